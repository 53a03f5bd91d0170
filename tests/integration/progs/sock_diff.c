/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sock_diff.c - control calls answer on a carried connection as the kernel
 * answers on a plain one: the same steps on a TCP pair the switch never
 * sees (raw system calls) and on a carried pair, every result compared:
 * ioctl FIONREAD/SIOCINQ/SIOCOUTQ, SO_ERROR, SO_RCVTIMEO's timeout,
 * SO_RCVLOWAT, poll's POLLIN/POLLOUT/POLLRDHUP/POLLHUP after the peer's
 * half-close, and recv after shutdown(SHUT_RD). Differences that cannot
 * be reproduced are in docs/semantics.md, and not compared here.
 */
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include "diff_pair.h"

static int fds[4];	/* plain client, plain server, carried ... */

static void feed(size_t n)
{
	char b[512];
	long end = tp_ms() + 5000;
	int i, avail;

	memset(b, 'x', sizeof(b));
	TP_CHECK(send(fds[0], b, n, 0) == (ssize_t)n &&
		 send(fds[2], b, n, 0) == (ssize_t)n, "send");
	for (i = 1; i < 4; i += 2) {
		do {
			avail = (int)recv(fds[i], b, sizeof(b),
					  MSG_PEEK | MSG_DONTWAIT);
			if (avail < (int)n)
				usleep(1000);
		} while (avail < (int)n && tp_ms() < end);
	}
}

/* Reads n bytes of anything from fd. */
static void tp_drain_all(int fd, size_t n)
{
	static char b[1 << 16];

	while (n) {
		ssize_t r = recv(fd, b, n < sizeof(b) ? n : sizeof(b), 0);

		TP_CHECK(r > 0, "drain: %zd", r);
		n -= (size_t)r;
	}
}

static int ioc(int fd, unsigned long req)
{
	int v = -12345;

	if (ioctl(fd, req, &v) < 0)
		return -errno;
	return v;
}

static int sopt(int fd, int lvl, int name)
{
	int v = -12345;
	socklen_t l = sizeof(v);

	if (getsockopt(fd, lvl, name, &v, &l) < 0)
		return -errno;
	return v;
}

static short prev(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };

	TP_CHECK(poll(&p, 1, 50) >= 0, "poll");
	return p.revents;
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	struct timeval tv = { 0, 100000 };
	char b[512];
	long t0, tk, tc;
	int i;

	tp_start("sock_diff", 30);
	raw_pair(family, &fds[0], &fds[1]);
	tp_pair(family, &fds[2], &fds[3]);
	tp_carry_both(fds[2], fds[3]);

	same("FIONREAD, empty", ioc(fds[1], FIONREAD), ioc(fds[3], FIONREAD));
	feed(300);
	same("FIONREAD", ioc(fds[1], FIONREAD), ioc(fds[3], FIONREAD));
	same("SIOCINQ", ioc(fds[1], SIOCINQ), ioc(fds[3], SIOCINQ));
	same("SO_ERROR", sopt(fds[1], SOL_SOCKET, SO_ERROR),
	     sopt(fds[3], SOL_SOCKET, SO_ERROR));
	same("poll POLLIN|POLLOUT|POLLRDHUP with bytes",
	     prev(fds[1], POLLIN | POLLOUT | POLLRDHUP),
	     prev(fds[3], POLLIN | POLLOUT | POLLRDHUP));
	same("recv 300", RES((int)recv(fds[1], b, sizeof(b), 0)),
	     RES((int)recv(fds[3], b, sizeof(b), 0)));
	same("SIOCOUTQ after the peer read", ioc(fds[0], SIOCOUTQ),
	     ioc(fds[2], SIOCOUTQ));

	/* SO_RCVTIMEO: EAGAIN after the timeout */
	for (i = 1; i < 4; i += 2)
		TP_CHECK(!setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv,
				     sizeof(tv)), "SO_RCVTIMEO");
	t0 = tp_ms();
	same("recv with SO_RCVTIMEO", RES((int)recv(fds[1], b, 10, 0)),
	     RES((int)recv(fds[3], b, 10, 0)));
	tc = tp_ms() - t0;
	TP_CHECK(tc >= 180 && tc < 1000,
		 "two SO_RCVTIMEO waits of 100 ms took %ld ms", tc);

	/* SO_SNDTIMEO: a send that finds no room returns what it wrote,
	 * or EAGAIN, once the timeout runs out (the peers read nothing) */
	for (i = 0; i < 4; i += 2) {
		static char big[1 << 20];
		size_t sent = 0;
		ssize_t w;

		TP_CHECK(!setsockopt(fds[i], SOL_SOCKET, SO_SNDTIMEO, &tv,
				     sizeof(tv)), "SO_SNDTIMEO");
		t0 = tp_ms();
		do {
			w = send(fds[i], big, sizeof(big), MSG_NOSIGNAL);
			if (w > 0)
				sent += (size_t)w;
		} while (w > 0 && sent < (64u << 20));
		tc = tp_ms() - t0;
		TP_CHECK(w < 0 && errno == EAGAIN && tc < 5000,
			 "%s send with SO_SNDTIMEO: %zd (%s) after %zu bytes "
			 "and %ld ms; the kernel returns EAGAIN once full",
			 i ? "carried" : "plain", w, strerror(errno), sent,
			 tc);
		/* the peer takes it all */
		tp_drain_all(fds[i + 1], sent);
	}

	/* SO_RCVLOWAT: 200 bytes wanted, 100 there: poll says not ready */
	i = 200;
	TP_CHECK(!setsockopt(fds[1], SOL_SOCKET, SO_RCVLOWAT, &i, sizeof(i)) &&
		 !setsockopt(fds[3], SOL_SOCKET, SO_RCVLOWAT, &i, sizeof(i)),
		 "SO_RCVLOWAT");
	same("SO_RCVLOWAT read back", sopt(fds[1], SOL_SOCKET, SO_RCVLOWAT),
	     sopt(fds[3], SOL_SOCKET, SO_RCVLOWAT));
	feed(100);
	same("poll POLLIN below SO_RCVLOWAT", prev(fds[1], POLLIN),
	     prev(fds[3], POLLIN));
	feed(150);
	same("poll POLLIN above SO_RCVLOWAT", prev(fds[1], POLLIN),
	     prev(fds[3], POLLIN));
	same("recv 250", RES((int)recv(fds[1], b, sizeof(b), 0)),
	     RES((int)recv(fds[3], b, sizeof(b), 0)));

	/* the peer's half-close */
	shutdown(fds[0], SHUT_WR);
	shutdown(fds[2], SHUT_WR);
	usleep(50 * 1000);
	same("poll after the peer's SHUT_WR",
	     prev(fds[1], POLLIN | POLLOUT | POLLRDHUP),
	     prev(fds[3], POLLIN | POLLOUT | POLLRDHUP));
	same("recv at EOF", RES((int)recv(fds[1], b, sizeof(b), 0)),
	     RES((int)recv(fds[3], b, sizeof(b), 0)));
	same("FIONREAD at EOF", ioc(fds[1], FIONREAD), ioc(fds[3], FIONREAD));
	/* this side's SHUT_RD too */
	same("shutdown(SHUT_RD)", RES(shutdown(fds[1], SHUT_RD)),
	     RES(shutdown(fds[3], SHUT_RD)));
	same("recv after SHUT_RD",
	     RES((int)recv(fds[1], b, sizeof(b), MSG_DONTWAIT)),
	     RES((int)recv(fds[3], b, sizeof(b), MSG_DONTWAIT)));
	tk = prev(fds[1], POLLIN | POLLOUT | POLLRDHUP);
	same("poll after both", tk, prev(fds[3], POLLIN | POLLOUT | POLLRDHUP));
	for (i = 0; i < 4; i++)
		close(fds[i]);
	tp_pass();
	return 0;
}

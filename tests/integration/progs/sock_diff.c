/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sock_diff.c - control calls answer on a carried connection as the kernel
 * answers on a plain one: the same steps on a TCP pair the switch never
 * sees (raw system calls) and on a carried pair, every result compared:
 * ioctl FIONREAD/SIOCINQ/SIOCOUTQ, SO_ERROR, SO_RCVTIMEO's timeout,
 * SO_RCVLOWAT, MSG_TRUNC, TCP_INFO, EPOLLONESHOT, EPOLLEXCLUSIVE, poll's
 * and epoll's IN/OUT/RDHUP/HUP after the peer's half-close and with both
 * directions shut, recv after shutdown(SHUT_RD), select and poll on
 * descriptors above FD_SETSIZE, and MSG_ERRQUEUE with bytes waiting.
 * Differences that cannot be reproduced are in docs/semantics.md, and not
 * compared here.
 */
#include <linux/sockios.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include "diff_pair.h"

static int family;
static int fds[4];	/* plain client, plain server, carried ... */
static char excl_buf[512];

/* Bytes the receiving end of fds[i - 1] holds (at most 1024). */
static int held(int i)
{
	char b[1024];
	int n = (int)recv(fds[i], b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);

	return n < 0 ? 0 : n;
}

/* n more bytes to each server end, there when this returns (5 s at
 * most): a comparison never runs while bytes are still on their way. */
static void feed(size_t n)
{
	char b[512];
	long end = tp_ms() + 5000;
	int i, want[4];

	memset(b, 'x', sizeof(b));
	for (i = 1; i < 4; i += 2)
		want[i] = held(i) + (int)n;
	TP_CHECK(send(fds[0], b, n, 0) == (ssize_t)n &&
		 send(fds[2], b, n, 0) == (ssize_t)n, "send");
	for (i = 1; i < 4; i += 2)
		while (held(i) < want[i] && tp_ms() < end)
			usleep(1000);
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

/* The events a wait of 50 ms on set ep reports (one fd in it). */
static long ewait(int ep)
{
	struct epoll_event ev;
	int n = epoll_wait(ep, &ev, 1, 50);

	TP_CHECK(n >= 0, "epoll_wait");
	return n ? (long)ev.events : 0;
}

/* The events one epoll_wait (50 ms) reports for fd alone. */
static unsigned int eprev(int fd, unsigned int events)
{
	struct epoll_event ev = { .events = events };
	int ep = epoll_create1(EPOLL_CLOEXEC), n;

	TP_CHECK(ep >= 0 && !epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), "epoll");
	n = epoll_wait(ep, &ev, 1, 50);
	TP_CHECK(n >= 0, "epoll_wait");
	close(ep);
	return n ? ev.events : 0;
}

/* What a program reads of TCP_INFO and can expect the same on any two
 * loopback connections: the state, the options agreed, the sending
 * segment size and path MTU. (Times, windows, byte counters and the
 * receiving segment size the kernel estimates from what arrived are the
 * TCP connection's: docs/semantics.md.) */
static void tcp_info_same(const char *when)
{
	struct tcp_info ti[2];
	socklen_t l;
	char what[96];
	int i;

	for (i = 0; i < 2; i++) {
		l = sizeof(ti[i]);
		memset(&ti[i], 0, sizeof(ti[i]));
		TP_CHECK(!getsockopt(fds[2 * i + 1], IPPROTO_TCP, TCP_INFO,
				     &ti[i], &l), "TCP_INFO");
	}
#define TI_SAME(f) do { \
		snprintf(what, sizeof(what), "TCP_INFO " #f " %s", when); \
		same(what, (long)ti[0].f, (long)ti[1].f); \
	} while (0)
	TI_SAME(tcpi_state);
	TI_SAME(tcpi_options);
	TI_SAME(tcpi_snd_wscale);
	TI_SAME(tcpi_rcv_wscale);
	TI_SAME(tcpi_snd_mss);
	TI_SAME(tcpi_pmtu);
#undef TI_SAME
}

/* What the kernel's poll, epoll and TCP_INFO tell of the receiving ends
 * when (after the peer's half-close, ...), the same on both pairs. */
static void ends_same(const char *when)
{
	char what[96];

	snprintf(what, sizeof(what), "poll %s", when);
	same(what, prev(fds[1], POLLIN | POLLOUT | POLLRDHUP),
	     prev(fds[3], POLLIN | POLLOUT | POLLRDHUP));
	snprintf(what, sizeof(what), "epoll %s", when);
	same(what, eprev(fds[1], EPOLLIN | EPOLLOUT | EPOLLRDHUP),
	     eprev(fds[3], EPOLLIN | EPOLLOUT | EPOLLRDHUP));
	tcp_info_same(when);
}

/* Two epoll sets hold fd with EPOLLEXCLUSIVE, a thread waits on each:
 * when what makes fd ready happens, at least one of them is woken (the
 * kernel wakes one; epoll(7): "one or more"). */
static int excl_ep[2];
static unsigned int excl_got[2];

static void *excl_waiter(void *arg)
{
	struct epoll_event ev;
	int i = (int)(intptr_t)arg;

	if (epoll_wait(excl_ep[i], &ev, 1, 1000) == 1)
		excl_got[i] = ev.events;
	return NULL;
}

static int excl_woken(int fd, void (*make_ready)(int), int arg)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE };
	pthread_t t[2];
	int i, n = 0;

	for (i = 0; i < 2; i++) {
		excl_ep[i] = epoll_create1(EPOLL_CLOEXEC);
		excl_got[i] = 0;
		TP_CHECK(excl_ep[i] >= 0 &&
			 !epoll_ctl(excl_ep[i], EPOLL_CTL_ADD, fd, &ev),
			 "EPOLLEXCLUSIVE");
		TP_CHECK(!pthread_create(&t[i], NULL, excl_waiter,
					 (void *)(intptr_t)i), "thread");
	}
	usleep(50 * 1000);
	make_ready(arg);
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		close(excl_ep[i]);
		n += excl_got[i] == EPOLLIN;
	}
	return n > 0;
}

static void send10(int fd)
{
	TP_CHECK(send(fd, "0123456789", 10, 0) == 10, "send");
}

static struct sockaddr_storage excl_ss;
static socklen_t excl_len;
static int excl_conn = -1;

static void connect_one(int raw)
{
	excl_conn = raw ? tp_raw_connect(&excl_ss, excl_len) :
			  tp_connect(&excl_ss, excl_len);
}

/* The epoll_ctl answers EPOLLEXCLUSIVE gets, as one number. */
static long excl_ctl(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE };
	int ep = epoll_create1(EPOLL_CLOEXEC), ep2 = epoll_create1(0);
	long r;

	TP_CHECK(ep >= 0 && ep2 >= 0, "epoll_create1");
	r = RES(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	r = r * 100 + RES(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev));
	ev.events = EPOLLIN | EPOLLRDHUP | EPOLLEXCLUSIVE;
	r = r * 100 + RES(epoll_ctl(ep2, EPOLL_CTL_ADD, fd, &ev));
	ev.events = EPOLLIN | EPOLLONESHOT | EPOLLEXCLUSIVE;
	r = r * 100 + RES(epoll_ctl(ep2, EPOLL_CTL_ADD, fd, &ev));
	ev.events = EPOLLIN | EPOLLEXCLUSIVE;
	r = r * 100 + RES(epoll_ctl(ep2, EPOLL_CTL_ADD, ep, &ev));
	close(ep);
	close(ep2);
	return r;
}

/* select and poll on numbers above FD_SETSIZE: the program allocates
 * fd_set words for them (glibc's FD_SET stops at FD_SETSIZE). */
#define HIGH_FD 1500
#define HIGH_WORDS ((HIGH_FD + 64) / 64)

static long sel_high(int fd, int write, int ms)
{
	unsigned long set[HIGH_WORDS];
	struct timeval tv = { 0, ms * 1000 };
	long r;

	memset(set, 0, sizeof(set));
	set[fd / 64] |= 1ul << (fd % 64);
	r = RES(select(fd + 1, write ? NULL : (fd_set *)set,
		       write ? (fd_set *)set : NULL, NULL, &tv));
	return r * 10 + (long)((set[fd / 64] >> (fd % 64)) & 1);
}

static void high_fds(void)
{
	struct rlimit rl;
	int hi[2], i;

	TP_CHECK(!getrlimit(RLIMIT_NOFILE, &rl), "getrlimit");
	if (rl.rlim_cur < HIGH_FD + 300) {
		TP_CHECK(rl.rlim_max >= HIGH_FD + 300, "RLIMIT_NOFILE's hard "
			 "limit %lu is below %d", (unsigned long)rl.rlim_max,
			 HIGH_FD + 300);
		rl.rlim_cur = HIGH_FD + 300;
		TP_CHECK(!setrlimit(RLIMIT_NOFILE, &rl), "setrlimit");
	}
	for (i = 0; i < 2; i++) {
		hi[i] = dup2(fds[2 * i + 1], HIGH_FD + 2 * i);
		TP_CHECK(hi[i] == HIGH_FD + 2 * i, "dup2 to %d",
			 HIGH_FD + 2 * i);
	}
	same("select above FD_SETSIZE, nothing to read",
	     sel_high(hi[0], 0, 20), sel_high(hi[1], 0, 20));
	same("select above FD_SETSIZE, writable", sel_high(hi[0], 1, 20),
	     sel_high(hi[1], 1, 20));
	same("poll above FD_SETSIZE, nothing to read", prev(hi[0], POLLIN),
	     prev(hi[1], POLLIN));
	feed(20);
	same("select above FD_SETSIZE, bytes to read",
	     sel_high(hi[0], 0, 20), sel_high(hi[1], 0, 20));
	same("poll above FD_SETSIZE, bytes to read", prev(hi[0], POLLIN),
	     prev(hi[1], POLLIN));
	same("recv above FD_SETSIZE", RES((int)recv(hi[0], excl_buf, 100, 0)),
	     RES((int)recv(hi[1], excl_buf, 100, 0)));
	for (i = 0; i < 2; i++)
		close(hi[i]);
	/* a closed number in the set: EBADF */
	same("select on a closed number above FD_SETSIZE",
	     sel_high(hi[0], 0, 0), sel_high(hi[1], 0, 0));
}

int main(int argc, char **argv)
{
	struct timeval tv = { 0, 100000 };
	char b[512];
	long t0, tk, tc, lres[2];
	int i, ep[2];

	family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	tp_start("sock_diff", 30);
	tp_raw_pair(family, &fds[0], &fds[1]);
	tp_pair(family, &fds[2], &fds[3]);
	tp_carry_both(fds[2], fds[3]);

	same("FIONREAD, empty", ioc(fds[1], FIONREAD), ioc(fds[3], FIONREAD));

	tcp_info_same("established");

	/* MSG_TRUNC: the bytes are taken (counted, with MSG_PEEK) without
	 * being written */
	feed(300);
	same("recv MSG_TRUNC|MSG_PEEK",
	     RES((int)recv(fds[1], NULL, 100, MSG_TRUNC | MSG_PEEK)),
	     RES((int)recv(fds[3], NULL, 100, MSG_TRUNC | MSG_PEEK)));
	same("recv MSG_TRUNC", RES((int)recv(fds[1], NULL, 100, MSG_TRUNC)),
	     RES((int)recv(fds[3], NULL, 100, MSG_TRUNC)));
	same("FIONREAD after MSG_TRUNC", ioc(fds[1], FIONREAD),
	     ioc(fds[3], FIONREAD));
	same("recv the rest", RES((int)recv(fds[1], b, sizeof(b), 0)),
	     RES((int)recv(fds[3], b, sizeof(b), 0)));

	/* MSG_ERRQUEUE reads the kernel's error queue (empty: EAGAIN),
	 * never the stream's bytes, which stay for the next read */
	feed(200);
	for (i = 1; i < 4; i += 2) {
		char ctl[128];
		struct iovec v = { b, sizeof(b) };
		struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1,
				    .msg_control = ctl,
				    .msg_controllen = sizeof(ctl) };

		lres[i / 2] = RES((int)recvmsg(fds[i], &m,
					       MSG_ERRQUEUE | MSG_DONTWAIT));
	}
	same("recvmsg MSG_ERRQUEUE with bytes waiting", lres[0], lres[1]);
	same("FIONREAD after MSG_ERRQUEUE", ioc(fds[1], FIONREAD),
	     ioc(fds[3], FIONREAD));
	same("recv after MSG_ERRQUEUE", RES((int)recv(fds[1], b, sizeof(b), 0)),
	     RES((int)recv(fds[3], b, sizeof(b), 0)));

	/* EPOLLONESHOT: one report, then none until EPOLL_CTL_MOD */
	for (i = 0; i < 2; i++) {
		struct epoll_event ev = {
			.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT
		};

		ep[i] = epoll_create1(EPOLL_CLOEXEC);
		TP_CHECK(ep[i] >= 0 && !epoll_ctl(ep[i], EPOLL_CTL_ADD,
						  fds[2 * i + 1], &ev),
			 "EPOLLONESHOT");
	}
	feed(10);
	same("EPOLLONESHOT, first wait", ewait(ep[0]), ewait(ep[1]));
	same("EPOLLONESHOT, second wait", ewait(ep[0]), ewait(ep[1]));
	for (i = 0; i < 2; i++) {
		struct epoll_event ev = {
			.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT
		};

		TP_CHECK(!epoll_ctl(ep[i], EPOLL_CTL_MOD, fds[2 * i + 1], &ev),
			 "EPOLL_CTL_MOD");
	}
	same("EPOLLONESHOT, rearmed", ewait(ep[0]), ewait(ep[1]));
	same("recv 10", RES((int)recv(fds[1], b, sizeof(b), 0)),
	     RES((int)recv(fds[3], b, sizeof(b), 0)));
	for (i = 0; i < 2; i++)
		close(ep[i]);

	/* EPOLLEXCLUSIVE: what epoll_ctl accepts, and a waiter woken */
	same("EPOLLEXCLUSIVE epoll_ctl", excl_ctl(fds[1]), excl_ctl(fds[3]));
	same("EPOLLEXCLUSIVE on a connected socket: a waiter woken",
	     excl_woken(fds[1], send10, fds[0]),
	     excl_woken(fds[3], send10, fds[2]));
	same("recv 10 after EPOLLEXCLUSIVE",
	     RES((int)recv(fds[1], b, sizeof(b), 0)),
	     RES((int)recv(fds[3], b, sizeof(b), 0)));
	for (i = 0; i < 2; i++) {
		int l = i ? tp_listener(family, 4, &excl_ss, &excl_len) :
			    tp_raw_listener(family, 4, &excl_ss, &excl_len);

		lres[i] = excl_ctl(l) * 10 +
			  excl_woken(l, connect_one, !i);
		close(excl_conn);
		close(l);
	}
	same("EPOLLEXCLUSIVE on a listener", lres[0], lres[1]);

	high_fds();
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
	ends_same("after the peer's SHUT_WR");
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
	/* and this side's SHUT_WR: both directions closed, EPOLLHUP */
	same("shutdown(SHUT_WR) after the peer's",
	     RES(shutdown(fds[1], SHUT_WR)),
	     RES(shutdown(fds[3], SHUT_WR)));
	usleep(50 * 1000);
	ends_same("with both directions closed");
	for (i = 0; i < 4; i++)
		close(fds[i]);
	tp_pass();
	return 0;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * poll_upgrade.c - epoll_upgrade's case for poll and for select: a
 * connection whose upgrade is still pending is waited on only through
 * poll (then, on a second connection, select), at both ends. The client
 * writes more than the switch keeps for a pending upgrade while the
 * server's program has not accepted yet: only the upgrade's progress inside
 * poll or select can make it writable again. Every byte is checked.
 */
#include <poll.h>
#include <stdbool.h>
#include <sys/select.h>
#include <sys/wait.h>
#include "tprog.h"

#define PU_BYTES 3000
#define PU_FIRST (6u << 20)	/* more than the pending buffer (4 MiB) */
#define PU_ACCEPT_DELAY_US 300000
#define PU_ROUNDS 20
/* No wait may take this long: the peer is running and waiting too. */
#define PU_WAIT_MS 1500

static bool pu_select;	/* select, not poll */

/* Waits until fd has one of events (POLLIN or POLLOUT); fails on a stall. */
static void pu_wait(int fd, short events, const char *what)
{
	long t0 = tp_ms();
	int n;

	TP_CHECK(fd < FD_SETSIZE, "fd %d too large for select", fd);
	for (;;) {
		if (pu_select) {
			struct timeval tv = { .tv_usec = PU_WAIT_MS * 1000 };
			fd_set r, w;

			FD_ZERO(&r);
			FD_ZERO(&w);
			if (events & POLLIN)
				FD_SET(fd, &r);
			if (events & POLLOUT)
				FD_SET(fd, &w);
			tv.tv_sec = tv.tv_usec / 1000000;
			tv.tv_usec %= 1000000;
			n = select(fd + 1, &r, &w, NULL, &tv);
			TP_CHECK(n <= 0 || FD_ISSET(fd, &r) ||
				 FD_ISSET(fd, &w), "select: %d without fd",
				 n);
		} else {
			struct pollfd p = { .fd = fd, .events = events };

			n = poll(&p, 1, PU_WAIT_MS);
			TP_CHECK(n <= 0 || (p.revents & (events | POLLERR |
							  POLLHUP)),
				 "poll: revents 0x%x for 0x%x", p.revents,
				 events);
		}
		if (n >= 0 || errno != EINTR)
			break;
	}
	TP_CHECK(n >= 0, "%s", pu_select ? "select" : "poll");
	TP_CHECK(n == 1, "%s: no report in %ld ms (the upgrade stalled "
		 "while the program slept in %s)", what, tp_ms() - t0,
		 pu_select ? "select" : "poll");
}

/* tp_wait_fn with poll or select. */
static void pu_wait_fn(void *ctx, int fd, bool out)
{
	if (out)
		pu_wait(fd, POLLOUT, "send waits for POLLOUT");
	else
		pu_wait(fd, POLLIN, "recv waits for POLLIN");
}

/* Sends (receives, checking) n bytes of stream id at off. */
static void pu_send(int fd, unsigned int id, size_t off, size_t n)
{
	tp_send_nb(fd, id, off, n, pu_wait_fn, NULL);
}

static void pu_recv(int fd, unsigned int id, size_t off, size_t n)
{
	tp_recv_nb(fd, id, off, n, pu_wait_fn, NULL);
}

/* The server: non-blocking listener and connection. Echoes each round
 * back as stream 2. */
static void pu_server(int l)
{
	int s, i;

	/* the client's upgrade stays pending meanwhile */
	usleep(PU_ACCEPT_DELAY_US);
	pu_wait(l, POLLIN, "listener");
	s = accept4(l, NULL, NULL, SOCK_NONBLOCK);
	TP_CHECK(s >= 0, "accept4");
	pu_recv(s, 3, 0, PU_FIRST);
	for (i = 0; i < PU_ROUNDS; i++) {
		pu_recv(s, 1, (size_t)i * PU_BYTES, PU_BYTES);
		pu_send(s, 2, (size_t)i * PU_BYTES, PU_BYTES);
	}
	close(s);
}

static void pu_run(int family)
{
	struct sockaddr_storage ss;
	int c, err, i;
	char b;
	socklen_t len, elen = sizeof(err);
	pid_t pid;

	/* The server makes its own listener and tells its address. */
	pid = tp_fork_server(family,
			     pu_select ? "poll_upgrade server (select)" :
					 "poll_upgrade server (poll)",
			     pu_server, &ss, &len);

	/* The client: a non-blocking connect, then poll or select only. */
	c = socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	TP_CHECK(c >= 0, "socket");
	TP_CHECK(connect(c, (struct sockaddr *)&ss, len) == 0 ||
		 errno == EINPROGRESS, "non-blocking connect");
	pu_wait(c, POLLOUT, "connect waits for POLLOUT");
	TP_CHECK(!getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &elen) && !err,
		 "SO_ERROR after POLLOUT is %d", err);
	/* Write until EAGAIN, then wait for POLLOUT. */
	pu_send(c, 3, 0, PU_FIRST);
	/* Request and answer, in rounds: each waits on the other end. */
	for (i = 0; i < PU_ROUNDS; i++) {
		pu_send(c, 1, (size_t)i * PU_BYTES, PU_BYTES);
		pu_recv(c, 2, (size_t)i * PU_BYTES, PU_BYTES);
	}
	/* The server closed after its last answer: EOF, nothing more. */
	pu_wait(c, POLLIN, "EOF");
	TP_CHECK(recv(c, &b, 1, 0) == 0, "no EOF after the last round");
	tp_reap(pid, "the server failed");
	close(c);
}

int main(int argc, char **argv)
{
	int family = argc > 1 ? AF_INET6 : AF_INET;

	tp_start("poll_upgrade", 40);
	pu_select = false;
	pu_run(family);
	pu_select = true;
	tp_name = "poll_upgrade (select)";
	pu_run(family);
	tp_name = "poll_upgrade";
	tp_pass();
}

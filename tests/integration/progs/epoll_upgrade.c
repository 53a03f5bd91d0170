/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * epoll_upgrade.c - a connection whose upgrade is still pending is waited
 * on only through epoll, at both ends: a non-blocking connect and a
 * non-blocking accept, each fd in an epoll set, no other call on it until
 * epoll reports it. The upgrade must move on while both sleep in
 * epoll_wait, EPOLLOUT must mean "usable", and every byte is checked.
 * The client first writes more than the switch keeps for a pending upgrade
 * (edge-triggered, EPOLLOUT only, registered once) while the server's
 * program has not accepted yet: only the upgrade's progress inside
 * epoll_wait can report it writable again.
 */
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include "tprog.h"

#define EU_BYTES 3000
#define EU_FIRST (6u << 20)	/* more than the pending buffer (4 MiB) */
#define EU_ACCEPT_DELAY_US 300000
#define EU_ROUNDS 20
/* No wait may take this long: the peer is running and waiting too. */
#define EU_WAIT_MS 1500

/* Waits for events on fd (the only fd in ep, edge-triggered); fails on a
 * stall. events 0: the registration stays as it is. */
static uint32_t eu_wait(int ep, int fd, uint32_t events, const char *what)
{
	struct epoll_event ev = { .events = events | EPOLLET, .data.fd = fd };
	long t0 = tp_ms();
	int n;

	TP_CHECK(!events || !epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev),
		 "epoll_ctl MOD");
	do
		n = epoll_wait(ep, &ev, 1, EU_WAIT_MS);
	while (n < 0 && errno == EINTR);
	TP_CHECK(n >= 0, "epoll_wait");
	TP_CHECK(n == 1, "%s: no report in %ld ms (the upgrade stalled "
		 "while the program slept in epoll_wait)", what,
		 tp_ms() - t0);
	TP_CHECK(ev.data.fd == fd, "report for fd %d, not %d", ev.data.fd, fd);
	return ev.events;
}

/* tp_wait_fn for the epoll set *ctx. */
static void eu_wait_fn(void *ctx, int fd, bool out)
{
	if (out)
		eu_wait(*(int *)ctx, fd, EPOLLOUT, "send waits for EPOLLOUT");
	else
		eu_wait(*(int *)ctx, fd, EPOLLIN, "recv waits for EPOLLIN");
}

/* tp_wait_fn for the first part: EPOLLOUT on the registration as it is. */
static void eu_first_wait(void *ctx, int fd, bool out)
{
	uint32_t r = eu_wait(*(int *)ctx, fd, 0,
			     "the first part waits for EPOLLOUT");

	TP_CHECK(r & EPOLLOUT, "events 0x%x without EPOLLOUT", r);
}

/* Sends (receives, checking) n bytes of stream id at off through ep. */
static void eu_send(int ep, int fd, unsigned int id, size_t off, size_t n)
{
	tp_send_nb(fd, id, off, n, eu_wait_fn, &ep);
}

static void eu_recv(int ep, int fd, unsigned int id, size_t off, size_t n)
{
	tp_recv_nb(fd, id, off, n, eu_wait_fn, &ep);
}

/* The server: non-blocking listener and connection, epoll only. Echoes
 * each round back as stream 2. */
static void eu_server(int l)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep, s, i;

	/* the client's upgrade stays pending meanwhile */
	usleep(EU_ACCEPT_DELAY_US);
	ep = epoll_create1(0);
	TP_CHECK(ep >= 0, "epoll_create1");
	ev.data.fd = l;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev), "epoll_ctl ADD l");
	eu_wait(ep, l, EPOLLIN, "listener");
	s = accept4(l, NULL, NULL, SOCK_NONBLOCK);
	TP_CHECK(s >= 0, "accept4");
	ev.events = EPOLLIN;
	ev.data.fd = s;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev), "epoll_ctl ADD s");
	eu_recv(ep, s, 3, 0, EU_FIRST);
	for (i = 0; i < EU_ROUNDS; i++) {
		eu_recv(ep, s, 1, (size_t)i * EU_BYTES, EU_BYTES);
		eu_send(ep, s, 2, (size_t)i * EU_BYTES, EU_BYTES);
	}
	close(s);
	close(ep);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLET };
	int family = argc > 1 ? AF_INET6 : AF_INET;
	int c, ep, err, i;
	socklen_t len, elen = sizeof(err);
	uint32_t r;
	pid_t pid;
	char b;

	tp_start("epoll_upgrade", 40);
	/* The server makes its own listener and tells its address. */
	pid = tp_fork_server(family, "epoll_upgrade server",
			     eu_server, &ss, &len);

	/* The client: a non-blocking connect, then epoll only. */
	c = socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	TP_CHECK(c >= 0, "socket");
	TP_CHECK(connect(c, (struct sockaddr *)&ss, len) == 0 ||
		 errno == EINPROGRESS, "non-blocking connect");
	ep = epoll_create1(0);
	TP_CHECK(ep >= 0, "epoll_create1");
	ev.data.fd = c;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev), "epoll_ctl ADD c");
	r = eu_wait(ep, c, EPOLLOUT, "connect waits for EPOLLOUT");
	TP_CHECK(r & EPOLLOUT, "connect: events 0x%x without EPOLLOUT", r);
	TP_CHECK(!getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &elen) && !err,
		 "SO_ERROR after EPOLLOUT is %d", err);
	/* Write until EAGAIN, then wait for EPOLLOUT, as registered. */
	tp_send_nb(c, 3, 0, EU_FIRST, eu_first_wait, &ep);
	/* Request and answer, in rounds: each waits on the other end. */
	for (i = 0; i < EU_ROUNDS; i++) {
		eu_send(ep, c, 1, (size_t)i * EU_BYTES, EU_BYTES);
		eu_recv(ep, c, 2, (size_t)i * EU_BYTES, EU_BYTES);
	}
	/* The server closed after its last answer: EOF, nothing more. */
	eu_wait(ep, c, EPOLLIN, "EOF");
	TP_CHECK(recv(c, &b, 1, 0) == 0, "no EOF after the last round");
	tp_reap(pid, "the server failed");
	close(c);
	close(ep);
	tp_pass();
}

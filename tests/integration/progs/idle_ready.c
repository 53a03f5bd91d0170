/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * idle_ready.c - carried connections that nobody writes to are never
 * reported ready for reading, in epoll (level and edge), poll or select,
 * while control traffic passes underneath: buffers given back after
 * SDP_IDLE_MS, credit returns, staging revoked. The kernel reports nothing
 * for an idle TCP socket; a program that trusts the report would block in
 * read(). Then one byte stream is written and exactly its socket reports.
 */
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include "tp_stats.h"

#define IRD_PAIRS 4
#define IRD_IDLE_MS "50"	/* buffers go back after this */
#define IRD_WAIT_MS 600
#define IRD_CHUNK 65536	/* one end writes, then the other reads */		/* per readiness call: several idle periods */

static int fds[2 * IRD_PAIRS];

static unsigned int recv_bufs(void)
{
	const struct sw_conn_stats *st;
	unsigned int i, n = 0;

	for (i = 0; i < 2 * IRD_PAIRS; i++) {
		st = tp_conn_stats(fds[i]);
		TP_CHECK(st && st->state == TP_STATE_SAN,
			 "fd %d not carried", fds[i]);
		n += st->recv_bufs;
	}
	return n;
}

/* What a reported fd really holds: bytes, EOF or nothing (EAGAIN). */
static void fail_ready(const char *how, int fd, unsigned int ev)
{
	char b[16];
	ssize_t r = recv(fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);

	tp_fail("%s reported fd %d ready (events 0x%x) on an idle connection; "
		"recv(MSG_PEEK|MSG_DONTWAIT) then returned %zd (%s)", how, fd,
		ev, r, r < 0 ? strerror(errno) : "bytes or EOF");
}

/* epoll over every fd with events; nothing may be reported for ms (after
 * the first call when skip_first: an edge-triggered EPOLLOUT is due once). */
static void epoll_quiet(uint32_t events, bool skip_first, const char *how)
{
	struct epoll_event ev, out[2 * IRD_PAIRS];
	long end;
	int ep, i, n;

	ep = epoll_create1(EPOLL_CLOEXEC);
	TP_CHECK(ep >= 0, "epoll_create1");
	for (i = 0; i < 2 * IRD_PAIRS; i++) {
		ev.events = events;
		ev.data.fd = fds[i];
		TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev),
			 "epoll_ctl");
	}
	if (skip_first) {
		n = epoll_wait(ep, out, 2 * IRD_PAIRS, 1000);
		for (i = 0; i < n; i++)
			TP_CHECK(!(out[i].events & ~(uint32_t)EPOLLOUT),
				 "%s: first report 0x%x on fd %d", how,
				 out[i].events, out[i].data.fd);
	}
	end = tp_ms() + IRD_WAIT_MS;
	while (tp_ms() < end) {
		n = epoll_wait(ep, out, 2 * IRD_PAIRS, 100);
		TP_CHECK(n >= 0, "epoll_wait: %s", strerror(errno));
		if (n > 0)
			fail_ready(how, out[0].data.fd, out[0].events);
	}
	close(ep);
}

static void poll_quiet(void)
{
	struct pollfd p[2 * IRD_PAIRS];
	long end = tp_ms() + IRD_WAIT_MS;
	int i, n;

	for (i = 0; i < 2 * IRD_PAIRS; i++) {
		p[i].fd = fds[i];
		p[i].events = POLLIN;
	}
	while (tp_ms() < end) {
		n = poll(p, 2 * IRD_PAIRS, 100);
		TP_CHECK(n >= 0, "poll: %s", strerror(errno));
		for (i = 0; n > 0 && i < 2 * IRD_PAIRS; i++)
			if (p[i].revents)
				fail_ready("poll", fds[i], p[i].revents);
	}
}

static void select_quiet(void)
{
	long end = tp_ms() + IRD_WAIT_MS;
	struct timeval tv;
	fd_set r;
	int i, n, max = 0;

	while (tp_ms() < end) {
		FD_ZERO(&r);
		for (i = 0; i < 2 * IRD_PAIRS; i++) {
			FD_SET(fds[i], &r);
			max = fds[i] > max ? fds[i] : max;
		}
		tv.tv_sec = 0;
		tv.tv_usec = 100000;
		n = select(max + 1, &r, NULL, NULL, &tv);
		TP_CHECK(n >= 0, "select: %s", strerror(errno));
		for (i = 0; n > 0 && i < 2 * IRD_PAIRS; i++)
			if (FD_ISSET(fds[i], &r))
				fail_ready("select", fds[i], POLLIN);
	}
}

static void *writer(void *arg)
{
	(void)arg;
	usleep(50 * 1000);	/* the reader is asleep in epoll_wait */
	tp_send(fds[4], 30, 0, 100);
	return NULL;
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	struct epoll_event ev, out[2 * IRD_PAIRS];
	unsigned int busy, idle;
	pthread_t t;
	int ep, i, k, n;
	size_t off;

	if (!getenv("SDP_IDLE_MS")) {
		/* the switch reads its settings at start: run again */
		setenv("SDP_IDLE_MS", IRD_IDLE_MS, 1);
		execv("/proc/self/exe", argv);
		tp_fail("execv: %s", strerror(errno));
	}
	tp_start("idle_ready", 40);
	for (i = 0; i < IRD_PAIRS; i++) {
		tp_pair(family, &fds[2 * i], &fds[2 * i + 1]);
		tp_carry_both(fds[2 * i], fds[2 * i + 1]);
	}
	/* traffic both ways: every end grows its buffers (and staging) */
	for (i = 0; i < IRD_PAIRS; i++) {
		for (k = 0; k < 16; k++) {
			off = (size_t)k * IRD_CHUNK;
			tp_send(fds[2 * i], 10 + i, off, IRD_CHUNK);
			tp_recv(fds[2 * i + 1], 10 + i, off, IRD_CHUNK);
			tp_send(fds[2 * i + 1], 20 + i, off, IRD_CHUNK);
			tp_recv(fds[2 * i], 20 + i, off, IRD_CHUNK);
		}
	}
	busy = recv_bufs();

	epoll_quiet(EPOLLIN, false, "epoll (level-triggered)");
	epoll_quiet(EPOLLIN | EPOLLRDHUP | EPOLLET, false,
		    "epoll (edge-triggered)");
	epoll_quiet(EPOLLIN | EPOLLOUT | EPOLLET, true,
		    "epoll (edge-triggered, EPOLLOUT reported once)");
	poll_quiet();
	select_quiet();
	idle = recv_bufs();
	TP_CHECK(idle < busy, "no buffers went back while idle (%u then %u "
		 "receive buffers): the waits saw no control traffic", busy,
		 idle);

	/* news on one connection: exactly its other end reports */
	ep = epoll_create1(EPOLL_CLOEXEC);
	TP_CHECK(ep >= 0, "epoll_create1");
	for (i = 0; i < 2 * IRD_PAIRS; i++) {
		ev.events = EPOLLIN;
		ev.data.fd = fds[i];
		TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev),
			 "epoll_ctl");
	}
	/* the writer runs while this thread waits, as a peer would: a
	 * blocking send to a reader that is in no call at all is another
	 * matter (idle_send) */
	TP_CHECK(!pthread_create(&t, NULL, writer, NULL), "pthread_create");
	n = epoll_wait(ep, out, 2 * IRD_PAIRS, 5000);
	TP_CHECK(n == 1 && out[0].data.fd == fds[5] &&
		 (out[0].events & EPOLLIN),
		 "after 100 bytes on one connection: %d reports (first fd %d, "
		 "expected fd %d)", n, n > 0 ? out[0].data.fd : -1, fds[5]);
	tp_recv(fds[5], 30, 0, 100);
	pthread_join(t, NULL);
	close(ep);
	for (i = 0; i < 2 * IRD_PAIRS; i++)
		close(fds[i]);
	tp_pass();
	return 0;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * epoll_carried.c - epoll_ctl on connections the provider carries behaves
 * as on TCP although the switch keeps its kernel registration (docs/
 * performance.md, "epoll on carried sockets"): DEL, DEL again (ENOENT),
 * MOD of a removed fd (ENOENT), ADD twice (EEXIST), nothing reported while
 * removed (and no busy loop for its doorbells), a re-ADD with EPOLLET
 * reporting bytes already queued, MOD to EPOLLOUT, a one-shot re-ADD, and
 * a closed fd whose number comes back for a new connection. Bytes checked.
 */
#include <sys/epoll.h>
#include <sys/resource.h>
#include "tp_stats.h"

static int waitev(int ep, struct epoll_event *ev, int ms)
{
	int n = epoll_wait(ep, ev, 1, ms);

	TP_CHECK(n >= 0, "epoll_wait: %s", strerror(errno));
	return n;
}

/* Both ends carried, bytes going each way by the provider. */
static void carry(int c, int s)
{
	const struct sw_conn_stats *cs, *ss;
	char byte;

	tp_carry_both(c, s);
	tp_send(c, 9, 0, 1);
	tp_recv(s, 9, 0, 1);
	tp_send(s, 9, 1, 1);
	tp_recv(c, 9, 1, 1);
	cs = tp_conn_stats(c);
	ss = tp_conn_stats(s);
	TP_CHECK(cs && ss && cs->rx_copy && ss->rx_copy,
		 "the ping-pong did not go by the provider");
	TP_CHECK(recv(s, &byte, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN,
		 "stray byte");
}

int main(int argc, char **argv)
{
	struct epoll_event ev, out;
	int c, s, c2, s2, ep, family = argc > 1 ? AF_INET6 : AF_INET;
	char buf[200];
	long t0, busy;

	tp_start("epoll_carried", 30);
	tp_pair(family, &c, &s);
	carry(c, s);
	ep = epoll_create1(0);
	TP_CHECK(ep >= 0, "epoll_create1");

	ev = (struct epoll_event){ .events = EPOLLIN, .data.u64 = 77 };
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev), "ADD");
	TP_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) < 0 && errno == EEXIST,
		 "second ADD: want EEXIST, got %s", strerror(errno));
	TP_CHECK(waitev(ep, &out, 100) == 0, "report with nothing sent");
	tp_send(c, 1, 0, 100);
	TP_CHECK(waitev(ep, &out, 5000) == 1 && out.data.u64 == 77 &&
		 (out.events & EPOLLIN), "no EPOLLIN for 100 bytes");
	tp_recv(s, 1, 0, 100);

	/* removed: nothing reported, and the sleep is a sleep */
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL), "DEL");
	TP_CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL) < 0 && errno == ENOENT,
		 "second DEL: want ENOENT, got %s", strerror(errno));
	TP_CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev) < 0 && errno == ENOENT,
		 "MOD of a removed fd: want ENOENT, got %s", strerror(errno));
	tp_send(c, 1, 100, 100);
	t0 = tp_cpu_ms();
	TP_CHECK(waitev(ep, &out, 400) == 0, "a removed fd was reported");
	busy = tp_cpu_ms() - t0;
	TP_CHECK(busy < 200, "a 400 ms wait on a set with a removed carried "
		 "fd used %ld ms of CPU", busy);

	/* back, edge-triggered: what is queued is one edge */
	ev = (struct epoll_event){ .events = EPOLLIN | EPOLLET, .data.u64 = 78 };
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev), "ADD after DEL");
	TP_CHECK(waitev(ep, &out, 5000) == 1 && out.data.u64 == 78,
		 "re-ADD with EPOLLET: queued bytes not reported");
	TP_CHECK(waitev(ep, &out, 100) == 0, "EPOLLET reported twice");
	tp_recv(s, 1, 100, 100);
	tp_send(c, 1, 200, 50);
	TP_CHECK(waitev(ep, &out, 5000) == 1 && out.data.u64 == 78,
		 "EPOLLET: new bytes not reported");
	tp_recv(s, 1, 200, 50);

	/* MOD to writable */
	ev = (struct epoll_event){ .events = EPOLLOUT, .data.u64 = 79 };
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev), "MOD to EPOLLOUT");
	TP_CHECK(waitev(ep, &out, 5000) == 1 && out.data.u64 == 79 &&
		 (out.events & EPOLLOUT) && !(out.events & EPOLLIN),
		 "EPOLLOUT not reported after MOD (events 0x%x)", out.events);

	/* one-shot after a DEL: the kernel's semantics again */
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL), "DEL");
	ev = (struct epoll_event){ .events = EPOLLIN | EPOLLONESHOT,
				   .data.u64 = 80 };
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev), "ADD one-shot");
	tp_send(c, 1, 250, 20);
	TP_CHECK(waitev(ep, &out, 5000) == 1 && out.data.u64 == 80,
		 "one-shot: not reported");
	TP_CHECK(waitev(ep, &out, 100) == 0, "one-shot reported twice");
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev), "MOD re-arm");
	TP_CHECK(waitev(ep, &out, 5000) == 1 && out.data.u64 == 80,
		 "one-shot: not reported after MOD");
	tp_recv(s, 1, 250, 20);

	/* removed, closed, and the number reused by a new connection */
	ev = (struct epoll_event){ .events = EPOLLIN, .data.u64 = 81 };
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev), "MOD");
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL), "DEL");
	TP_CHECK(!close(s), "close");
	close(c);
	tp_pair(family, &c2, &s2);
	carry(c2, s2);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.u64 = 82 };
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s2, &ev),
		 "ADD of a new connection (fd %d, was %d): %s", s2, s,
		 strerror(errno));
	TP_CHECK(waitev(ep, &out, 100) == 0, "report for the new connection "
		 "with nothing sent (data %llu)",
		 (unsigned long long)out.data.u64);
	tp_send(c2, 2, 0, 150);
	TP_CHECK(waitev(ep, &out, 5000) == 1 && out.data.u64 == 82,
		 "new connection: not reported");
	TP_CHECK(recv(s2, buf, sizeof(buf), 0) == 150, "recv 150");
	tp_verify(2, 0, buf, 150);
	close(ep);
	close(c2);
	close(s2);
	tp_pass();
}

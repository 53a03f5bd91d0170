/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * epoll_et.c - edge-triggered epoll on a connection: one report per
 * arrival, none for data left unread, a new one for the next arrival;
 * every byte checked. Run under LD_PRELOAD of the switch.
 */
#include <sys/epoll.h>
#include "tprog.h"

static int wait1(int ep, int ms, uint64_t want)
{
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, ms);

	TP_CHECK(n >= 0, "epoll_wait");
	TP_CHECK(n <= 1, "epoll_wait reported %d events for one fd", n);
	if (n == 1) {
		TP_CHECK(ev[0].data.u64 == want, "wrong data %llu",
			 (unsigned long long)ev[0].data.u64);
		TP_CHECK(ev[0].events & EPOLLIN, "no EPOLLIN in 0x%x",
			 ev[0].events);
	}
	return n;
}

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int c, s, ep, family = argc > 1 ? AF_INET6 : AF_INET;
	char buf[64];
	size_t got;

	tp_start("epoll_et", 20);
	tp_pair(family, &c, &s);
	tp_nonblock(s);
	ep = epoll_create1(EPOLL_CLOEXEC);
	TP_CHECK(ep >= 0, "epoll_create1");
	ev.data.u64 = 0x1234567890ull;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev), "epoll_ctl ADD");

	TP_CHECK(wait1(ep, 100, ev.data.u64) == 0, "report before any data");
	tp_send(c, 1, 0, 1000);
	TP_CHECK(wait1(ep, 5000, ev.data.u64) == 1, "no report for arrival");
	/* Read a part only: edge-triggered must not report the rest. */
	TP_CHECK(recv(s, buf, 10, 0) == 10, "recv 10");
	tp_verify(1, 0, buf, 10);
	TP_CHECK(wait1(ep, 200, ev.data.u64) == 0,
		 "edge-triggered reported old data again");
	/* A new arrival: one new report, though old data is still there. */
	tp_send(c, 1, 1000, 500);
	TP_CHECK(wait1(ep, 5000, ev.data.u64) == 1,
		 "no report for the second arrival");
	TP_CHECK(wait1(ep, 200, ev.data.u64) == 0,
		 "second arrival reported twice");
	got = tp_drain(s, 1, 10, 1490);
	TP_CHECK(got == 1490, "drained %zu bytes, expected 1490", got);
	TP_CHECK(wait1(ep, 100, ev.data.u64) == 0, "report after draining");
	/* Blocking wake-up: the sender comes after the sleep started. */
	if (fork() == 0) {
		usleep(200000);
		tp_send(c, 1, 1500, 3000);
		_exit(0);
	}
	TP_CHECK(wait1(ep, 5000, ev.data.u64) == 1,
		 "sleeping waiter not woken");
	got = tp_drain(s, 1, 1500, 3000);
	TP_CHECK(got == 3000, "drained %zu bytes, expected 3000", got);
	close(ep);
	close(c);
	close(s);
	tp_pass();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * epoll_nested.c - an epoll set inside another epoll set and inside poll:
 * the outer waits see the inner set's readiness, including data already
 * queued by the switch (after a partial read); bytes checked.
 */
#include <sys/epoll.h>
#include "tprog.h"

static int waitn(int ep, int ms, uint32_t want)
{
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, ms);

	TP_CHECK(n >= 0, "epoll_wait");
	TP_CHECK(n == 0 || ev[0].data.u32 == want,
		 "reported data %u, expected %u", ev[0].data.u32, want);
	return n;
}

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int c, s, inner, outer, family = argc > 1 ? AF_INET6 : AF_INET;
	struct pollfd p;
	char buf[10];

	tp_start("epoll_nested", 20);
	tp_pair(family, &c, &s);
	tp_nonblock(s);
	inner = epoll_create1(0);
	outer = epoll_create1(0);
	TP_CHECK(inner >= 0 && outer >= 0, "epoll_create1");
	ev.data.u32 = 10;
	TP_CHECK(!epoll_ctl(inner, EPOLL_CTL_ADD, s, &ev), "ADD s to inner");
	ev.data.u32 = 20;
	TP_CHECK(!epoll_ctl(outer, EPOLL_CTL_ADD, inner, &ev),
		 "ADD inner to outer");
	TP_CHECK(waitn(outer, 100, 20) == 0, "outer ready with no data");
	if (fork() == 0) {
		usleep(150000);
		tp_send(c, 4, 0, 700);
		_exit(0);
	}
	TP_CHECK(waitn(outer, 5000, 20) == 1, "outer not woken by data");
	TP_CHECK(waitn(inner, 5000, 10) == 1, "inner set has no report");
	TP_CHECK(recv(s, buf, 10, 0) == 10, "recv 10");
	tp_verify(4, 0, buf, 10);
	/* The rest may be queued where the kernel cannot see it. */
	TP_CHECK(waitn(outer, 1000, 20) == 1,
		 "outer set does not see data still queued in the inner set");
	p.fd = inner;
	p.events = POLLIN;
	TP_CHECK(poll(&p, 1, 1000) == 1 && (p.revents & POLLIN),
		 "poll on the inner epoll fd does not see queued data");
	TP_CHECK(tp_drain(s, 4, 10, 690) == 690, "drain");
	TP_CHECK(waitn(outer, 200, 20) == 0, "outer ready after drain");
	p.revents = 0;
	TP_CHECK(poll(&p, 1, 100) == 0, "poll on inner ready after drain");
	close(outer);
	close(inner);
	close(c);
	close(s);
	tp_pass();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * epoll_oneshot.c - EPOLLONESHOT on a connection: one report, then silence
 * while data remains, until EPOLL_CTL_MOD re-arms it; bytes checked.
 */
#include <sys/epoll.h>
#include "tprog.h"

static int waitn(int ep, int ms)
{
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, ms);

	TP_CHECK(n >= 0, "epoll_wait");
	TP_CHECK(n == 0 || (ev[0].data.fd == 77 && (ev[0].events & EPOLLIN)),
		 "unexpected event 0x%x data %d", ev[0].events, ev[0].data.fd);
	return n;
}

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT };
	int c, s, ep, family = argc > 1 ? AF_INET6 : AF_INET;
	char buf[100];

	tp_start("epoll_oneshot", 20);
	tp_pair(family, &c, &s);
	tp_nonblock(s);
	ep = epoll_create(8);
	TP_CHECK(ep >= 0, "epoll_create");
	ev.data.fd = 77;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev), "epoll_ctl ADD");
	tp_send(c, 2, 0, 2000);
	TP_CHECK(waitn(ep, 5000) == 1, "no report for arrival");
	TP_CHECK(recv(s, buf, 100, 0) == 100, "recv 100");
	tp_verify(2, 0, buf, 100);
	TP_CHECK(waitn(ep, 200) == 0, "oneshot reported twice without MOD");
	tp_send(c, 2, 2000, 100);
	TP_CHECK(waitn(ep, 200) == 0, "oneshot reported new data without MOD");
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev), "epoll_ctl MOD");
	TP_CHECK(waitn(ep, 5000) == 1, "no report after MOD with data queued");
	TP_CHECK(waitn(ep, 200) == 0, "reported again after re-arm");
	TP_CHECK(tp_drain(s, 2, 100, 2000) == 2000, "drain");
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev), "epoll_ctl MOD");
	TP_CHECK(waitn(ep, 200) == 0, "report with nothing queued");
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL), "epoll_ctl DEL");
	close(ep);
	close(c);
	close(s);
	tp_pass();
}

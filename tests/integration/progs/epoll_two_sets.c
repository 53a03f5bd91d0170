/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * epoll_two_sets.c - one connection in two epoll sets, level-triggered in
 * one and edge-triggered in the other: each set keeps its own semantics,
 * closing the fd removes it from both; bytes checked.
 */
#include <sys/epoll.h>
#include "tprog.h"

static int waitn(int ep, int ms, int want)
{
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, ms);

	TP_CHECK(n >= 0, "epoll_wait");
	TP_CHECK(n == 0 || ev[0].data.u32 == (uint32_t)want,
		 "set reported data %u, expected %d", ev[0].data.u32, want);
	return n;
}

int main(int argc, char **argv)
{
	struct epoll_event lt = { .events = EPOLLIN, .data.u32 = 1 };
	struct epoll_event et = { .events = EPOLLIN | EPOLLET, .data.u32 = 2 };
	int c, s, e1, e2, family = argc > 1 ? AF_INET6 : AF_INET;
	char buf[50];

	tp_start("epoll_two_sets", 20);
	tp_pair(family, &c, &s);
	tp_nonblock(s);
	e1 = epoll_create1(0);
	e2 = epoll_create1(0);
	TP_CHECK(e1 >= 0 && e2 >= 0, "epoll_create1");
	TP_CHECK(!epoll_ctl(e1, EPOLL_CTL_ADD, s, &lt), "ADD to set 1");
	TP_CHECK(!epoll_ctl(e2, EPOLL_CTL_ADD, s, &et), "ADD to set 2");
	tp_send(c, 3, 0, 1000);
	TP_CHECK(waitn(e1, 5000, 1) == 1, "level set: no report");
	TP_CHECK(waitn(e2, 5000, 2) == 1, "edge set: no report");
	TP_CHECK(recv(s, buf, 50, 0) == 50, "recv 50");
	tp_verify(3, 0, buf, 50);
	TP_CHECK(waitn(e1, 1000, 1) == 1, "level set forgot queued data");
	TP_CHECK(waitn(e1, 1000, 1) == 1, "level set forgot queued data (2)");
	TP_CHECK(waitn(e2, 200, 2) == 0, "edge set reported old data");
	tp_send(c, 3, 1000, 10);
	TP_CHECK(waitn(e2, 5000, 2) == 1, "edge set missed new data");
	TP_CHECK(tp_drain(s, 3, 50, 960) == 960, "drain");
	TP_CHECK(waitn(e1, 200, 1) == 0, "level set reports after drain");
	/* Closing the fd removes it from both sets. */
	tp_send(c, 3, 1010, 10);
	close(s);
	TP_CHECK(waitn(e1, 200, 1) == 0, "closed fd still in set 1");
	TP_CHECK(waitn(e2, 200, 2) == 0, "closed fd still in set 2");
	close(e1);
	close(e2);
	close(c);
	tp_pass();
}

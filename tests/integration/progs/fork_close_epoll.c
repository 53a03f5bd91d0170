/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_close_epoll.c - a forked child shares its parent's epoll set and
 * closes what it inherited (redis's background save closes the listeners
 * so): the parent's registrations live on, as the kernel keeps them while
 * the parent holds the files. The parent then takes a new connection on
 * the listener and reads a carried connection's bytes, both reported by
 * its set within a second; bytes checked. A carried connection the
 * parent took out of the set before the fork (asyncio's flow control
 * does, while it writes) and puts back after the child's close is
 * accepted and reported as well.
 */
#include <sys/epoll.h>
#include <sys/wait.h>
#include "tp_stats.h"

/* The one report a wait on ep gives within ms, its data in *data. */
static int wait_one(int ep, int ms, uint32_t *data)
{
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, ms);

	TP_CHECK(n >= 0, "epoll_wait");
	if (n > 0)
		*data = ev[0].data.u32;
	return n;
}

int main(int argc, char **argv)
{
	struct epoll_event lev = { .events = EPOLLIN, .data.u32 = 1 };
	struct epoll_event cev = { .events = EPOLLIN, .data.u32 = 2 };
	struct epoll_event dev = { .events = EPOLLIN, .data.u32 = 3 };
	int family = argc > 1 ? AF_INET6 : AF_INET;
	struct sockaddr_storage ss;
	socklen_t len;
	int l, c, s, c2, s2, c3, s3, ep;
	uint32_t data = 0;
	pid_t pid;
	char buf[100];

	tp_start("fork_close_epoll", 30);
	l = tp_listener(family, 16, &ss, &len);
	tp_nonblock(l);
	c = tp_connect(&ss, len);
	s = accept(l, NULL, NULL);
	TP_CHECK(s >= 0, "accept");
	tp_carry_both(c, s);
	tp_nonblock(s);
	c3 = tp_connect(&ss, len);
	s3 = accept(l, NULL, NULL);
	TP_CHECK(s3 >= 0, "accept");
	tp_carry_both(c3, s3);
	ep = epoll_create1(EPOLL_CLOEXEC);
	TP_CHECK(ep >= 0, "epoll_create1");
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, l, &lev), "ADD listener");
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s, &cev), "ADD connection");
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s3, &dev), "ADD third");
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_DEL, s3, NULL), "DEL third");
	TP_CHECK(wait_one(ep, 0, &data) == 0, "a report before any byte");

	pid = fork();
	TP_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		/* the child uses neither: it closes both and goes */
		tp_name = "fork_close_epoll (child)";
		close(l);
		close(s);
		close(s3);
		_exit(0);
	}
	tp_reap(pid, "child failed");
	/* the connection taken out before the fork goes back in (before
	 * any wait on the set) */
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s3, &dev),
		 "ADD again of a connection taken out before the fork");

	/* a new connection: the parent's set reports the listener */
	c2 = tp_connect(&ss, len);
	TP_CHECK(wait_one(ep, 1000, &data) == 1 && data == 1,
		 "the listener's new connection was not reported within 1 s (data %u)",
		 data);
	s2 = accept(l, NULL, NULL);
	TP_CHECK(s2 >= 0, "accept after the child's close");
	tp_send(c2, 5, 0, 100);
	tp_recv(s2, 5, 0, 100);

	/* bytes on the first connection: its registration lives too */
	tp_send(c, 6, 0, 100);
	TP_CHECK(wait_one(ep, 1000, &data) == 1 && data == 2,
		 "the connection's bytes were not reported within 1 s (data %u)",
		 data);
	TP_CHECK(recv(s, buf, sizeof(buf), MSG_WAITALL) == (ssize_t)sizeof(buf),
		 "recv 100");
	tp_verify(6, 0, buf, sizeof(buf));
	tp_send(s, 7, 0, 1000);
	tp_recv(c, 7, 0, 1000);

	tp_send(c3, 8, 0, 100);
	TP_CHECK(wait_one(ep, 1000, &data) == 1 && data == 3,
		 "the third connection's bytes were not reported within 1 s (data %u)",
		 data);
	tp_recv(s3, 8, 0, 100);

	close(ep);
	close(s3);
	close(c3);
	close(s2);
	close(c2);
	close(s);
	close(c);
	close(l);
	tp_pass();
}

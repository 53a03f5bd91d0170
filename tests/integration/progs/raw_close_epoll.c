/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * raw_close_epoll.c - a carried connection in an epoll set closed with
 * syscall(SYS_close), as libuv (node) closes its fds, past the shim: the
 * next accepted connection gets the same fd, and its EPOLL_CTL_ADD and MOD
 * must succeed as the kernel's would (node aborted on the EEXIST, then
 * ENOENT, of the entry kept for the old socket), and it must report its
 * bytes; every byte checked.
 */
#include <sys/epoll.h>
#include <sys/syscall.h>
#include "tp_stats.h"

static int conn(int l, struct sockaddr_storage *ss, socklen_t len, int *s)
{
	int c = socket(ss->ss_family, SOCK_STREAM, 0);

	TP_CHECK(c >= 0, "socket");
	TP_CHECK(!connect(c, (struct sockaddr *)ss, len), "connect");
	*s = accept(l, NULL, NULL);
	TP_CHECK(*s >= 0, "accept");
	return c;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int l, c, s, c2, s2, ep, family = argc > 1 ? AF_INET6 : AF_INET;
	socklen_t len;

	tp_start("raw_close_epoll", 20);
	l = tp_listener(family, 16, &ss, &len);
	ep = epoll_create1(0);
	TP_CHECK(ep >= 0, "epoll_create1");
	c = conn(l, &ss, len, &s);
	ev.data.fd = s;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev), "epoll_ctl ADD");
	tp_send(c, 1, 0, 100000);
	TP_CHECK(epoll_wait(ep, &out, 1, 5000) == 1, "epoll_wait");
	tp_recv(s, 1, 0, 100000);
	tp_carry_both(c, s);
	/* the set's waits keep the carried socket's entry from now on */
	tp_send(c, 1, 100000, 10);
	TP_CHECK(epoll_wait(ep, &out, 1, 5000) == 1, "epoll_wait carried");
	tp_recv(s, 1, 100000, 10);
	TP_CHECK(epoll_wait(ep, &out, 1, 0) == 0, "epoll_wait, nothing");
	ev.events = EPOLLIN | EPOLLOUT;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev), "epoll_ctl MOD");
	ev.events = EPOLLIN;
	/* libuv's uv_close: the fd leaves the set, then the raw close */
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL), "epoll_ctl DEL");
	TP_CHECK(syscall(SYS_close, s) == 0, "close by system call");
	close(c);
	c2 = conn(l, &ss, len, &s2);
	TP_CHECK(s2 == s, "the new connection got fd %d, not %d", s2, s);
	ev.data.fd = s2;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s2, &ev),
		 "epoll_ctl ADD of the fd's new socket (errno %d)", errno);
	ev.events = EPOLLIN | EPOLLRDHUP;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_MOD, s2, &ev),
		 "epoll_ctl MOD of the fd's new socket (errno %d)", errno);
	tp_send(c2, 2, 0, 1000);
	TP_CHECK(epoll_wait(ep, &out, 1, 5000) == 1 && out.data.fd == s2 &&
		 (out.events & EPOLLIN), "the new socket's bytes not reported");
	tp_recv(s2, 2, 0, 1000);
	tp_send(s2, 3, 0, 200000);
	tp_recv(c2, 3, 0, 200000);
	close(c2);
	close(s2);
	close(ep);
	close(l);
	tp_pass();
}

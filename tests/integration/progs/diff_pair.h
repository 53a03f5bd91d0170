/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * diff_pair.h - the differential programs' two connections: a loopback TCP
 * pair made with raw system calls, which the switch never sees (the
 * kernel's answers), beside a pair carried by the provider; and comparing
 * one answer of each.
 */
#ifndef DIFF_PAIR_H
#define DIFF_PAIR_H

#include <sys/syscall.h>
#include "tp_stats.h"

/* A loopback listener made with raw system calls (never the switch's). */
static inline int raw_listener(int family, int backlog,
			       struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	long l;

	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET6) {
		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_loopback;
		*len = sizeof(*in6);
	} else {
		in4->sin_family = AF_INET;
		in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*len = sizeof(*in4);
	}
	l = syscall(SYS_socket, family, SOCK_STREAM, 0);
	TP_CHECK(l >= 0, "raw socket");
	TP_CHECK(!syscall(SYS_bind, l, ss, *len), "raw bind");
	TP_CHECK(!syscall(SYS_listen, l, backlog), "raw listen");
	TP_CHECK(!syscall(SYS_getsockname, l, ss, len), "raw getsockname");
	return (int)l;
}

/* A socket connected with raw system calls. */
static inline int raw_connect(const struct sockaddr_storage *ss,
			      socklen_t len)
{
	int c = (int)syscall(SYS_socket, ss->ss_family, SOCK_STREAM, 0);

	TP_CHECK(c >= 0, "raw socket");
	TP_CHECK(!syscall(SYS_connect, c, ss, len), "raw connect");
	return c;
}

static inline void raw_pair(int family, int *c, int *s)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l, one = 1;

	l = raw_listener(family, 4, &ss, &len);
	*c = raw_connect(&ss, len);
	*s = (int)syscall(SYS_accept4, l, NULL, NULL, 0);
	TP_CHECK(*s >= 0, "raw accept");
	syscall(SYS_setsockopt, *c, IPPROTO_TCP, TCP_NODELAY, &one,
		sizeof(one));
	syscall(SYS_close, l);
}

/* r and errno of an int-returning call, as one number to compare */
#define RES(x) ({ int _r = (x); _r < 0 ? -errno : _r; })

static inline void same(const char *what, long k, long c)
{
	TP_CHECK(k == c, "%s: %ld on the carried connection, the kernel %ld",
		 what, c, k);
}

#endif /* DIFF_PAIR_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tcp_ulp.c - TCP_ULP (kernel TLS: the kernel encrypts what the program
 * writes and decrypts what it reads) cannot hold on a carried connection,
 * whose bytes pass the kernel by: the switch refuses the option there as a
 * kernel without the module does (ENOENT), and the connection goes on
 * carried, every byte in order. On a connection that is plain TCP for good
 * (its server has no switch) the option goes to the kernel, whose answer
 * the program gets. The ULP asked for is "mptcp", which this kernel knows
 * and refuses from user space with EOPNOTSUPP: so the two answers differ
 * on any kernel, with or without the tls module.
 */
#include <sys/syscall.h>
#include "tp_stats.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif

static int family;

static void exchange(int c, int s, unsigned int id)
{
	tp_send(c, id, 0, 40000);
	tp_recv(s, id, 0, 40000);
	tp_send(s, id + 1, 0, 20000);
	tp_recv(c, id + 1, 0, 20000);
}

int main(int argc, char **argv)
{
	const struct sw_conn_stats *st;
	struct sockaddr_storage ss;
	socklen_t len;
	int c, s, l, r, e;

	family = argc > 1 ? AF_INET6 : AF_INET;
	tp_start("tcp_ulp", 30);

	/* a server without the switch: TCP for good, the kernel answers */
	l = tp_raw_listener(family, 4, &ss, &len);
	c = tp_connect(&ss, len);
	s = (int)syscall(SYS_accept4, l, NULL, NULL, 0);
	TP_CHECK(s >= 0, "raw accept");
	tp_send(c, 5, 0, 1000);
	{
		char b[1000];
		size_t got = 0;

		while (got < sizeof(b)) {
			long n = syscall(SYS_recvfrom, s, b + got,
					 sizeof(b) - got, 0, NULL, NULL);

			TP_CHECK(n > 0, "raw recv");
			tp_verify(5, got, b + got, (size_t)n);
			got += (size_t)n;
		}
	}
	st = tp_conn_stats(c);
	TP_CHECK(st && st->state == SW_TCP,
		 "a connection to a server without the switch is not TCP (state %d)",
		 st ? (int)st->state : -1);
	errno = 0;
	r = setsockopt(c, IPPROTO_TCP, TCP_ULP, "mptcp", 5);
	e = errno;
	TP_CHECK(r == -1 && e == EOPNOTSUPP,
		 "TCP_ULP on a plain connection: %d, errno %d (the kernel says EOPNOTSUPP)",
		 r, e);
	close(c);
	syscall(SYS_close, s);
	syscall(SYS_close, l);

	/* carried: refused, and still carried */
	tp_pair(family, &c, &s);
	tp_carry_both(c, s);
	exchange(c, s, 1);
	errno = 0;
	r = setsockopt(c, IPPROTO_TCP, TCP_ULP, "mptcp", 5);
	e = errno;
	TP_CHECK(r == -1 && e == ENOENT,
		 "TCP_ULP on a carried connection: %d, errno %d (want ENOENT)",
		 r, e);
	r = setsockopt(s, IPPROTO_TCP, TCP_ULP, "tls", 3);
	TP_CHECK(r == -1 && errno == ENOENT,
		 "TCP_ULP on the carried server end: %d", r);
	exchange(c, s, 3);
	st = tp_conn_stats(c);
	TP_CHECK(st && st->state == TP_STATE_SAN,
		 "the connection left the SAN (state %d)",
		 st ? (int)st->state : -1);
	close(c);
	close(s);
	tp_pass();
}

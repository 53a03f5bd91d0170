/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * kernel_opts.c - options whose effect is on the bytes in the TCP socket
 * itself cannot hold on a carried connection, whose bytes pass the kernel
 * by: TCP_ULP (kernel TLS: the kernel encrypts what the program writes and
 * decrypts what it reads) and SO_PEEK_OFF (MSG_PEEK goes on from an offset
 * the kernel keeps; accepted sockets inherit it from their listener). The
 * switch refuses them there as a kernel without them does (TCP_ULP:
 * ENOENT; SO_PEEK_OFF: EOPNOTSUPP), and the connection goes on carried,
 * every byte in order. On a connection that is plain TCP for good (its
 * server has no switch) they go to the kernel, whose answer the program
 * gets. The ULP asked for is "mptcp", which this kernel knows and refuses
 * from user space with EOPNOTSUPP: so the two answers differ on any
 * kernel, with or without the tls module.
 */
#include <sys/syscall.h>
#include "tp_stats.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif

static int family;

/* setsockopt(fd, level, name) must answer want: 0, or the errno of a
 * failure. */
static void opt_answer(int fd, int level, int name, const void *val,
		       socklen_t len, int want, const char *what)
{
	int r, e;

	errno = 0;
	r = setsockopt(fd, level, name, val, len);
	e = r ? errno : 0;
	TP_CHECK(e == want && (r == 0) == (want == 0),
		 "%s: %d, errno %d (want %d)", what, r, e, want);
}

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
	int c, s, l, off = 0;

	family = argc > 1 ? AF_INET6 : AF_INET;
	tp_start("kernel_opts", 30);

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
	/* the kernel's answer */
	opt_answer(c, IPPROTO_TCP, TCP_ULP, "mptcp", 5, EOPNOTSUPP,
		   "TCP_ULP on a plain connection");
	/* SO_PEEK_OFF: the kernel's, each peek going on from the last */
	{
		char p[6];

		opt_answer(c, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off), 0,
			   "SO_PEEK_OFF on a plain connection");
		TP_CHECK(syscall(SYS_sendto, s, "abcdef", 6, 0, NULL, 0) == 6,
			 "raw send");
		TP_CHECK(recv(c, p, 3, MSG_PEEK | MSG_WAITALL) == 3 &&
			 recv(c, p + 3, 3, MSG_PEEK | MSG_WAITALL) == 3 &&
			 !memcmp(p, "abcdef", 6),
			 "peeks with SO_PEEK_OFF on a plain connection: %.6s",
			 p);
	}
	close(c);
	syscall(SYS_close, s);
	syscall(SYS_close, l);

	/* carried: refused, and still carried */
	tp_pair(family, &c, &s);
	tp_carry_both(c, s);
	exchange(c, s, 1);
	opt_answer(c, IPPROTO_TCP, TCP_ULP, "mptcp", 5, ENOENT,
		   "TCP_ULP on a carried connection");
	opt_answer(s, IPPROTO_TCP, TCP_ULP, "tls", 3, ENOENT,
		   "TCP_ULP on the carried server end");
	{
		char p[6];

		opt_answer(s, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off),
			   EOPNOTSUPP, "SO_PEEK_OFF on a carried connection");
		tp_send(c, 9, 0, 6);
		TP_CHECK(recv(s, p, 3, MSG_PEEK | MSG_WAITALL) == 3 &&
			 recv(s, p + 3, 3, MSG_PEEK | MSG_WAITALL) == 3 &&
			 !memcmp(p, p + 3, 3),
			 "two peeks without an offset differ");
		tp_recv(s, 9, 0, 6);
		l = tp_listener(family, 4, &ss, &len);
		opt_answer(l, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off),
			   EOPNOTSUPP, "SO_PEEK_OFF on a listener the switch serves");
		close(l);
	}
	exchange(c, s, 3);
	st = tp_conn_stats(c);
	TP_CHECK(st && st->state == TP_STATE_SAN,
		 "the connection left the SAN (state %d)",
		 st ? (int)st->state : -1);
	close(c);
	close(s);
	tp_pass();
}

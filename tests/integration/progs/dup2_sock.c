/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * dup2_sock.c - dup, dup2 and fcntl(F_DUPFD) on connections: dup2 over a
 * connection closes that connection (its peer sees EOF), the new fd
 * carries the old one's stream, closing one of two fds keeps the stream
 * open; every byte checked.
 */
#include "tprog.h"

int main(int argc, char **argv)
{
	int c1, s1, c2, s2, d, f, family = argc > 1 ? AF_INET6 : AF_INET;
	char buf[16];

	tp_start("dup2_sock", 20);
	tp_pair(family, &c1, &s1);
	tp_pair(family, &c2, &s2);
	tp_send(c1, 7, 0, 1000);
	tp_recv(s1, 7, 0, 100);		/* part read through s1 */
	/* s2 now names s1's connection; s2's own connection is closed. */
	TP_CHECK(dup2(s1, s2) == s2, "dup2");
	TP_CHECK(recv(c2, buf, sizeof(buf), 0) == 0,
		 "peer of the fd dup2 replaced did not see EOF");
	close(c2);
	close(s1);
	tp_recv(s2, 7, 100, 900);	/* the rest through the new fd */
	tp_send(s2, 8, 0, 2000);
	tp_recv(c1, 8, 0, 2000);
	/* dup: two fds, one stream; closing one keeps it. */
	d = dup(s2);
	TP_CHECK(d >= 0, "dup");
	close(s2);
	tp_send(c1, 7, 1000, 3000);
	tp_recv(d, 7, 1000, 3000);
	f = fcntl(d, F_DUPFD_CLOEXEC, 100);
	TP_CHECK(f >= 100, "fcntl F_DUPFD_CLOEXEC");
	close(d);
	tp_send(f, 8, 2000, 1000);
	tp_recv(c1, 8, 2000, 1000);
	/* The last close ends the stream. */
	close(f);
	TP_CHECK(recv(c1, buf, sizeof(buf), 0) == 0,
		 "no EOF after the last fd was closed");
	close(c1);
	tp_pass();
}

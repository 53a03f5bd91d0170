/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * plain_idle.c - a preloaded server's connection from a client without the
 * switch stays TCP, and waiting on it costs what it costs on TCP: epoll
 * and poll on it sleep in the kernel at once, with no busy-poll first (a
 * server under the switch whose clients run none spun up to 500 us in
 * every wait: nginx served plain wrk 12% slower than without the switch).
 * The client here talks through raw system calls, which the switch never
 * sees. Every byte both ways is checked.
 */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include "tp_stats.h"

#define PI_WAITS 400
#define PI_CPU_MS 15	/* for PI_WAITS sleeps of 1 ms; a busy-poll of the
			 * smallest budget (50 us) each would take 20 ms */

/* n bytes of stream id from off, written by the raw client. */
static void raw_send(int fd, unsigned int id, size_t off, size_t n)
{
	char buf[4096];

	while (n) {
		size_t k = n < sizeof(buf) ? n : sizeof(buf);
		long r;

		tp_fill(id, off, buf, k);
		r = syscall(SYS_sendto, fd, buf, k, MSG_NOSIGNAL, NULL, 0);
		TP_CHECK(r > 0, "raw send");
		off += (size_t)r;
		n -= (size_t)r;
	}
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	struct sockaddr_storage ss;
	struct epoll_event ev = { .events = EPOLLIN }, out;
	const struct sw_conn_stats *st;
	struct pollfd pf;
	socklen_t len;
	long c, t0, spent;
	int l, s, ep, i;

	tp_start("plain_idle", 30);
	l = tp_listener(family, 4, &ss, &len);
	c = syscall(SYS_socket, family, SOCK_STREAM, 0);
	TP_CHECK(c >= 0, "raw socket");
	TP_CHECK(!syscall(SYS_connect, (int)c, (struct sockaddr *)&ss, len),
		 "raw connect");
	s = accept(l, NULL, NULL);
	TP_CHECK(s >= 0, "accept");
	raw_send((int)c, 1, 0, 3000);
	tp_recv(s, 1, 0, 3000);
	tp_send(s, 2, 0, 3000);
	{
		char buf[3000];
		size_t got = 0;

		while (got < sizeof(buf)) {
			long r = syscall(SYS_recvfrom, (int)c, buf + got,
					 sizeof(buf) - got, 0, NULL, NULL);

			TP_CHECK(r > 0, "raw recv");
			got += (size_t)r;
		}
		tp_verify(2, 0, buf, sizeof(buf));
	}
	st = tp_conn_stats(s);
	TP_CHECK(st && st->state == 1 /* SW_TCP */,
		 "a client without the switch: the connection should be TCP "
		 "(state %d)", st ? (int)st->state : -1);

	ep = epoll_create1(0);
	TP_CHECK(ep >= 0 && !epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev),
		 "epoll set");
	t0 = tp_cpu_ms();
	for (i = 0; i < PI_WAITS; i++)
		TP_CHECK(epoll_wait(ep, &out, 1, 1) == 0,
			 "epoll reported an idle connection");
	spent = tp_cpu_ms() - t0;
	TP_CHECK(spent <= PI_CPU_MS, "%d epoll waits of 1 ms on a TCP "
		 "connection used %ld ms of CPU", PI_WAITS, spent);
	pf.fd = s;
	pf.events = POLLIN;
	t0 = tp_cpu_ms();
	for (i = 0; i < PI_WAITS; i++)
		TP_CHECK(poll(&pf, 1, 1) == 0, "poll reported an idle "
			 "connection");
	spent = tp_cpu_ms() - t0;
	TP_CHECK(spent <= PI_CPU_MS, "%d polls of 1 ms on a TCP connection "
		 "used %ld ms of CPU", PI_WAITS, spent);

	/* and both still report what comes */
	raw_send((int)c, 3, 0, 5000);
	TP_CHECK(epoll_wait(ep, &out, 1, 5000) == 1 &&
		 (out.events & EPOLLIN), "epoll missed the bytes");
	TP_CHECK(poll(&pf, 1, 5000) == 1 && (pf.revents & POLLIN),
		 "poll missed the bytes");
	tp_recv(s, 3, 0, 5000);
	syscall(SYS_close, (int)c);
	close(s);
	close(ep);
	close(l);
	tp_pass();
}

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
#define PI_ROUNDS 8	/* the waits in rounds, alternating with the same
			 * waits on a socket the switch does not know */
#define PI_SLACK_MS 10	/* over that socket's CPU for PI_WAITS sleeps of
			 * 1 ms; a busy-poll of the smallest budget (50 us)
			 * each would add 20 ms */

/* CPU milliseconds of this thread for n waits of 1 ms on fd, by epoll (set
 * ep) or poll: a busy-poll would be spent here, in the waiting thread; the
 * switch's background threads (an upgrade attempt, the flusher) run
 * whenever they run and are not what this measures. */
static long waits_cpu(int ep, int fd, int n)
{
	struct epoll_event out;
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	long t0 = tp_cpu_ms_of(RUSAGE_THREAD);
	int i;

	for (i = 0; i < n; i++) {
		if (ep >= 0)
			TP_CHECK(epoll_wait(ep, &out, 1, 1) == 0,
				 "epoll reported an idle connection");
		else
			TP_CHECK(poll(&pf, 1, 1) == 0,
				 "poll reported an idle connection");
	}
	return tp_cpu_ms_of(RUSAGE_THREAD) - t0;
}

/* The CPU that PI_WAITS waits on s cost beyond the same waits on the
 * switch-free fd raw, measured in alternating rounds on this machine, as
 * loaded as it is now (and under ASan when built so). */
static void idle_cost(const char *how, int ep, int epraw, int s, int raw)
{
	long mine = 0, base = 0, m;
	char rounds[PI_ROUNDS * 24] = "", *p = rounds;
	int r;

	for (r = 0; r < PI_ROUNDS; r++) {
		base += waits_cpu(epraw, raw, PI_WAITS / PI_ROUNDS);
		m = waits_cpu(ep, s, PI_WAITS / PI_ROUNDS);
		mine += m;
		p += snprintf(p, sizeof(rounds) - (size_t)(p - rounds),
			      "%s%ld", r ? " " : "", m);
	}
	/* by round: a busy-poll costs in every round, something else that
	 * ran on this thread's time in one */
	TP_CHECK(mine <= base + PI_SLACK_MS, "%d %s waits of 1 ms on a TCP "
		 "connection used %ld ms of CPU (by round of %d: %s), the "
		 "same waits on a socket the switch does not know %ld ms",
		 PI_WAITS, how, mine, PI_WAITS / PI_ROUNDS, rounds, base);
}

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
	long c;
	int l, s, ep, epraw;

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
	/* the raw client's socket, idle too, is the reference */
	epraw = epoll_create1(0);
	TP_CHECK(epraw >= 0 &&
		 !epoll_ctl(epraw, EPOLL_CTL_ADD, (int)c, &ev),
		 "epoll set of the raw socket");
	idle_cost("epoll", ep, epraw, s, (int)c);
	idle_cost("poll", -1, -1, s, (int)c);
	pf.fd = s;
	pf.events = POLLIN;

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
	close(epraw);
	close(l);
	tp_pass();
}

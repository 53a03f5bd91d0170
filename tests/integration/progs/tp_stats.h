/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tp_stats.h - the integration programs' view of their own connections in
 * the switch's statistics file (docs/statistics.md): which state a
 * connection is in, and waiting until the provider carries it.
 */
#ifndef TP_STATS_H
#define TP_STATS_H

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include "stats.h"
#include "tprog.h"

#define TP_STATE_SAN SW_SAN

/* This process's statistics record of the connection on fd (the switch
 * publishes it where sw_stats_path says); NULL when not found. */
static inline const struct sw_conn_stats *tp_conn_stats(int fd)
{
	static const struct sw_proc_stats *ps;
	static pid_t ps_pid;
	char path[512];
	unsigned int i;
	int f;

	/* a forked process has a file of its own */
	if (ps && ps_pid != getpid()) {
		munmap((void *)ps, sizeof(*ps));
		ps = NULL;
	}
	if (!ps) {
		ps_pid = getpid();
		sw_stats_path(path, sizeof(path), (int)getpid());
		f = open(path, O_RDONLY);
		if (f < 0)
			return NULL;
		ps = mmap(NULL, sizeof(*ps), PROT_READ, MAP_SHARED, f, 0);
		close(f);
		if (ps == MAP_FAILED) {
			ps = NULL;
			return NULL;
		}
	}
	for (i = 0; i < ps->nslots && i < SW_STATS_SLOTS; i++) {
		const struct sw_conn_stats *c = &ps->conn[i];
		struct stat sb;

		if (!c->in_use || c->fd != fd)
			continue;
		/* a TCP-only connection's record outlives its close until
		 * the switch sweeps it: the socket must still be fd's (as
		 * sdp-stat checks) */
		if ((c->flags & SW_CONN_TCP_ONLY) &&
		    (fstat(fd, &sb) || (uint64_t)sb.st_ino != c->sock_ino))
			continue;
		return c;
	}
	return NULL;
}

/* The upgrade runs while the first bytes travel on TCP: waits (5 s at
 * most) until this side of c sends by the provider; empty sends move its
 * upgrade on. */
static inline void tp_wait_carried(int c)
{
	const struct sw_conn_stats *st;
	long end = tp_ms() + 5000;

	while (!(st = tp_conn_stats(c)) || st->state != TP_STATE_SAN) {
		TP_CHECK(tp_ms() < end, "the connection was not carried by "
			 "the provider within 5 s (state %d)",
			 st ? (int)st->state : -1);
		TP_CHECK(send(c, "", 0, MSG_NOSIGNAL) == 0, "empty send");
		usleep(1000);
	}
}

/* Both ends of a connection in this one process: each side's calls move
 * its own upgrade on, so both are nudged (empty sends) until both are
 * carried by the provider (5 s at most). */
static inline void tp_carry_both(int c, int s)
{
	const struct sw_conn_stats *a = NULL, *b = NULL;
	long end = tp_ms() + 5000;

	while (!(a = tp_conn_stats(c)) || !(b = tp_conn_stats(s)) ||
	       a->state != TP_STATE_SAN || b->state != TP_STATE_SAN) {
		TP_CHECK(tp_ms() < end, "not carried by the provider within "
			 "5 s (states %d, %d)", a ? (int)a->state : -1,
			 b ? (int)b->state : -1);
		TP_CHECK(send(c, "", 0, MSG_NOSIGNAL) == 0 &&
			 send(s, "", 0, MSG_NOSIGNAL) == 0, "empty send");
		usleep(1000);
	}
}

/* CPU milliseconds this process (all its threads) has used. */
/* CPU milliseconds used so far by this process (who RUSAGE_SELF: every
 * thread, the switch's own included) or by the calling thread only
 * (RUSAGE_THREAD: what a wait in this thread costs, whatever the switch's
 * background threads happen to do meanwhile). */
static inline long tp_cpu_ms_of(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000 +
	       ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000;
}

static inline long tp_cpu_ms(void)
{
	return tp_cpu_ms_of(RUSAGE_SELF);
}

/* A connected pair whose client end goes to a child: once carried, it
 * sends n bytes of stream 1, then ends as end(c, arg) says (NULL: close
 * and _exit). *s is this process's (server) end; returns the child. */
static inline pid_t tp_fork_sender(int family, int *s, size_t n,
				   void (*end)(int c, void *arg), void *arg)
{
	pid_t kid;
	int c;

	tp_pair(family, &c, s);
	kid = fork();
	TP_CHECK(kid >= 0, "fork");
	if (!kid) {
		close(*s);
		tp_wait_carried(c);
		tp_send(c, 1, 0, n);
		if (end)
			end(c, arg);
		close(c);
		_exit(0);
	}
	close(c);
	return kid;
}

#endif /* TP_STATS_H */

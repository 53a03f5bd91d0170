/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * poll_mixed.c - poll, ppoll, select and pselect over a set that mixes
 * connections with a pipe: each source reported alone and correctly, data
 * left queued after a partial read reported again, sleeping waiters woken,
 * timeouts honoured; bytes checked.
 */
#include <signal.h>
#include <stdbool.h>
#include <sys/select.h>
#include "tprog.h"

static int c1, s1, c2, s2, pr, pw;

static int do_poll(int ms, short *rs1, short *rs2, short *rp)
{
	struct pollfd p[3] = {
		{ .fd = s1, .events = POLLIN },
		{ .fd = pr, .events = POLLIN },
		{ .fd = s2, .events = POLLIN },
	};
	int n = poll(p, 3, ms);

	TP_CHECK(n >= 0, "poll");
	*rs1 = p[0].revents;
	*rp = p[1].revents;
	*rs2 = p[2].revents;
	return n;
}

static int do_select(int ms, bool *r1, bool *r2, bool *rp, bool use_pselect)
{
	struct timeval tv = { .tv_sec = ms / 1000,
			      .tv_usec = (ms % 1000) * 1000 };
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (ms % 1000) * 1000000L };
	sigset_t mask;
	fd_set rf;
	int n, max = s1;

	if (s2 > max)
		max = s2;
	if (pr > max)
		max = pr;
	FD_ZERO(&rf);
	FD_SET(s1, &rf);
	FD_SET(s2, &rf);
	FD_SET(pr, &rf);
	sigemptyset(&mask);
	n = use_pselect ? pselect(max + 1, &rf, NULL, NULL, &ts, &mask) :
		select(max + 1, &rf, NULL, NULL, &tv);
	TP_CHECK(n >= 0, "select");
	*r1 = FD_ISSET(s1, &rf);
	*r2 = FD_ISSET(s2, &rf);
	*rp = FD_ISSET(pr, &rf);
	TP_CHECK(n == *r1 + *r2 + *rp, "select returned %d for %d bits", n,
		 *r1 + *r2 + *rp);
	return n;
}

int main(int argc, char **argv)
{
	int fds[2], family = argc > 1 ? AF_INET6 : AF_INET, round;
	short a, b, p;
	bool r1, r2, rp;
	char buf[64];
	long t0;

	tp_start("poll_mixed", 30);
	tp_pair(family, &c1, &s1);
	tp_pair(family, &c2, &s2);
	TP_CHECK(!pipe(fds), "pipe");
	pr = fds[0];
	pw = fds[1];
	tp_nonblock(s1);
	tp_nonblock(s2);

	/* Nothing ready: the timeout is honoured. */
	t0 = tp_ms();
	TP_CHECK(do_poll(150, &a, &b, &p) == 0, "poll ready with no data");
	TP_CHECK(tp_ms() - t0 >= 140, "poll returned early (%ld ms)",
		 tp_ms() - t0);
	t0 = tp_ms();
	TP_CHECK(do_select(150, &r1, &r2, &rp, false) == 0, "select ready");
	TP_CHECK(tp_ms() - t0 >= 140, "select returned early");

	/* The pipe alone. */
	TP_CHECK(write(pw, "x", 1) == 1, "write pipe");
	TP_CHECK(do_poll(2000, &a, &b, &p) == 1 && p == POLLIN && !a && !b,
		 "poll with pipe data: s1 0x%x s2 0x%x pipe 0x%x", a, b, p);
	TP_CHECK(do_select(2000, &r1, &r2, &rp, true) == 1 && rp,
		 "pselect with pipe data");
	TP_CHECK(read(pr, buf, 1) == 1 && buf[0] == 'x', "read pipe");

	/* One connection, then a partial read: still readable. */
	for (round = 0; round < 2; round++) {
		tp_send(c1, 5, round * 300, 300);
		TP_CHECK(do_poll(5000, &a, &b, &p) == 1 && (a & POLLIN) &&
			 !b && !p, "poll with s1 data: 0x%x 0x%x 0x%x",
			 a, b, p);
		TP_CHECK(recv(s1, buf, 7, 0) == 7, "recv 7");
		tp_verify(5, round * 300, buf, 7);
		TP_CHECK(do_poll(0, &a, &b, &p) == 1 && (a & POLLIN),
			 "poll lost data queued after a partial read");
		TP_CHECK(do_select(0, &r1, &r2, &rp, round) == 1 && r1 &&
			 !r2 && !rp,
			 "select lost data queued after a partial read");
		TP_CHECK(tp_drain(s1, 5, round * 300 + 7, 293) == 293,
			 "drain s1");
		TP_CHECK(do_poll(0, &a, &b, &p) == 0, "poll ready after drain");
	}

	/* Sleeping waiters woken by a later sender, on the second socket. */
	if (fork() == 0) {
		usleep(200000);
		tp_send(c2, 6, 0, 5000);
		usleep(200000);
		tp_send(c2, 6, 5000, 5000);
		_exit(0);
	}
	TP_CHECK(do_poll(5000, &a, &b, &p) == 1 && (b & POLLIN) && !a,
		 "poll sleeper not woken");
	TP_CHECK(tp_drain(s2, 6, 0, 5000) == 5000, "drain s2");
	TP_CHECK(do_select(5000, &r1, &r2, &rp, false) == 1 && r2,
		 "select sleeper not woken");
	TP_CHECK(tp_drain(s2, 6, 5000, 5000) == 5000, "drain s2 (2)");

	/* Writability of a connection with room. */
	{
		struct pollfd w = { .fd = c1, .events = POLLOUT };

		TP_CHECK(poll(&w, 1, 1000) == 1 && (w.revents & POLLOUT),
			 "idle connection not writable");
	}
	close(c1);
	close(s1);
	close(c2);
	close(s2);
	close(pr);
	close(pw);
	tp_pass();
}

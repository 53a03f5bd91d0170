/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * idle_send.c - after a carried connection went idle (buffers given back,
 * "wake me" announced), a program writes a few small messages with
 * blocking send() to a peer that is in no socket call at all, and only then
 * reads them (one thread holds both ends, as many test suites do). TCP
 * buffers them; the switch must too, instead of waiting for credits that
 * only the sleeping peer's switch could return. Then, with every pool held
 * at two buffers, both ends of each pair write bursts at once from their own
 * threads before they read: each side spends its credits and owes the other
 * buffers, over and over, and neither may wait for the other for ever.
 */
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include "tp_stats.h"

#define IS_PAIRS 4
#define IS_MSGS 16	/* of IS_MSG bytes: far below any TCP buffer */
#define IS_MSG 100
#define IS_CHUNK 65536
#define IS_ROUNDS 300	/* crossing bursts per end */
#define IS_BURST 12	/* messages per burst: more than the credits */

static int fds[2 * IS_PAIRS];

/* One end: a burst of small sends, then the peer's burst, many times;
 * the message sizes vary so the messages do not line up with reads. */
static void *crossing(void *arg)
{
	int i = (int)(long)arg;
	size_t out = 0, in = 0, n;
	int r, k;

	for (r = 0; r < IS_ROUNDS; r++) {
		size_t want = 0;

		for (k = 0; k < IS_BURST; k++) {
			n = 1 + (size_t)((r * 7 + k * 13 + i) % 300);
			tp_send(fds[i], 40 + (unsigned int)i, out, n);
			out += n;
		}
		for (k = 0; k < IS_BURST; k++)
			want += 1 + (size_t)((r * 7 + k * 13 + (i ^ 1)) % 300);
		tp_recv(fds[i], 40 + (unsigned int)(i ^ 1), in, want);
		in += want;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	struct pollfd p[2 * IS_PAIRS];
	pthread_t t[2 * IS_PAIRS];
	long end;
	int i, k;

	if (!getenv("SDP_IDLE_MS")) {
		/* the switch reads its settings at start: run again */
		setenv("SDP_IDLE_MS", "50", 1);
		/* pools stay at two buffers: credits are short all the time */
		setenv("SDP_RECV_BUFS", "2", 1);
		execv("/proc/self/exe", argv);
		tp_fail("execv: %s", strerror(errno));
	}
	tp_start("idle_send", 20);
	for (i = 0; i < IS_PAIRS; i++) {
		tp_pair(family, &fds[2 * i], &fds[2 * i + 1]);
		tp_carry_both(fds[2 * i], fds[2 * i + 1]);
		for (k = 0; k < 8; k++) {
			tp_send(fds[2 * i], 1, (size_t)k * IS_CHUNK, IS_CHUNK);
			tp_recv(fds[2 * i + 1], 1, (size_t)k * IS_CHUNK,
				IS_CHUNK);
			tp_send(fds[2 * i + 1], 2, (size_t)k * IS_CHUNK,
				IS_CHUNK);
			tp_recv(fds[2 * i], 2, (size_t)k * IS_CHUNK, IS_CHUNK);
		}
	}
	/* idle, waiting on every end: buffers go back, wake-ups armed */
	for (i = 0; i < 2 * IS_PAIRS; i++) {
		p[i].fd = fds[i];
		p[i].events = POLLIN;
	}
	end = tp_ms() + 500;
	while (tp_ms() < end)
		TP_CHECK(poll(p, 2 * IS_PAIRS, 100) == 0,
			 "an idle connection was reported ready");
	/* every end writes, nobody reads yet: both directions at once */
	for (i = 0; i < 2 * IS_PAIRS; i++)
		for (k = 0; k < IS_MSGS; k++)
			tp_send(fds[i], 10 + (unsigned int)i,
				(size_t)k * IS_MSG, IS_MSG);
	for (i = 0; i < 2 * IS_PAIRS; i++)
		tp_recv(fds[i ^ 1], 10 + (unsigned int)i, 0, IS_MSGS * IS_MSG);
	/* both ends of every pair at once, each from its own thread */
	for (i = 0; i < 2 * IS_PAIRS; i++)
		TP_CHECK(!pthread_create(&t[i], NULL, crossing, (void *)(long)i),
			 "pthread_create");
	for (i = 0; i < 2 * IS_PAIRS; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < 2 * IS_PAIRS; i++) {
		const struct sw_conn_stats *st = tp_conn_stats(fds[i]);

		TP_CHECK(st && st->state == TP_STATE_SAN,
			 "fd %d left the provider", fds[i]);
		close(fds[i]);
	}
	tp_pass();
	return 0;
}

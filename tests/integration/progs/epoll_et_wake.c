/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * epoll_et_wake.c - a connection registered for good with
 * EPOLLIN|EPOLLOUT|EPOLLET (gRPC's and libuv's way): EPOLLOUT stays ready
 * and was reported, so no wait finds an edge; the wait for the answer to
 * each request must still be ended by the peer's doorbell when the answer
 * comes, not found by a bounded nap. The peer answers 2 ms after each
 * request, longer than this side busy-polls, so each wait sleeps; the
 * statistics must count a doorbell for most of them. Every byte checked.
 */
#include <sys/epoll.h>
#include "tp_stats.h"

#define ROUNDS 60
#define MSG 64

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	const struct sw_conn_stats *st;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLET };
	uint64_t wake0;
	int c, s, ep, i;
	pid_t kid;

	tp_start("epoll_et_wake", 30);
	tp_pair(family, &c, &s);
	kid = fork();
	TP_CHECK(kid >= 0, "fork");
	if (!kid) {
		/* the answerer: each request back, 2 ms later */
		uint8_t b[MSG];

		close(c);
		for (i = 0; i < ROUNDS; i++) {
			tp_recv(s, 1, (size_t)i * MSG, MSG);
			usleep(2000);
			tp_fill(2, (size_t)i * MSG, b, MSG);
			tp_write_all(s, b, MSG);
		}
		tp_recv(s, 1, (size_t)ROUNDS * MSG, 1);
		_exit(0);
	}
	close(s);
	tp_wait_carried(c);
	tp_nonblock(c);
	ep = epoll_create1(EPOLL_CLOEXEC);
	TP_CHECK(ep >= 0, "epoll_create1");
	ev.data.fd = c;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev), "epoll_ctl");
	st = tp_conn_stats(c);
	TP_CHECK(st != NULL, "no statistics for the connection");
	wake0 = st->wakeups;
	for (i = 0; i < ROUNDS; i++) {
		uint8_t b[MSG];
		size_t got = 0;

		tp_fill(1, (size_t)i * MSG, b, MSG);
		tp_write_all(c, b, MSG);
		while (got < MSG) {
			struct epoll_event out;
			ssize_t r = recv(c, b + got, MSG - got, 0);

			if (r > 0) {
				got += (size_t)r;
				continue;
			}
			TP_CHECK(r < 0 && errno == EAGAIN, "recv after %zu "
				 "bytes of round %d", got, i);
			TP_CHECK(epoll_wait(ep, &out, 1, 10000) >= 0,
				 "epoll_wait");
		}
		tp_verify(2, (size_t)i * MSG, b, MSG);
	}
	TP_CHECK(st->wakeups - wake0 >= ROUNDS / 2, "%llu of %d waits for an "
		 "answer were ended by the peer's doorbell: the others "
		 "found it only when a bounded nap ran out",
		 (unsigned long long)(st->wakeups - wake0), ROUNDS);
	{
		uint8_t end;

		tp_fill(1, (size_t)ROUNDS * MSG, &end, 1);
		tp_write_all(c, &end, 1);
	}
	tp_reap(kid, "the answerer failed");
	close(c);
	tp_pass();
	return 0;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * epoll_add_waiting.c - a carried connection joins an epoll set (ADD, or a
 * MOD that asks EPOLLIN again) while another thread sleeps in epoll_wait on
 * that set, as Apache's event MPM hands each keep-alive connection back to
 * its listener thread: the sleeper must report the bytes that come, or
 * that were there already, at once, not at the end of its timeout. Each
 * case: the sleeper waits 5 s at most and must answer within 1 s; the
 * bytes are checked.
 */
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include "tp_stats.h"

static int ep;
static pid_t waiter_tid;
static long answered_ms;
static uint32_t answered_data;
static int answered_n;

static void *waiter(void *arg)
{
	struct epoll_event ev[4];

	(void)arg;
	waiter_tid = (pid_t)syscall(SYS_gettid);
	answered_n = epoll_wait(ep, ev, 4, 5000);
	answered_ms = tp_ms();
	answered_data = answered_n > 0 ? ev[0].data.u32 : 0;
	return NULL;
}

/* Starts the waiter and returns once it sleeps in the kernel (past any
 * busy-poll: asleep twice, 20 ms apart). */
static pthread_t start_waiter(void)
{
	pthread_t t;
	long end = tp_ms() + 3000;

	waiter_tid = 0;
	TP_CHECK(!pthread_create(&t, NULL, waiter, NULL), "thread");
	while (tp_ms() < end) {
		if (waiter_tid && tp_asleep(waiter_tid)) {
			usleep(20 * 1000);
			if (tp_asleep(waiter_tid))
				return t;
		}
		usleep(1000);
	}
	tp_fail("the waiter never slept");
	return t;
}

static void finish(pthread_t t, long from, uint32_t want, const char *what)
{
	pthread_join(t, NULL);
	TP_CHECK(answered_n == 1 && answered_data == want,
		 "%s: epoll_wait returned %d (data %u) after %ld ms, want "
		 "the connection's report", what, answered_n, answered_data,
		 answered_ms - from);
	TP_CHECK(answered_ms - from < 1000, "%s: reported after %ld ms",
		 what, answered_ms - from);
}

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int c, s, c2, s2, pp[2], family = argc > 1 ? AF_INET6 : AF_INET;
	size_t off = 0;
	char buf[100];
	pthread_t t;
	long from;

	tp_start("epoll_add_waiting", 40);
	tp_pair(family, &c, &s);
	tp_pair(family, &c2, &s2);
	tp_carry_both(c, s);
	tp_carry_both(c2, s2);
	tp_nonblock(s);
	ep = epoll_create1(EPOLL_CLOEXEC);
	TP_CHECK(ep >= 0 && !pipe(pp), "epoll_create1, pipe");

	/* 1: a set holding only a pipe; the connection joins, then its
	 * bytes come */
	ev.data.u32 = 7;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &ev), "ADD pipe");
	t = start_waiter();
	ev.data.u32 = 1;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev), "ADD");
	usleep(50 * 1000);
	from = tp_ms();
	tp_send(c, 5, off, 100);
	finish(t, from, 1, "bytes after the ADD");
	tp_recv(s, 5, off, 100);
	off += 100;

	/* 2: the set also holds another carried connection, idle; ours
	 * leaves it, its bytes come, then it joins again */
	ev.data.u32 = 2;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s2, &ev), "ADD s2");
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL), "DEL");
	tp_send(c, 5, off, 100);
	usleep(50 * 1000);
	t = start_waiter();
	from = tp_ms();
	ev.data.u32 = 1;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev), "ADD again");
	finish(t, from, 1, "bytes before the ADD");
	tp_recv(s, 5, off, 100);
	off += 100;

	/* 3: registered without EPOLLIN; a MOD asks for it while the
	 * waiter sleeps, then the bytes come */
	ev.events = EPOLLRDHUP;
	ev.data.u32 = 1;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev), "MOD off");
	t = start_waiter();
	ev.events = EPOLLIN;
	TP_CHECK(!epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev), "MOD on");
	usleep(50 * 1000);
	from = tp_ms();
	tp_send(c, 5, off, 100);
	finish(t, from, 1, "bytes after the MOD");
	TP_CHECK(recv(s, buf, sizeof(buf), 0) == 100, "recv");
	tp_verify(5, off, buf, 100);

	for (int i = 0; i < 2; i++) {
		const struct sw_conn_stats *st = tp_conn_stats(i ? s2 : s);

		TP_CHECK(st && st->state == TP_STATE_SAN,
			 "the connection is no longer carried");
	}
	close(ep);
	close(pp[0]);
	close(pp[1]);
	close(c);
	close(s);
	close(c2);
	close(s2);
	tp_pass();
	return 0;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_sender_close.c - the receiver of a carried stream forks (the
 * connection returns to TCP: its DOWNGRADE, then its marker on TCP) while
 * the sender writes 16 MiB; the sender, which never reads, closes when
 * done, or ends with exit or _exit and leaves the close to the kernel.
 * Its switch must take the receiver's marker off its TCP queue before
 * the close: a TCP socket closed with unread bytes sends a reset, and the
 * receiver's kernel dropped what it had not read yet (up to 2 MB short,
 * or ECONNRESET at the end: after close two runs in eight, after exit
 * eight in eight). Every byte, then EOF, in each round.
 */
#include <sys/wait.h>
#include "tp_stats.h"

#define TOTAL (16u << 20)
#define ROUNDS 4

/* how the sender ends after its last byte */
static void sender_end(int c, void *arg)
{
	int end = *(int *)arg;

	if (end == 1)
		exit(0);	/* the kernel closes c */
	if (end == 2)
		_exit(0);
	if (end == 3) {
		close(c);
		exit(0);
	}
	/* 0: close and _exit (tp_fork_sender) */
}

static void run(int family, int end)
{
	static uint8_t buf[1 << 20];
	size_t got = 0;
	pid_t kid, k2;
	ssize_t r;
	int s;

	kid = tp_fork_sender(family, &s, TOTAL, sender_end, &end);
	tp_wait_carried(s);
	/* the sender fills what the SAN holds, and waits in its send */
	usleep(50 * 1000);
	r = recv(s, buf, 4096, 0);
	TP_CHECK(r > 0, "first recv");
	tp_verify(1, 0, buf, (size_t)r);
	got = (size_t)r;
	k2 = fork();
	TP_CHECK(k2 >= 0, "fork");
	if (!k2)
		_exit(0);
	TP_CHECK(waitpid(k2, NULL, 0) == k2, "waitpid");
	while ((r = recv(s, buf, sizeof(buf), 0)) > 0) {
		tp_verify(1, got, buf, (size_t)r);
		got += (size_t)r;
	}
	TP_CHECK(r == 0 && got == TOTAL, "recv after %zu of %u bytes "
		 "returned %zd: the sender's close was a reset", got, TOTAL, r);
	tp_reap(kid, "the sender failed");
	close(s);
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	int i;

	tp_start("fork_sender_close", 50);
	for (i = 0; i < 2 * ROUNDS; i++)
		run(family, i % ROUNDS);
	tp_pass();
	return 0;
}

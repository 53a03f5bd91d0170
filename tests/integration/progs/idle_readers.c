/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * idle_readers.c - both ends of a carried connection blocked in recv(), as
 * in any protocol where each side waits for the other to speak: they must
 * sleep, not wake each other. Each sleeper's "wake me" and credit returns
 * used to count as news for the other, which rang its doorbell, which woke
 * it to send its own: 1,800 wake-ups a second each way, most of a CPU for
 * a connection moving nothing. Bytes before and after are checked.
 */
#include <pthread.h>
#include <sys/resource.h>
#include "tp_stats.h"

#define IR_IDLE_MS 1000
#define IR_CPU_MS 100	/* for both readers over IR_IDLE_MS */

static int fds[2];

/* Blocks in recv until the other end speaks: 100 bytes of stream 7 + i. */
static void *reader(void *arg)
{
	int i = (int)(long)arg;

	tp_recv(fds[i], 7 + i, 0, 100);
	return NULL;
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	const struct sw_conn_stats *a, *b;
	pthread_t t[2];
	uint64_t wake0, wake1;
	long c0, spent;
	int i;

	tp_start("idle_readers", 30);
	tp_pair(family, &fds[0], &fds[1]);
	tp_carry_both(fds[0], fds[1]);
	/* traffic both ways first: credits and buffers in use */
	for (i = 0; i < 8; i++) {
		tp_send(fds[0], 1, (size_t)i * 20000, 20000);
		tp_recv(fds[1], 1, (size_t)i * 20000, 20000);
		tp_send(fds[1], 2, (size_t)i * 20000, 20000);
		tp_recv(fds[0], 2, (size_t)i * 20000, 20000);
	}
	a = tp_conn_stats(fds[0]);
	b = tp_conn_stats(fds[1]);
	TP_CHECK(a && b && a->state == TP_STATE_SAN &&
		 b->state == TP_STATE_SAN, "not carried");
	for (i = 0; i < 2; i++)
		TP_CHECK(!pthread_create(&t[i], NULL, reader, (void *)(long)i),
			 "pthread_create");
	usleep(100 * 1000);	/* both asleep, their wake-me sent */
	wake0 = a->wakeups + b->wakeups;
	c0 = tp_cpu_ms();
	usleep(IR_IDLE_MS * 1000);
	spent = tp_cpu_ms() - c0;
	wake1 = a->wakeups + b->wakeups;
	TP_CHECK(spent <= IR_CPU_MS && wake1 - wake0 <= 10,
		 "two idle readers used %ld ms of CPU in %d ms with %llu "
		 "wake-ups", spent, IR_IDLE_MS,
		 (unsigned long long)(wake1 - wake0));
	/* and each still hears the other */
	tp_send(fds[1], 7, 0, 100);
	tp_send(fds[0], 8, 0, 100);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	close(fds[0]);
	close(fds[1]);
	tp_pass();
}

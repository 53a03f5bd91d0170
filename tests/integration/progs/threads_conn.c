/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * threads_conn.c - many threads opening, using and closing connections at
 * once while another thread polls: fd numbers are reused quickly across
 * threads, and every byte must still arrive on the right connection.
 */
#include <pthread.h>
#include "tprog.h"

#define WORKERS 4
#define ROUNDS 25
#define BYTES 20000

static int family;
static volatile int stop;

static void *worker(void *arg)
{
	unsigned int id = (unsigned int)(uintptr_t)arg, r;
	int c, s, d;

	for (r = 0; r < ROUNDS; r++) {
		tp_pair(family, &c, &s);
		/* a dup closed early: the stream must survive it */
		d = dup(s);
		TP_CHECK(d >= 0, "dup");
		tp_send(c, id * 100 + r, 0, BYTES);
		tp_recv(d, id * 100 + r, 0, BYTES / 2);
		close(d);
		tp_recv(s, id * 100 + r, BYTES / 2, BYTES / 2);
		tp_send(s, id * 100 + r + 50, 0, BYTES);
		tp_recv(c, id * 100 + r + 50, 0, BYTES);
		close(c);
		close(s);
	}
	return NULL;
}

static void *poller(void *arg)
{
	int p[2];
	struct pollfd pf;

	TP_CHECK(!pipe(p), "pipe");
	pf.fd = p[0];
	pf.events = POLLIN;
	while (!stop)
		TP_CHECK(poll(&pf, 1, 1) == 0, "poll on an empty pipe");
	close(p[0]);
	close(p[1]);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t w[WORKERS], pt;
	uintptr_t i;

	tp_start("threads_conn", 60);
	family = argc > 1 ? AF_INET6 : AF_INET;
	TP_CHECK(!pthread_create(&pt, NULL, poller, NULL), "pthread_create");
	for (i = 0; i < WORKERS; i++)
		TP_CHECK(!pthread_create(&w[i], NULL, worker, (void *)(i + 1)),
			 "pthread_create");
	for (i = 0; i < WORKERS; i++)
		pthread_join(w[i], NULL);
	stop = 1;
	pthread_join(pt, NULL);
	tp_pass();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * stdio_sock.c - a server that reads and writes its connection through a
 * stdio stream (fdopen), whose calls reach the kernel inside the C library
 * where no wrapper sees them: made before the first byte, and made once
 * the connection is carried. Every byte checked both ways, no hello in
 * the stream, and the connection on TCP at the end.
 */
#include <pthread.h>
#include <stdio.h>
#include <fcntl.h>

#include "tprog.h"
#include "tp_stats.h"

#define ROUND 16384
#define ROUNDS 64

struct client {
	int fd;
	size_t off;
};

/* The peer, through the switch: a round sent, then its answer read. */
static void *client_run(void *arg)
{
	struct client *cl = arg;
	char go = 0;
	int i;

	/* the server's go, written through its stream: meanwhile this
	 * thread waits in the switch, which answers the return to TCP */
	TP_CHECK(recv(cl->fd, &go, 1, MSG_WAITALL) == 1 && go == 'g',
		 "the server's go: %d", go);
	for (i = 0; i < ROUNDS; i++) {
		tp_send(cl->fd, 1, cl->off + (size_t)i * ROUND, ROUND);
		tp_recv(cl->fd, 2, cl->off + (size_t)i * ROUND, ROUND);
	}
	return NULL;
}

/* The server's side of the rounds, all through f. */
static void serve(FILE *f, size_t off)
{
	static unsigned char buf[ROUND];
	int i;

	for (i = 0; i < ROUNDS; i++) {
		size_t pos = off + (size_t)i * ROUND;

		TP_CHECK(fread(buf, 1, ROUND, f) == ROUND,
			 "fread: the stream ended early");
		tp_verify(1, pos, buf, ROUND);
		tp_fill(2, pos, buf, ROUND);
		TP_CHECK(fwrite(buf, 1, ROUND, f) == ROUND && !fflush(f),
			 "fwrite");
	}
}

static void not_carried(int fd, const char *who)
{
	const struct sw_conn_stats *st = tp_conn_stats(fd);

	TP_CHECK(st && st->state != TP_STATE_SAN,
		 "%s: still carried by the provider (state %d) after fdopen",
		 who, st ? (int)st->state : -1);
}

static void run(int family, bool carried_first)
{
	struct client cl = { .off = 0 };
	pthread_t th;
	size_t off = 0;
	FILE *f;
	int s;

	tp_pair(family, &cl.fd, &s);
	if (carried_first) {
		/* carried, bytes each way through the switch, then stdio */
		tp_carry_both(cl.fd, s);
		tp_send(cl.fd, 1, 0, 100000);
		tp_recv(s, 1, 0, 100000);
		tp_send(s, 2, 0, 100000);
		tp_recv(cl.fd, 2, 0, 100000);
		off = cl.off = 100000;
	}
	/* the client waits for the server's first byte, so nothing is
	 * under way when the stream is made: bytes that came on the SAN and
	 * were not read then can be read by read and recv only
	 * (docs/semantics.md) */
	TP_CHECK(pthread_create(&th, NULL, client_run, &cl) == 0,
		 "pthread_create");
	f = fdopen(s, "r+");
	TP_CHECK(f != NULL, "fdopen");
	TP_CHECK(fputc('g', f) == 'g' && !fflush(f), "fputc");
	serve(f, off);
	pthread_join(th, NULL);
	not_carried(s, "server");
	not_carried(cl.fd, "client");
	fclose(f);
	close(cl.fd);
}

/* The peer's side while the server makes its stream: it waits in the
 * switch, which answers the return to TCP, for the server's go. */
static void *wait_go(void *arg)
{
	char go = 0;

	TP_CHECK(recv(*(int *)arg, &go, 1, MSG_WAITALL) == 1 && go == 'g',
		 "the server's go: %d", go);
	return NULL;
}

/*
 * A stream closed with bytes that came on the SAN still unread: fclose
 * closes the fd inside the C library, and the number, taken next by a
 * pipe, must read the pipe's bytes, not the old connection's.
 */
static void closed_by_fclose(int family)
{
	static const char want[] = "the pipe's own bytes";
	char got[sizeof(want)] = "";
	int c, s, p[2];
	pthread_t th;
	FILE *f;

	tp_pair(family, &c, &s);
	tp_carry_both(c, s);
	tp_send(c, 3, 0, 4096);
	/* the bytes are here, on the SAN, and none is read */
	TP_CHECK(recv(s, got, 1, MSG_PEEK) == 1, "peek");
	TP_CHECK(pipe(p) == 0, "pipe");
	TP_CHECK(pthread_create(&th, NULL, wait_go, &c) == 0,
		 "pthread_create");
	f = fdopen(s, "r+");
	TP_CHECK(f != NULL, "fdopen");
	TP_CHECK(fputc('g', f) == 'g' && !fflush(f), "fputc");
	pthread_join(th, NULL);
	not_carried(s, "server");
	TP_CHECK(fclose(f) == 0, "fclose: %s", strerror(errno));
	TP_CHECK(fcntl(p[0], F_DUPFD, s) == s, "F_DUPFD: %s",
		 strerror(errno));
	TP_CHECK(write(p[1], want, sizeof(want)) == (ssize_t)sizeof(want),
		 "write to the pipe");
	TP_CHECK(read(s, got, sizeof(got)) == (ssize_t)sizeof(want) &&
		 !memcmp(got, want, sizeof(want)),
		 "fd %d, a pipe now, did not read the pipe's bytes (first "
		 "byte %#x): the connection fclose closed still answers for "
		 "it", s, (unsigned char)got[0]);
	close(s);
	close(p[0]);
	close(p[1]);
	close(c);
}

int main(int argc, char **argv)
{
	int family = argc > 1 ? AF_INET6 : AF_INET;

	tp_start("stdio_sock", 30);
	run(family, false);
	run(family, true);
	closed_by_fclose(family);
	tp_pass();
}

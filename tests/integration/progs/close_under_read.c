/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * close_under_read.c - the JDK's way to interrupt a blocked read: another
 * thread dup2()s a pre-closed socket over the fd of a carried connection
 * while a thread sleeps in recv on it. The read must end at once (at the
 * end of the stream, as on the file that now has the number) and the
 * switch must not read from that file: bytes waiting in it stay there.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/un.h>
#include "tp_stats.h"

static int fd;
static volatile long ended_ms = -1;
static volatile ssize_t read_ret = -2;

static void on_usr1(int sig)
{
	(void)sig;
}

static void *reader(void *arg)
{
	char b[64];

	(void)arg;
	read_ret = recv(fd, b, sizeof(b), 0);
	ended_ms = tp_ms();
	return NULL;
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	struct sigaction sa = { .sa_handler = on_usr1 };
	int c, sp[2];
	pthread_t t;
	long t0;
	char b[8];

	tp_start("close_under_read", 30);
	sigaction(SIGUSR1, &sa, NULL);
	tp_pair(family, &c, &fd);
	tp_carry_both(c, fd);
	tp_send(c, 3, 0, 5000);
	tp_recv(fd, 3, 0, 5000);
	/* the pre-closed socket: one end of a pair whose other end holds
	 * bytes for it, then is shut down for writing */
	TP_CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sp), "socketpair");
	/* 0x44 is a doorbell byte: a switch that drained the new file
	 * would take these two */
	TP_CHECK(send(sp[1], "DDKEEP", 6, 0) == 6, "socketpair send");
	TP_CHECK(!pthread_create(&t, NULL, reader, NULL), "pthread_create");
	usleep(200 * 1000);	/* the reader sleeps in recv */
	TP_CHECK(ended_ms < 0, "recv returned with nothing sent (%zd)",
		 read_ret);
	t0 = tp_ms();
	TP_CHECK(dup2(sp[0], fd) == fd, "dup2 over the connection");
	/* the peer speaks: a doorbell wakes the reader's sleep, which still
	 * holds the old socket; the signal comes only later */
	send(c, "x", 1, MSG_NOSIGNAL);
	usleep(100 * 1000);
	pthread_kill(t, SIGUSR1);
	pthread_join(t, NULL);
	TP_CHECK(ended_ms - t0 < 500, "the read ended %ld ms after the "
		 "close", ended_ms - t0);
	/* what the pair sent is still there for its reader, whole */
	TP_CHECK(recv(fd, b, sizeof(b), MSG_DONTWAIT) == 6 &&
		 !memcmp(b, "DDKEEP", 6), "bytes of the file that took the "
		 "number were consumed");
	close(fd);
	close(sp[0]);
	close(sp[1]);
	close(c);
	tp_pass();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * hello_reader.c - the client's hello arrives at a server where one thread
 * is already blocked in recv() on the accepted socket and another waits in
 * poll() on it: whichever takes the hello, it is checked as it came (the
 * other's look at the stream must not overwrite it with the program's
 * bytes behind it), every connection is carried, and the reader gets
 * exactly the client's bytes. Many connections, to meet the race often.
 */
#include <pthread.h>
#include "tp_stats.h"

#define HR_ROUNDS 150
#define HR_BYTES 4096

static int srv_fd, cli_fd;
static volatile int go;

static void *reader(void *arg)
{
	(void)arg;
	tp_recv(srv_fd, 7, 0, HR_BYTES);
	return NULL;
}

static void *writer(void *arg)
{
	(void)arg;
	while (!go)
		usleep(100);
	usleep(500);	/* the server's main thread is in poll() */
	tp_send(cli_fd, 7, 0, HR_BYTES);
	return NULL;
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	struct sockaddr_storage ss;
	socklen_t len;
	int i, l;

	tp_start("hello_reader", 120);
	l = tp_listener(family, 16, &ss, &len);
	for (i = 0; i < HR_ROUNDS; i++) {
		const struct sw_conn_stats *st;
		struct pollfd p;
		pthread_t rt, wt;

		cli_fd = socket(family, SOCK_STREAM, 0);
		TP_CHECK(cli_fd >= 0, "socket");
		TP_CHECK(!connect(cli_fd, (struct sockaddr *)&ss, len),
			 "connect");
		srv_fd = accept(l, NULL, NULL);
		TP_CHECK(srv_fd >= 0, "accept");
		go = 0;
		TP_CHECK(!pthread_create(&rt, NULL, reader, NULL) &&
			 !pthread_create(&wt, NULL, writer, NULL),
			 "pthread_create");
		usleep(1000);	/* the reader is blocked in recv() */
		go = 1;
		p.fd = srv_fd;
		p.events = POLLIN;
		TP_CHECK(poll(&p, 1, 20) >= 0, "poll: %s", strerror(errno));
		pthread_join(wt, NULL);
		pthread_join(rt, NULL);
		/* the hello was good: the connection goes to the provider */
		tp_carry_both(cli_fd, srv_fd);
		st = tp_conn_stats(srv_fd);
		TP_CHECK(st && !st->fb_reason,
			 "round %d: the server fell back (reason %u)", i,
			 st ? st->fb_reason : 0);
		tp_send(srv_fd, 8, 0, 100);
		tp_recv(cli_fd, 8, 0, 100);
		close(cli_fd);
		close(srv_fd);
	}
	close(l);
	tp_pass();
	return 0;
}

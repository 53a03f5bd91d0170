/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_peer.c - qperf's pattern: a server forks a child per request while
 * it holds the connection, and the child answers; the client, in another
 * process, waits for the answer in poll on a non-blocking socket and takes
 * POLLIN followed by EAGAIN as a failure, as qperf does. Checks that the
 * downgrade at fork hands every byte over in order, with no stray doorbell
 * among them, and that poll reports readable only when bytes are there.
 */
#include <poll.h>
#include <sys/wait.h>
#include "tprog.h"

#define FP_ROUNDS 8
#define FP_REQ 1000
#define FP_ANSWER 100000
#define FP_MORE 200000

/* Receives exactly n bytes of stream id at off on a non-blocking fd,
 * through poll; every POLLIN must bring bytes. */
static void fp_recv_poll(int fd, unsigned int id, size_t off, size_t n)
{
	char buf[16384];
	size_t done = 0;
	ssize_t r;
	int k;

	while (done < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		do
			k = poll(&p, 1, 5000);
		while (k < 0 && errno == EINTR);
		TP_CHECK(k == 1, "poll: no POLLIN in 5 s after %zu of %zu bytes",
			 done, n);
		r = recv(fd, buf, n - done < sizeof(buf) ? n - done :
			 sizeof(buf), 0);
		TP_CHECK(r > 0, "recv after POLLIN returned %zd (%s) after %zu "
			 "of %zu bytes", r, r < 0 ? strerror(errno) : "EOF",
			 done, n);
		tp_verify(id, off + done, buf, (size_t)r);
		done += (size_t)r;
	}
}

static void fp_client(const struct sockaddr_storage *ss, socklen_t len,
		      int family, int round)
{
	int c = tp_connect(ss, len);
	char b;

	tp_send(c, 1 + 4 * round, 0, FP_REQ);
	tp_nonblock(c);
	/* asleep in poll when the server forks */
	fp_recv_poll(c, 2 + 4 * round, 0, FP_ANSWER);
	TP_CHECK(!fcntl(c, F_SETFL, fcntl(c, F_GETFL) & ~O_NONBLOCK),
		 "fcntl blocking");
	tp_send(c, 3 + 4 * round, 0, FP_MORE);
	tp_nonblock(c);
	fp_recv_poll(c, 4 + 4 * round, 0, 4);
	{
		struct pollfd p = { .fd = c, .events = POLLIN };

		TP_CHECK(poll(&p, 1, 5000) == 1, "no EOF in 5 s");
		TP_CHECK(recv(c, &b, 1, 0) == 0, "no EOF after the answer");
	}
	close(c);
}

/* The server's child per connection: reads the request, answers. */
static void fp_child(int s, int round)
{
	tp_name = "fork_peer (server child)";
	tp_recv(s, 1 + 4 * round, 0, FP_REQ);
	usleep(20000);	/* the client sleeps in poll meanwhile */
	tp_send(s, 2 + 4 * round, 0, FP_ANSWER);
	tp_recv(s, 3 + 4 * round, 0, FP_MORE);
	tp_send(s, 4 + 4 * round, 0, 4);
	shutdown(s, SHUT_WR);
	_exit(0);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	int family = argc > 1 ? AF_INET6 : AF_INET;
	int l, s, i;
	socklen_t len = sizeof(ss);
	pid_t cli, ch;

	tp_start("fork_peer", 50);
	l = tp_listener(family, 4, &ss, &len);
	cli = tp_fork_client(l, "fork_peer (client)", FP_ROUNDS, fp_client, &ss, len,
			     family);
	for (i = 0; i < FP_ROUNDS; i++) {
		s = accept(l, NULL, NULL);
		TP_CHECK(s >= 0, "accept");
		/* the request may still be on the SAN, unread */
		ch = fork();
		TP_CHECK(ch >= 0, "fork");
		if (ch == 0) {
			close(l);
			fp_child(s, i);
		}
		/* the parent holds the connection while the child works */
		tp_reap(ch, "round %d: the server's child failed", i);
		close(s);
	}
	tp_reap(cli, "the client failed");
	close(l);
	tp_pass();
}

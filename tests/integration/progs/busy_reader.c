/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * busy_reader.c - a reader that keeps calling select() (another of its fds
 * is always ready, as iperf3's are) or recv() without sleeping gets every
 * byte its peer writes, even when the writer holds one credit and owes
 * nothing: the reader's switch must give back the buffer it owes, though
 * its program never sleeps and so never asks to be woken. Then the writer
 * sends many small messages, one more byte, and closes: the reader gets
 * them all before EOF. Two processes; the reader's pool is two buffers.
 */
#include <sys/select.h>
#include "tp_stats.h"

#define BR_ROUNDS 24
#define BR_MSGS 400		/* small writes before the close */
#define BR_WAIT_MS 3000		/* a byte later than this: stalled */

static int family;

/* Reader: select() with a pipe's write end, always writable, in the set
 * (or, every other round, a non-blocking recv() in a loop), until one of
 * s's bytes is there; n bytes at stream offset off. */
static void busy_recv(int s, int pw, size_t off, size_t n, bool by_select,
		      const char *what)
{
	long end = tp_ms() + BR_WAIT_MS;
	uint8_t buf[4096];
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		if (by_select) {
			fd_set rd, wr;
			struct timeval tv = { .tv_sec = 1 };

			FD_ZERO(&rd);
			FD_ZERO(&wr);
			FD_SET(s, &rd);
			FD_SET(pw, &wr);
			TP_CHECK(select((s > pw ? s : pw) + 1, &rd, &wr, NULL,
					&tv) > 0, "select");
			TP_CHECK(FD_ISSET(pw, &wr), "pipe not writable");
			if (!FD_ISSET(s, &rd)) {
				TP_CHECK(tp_ms() < end, "%s: %zu of %zu bytes "
					 "after %d ms, select() busy all the "
					 "while (the writer's bytes stalled)",
					 what, got, n, BR_WAIT_MS);
				continue;
			}
		}
		r = recv(s, buf, n - got < sizeof(buf) ? n - got : sizeof(buf),
			 MSG_DONTWAIT);
		if (r < 0 && errno == EAGAIN) {
			TP_CHECK(tp_ms() < end, "%s: %zu of %zu bytes after "
				 "%d ms of recv() in a loop (the writer's bytes "
				 "stalled)", what, got, n, BR_WAIT_MS);
			continue;
		}
		TP_CHECK(r > 0, "%s: recv after %zu of %zu bytes (%zd)", what,
			 got, n, r);
		tp_verify(2, off + got, buf, (size_t)r);
		got += (size_t)r;
	}
}

static void reader(int port)
{
	const struct sw_conn_stats *st;
	struct sockaddr_storage ss;
	socklen_t len;
	size_t off = 0, up = 0;
	uint8_t buf[4096];
	int s, p[2], i;
	long end;

	tp_start("busy_reader (reader)", 50);
	tp_loopback(family, &ss, &len);
	if (family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
	s = tp_connect(&ss, len);
	TP_CHECK(!pipe(p), "pipe");
	tp_send(s, 1, up, 1);
	up++;
	tp_wait_carried(s);
	for (i = 0; i < BR_ROUNDS; i++) {
		/* the writer's byte of this round, then two of ours (two
		 * messages: the writer owes this side two buffers, and gives
		 * them back before it waits) */
		busy_recv(s, p[1], off, 1, i % 2 == 0, "round");
		off++;
		tp_send(s, 1, up, 1);
		tp_send(s, 1, up + 1, 1);
		up += 2;
	}
	/* the small messages, one byte more, then EOF */
	for (i = 0; i < BR_MSGS; i++) {
		size_t n = 1 + (size_t)(i * 37 % 120);

		busy_recv(s, p[1], off, n, i % 2 == 0, "small messages");
		off += n;
	}
	busy_recv(s, p[1], off, 1, true, "the last byte before close");
	off++;
	st = tp_conn_stats(s);
	TP_CHECK(st && st->state == TP_STATE_SAN && st->rx_copy >= off &&
		 !st->rx_tcp, "reader: not carried by the provider: state %d, "
		 "%llu bytes copied of %zu, %llu on TCP",
		 st ? (int)st->state : -1,
		 st ? (unsigned long long)st->rx_copy : 0ull, off,
		 st ? (unsigned long long)st->rx_tcp : 0ull);
	end = tp_ms() + BR_WAIT_MS;
	for (;;) {
		ssize_t r = recv(s, buf, sizeof(buf), MSG_DONTWAIT);

		if (r == 0)
			break;
		TP_CHECK(r < 0 && errno == EAGAIN, "%zd bytes after the last",
			 r);
		TP_CHECK(tp_ms() < end, "no EOF %d ms after the last byte",
			 BR_WAIT_MS);
		usleep(1000);
	}
	printf("reader: %zu bytes, all in order\n", off);
	close(s);
	exit(0);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const struct sw_conn_stats *st;
	struct pollfd pf;
	size_t off = 0, in = 0;
	int l, c, i, port;
	pid_t pid;
	char pbuf[16];

	family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	if (argc > 3 && !strcmp(argv[2], "reader"))
		reader(atoi(argv[3]));
	if (!getenv("SDP_IDLE_MS")) {
		/* the switch reads its settings at start: run again; no
		 * pool shrinks on its own during the test */
		setenv("SDP_IDLE_MS", "60000", 1);
		execv("/proc/self/exe", argv);
		tp_fail("execv: %s", strerror(errno));
	}
	tp_start("busy_reader", 55);
	l = tp_listener(family, 4, &ss, &len);
	port = ntohs(family == AF_INET6 ?
		     ((struct sockaddr_in6 *)&ss)->sin6_port :
		     ((struct sockaddr_in *)&ss)->sin_port);
	snprintf(pbuf, sizeof(pbuf), "%d", port);
	pid = fork();
	TP_CHECK(pid >= 0, "fork");
	if (!pid) {
		char *av[] = { argv[0], family == AF_INET6 ? "6" : "4",
			       "reader", pbuf, NULL };

		/* the reader's pool: two buffers, so this side holds two
		 * credits at most */
		setenv("SDP_RECV_BUFS", "2", 1);
		execv("/proc/self/exe", av);
		tp_fail("execv: %s", strerror(errno));
	}
	c = accept(l, NULL, NULL);
	TP_CHECK(c >= 0, "accept");
	tp_recv(c, 1, in, 1);
	in++;
	tp_wait_carried(c);
	for (i = 0; i < BR_ROUNDS; i++) {
		tp_send(c, 2, off, 1);
		off++;
		tp_recv(c, 1, in, 2);
		in += 2;
		/* wait a little: what this side owes goes back now (a
		 * CREDIT, its second-last credit) */
		pf.fd = c;
		pf.events = POLLIN;
		TP_CHECK(poll(&pf, 1, 20) == 0, "poll: %#x", pf.revents);
	}
	st = tp_conn_stats(c);
	TP_CHECK(st && st->state == TP_STATE_SAN && st->tx_copy >= off &&
		 !st->tx_tcp, "not carried by the provider: state %d, %llu "
		 "bytes copied, %llu on TCP", st ? (int)st->state : -1,
		 st ? (unsigned long long)st->tx_copy : 0ull,
		 st ? (unsigned long long)st->tx_tcp : 0ull);
	for (i = 0; i < BR_MSGS; i++) {
		size_t n = 1 + (size_t)(i * 37 % 120);

		tp_send(c, 2, off, n);
		off += n;
	}
	tp_send(c, 2, off, 1);
	off++;
	TP_CHECK(!close(c), "close");
	tp_reap(pid, "the reader");
	printf("writer: %zu bytes\n", off);
	close(l);
	tp_pass();
	return 0;
}

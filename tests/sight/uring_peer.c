/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * uring_peer.c - one end of a TCP connection that moves its bytes with
 * io_uring (liburing), with libc calls, with both on the same socket, with
 * libc until the middle of the stream and io_uring after (late), or with
 * libc for its first transfer only and io_uring after (early: a client's
 * hello is out, the server's first bytes not yet here); a server that
 * makes its ring right after accept(), before the client's first bytes
 * (accept; acceptg: and writes a greeting first, with the ring), against a
 * client that writes at once (libc), writes after a while (slow: its
 * hello would come after the ring) or reads the greeting first (greet;
 * sgreet: after a while); a server that makes its ring between listen()
 * and accept(), once a client has connected (lring);
 * a server whose first byte is a lone 0xd5 (d5) against a client that
 * reads one byte first and must get it at once (d5). Checks every byte it
 * receives and reports the switch's view of the connection.
 *   uring_peer server|client PORT MODE BYTES [4|6]
 */
#include <liburing.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include "tp_stats.h"

enum { M_LIBC, M_URING, M_MIXED, M_LATE, M_EARLY, M_ACCEPT, M_ACCEPTG,
       M_SLOW, M_GREET, M_SGREET, M_LRING, M_D5 };

static const char *const mode_names[] = {
	[M_LIBC] = "libc", [M_URING] = "uring", [M_MIXED] = "mixed",
	[M_LATE] = "late", [M_EARLY] = "early", [M_ACCEPT] = "accept",
	[M_ACCEPTG] = "acceptg", [M_SLOW] = "slow", [M_GREET] = "greet",
	[M_SGREET] = "sgreet", [M_LRING] = "lring",
	[M_D5] = "d5",
};

static struct io_uring ring;
static bool have_ring;
static int mode;
static unsigned long nops;

static void ring_make(void)
{
	int r = io_uring_queue_init(8, &ring, 0);

	TP_CHECK(r == 0, "io_uring_queue_init: %d", r);
	have_ring = true;
}

/* One transfer of at most len bytes, by io_uring or by libc. */
static ssize_t xfer(int fd, void *buf, size_t len, bool out)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	bool uring = have_ring && (mode != M_MIXED || nops % 2 == 0);
	int r;

	nops++;
	if (!uring)
		return out ? send(fd, buf, len, MSG_NOSIGNAL) :
			     recv(fd, buf, len, 0);
	sqe = io_uring_get_sqe(&ring);
	TP_CHECK(sqe, "io_uring_get_sqe");
	if (out)
		io_uring_prep_send(sqe, fd, buf, len, MSG_NOSIGNAL);
	else
		io_uring_prep_recv(sqe, fd, buf, len, 0);
	r = io_uring_submit_and_wait(&ring, 1);
	TP_CHECK(r >= 0, "io_uring_submit_and_wait: %d", r);
	r = io_uring_wait_cqe(&ring, &cqe);
	TP_CHECK(r == 0, "io_uring_wait_cqe: %d", r);
	r = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return r;
}

static void put(int fd, unsigned int id, size_t off, size_t n)
{
	static char buf[65536];
	size_t done = 0, k;
	ssize_t r;

	while (done < n) {
		k = n - done < sizeof(buf) ? n - done : sizeof(buf);
		tp_fill(id, off + done, buf, k);
		r = xfer(fd, buf, k, true);
		TP_CHECK(r > 0, "send of %zu bytes", k);
		if ((size_t)r < k) {
			/* the rest again, from its own offset */
			done += (size_t)r;
			continue;
		}
		done += k;
		if (mode == M_EARLY && !have_ring)
			ring_make();	/* after the first send */
	}
}

static void get(int fd, unsigned int id, size_t off, size_t n)
{
	static char buf[65536];
	size_t done = 0, k;
	ssize_t r;

	while (done < n) {
		k = n - done < sizeof(buf) ? n - done : sizeof(buf);
		r = xfer(fd, buf, k, false);
		TP_CHECK(r > 0, "recv after %zu of %zu bytes of stream %u (%zd)",
			 off + done, off + n, id, r);
		tp_verify(id, off + done, buf, (size_t)r);
		done += (size_t)r;
		if (mode == M_EARLY && !have_ring)
			ring_make();	/* after the first receive */
	}
}

static void expect_eof(int fd)
{
	char c;
	ssize_t r = xfer(fd, &c, 1, false);

	TP_CHECK(r == 0, "the stream's end, not %zd more byte(s) (0x%02x)",
		 r, r > 0 ? (unsigned char)c : 0);
}

static void report(int fd)
{
	const struct sw_conn_stats *st = tp_conn_stats(fd);

	if (!st)
		printf("state none\n");
	else
		printf("state %d fb %d\n", (int)st->state, (int)st->fb_reason);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage a;
	socklen_t alen;
	bool server;
	size_t n, half;
	char ack = 'A';
	int fd, l, one = 1, family;
	uint16_t port;

	TP_CHECK(argc == 5 || argc == 6, "usage: uring_peer server|client PORT "
		 "MODE BYTES [4|6]");
	server = !strcmp(argv[1], "server");
	tp_start(server ? "uring_peer server" : "uring_peer client", 120);
	family = argc == 6 && !strcmp(argv[5], "6") ? AF_INET6 : AF_INET;
	tp_loopback(family, &a, &alen);
	port = htons((uint16_t)atoi(argv[2]));
	if (family == AF_INET6)
		((struct sockaddr_in6 *)&a)->sin6_port = port;
	else
		((struct sockaddr_in *)&a)->sin_port = port;
	for (mode = 0; mode <= M_D5; mode++)
		if (!strcmp(argv[3], mode_names[mode]))
			break;
	TP_CHECK(mode <= M_D5, "unknown mode %s", argv[3]);
	n = strtoull(argv[4], NULL, 0);
	half = n / 2;
	if (mode == M_URING || mode == M_MIXED)
		ring_make();	/* before any connection, as servers do */
	if (server) {
		l = socket(family, SOCK_STREAM, 0);
		TP_CHECK(l >= 0, "socket");
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		TP_CHECK(!bind(l, (void *)&a, alen), "bind");
		TP_CHECK(!listen(l, 4), "listen");
		if (mode == M_LRING) {
			struct pollfd pl = { .fd = l, .events = POLLIN };

			/* a client that saw the listener announced */
			TP_CHECK(poll(&pl, 1, 30000) == 1, "no client");
			ring_make();
		}
		fd = accept(l, NULL, NULL);
		TP_CHECK(fd >= 0, "accept");
		if (mode == M_ACCEPT || mode == M_ACCEPTG)
			ring_make();	/* before the client's first bytes */
		if (mode == M_ACCEPTG) {
			ack = 'G';
			TP_CHECK(xfer(fd, &ack, 1, true) == 1, "greeting");
			ack = 'A';
		}
		if (mode == M_D5) {
			/* a lone first byte that starts like the magic */
			TP_CHECK(send(fd, "\xd5", 1, MSG_NOSIGNAL) == 1, "0xd5");
			TP_CHECK(recv(fd, &ack, 1, MSG_WAITALL) == 1 &&
				 ack == 'B', "answer to 0xd5 (0x%02x)",
				 (unsigned char)ack);
			ack = 'A';
		}
		get(fd, 1, 0, half);
		if (mode == M_LATE)
			ring_make();	/* a carried connection meets a ring */
		TP_CHECK(xfer(fd, &ack, 1, true) == 1, "ack");
		get(fd, 1, half, n - half);
		put(fd, 2, 0, n);
		expect_eof(fd);
		report(fd);
		close(fd);
		close(l);
	} else {
		fd = socket(family, SOCK_STREAM, 0);
		TP_CHECK(fd >= 0, "socket");
		TP_CHECK(!connect(fd, (void *)&a, alen), "connect");
		if (mode == M_SLOW || mode == M_SGREET)
			usleep(300000);	/* the server's ring comes first */
		if (mode == M_GREET || mode == M_SGREET) {
			ack = 0;
			TP_CHECK(recv(fd, &ack, 1, 0) == 1 && ack == 'G',
				 "greeting (0x%02x)", (unsigned char)ack);
		}
		if (mode == M_D5) {
			long t0 = tp_ms(), ms;

			ack = 0;
			TP_CHECK(recv(fd, &ack, 1, 0) == 1 &&
				 (unsigned char)ack == 0xd5,
				 "lone 0xd5 (0x%02x)", (unsigned char)ack);
			ms = tp_ms() - t0;
			printf("d5 after %ld ms\n", ms);
			TP_CHECK(send(fd, "B", 1, MSG_NOSIGNAL) == 1, "answer");
		}
		put(fd, 1, 0, half);
		ack = 0;
		TP_CHECK(xfer(fd, &ack, 1, false) == 1 && ack == 'A',
			 "ack (0x%02x)", (unsigned char)ack);
		if (mode == M_LATE)
			ring_make();
		put(fd, 1, half, n - half);
		get(fd, 2, 0, n);
		report(fd);
		TP_CHECK(!shutdown(fd, SHUT_WR), "shutdown");
		expect_eof(fd);
		close(fd);
	}
	if (have_ring)
		io_uring_queue_exit(&ring);
	return 0;
}

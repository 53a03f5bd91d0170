/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * zerocopy.c - SO_ZEROCOPY and MSG_ZEROCOPY: a send so made is completed by
 * a notification on the kernel's error queue, which the program waits for
 * before it reuses the buffer. Whether the option comes on a carried
 * connection, before connect, or on the listener, the connection is
 * carried until its first MSG_ZEROCOPY send (the option alone, as gRPC
 * sets it, changes nothing); then every completion must come (and every
 * byte arrive in order): the switch leaves it to TCP from that send on.
 * The receiver reads through the switch as usual.
 */
#include <time.h>
#include <linux/errqueue.h>
#include "tp_stats.h"

#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#define CHUNK 65536
#define NCHUNK 48

enum where { W_CARRIED, W_BEFORE_CONNECT, W_LISTENER };

static int family;
static uint8_t bufs[NCHUNK][CHUNK];

/* c is carried with SO_ZEROCOPY on: sends NCHUNK chunks with
 * MSG_ZEROCOPY, then waits (5 s at most) until the error queue has
 * completed every call; c is on TCP then. */
static void zc_send(int c)
{
	const struct sw_conn_stats *st;
	uint32_t calls = 0, done = 0;
	long end;
	int i;

	tp_wait_carried(c);

	for (i = 0; i < NCHUNK; i++) {
		size_t off = 0;

		tp_fill(1, (size_t)i * CHUNK, bufs[i], CHUNK);
		while (off < CHUNK) {
			ssize_t r = send(c, bufs[i] + off, CHUNK - off,
					 MSG_ZEROCOPY);

			TP_CHECK(r > 0, "send with MSG_ZEROCOPY");
			off += (size_t)r;
			calls++;
		}
	}
	end = tp_ms() + 5000;
	while (done < calls) {
		struct pollfd pf = { .fd = c, .events = 0 };
		char ctl[256];
		struct msghdr m = { .msg_control = ctl,
				    .msg_controllen = sizeof(ctl) };
		struct cmsghdr *cm;
		ssize_t r;

		TP_CHECK(tp_ms() < end, "%u of %u MSG_ZEROCOPY sends completed "
			 "after 5 s: their completions never came", done,
			 calls);
		poll(&pf, 1, 100);
		r = recvmsg(c, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
		if (r < 0 && errno == EAGAIN)
			continue;
		TP_CHECK(r == 0, "recvmsg MSG_ERRQUEUE returned %zd", r);
		for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
			struct sock_extended_err e;

			memcpy(&e, CMSG_DATA(cm), sizeof(e));
			TP_CHECK(e.ee_origin == SO_EE_ORIGIN_ZEROCOPY &&
				 e.ee_info == done && e.ee_data >= done,
				 "completion %u..%u (origin %u) where %u was "
				 "due", e.ee_info, e.ee_data, e.ee_origin,
				 done);
			done = e.ee_data + 1;
		}
	}
	st = tp_conn_stats(c);
	TP_CHECK(st && st->state == SW_TCP, "the connection is not on TCP "
		 "after its MSG_ZEROCOPY sends (state %d)",
		 st ? (int)st->state : -1);
}

static enum where mode;

static void listener_opt(int l)
{
	int one = 1;

	if (mode == W_LISTENER)
		TP_CHECK(!setsockopt(l, SOL_SOCKET, SO_ZEROCOPY, &one,
				     sizeof(one)), "SO_ZEROCOPY on the listener");
}

/* the server sends: the option on its carried connection, or from the
 * listener */
static void server_send(int s)
{
	const struct sw_conn_stats *st;
	int one = 1;

	if (mode == W_CARRIED) {
		tp_wait_carried(s);
		TP_CHECK(!setsockopt(s, SOL_SOCKET, SO_ZEROCOPY, &one,
				     sizeof(one)), "SO_ZEROCOPY");
		st = tp_conn_stats(s);
		TP_CHECK(st && st->state == SW_SAN, "SO_ZEROCOPY alone took "
			 "the connection off the SAN (state %d)",
			 st ? (int)st->state : -1);
	}
	tp_recv(s, 2, 0, 100);
	zc_send(s);
}

/* the receiver: a client with the switch, reading as usual */
static void client_recv(int c)
{
	tp_send(c, 2, 0, 100);
	tp_recv(c, 1, 0, (size_t)NCHUNK * CHUNK);
}

static void run(enum where w)
{
	mode = w;
	tp_sender_pair(family, false, listener_opt, server_send, client_recv);
}

/* The option set before connect: the sender is the client. */
static void client_opt(int c)
{
	int one = 1;

	TP_CHECK(!setsockopt(c, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)),
		 "SO_ZEROCOPY");
}

static void client_send(int c)
{
	tp_send(c, 2, 0, 100);
	zc_send(c);
}

static void server_recv(int s)
{
	tp_recv(s, 2, 0, 100);
	tp_recv(s, 1, 0, (size_t)NCHUNK * CHUNK);
}

int main(int argc, char **argv)
{
	family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	tp_start("zerocopy", 40);
	tp_name = "zerocopy carried";
	run(W_CARRIED);
	tp_name = "zerocopy listener";
	run(W_LISTENER);
	tp_name = "zerocopy before connect";
	tp_sender_pair(family, true, client_opt, client_send, server_recv);
	tp_name = "zerocopy";
	tp_pass();
	return 0;
}

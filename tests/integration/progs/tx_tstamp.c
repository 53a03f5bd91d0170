/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tx_tstamp.c - SO_TIMESTAMPING transmit timestamps: the kernel stamps
 * the bytes its TCP sends and acknowledges, on the socket's error queue,
 * numbered by their offset in the stream (SOF_TIMESTAMPING_OPT_ID). A
 * carried connection's bytes never pass the kernel, so a program waiting
 * for the stamp of its last byte would wait for ever. Whether the option
 * comes on a carried connection, before connect, on the listener, or in
 * a send's control message (the socket only reporting), the connection
 * must be on TCP when the bytes go, every stamp must come
 * (with OPT_ID, the acknowledgement of the last byte at its offset), and
 * every byte arrive in order at a receiver that reads through the switch.
 */
#include <time.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include "tp_stats.h"

#define CHUNK 4096
#define NCHUNK 16
#define TOTAL ((size_t)CHUNK * NCHUNK)

enum where { W_CARRIED, W_BEFORE_CONNECT, W_LISTENER, W_PER_SEND };

static int family;

static int ts_flags(bool id)
{
	return SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
	       SOF_TIMESTAMPING_TX_ACK | (id ? SOF_TIMESTAMPING_OPT_ID : 0);
}

/* Waits (5 s at most) for the kernel's acknowledgement stamp: of byte
 * last with OPT_ID (id), of any byte without. */
static void ts_wait_ack(int c, bool id, size_t last)
{
	bool acked = false;
	long end = tp_ms() + 5000;

	while (!acked) {
		struct pollfd pf = { .fd = c, .events = 0 };
		char ctl[512], b[64];
		struct iovec v = { b, sizeof(b) };
		struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1,
				    .msg_control = ctl,
				    .msg_controllen = sizeof(ctl) };
		struct cmsghdr *cm;
		ssize_t r;

		TP_CHECK(tp_ms() < end, "no acknowledgement stamp of byte "
			 "%zu after 5 s", last);
		poll(&pf, 1, 100);
		r = recvmsg(c, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
		if (r < 0 && errno == EAGAIN)
			continue;
		TP_CHECK(r >= 0, "recvmsg MSG_ERRQUEUE");
		for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
			struct sock_extended_err e;

			if (cm->cmsg_type != IP_RECVERR &&
			    cm->cmsg_type != IPV6_RECVERR)
				continue;
			memcpy(&e, CMSG_DATA(cm), sizeof(e));
			TP_CHECK(e.ee_origin == SO_EE_ORIGIN_TIMESTAMPING,
				 "an error-queue entry of origin %u",
				 e.ee_origin);
			TP_CHECK(!id || e.ee_data <= last,
				 "a stamp for byte %u, %zu sent", e.ee_data,
				 last + 1);
			if (e.ee_info == SCM_TSTAMP_ACK &&
			    (!id || e.ee_data == last))
				acked = true;
		}
	}
}

/* Sends TOTAL bytes on c a chunk at a time, each once the kernel stamped
 * the acknowledgement of the one before (as a program that times its
 * messages does; the kernel stamps the last byte of each send, and sends
 * that TCP joins in one segment would share one stamp), on TCP. */
static void ts_send(int c, bool id, bool per_send)
{
	const struct sw_conn_stats *st;
	int i;

	for (i = 0; i < NCHUNK; i++) {
		if (per_send) {
			/* the request in each send's control message */
			union {
				char b[CMSG_SPACE(sizeof(int))];
				struct cmsghdr align;
			} ctl;
			static char buf[CHUNK];
			struct iovec v = { buf, CHUNK };
			struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1,
					    .msg_control = ctl.b,
					    .msg_controllen = sizeof(ctl.b) };
			struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
			int f = SOF_TIMESTAMPING_TX_SOFTWARE |
				SOF_TIMESTAMPING_TX_ACK;

			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SO_TIMESTAMPING;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &f, sizeof(f));
			tp_fill(1, (size_t)i * CHUNK, buf, CHUNK);
			TP_CHECK(sendmsg(c, &m, 0) == CHUNK,
				 "sendmsg with SO_TIMESTAMPING");
		} else {
			tp_send(c, 1, (size_t)i * CHUNK, CHUNK);
		}
		ts_wait_ack(c, id, (size_t)(i + 1) * CHUNK - 1);
	}
	st = tp_conn_stats(c);
	TP_CHECK(st && st->state == SW_TCP, "the connection is not on TCP "
		 "with transmit timestamps on (state %d)",
		 st ? (int)st->state : -1);
}

static void opt_on(int fd, bool id, const char *what)
{
	int v = ts_flags(id);

	TP_CHECK(!setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &v, sizeof(v)),
		 "SO_TIMESTAMPING %s", what);
}

/* The receiver reads everything through the switch and checks it. */
static void receive(int c)
{
	char b;

	tp_recv(c, 1, 0, TOTAL);
	TP_CHECK(recv(c, &b, 1, 0) == 0, "no end after the bytes");
}

static enum where mode;

static void listener_opt(int l)
{
	if (mode == W_LISTENER)
		opt_on(l, false, "on the listener");
}

/* The accepted end sends: the option on it, carried, from the listener,
 * or in each send. */
static void server_send(int s)
{
	const struct sw_conn_stats *st;
	int v = SOF_TIMESTAMPING_SOFTWARE;

	tp_recv(s, 2, 0, 100);
	if (mode == W_CARRIED) {
		tp_wait_carried(s);
		opt_on(s, true, "on a carried connection");
	}
	if (mode == W_PER_SEND) {
		/* reporting on, no transmit flag: the connection stays
		 * carried until a send asks for its stamps */
		tp_wait_carried(s);
		TP_CHECK(!setsockopt(s, SOL_SOCKET, SO_TIMESTAMPING, &v,
				     sizeof(v)), "SO_TIMESTAMPING reporting");
		st = tp_conn_stats(s);
		TP_CHECK(st && st->state == SW_SAN, "reporting alone took the "
			 "connection off the SAN (state %d)",
			 st ? (int)st->state : -1);
	}
	ts_send(s, mode == W_CARRIED, mode == W_PER_SEND);
}

static void client_recv(int c)
{
	tp_send(c, 2, 0, 100);
	receive(c);
}

static void run_server(enum where w)
{
	mode = w;
	tp_sender_pair(family, false, listener_opt, server_send, client_recv);
}

/* The option set before connect: the sender is the client. */
static void client_opt(int c)
{
	opt_on(c, false, "before connect");
}

static void client_send(int c)
{
	ts_send(c, false, false);
}

int main(int argc, char **argv)
{
	family = argc > 1 ? AF_INET6 : AF_INET;
	tp_start("tx_tstamp", 40);
	run_server(W_CARRIED);
	tp_sender_pair(family, true, client_opt, client_send, receive);
	run_server(W_LISTENER);
	run_server(W_PER_SEND);
	tp_pass();
}

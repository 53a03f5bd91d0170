/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * stream_close.c - every byte written before close() arrives, on each data
 * path (RDMA write into staging, RdmaRead, copy) and with registrations
 * failing: a client process writes large pieces (64 KiB .. 1 MiB) then
 * closes and exits, or has them echoed by a non-blocking server that
 * half-closes and closes at once; the receiving side checks every byte.
 */
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "tp_stats.h"

#define TOTAL (8u << 20)
/* The losses this pins down were races at close: each case runs often. */
#define ROUNDS 6

static int family;

/* Byte sizes of the client's writes: 64 KiB .. 1 MiB, some odd. */
static size_t piece(unsigned int i)
{
	static const size_t sz[] = { 65536, 1 << 20, 131072, 65536 + 1,
				     300000, 65536, 65536, 524288, 999999 };

	return sz[i % (sizeof(sz) / sizeof(sz[0]))];
}

/* Client: writes TOTAL bytes of stream 1 in large pieces, closes, exits.
 * The upgrade runs while the first bytes travel on TCP: this test is about
 * the SAN's paths at close, so the bulk waits until the connection is
 * carried. */
static void client_send(int c, bool nb)
{
	uint8_t *buf = malloc(1 << 20);
	size_t off = 4096, n;
	unsigned int i;

	TP_CHECK(buf != NULL, "malloc");
	tp_fill(1, 0, buf, off);
	tp_write_all(c, buf, off);
	tp_wait_carried(c);
	if (nb)
		tp_nonblock(c);
	for (i = 0; off < TOTAL; i++) {
		n = piece(i);
		if (n > TOTAL - off)
			n = TOTAL - off;
		tp_fill(1, off, buf, n);
		tp_write_all(c, buf, n);
		off += n;
	}
	TP_CHECK(!close(c), "close");
	_exit(0);
}

/* Client of the echo: sends in large pieces and reads the echo at once
 * (one non-blocking loop), half-closes, reads to EOF. */
static void client_echo(int c)
{
	uint8_t *out = malloc(1 << 20), *in = malloc(1 << 20);
	size_t off = 0, got = 0, have = 0, pos = 0;
	unsigned int i = 0;
	bool eof = false, shut = false;

	TP_CHECK(out && in, "malloc");
	/* the first bytes, and their echo, while the upgrade runs */
	tp_fill(2, 0, out, 4096);
	tp_write_all(c, out, 4096);
	off = 4096;
	while (got < off) {
		ssize_t r = recv(c, in, off - got, 0);

		TP_CHECK(r > 0, "echo client: the first echo");
		tp_verify(2, got, in, (size_t)r);
		got += (size_t)r;
	}
	tp_wait_carried(c);
	tp_nonblock(c);
	while (!eof) {
		struct pollfd pf = { .fd = c, .events = POLLIN };
		ssize_t r;

		if (!shut && pos == have) {
			if (off == TOTAL) {
				TP_CHECK(!shutdown(c, SHUT_WR), "shutdown");
				shut = true;
			} else {
				have = piece(i++);
				if (have > TOTAL - off)
					have = TOTAL - off;
				tp_fill(2, off, out, have);
				pos = 0;
			}
		}
		if (!shut && pos < have) {
			r = send(c, out + pos, have - pos, MSG_NOSIGNAL);
			if (r > 0) {
				pos += (size_t)r;
				off += (size_t)r;
			} else {
				TP_CHECK(errno == EAGAIN, "echo client send");
				pf.events |= POLLOUT;
			}
		}
		r = recv(c, in, 1 << 20, 0);
		if (r > 0) {
			tp_verify(2, got, in, (size_t)r);
			got += (size_t)r;
			continue;
		}
		if (r == 0) {
			eof = true;
			break;
		}
		TP_CHECK(errno == EAGAIN, "echo client recv after %zu", got);
		if (shut || pos == have)
			pf.events &= ~POLLOUT;
		TP_CHECK(poll(&pf, 1, 10000) == 1,
			 "echo client: nothing for 10 s, %zu of %u bytes back",
			 got, TOTAL);
	}
	TP_CHECK(got == TOTAL, "echo: %zu of %u bytes came back before EOF",
		 got, TOTAL);
	close(c);
	_exit(0);
}

/* Server side of the plain stream: reads to EOF, checks every byte. */
static size_t server_sink(int s)
{
	uint8_t *buf = malloc(1 << 20);
	size_t got = 0;
	ssize_t r;

	TP_CHECK(buf != NULL, "malloc");
	while ((r = recv(s, buf, 1 << 20, 0)) > 0) {
		tp_verify(1, got, buf, (size_t)r);
		got += (size_t)r;
	}
	TP_CHECK(r == 0, "recv after %zu bytes", got);
	free(buf);
	return got;
}

/* Non-blocking echo server (an event loop's way): reads what is there,
 * writes it back, at EOF half-closes and closes at once. */
static size_t server_echo(int s)
{
	uint8_t *buf = malloc(1 << 20);
	size_t got = 0;
	ssize_t r;

	TP_CHECK(buf != NULL, "malloc");
	tp_nonblock(s);
	for (;;) {
		struct pollfd pf = { .fd = s, .events = POLLIN };

		r = recv(s, buf, 1 << 20, 0);
		if (r == 0)
			break;
		if (r < 0) {
			TP_CHECK(errno == EAGAIN, "echo server recv");
			TP_CHECK(poll(&pf, 1, 10000) == 1,
				 "echo server: nothing for 10 s after %zu", got);
			continue;
		}
		tp_verify(2, got, buf, (size_t)r);
		got += (size_t)r;
		tp_write_all(s, buf, (size_t)r);
	}
	TP_CHECK(!shutdown(s, SHUT_WR), "echo server shutdown");
	free(buf);
	return got;
}

enum mode { M_SEND_BLOCKING, M_SEND_NONBLOCKING, M_ECHO };

static void run(enum mode m, const char *want_path)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const struct sw_conn_stats *st;
	uint64_t by_path = 0;
	size_t got;
	pid_t kid;
	int l, s, c;

	l = tp_listener(family, 4, &ss, &len);
	kid = fork();
	TP_CHECK(kid >= 0, "fork");
	if (!kid) {
		close(l);
		c = tp_connect(&ss, len);
		if (m == M_ECHO)
			client_echo(c);
		client_send(c, m == M_SEND_NONBLOCKING);
	}
	s = accept(l, NULL, NULL);
	TP_CHECK(s >= 0, "accept");
	close(l);
	got = m == M_ECHO ? server_echo(s) : server_sink(s);
	st = tp_conn_stats(s);
	TP_CHECK(st && st->state == 5, "the connection is not carried by "
		 "the provider (state %d): this test needs it",
		 st ? (int)st->state : -1);
	if (!strcmp(want_path, "write"))
		by_path = st->rx_rdma_write;
	else if (!strcmp(want_path, "read"))
		by_path = st->rx_rdma_read;
	else
		by_path = st->rx_copy + st->rx_rdma_read + st->rx_rdma_write;
	TP_CHECK(by_path > 0, "no byte arrived by the %s path", want_path);
	close(s);
	tp_reap(kid, "the client failed");
	TP_CHECK(got == TOTAL, "%u bytes sent, %zu arrived before EOF",
		 TOTAL, got);
}

/* Each case runs in a fresh process: the switch reads its settings once. */
static const struct {
	const char *name, *env, *path;
	enum mode m;
} cases[] = {
	{ "write, blocking", "SDP_PATH=write", "write", M_SEND_BLOCKING },
	{ "write, non-blocking", "SDP_PATH=write", "write",
	  M_SEND_NONBLOCKING },
	{ "write, echo", "SDP_PATH=write", "write", M_ECHO },
	{ "no CMA, blocking", "SDP_SHM_NO_CMA=1", "any", M_SEND_BLOCKING },
	/* staged RDMA writes into the receiver's ring (nginx's sendfile
	 * to curl across uids hung here) */
	{ "no CMA, non-blocking", "SDP_SHM_NO_CMA=1", "write",
	  M_SEND_NONBLOCKING },
	{ "no CMA, echo", "SDP_SHM_NO_CMA=1", "any", M_ECHO },
	{ "read, blocking", "SDP_PATH=read", "read", M_SEND_BLOCKING },
	{ "auto, echo", "SDP_PATH=auto", "any", M_ECHO },
	{ "registration faults, echo", "SDP_SHM_FAIL_REG_EVERY=3", "any",
	  M_ECHO },
};

int main(int argc, char **argv)
{
	const char *which = getenv("SDP_ITEST_CASE");
	unsigned int i, r;

	family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	if (which) {
		i = (unsigned int)atoi(which);
		TP_CHECK(i < sizeof(cases) / sizeof(cases[0]), "case %u", i);
		tp_start(cases[i].name, 40);
		for (r = 0; r < ROUNDS; r++)
			run(cases[i].m, cases[i].path);
		tp_pass();
	}
	tp_start("stream_close", 55);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char num[16], env[64];
		pid_t p = fork();

		TP_CHECK(p >= 0, "fork");
		if (!p) {
			snprintf(num, sizeof(num), "%u", i);
			snprintf(env, sizeof(env), "%s", cases[i].env);
			setenv("SDP_ITEST_CASE", num, 1);
			putenv(env);
			execv("/proc/self/exe", argv);
			tp_fail("exec of /proc/self/exe");
		}
		tp_reap(p, "case '%s' (%s) failed",
			cases[i].name, cases[i].env);
	}
	tp_pass();
}

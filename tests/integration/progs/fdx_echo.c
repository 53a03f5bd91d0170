/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fdx_echo.c - full-duplex echo with 4 MiB blocking writes at both ends,
 * and threads reading and writing one socket at once at both ends: the
 * client's writer and reader threads, the server's reader and writer
 * threads (separate processes, both preloaded). Every data path runs in
 * turn (default, SDP_XSLOT=0, SDP_PATH=write, read, copy), each in a new
 * process since the switch reads its settings at start, and then a client
 * with one thread, non-blocking, in poll(). Every byte of the echo is
 * checked, the connection must be carried, and no run may stall: a run
 * in which no echoed byte came for FX_STALL_S seconds fails (a loaded host
 * stretches the runs many times over, and they keep moving).
 * FDX_BYTES sets the bytes per run: 1 GiB, under SANITIZE=1 too (the six
 * runs take about 4 s on an idle 2-core machine, 25-35 s beside two
 * CPU-bound processes).
 */
#include <pthread.h>
#include <sys/wait.h>
#include "tp_stats.h"

#define FX_BLOCK (4u << 20)
#define FX_PERIOD ((size_t)FX_BLOCK + 4099)	/* the pattern's period */
#define FX_RING (16u << 20)	/* the server's bytes between its threads */
#define FX_STALL_S 15

static unsigned char *pat;	/* 2 x FX_PERIOD bytes of the pattern */
static uint64_t total;
static int fd;
static uint64_t echoed;	/* the client's count, for the watchdog */

static const unsigned char *expect(uint64_t off)
{
	return pat + off % FX_PERIOD;
}

static void check(const unsigned char *b, uint64_t off, size_t n)
{
	while (n) {
		size_t k = n < FX_BLOCK ? n : FX_BLOCK;

		if (memcmp(b, expect(off), k)) {
			size_t i;

			for (i = 0; i < k && b[i] == expect(off)[i]; i++)
				;
			tp_fail("echo byte %llu is 0x%02x, not 0x%02x",
				(unsigned long long)(off + i), b[i],
				expect(off)[i]);
		}
		b += k;
		off += k;
		n -= k;
	}
}

static void write_all(int f, const unsigned char *b, size_t n)
{
	while (n) {
		ssize_t w = send(f, b, n, MSG_NOSIGNAL);

		TP_CHECK(w > 0, "send of %zu bytes", n);
		b += w;
		n -= (size_t)w;
	}
}

/* ---- the server: a reader and a writer thread on one socket ---------- */

static unsigned char *ring;
static uint64_t ring_in, ring_out;	/* bytes put, bytes taken */
static bool ring_eof;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_cond = PTHREAD_COND_INITIALIZER;

static void *srv_writer(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t from;
		size_t n;

		pthread_mutex_lock(&ring_lock);
		while (ring_in - ring_out < FX_BLOCK && !ring_eof)
			pthread_cond_wait(&ring_cond, &ring_lock);
		from = ring_out;
		n = ring_in - ring_out;
		pthread_mutex_unlock(&ring_lock);
		if (!n)
			break;
		if (n > FX_BLOCK)
			n = FX_BLOCK;
		/* a block of 4 MiB, or the rest (within the ring) */
		if (from % FX_RING + n > FX_RING)
			n = FX_RING - from % FX_RING;
		write_all(fd, ring + from % FX_RING, n);
		pthread_mutex_lock(&ring_lock);
		ring_out += n;
		pthread_cond_broadcast(&ring_cond);
		pthread_mutex_unlock(&ring_lock);
	}
	shutdown(fd, SHUT_WR);
	return NULL;
}

static void serve(int l)
{
	pthread_t wt;

	fd = accept(l, NULL, NULL);
	TP_CHECK(fd >= 0, "accept");
	ring = malloc(FX_RING);
	TP_CHECK(ring != NULL, "malloc");
	TP_CHECK(!pthread_create(&wt, NULL, srv_writer, NULL), "thread");
	for (;;) {
		uint64_t at;
		size_t room;
		ssize_t r;

		pthread_mutex_lock(&ring_lock);
		while (ring_in - ring_out == FX_RING)
			pthread_cond_wait(&ring_cond, &ring_lock);
		at = ring_in;
		room = FX_RING - (size_t)(ring_in - ring_out);
		pthread_mutex_unlock(&ring_lock);
		if (room > FX_RING - at % FX_RING)
			room = FX_RING - at % FX_RING;
		if (room > FX_BLOCK)
			room = FX_BLOCK;
		r = recv(fd, ring + at % FX_RING, room, 0);
		TP_CHECK(r >= 0, "server recv: %s", strerror(errno));
		pthread_mutex_lock(&ring_lock);
		if (r == 0)
			ring_eof = true;
		ring_in += (uint64_t)r;
		pthread_cond_broadcast(&ring_cond);
		pthread_mutex_unlock(&ring_lock);
		if (r == 0)
			break;
	}
	pthread_join(wt, NULL);
	TP_CHECK(ring_in == total, "the server read %llu bytes of %llu",
		 (unsigned long long)ring_in, (unsigned long long)total);
	close(fd);
	exit(0);
}

/* ---- the client ------------------------------------------------------- */

static void *cli_writer(void *arg)
{
	uint64_t sent = 0;

	(void)arg;
	while (sent < total) {
		size_t n = total - sent < FX_BLOCK ? total - sent : FX_BLOCK;

		write_all(fd, expect(sent), n);
		sent += n;
	}
	shutdown(fd, SHUT_WR);
	return NULL;
}

static uint64_t cli_reader(void)
{
	unsigned char *b = malloc(FX_BLOCK);
	uint64_t got = 0;
	ssize_t r;

	TP_CHECK(b != NULL, "malloc");
	while ((r = recv(fd, b, FX_BLOCK, 0)) > 0) {
		check(b, got, (size_t)r);
		got += (uint64_t)r;
		tp_progress(&echoed, got);
	}
	TP_CHECK(r == 0, "client recv: %s", strerror(errno));
	free(b);
	return got;
}

/* One thread, non-blocking, both directions in poll(). */
static uint64_t cli_poll(void)
{
	unsigned char *b = malloc(FX_BLOCK);
	uint64_t sent = 0, got = 0;
	bool eof = false;

	TP_CHECK(b != NULL, "malloc");
	tp_nonblock(fd);
	while (!eof) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (sent < total)
			p.events |= POLLOUT;
		TP_CHECK(poll(&p, 1, 10000) == 1, "poll: nothing for 10 s "
			 "(sent %llu, echoed %llu)", (unsigned long long)sent,
			 (unsigned long long)got);
		if ((p.revents & POLLOUT) && sent < total) {
			size_t n = total - sent < FX_BLOCK ? total - sent :
							    FX_BLOCK;

			r = send(fd, expect(sent), n, MSG_NOSIGNAL);
			TP_CHECK(r > 0 || errno == EAGAIN, "send: %s",
				 strerror(errno));
			if (r > 0) {
				sent += (uint64_t)r;
				if (sent == total)
					shutdown(fd, SHUT_WR);
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			r = recv(fd, b, FX_BLOCK, 0);
			TP_CHECK(r >= 0 || errno == EAGAIN, "recv: %s",
				 strerror(errno));
			if (r == 0)
				eof = true;
			if (r > 0) {
				check(b, got, (size_t)r);
				got += (uint64_t)r;
				tp_progress(&echoed, got);
			}
		}
	}
	free(b);
	return got;
}

static void run(int family, bool polled)
{
	struct sockaddr_storage ss;
	const struct sw_conn_stats *st;
	socklen_t len;
	pthread_t wt;
	uint64_t got;
	pid_t pid;
	long t0;
	int l;

	l = tp_listener(family, 1, &ss, &len);
	pid = fork();
	TP_CHECK(pid >= 0, "fork");
	if (!pid)
		serve(l);
	close(l);
	fd = socket(family, SOCK_STREAM, 0);
	TP_CHECK(fd >= 0 && !connect(fd, (struct sockaddr *)&ss, len),
		 "connect");
	t0 = tp_ms();
	tp_watch(FX_STALL_S, total, "echoed", &echoed, NULL, NULL);
	if (polled) {
		got = cli_poll();
	} else {
		TP_CHECK(!pthread_create(&wt, NULL, cli_writer, NULL),
			 "thread");
		got = cli_reader();
		pthread_join(wt, NULL);
	}
	TP_CHECK(got == total, "%llu bytes echoed of %llu",
		 (unsigned long long)got, (unsigned long long)total);
	st = tp_conn_stats(fd);
	TP_CHECK(st && st->state == TP_STATE_SAN,
		 "the connection was not carried (state %d)",
		 st ? (int)st->state : -1);
	close(fd);
	tp_reap(pid, "echo server");
	fprintf(stderr, "fdx_echo %s %s: %llu MiB each way in %ld ms\n",
		getenv("SDP_PATH") ? getenv("SDP_PATH") :
		getenv("SDP_XSLOT") ? "xslot=0" : "default",
		polled ? "poll" : "threads",
		(unsigned long long)(total >> 20), tp_ms() - t0);
}

int main(int argc, char **argv)
{
	static const char *const paths[][2] = {
		{ NULL, NULL }, { "SDP_XSLOT", "0" }, { "SDP_PATH", "write" },
		{ "SDP_PATH", "read" }, { "SDP_PATH", "copy" },
	};
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	const char *e = getenv("FDX_BYTES");
	const char *step = getenv("FDX_STEP");
	size_t i;

	total = e ? strtoull(e, NULL, 0) : 1ull << 30;
	pat = malloc(2 * FX_PERIOD);
	TP_CHECK(pat != NULL, "malloc");
	for (i = 0; i < 2 * FX_PERIOD; i++)
		pat[i] = tp_byte(1, i % FX_PERIOD);
	if (step) {
		/* one run, in this process with its settings */
		tp_start("fdx_echo", 600);
		run(family, !strcmp(step, "poll"));
		return 0;
	}
	tp_start("fdx_echo", 3000);
	for (i = 0; i <= sizeof(paths) / sizeof(paths[0]); i++) {
		bool polled = i == sizeof(paths) / sizeof(paths[0]);
		pid_t pid = fork();

		TP_CHECK(pid >= 0, "fork");
		if (!pid) {
			if (!polled && paths[i][0])
				setenv(paths[i][0], paths[i][1], 1);
			setenv("FDX_STEP", polled ? "poll" : "threads", 1);
			execv("/proc/self/exe", argv);
			tp_fail("execv: %s", strerror(errno));
		}
		tp_reap(pid, "run %zu", i);
	}
	tp_pass();
	return 0;
}

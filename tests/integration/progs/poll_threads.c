/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * poll_threads.c - two threads wait on one carried socket at once, each in
 * poll() before its non-blocking call: a writer for POLLOUT, a reader for
 * POLLIN (as Python's sockets with a timeout do), against an echo server.
 * A doorbell taken by one of them must not be the wake-up the other sleeps
 * for. The switch's periodic idle wake-up is set far beyond the test's
 * bound (SDP_IDLE_MS), so a lost wake-up is a hang, not a slow run: a
 * watchdog fails the run when no byte moved either way for PT_STALL_S
 * seconds. A run that is only slow (a loaded host stretches the echo many
 * times over) keeps moving and is not failed for it. It runs twice: as
 * configured, and with the transfer slots off (SDP_XSLOT=0: every byte by
 * the peer's staging ring or RDMA read, as on a provider without a shared
 * area), where the writer's look for credits takes the reader's data.
 * A third run leaves no descriptor free (RLIMIT_NOFILE lowered, the table
 * filled) before the writer starts: its wake-up eventfd cannot be made,
 * so its sleeps are bounded instead, no byte may be lost and the switch's
 * log must say so.
 */
#include <sys/resource.h>
#include <pthread.h>
#include <sys/wait.h>
#include "tp_stats.h"

#define PT_MAXCHUNK (256u << 10)
#define PT_STALL_S 15

static uint64_t total;
static int fd;
/* bytes sent and bytes echoed back so far, for the watchdog */
static uint64_t sent, echoed;

/* Deterministic chunk sizes from 1 byte to 256 KiB. */
static size_t chunk(uint64_t *rnd)
{
	*rnd = *rnd * 6364136223846793005ull + 1442695040888963407ull;
	return (size_t)(*rnd >> 33) % PT_MAXCHUNK + 1;
}

static void wait_for(short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int r;

	do
		r = poll(&p, 1, -1);
	while (r < 0 && errno == EINTR);
	TP_CHECK(r == 1, "poll for 0x%x returned %d", ev, r);
}

static void *writer(void *arg)
{
	unsigned char *buf = malloc(PT_MAXCHUNK);
	uint64_t off = 0, rnd = 7;

	(void)arg;
	TP_CHECK(buf != NULL, "malloc");
	while (off < total) {
		size_t n = chunk(&rnd), done = 0;

		if (n > total - off)
			n = (size_t)(total - off);
		tp_fill(1, off, buf, n);
		while (done < n) {
			ssize_t w;

			wait_for(POLLOUT);
			w = send(fd, buf + done, n - done,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
			TP_CHECK(w > 0 || errno == EAGAIN,
				 "send at byte %llu: %s",
				 (unsigned long long)(off + done),
				 strerror(errno));
			if (w > 0) {
				done += (size_t)w;
				tp_progress(&sent, off + done);
			}
		}
		off += n;
	}
	TP_CHECK(!shutdown(fd, SHUT_WR), "shutdown");
	free(buf);
	return NULL;
}

static void reader(void)
{
	unsigned char *buf = malloc(65536);
	uint64_t off = 0;

	TP_CHECK(buf != NULL, "malloc");
	for (;;) {
		ssize_t n;

		wait_for(POLLIN);
		n = recv(fd, buf, 65536, MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN)
			continue;
		TP_CHECK(n >= 0, "recv at byte %llu: %s",
			 (unsigned long long)off, strerror(errno));
		if (!n)
			break;
		TP_CHECK(off + (uint64_t)n <= total, "%llu bytes echoed, "
			 "%llu sent", (unsigned long long)(off + n),
			 (unsigned long long)total);
		tp_verify(1, (size_t)off, buf, (size_t)n);
		off += (uint64_t)n;
		tp_progress(&echoed, off);
	}
	TP_CHECK(off == total, "EOF after %llu of %llu echoed bytes",
		 (unsigned long long)off, (unsigned long long)total);
	free(buf);
}

/* Leaves this process no free descriptor: the soft limit at PT_NOFD_LIMIT
 * (the switch's own may sit above it), the rest filled with /dev/null.
 * Returns how many were opened into fds. */
#define PT_NOFD_LIMIT 64
static int fill_fds(int *fds)
{
	struct rlimit rl;
	int n = 0;

	TP_CHECK(!getrlimit(RLIMIT_NOFILE, &rl), "getrlimit");
	rl.rlim_cur = PT_NOFD_LIMIT;
	TP_CHECK(!setrlimit(RLIMIT_NOFILE, &rl), "setrlimit");
	while (n < PT_NOFD_LIMIT && (fds[n] = open("/dev/null", O_RDONLY)) >= 0)
		n++;
	TP_CHECK(n < PT_NOFD_LIMIT && errno == EMFILE,
		 "filling the descriptor table: %s", strerror(errno));
	return n;
}

static void unfill_fds(const int *fds, int n, rlim_t limit)
{
	struct rlimit rl;

	while (n--)
		close(fds[n]);
	TP_CHECK(!getrlimit(RLIMIT_NOFILE, &rl), "getrlimit");
	rl.rlim_cur = limit;
	TP_CHECK(!setrlimit(RLIMIT_NOFILE, &rl), "setrlimit");
}

/* The switch's log (SDP_LOG_FILE) said that the writer had no eventfd. */
static void check_log_says_nofd(void)
{
	const char *path = getenv("SDP_LOG_FILE");
	static char text[65536];
	size_t n = 0;
	ssize_t r;
	int f;

	TP_CHECK(path != NULL, "SDP_LOG_FILE not set");
	f = open(path, O_RDONLY);
	TP_CHECK(f >= 0, "%s: %s", path, strerror(errno));
	while (n < sizeof(text) - 1 &&
	       (r = read(f, text + n, sizeof(text) - 1 - n)) > 0)
		n += (size_t)r;
	close(f);
	unlink(path);
	text[n] = 0;
	TP_CHECK(strstr(text, "no eventfd for a thread's wake-ups") != NULL,
		 "the switch's log does not say that a thread had no "
		 "eventfd:\n%s", text);
}

/* The server: one blocking thread that echoes what it reads. */
static void serve(int l)
{
	unsigned char *buf = malloc(65536);
	struct pollfd p = { .fd = l, .events = POLLIN };
	int c;

	TP_CHECK(buf != NULL, "malloc");
	TP_CHECK(poll(&p, 1, 10000) == 1, "no client came");
	c = accept(l, NULL, NULL);
	TP_CHECK(c >= 0, "accept");
	for (;;) {
		ssize_t n = recv(c, buf, 65536, 0);
		size_t done = 0;

		TP_CHECK(n >= 0, "server recv: %s", strerror(errno));
		if (!n)
			break;
		while (done < (size_t)n) {
			ssize_t w = send(c, buf + done, (size_t)n - done,
					 MSG_NOSIGNAL);

			TP_CHECK(w > 0, "server send: %s", strerror(errno));
			done += (size_t)w;
		}
	}
	shutdown(c, SHUT_WR);
	close(c);
	free(buf);
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	const char *e = getenv("PT_BYTES");
	struct sockaddr_storage ss;
	socklen_t len;
	pthread_t w;
	static char logenv[80];
	static struct tp_step steps[] = {
		{ "slots", NULL }, { "copy", "SDP_XSLOT=0" },
		{ "nofd", logenv },
	};
	int held[PT_NOFD_LIMIT], nheld = 0;
	struct rlimit rl0;
	const char *step;
	pid_t srv;
	bool copy, nofd;

	/* the switch reads its settings at start: both ends are this
	 * program's processes, run once as configured and once without
	 * transfer slots; the bound is the runner's (60 s) for both runs, a
	 * hang is the watchdog's */
	setenv("SDP_IDLE_MS", "3600000", 1);
	snprintf(logenv, sizeof(logenv),
		 "SDP_LOG_FILE=/tmp/sdp-poll-threads.%d.log", (int)getpid());
	step = tp_steps(argv, steps, 3);
	if (!step)
		return 0;
	copy = !strcmp(step, "copy");
	nofd = !strcmp(step, "nofd");
	tp_start(copy ? "poll_threads (copy path)" :
		 nofd ? "poll_threads (no descriptor left)" : "poll_threads",
		 nofd ? 14 : 28);
	total = e ? strtoull(e, NULL, 0) :
		getenv("SANITIZE") && !strcmp(getenv("SANITIZE"), "1") ?
		64ull << 20 : copy ? 256ull << 20 :
		nofd ? 64ull << 20 : 512ull << 20;
	srv = tp_fork_server(family, "poll_threads server", serve, &ss, &len);
	fd = tp_connect(&ss, len);
	tp_wait_carried(fd);
	tp_nonblock(fd);
	tp_watch(PT_STALL_S, total, "sent", &sent, "echoed", &echoed);
	TP_CHECK(!getrlimit(RLIMIT_NOFILE, &rl0), "getrlimit");
	if (nofd)
		nheld = fill_fds(held);
	TP_CHECK(!pthread_create(&w, NULL, writer, NULL), "pthread_create");
	reader();
	pthread_join(w, NULL);
	if (nofd) {
		unfill_fds(held, nheld, rl0.rlim_cur);
		check_log_says_nofd();
	}
	{
		const struct sw_conn_stats *st = tp_conn_stats(fd);
		uint64_t san;

		TP_CHECK(st && st->state == TP_STATE_SAN,
			 "the connection left the provider (state %d)",
			 st ? (int)st->state : -1);
		san = st->rx_copy + st->rx_rdma_read + st->rx_rdma_write;
		TP_CHECK(san >= total / 2, "only %llu of %llu echoed bytes "
			 "came by the provider", (unsigned long long)san,
			 (unsigned long long)total);
	}
	close(fd);
	tp_reap(srv, "the echo server");
	tp_pass();
	return 0;
}

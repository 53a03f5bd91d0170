/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * orphan_close.c - close() of a carried connection with bytes kept back
 * returns at once, and the switch still delivers every byte, then EOF, to
 * a peer that reads only 7 s later (as TCP sends an orphaned socket's
 * buffer): a writer that stays alive (and forks: the child holds no copy
 * of the connection), one that exits at once, one that execs at once, and
 * one whose fd number a new connection takes while the first one drains
 * (its epoll registration gone with the close);
 * with SO_LINGER, close waits until the reader took everything.
 * Then, with SDP_ORPHAN_TIMEOUT_MS short, a peer that reads too late sees
 * a reset, never a clean end of a stream that is not whole; and a reader
 * that forks (its end returns to TCP) while the writer's switch still
 * holds bytes gets them all, then EOF.
 */
#include <linux/sockios.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "tp_stats.h"

#define FILL_MAX (16u << 20)	/* the most a writer writes */
#define READ_AFTER_MS 7000	/* the reader's sleep before it reads */
#define SECOND_LEN (1u << 20)	/* the reuse case's second connection */

enum { C_STAY, C_EXIT, C_EXEC, C_LINGER, C_REUSE, C_REUSE2, NCASES };
#define NWRITERS C_REUSE2	/* the last case is C_REUSE's second */

static const char *const case_name[NCASES] = {
	"close, writer stays", "close, writer exits", "close, writer execs",
	"close with SO_LINGER 30 s", "close, fd reused",
	"the connection on the reused fd",
};

/* What a writer tells the reader once it closed (one pipe write). */
struct report {
	uint32_t id;
	uint32_t kept;		/* SIOCOUTQ before close: bytes kept */
	uint64_t total;		/* bytes written */
	uint64_t close_us;	/* how long close() took */
};

static int family;
static int rep_rd;	/* the reader's end of the reports */

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void send_id(int c, uint32_t id)
{
	TP_CHECK(send(c, &id, sizeof(id), MSG_NOSIGNAL) == sizeof(id),
		 "send of the case id");
}

/* Writes stream id (non-blocking) until max bytes or until the
 * switch takes no more for 300 ms (the reader does not read yet).
 * Returns the bytes written. */
static size_t fill(int c, unsigned int id, size_t max)
{
	static uint8_t buf[1 << 20];
	struct pollfd pf = { .fd = c, .events = POLLOUT };
	size_t total = 0, n, piece = sizeof(buf);
	ssize_t r;

	tp_nonblock(c);
	while (total < max) {
		n = piece;
		if (n > max - total)
			n = max - total;
		tp_fill(id, total, buf, n);
		r = send(c, buf, n, MSG_NOSIGNAL);
		if (r > 0) {
			total += (size_t)r;
			continue;
		}
		TP_CHECK(r < 0 && errno == EAGAIN, "send after %zu", total);
		/* smaller pieces fill what is left of the send buffer */
		if (piece > 1024) {
			piece /= 4;
			continue;
		}
		if (poll(&pf, 1, 300) == 0)
			break;
		piece = sizeof(buf);
	}
	return total;
}

/* Closes c, timed, and tells the reader (rep) what it wrote. */
static void close_report(int rep, int c, uint32_t id, size_t total)
{
	struct report r = { .id = id, .total = total };
	int q = 0;
	uint64_t t;

	TP_CHECK(!ioctl(c, SIOCOUTQ, &q), "SIOCOUTQ");
	r.kept = (uint32_t)q;
	t = now_us();
	TP_CHECK(!close(c), "close");
	r.close_us = now_us() - t;
	TP_CHECK(write(rep, &r, sizeof(r)) == sizeof(r), "report");
}

/* Whether this process has a descriptor on the socket of inode ino. */
static bool holds_socket(ino_t ino)
{
	char want[64], path[300], link[64];
	struct dirent *e;
	bool found = false;
	DIR *d = opendir("/proc/self/fd");
	ssize_t n;

	TP_CHECK(d != NULL, "opendir /proc/self/fd");
	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	while ((e = readdir(d))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		found |= !strcmp(link, want);
	}
	closedir(d);
	return found;
}

/* Whether epoll set ep has a registration of the file of inode ino (the
 * kernel lists each target's inode in the set's fdinfo). */
static bool ep_watches(int ep, ino_t ino)
{
	char path[64], line[256], want[48];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ep);
	snprintf(want, sizeof(want), " ino:%lx ", (unsigned long)ino);
	f = fopen(path, "r");
	TP_CHECK(f != NULL, "open %s", path);
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, want) != NULL;
	fclose(f);
	return found;
}

/* The switch holds its own copy of the closed connection (so the case
 * tests what it means to), and a child forked now closes its copy of
 * that copy at once: it would hold TCP's FIN back while it lives. */
static void fork_check(ino_t ino)
{
	pid_t kid;

	TP_CHECK(holds_socket(ino), "after close the switch holds no copy "
		 "of the connection: the case tests nothing");
	kid = fork();
	TP_CHECK(kid >= 0, "fork");
	if (!kid)
		_exit(holds_socket(ino) ? 1 : 0);
	tp_reap(kid, "a child forked after close holds the closed "
		"connection's socket");
}

static void writer(int which, const struct sockaddr_storage *ss,
		   socklen_t len, int rep, int done)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct stat sb;
	char b;
	int c, c2, ep = -1;
	size_t total;

	c = tp_connect(ss, len);
	send_id(c, which);
	tp_wait_carried(c);
	if (which == C_REUSE) {
		/* the program's epoll registration ends with its close, as
		 * the kernel ends it when the file closes, although the
		 * switch keeps the file open */
		ep = epoll_create1(0);
		TP_CHECK(ep >= 0 && !epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev),
			 "epoll");
	}
	if (which == C_LINGER) {
		struct linger lg = { 1, 30 };

		TP_CHECK(!setsockopt(c, SOL_SOCKET, SO_LINGER, &lg,
				     sizeof(lg)), "SO_LINGER");
	}
	total = fill(c, which, FILL_MAX);
	TP_CHECK(!fstat(c, &sb), "fstat");
	TP_CHECK(ep < 0 || ep_watches(ep, sb.st_ino), "the epoll set's "
		 "registration is not in its fdinfo: the check tests nothing");
	close_report(rep, c, which, total);
	if (which == C_STAY)
		fork_check(sb.st_ino);
	if (which == C_EXIT)
		exit(0);	/* the exit hook's turn */
	if (which == C_EXEC) {
		execlp("true", "true", (char *)NULL);
		tp_fail("exec of true");
	}
	if (which == C_REUSE) {
		TP_CHECK(!ep_watches(ep, sb.st_ino), "the epoll set still "
			 "watches the closed connection's socket");
		/* the program's number is free at once: the next socket
		 * takes it while the first connection drains */
		c2 = tp_connect(ss, len);
		TP_CHECK(c2 == c, "the new connection got fd %d, not the "
			 "closed one's %d", c2, c);
		send_id(c2, C_REUSE2);
		tp_wait_carried(c2);
		close_report(rep, c2, C_REUSE2,
			     fill(c2, C_REUSE2, SECOND_LEN));
	}
	/* alive until the reader is done: the orphan drains meanwhile */
	TP_CHECK(read(done, &b, 1) == 0, "waiting for the reader");
	exit(0);
}

/* Reads one connection: its case id, then its stream to EOF. */
static void read_one(int s, struct report *reps, bool *seen)
{
	static uint8_t buf[1 << 20];
	const struct sw_conn_stats *st;
	size_t got = 0;
	uint32_t id;
	ssize_t r;

	TP_CHECK(recv(s, &id, sizeof(id), MSG_WAITALL) == sizeof(id),
		 "recv of the case id");
	TP_CHECK(id < NCASES && !seen[id], "case id %u", id);
	seen[id] = true;
	while ((r = recv(s, buf, sizeof(buf), 0)) > 0) {
		tp_verify(id, got, buf, (size_t)r);
		got += (size_t)r;
	}
	TP_CHECK(r == 0, "%s: recv after %zu of %llu bytes", case_name[id],
		 got, (unsigned long long)reps[id].total);
	if (id == C_LINGER) {
		/* its close returns once we took everything: the last
		 * report */
		struct report lr;

		TP_CHECK(read(rep_rd, &lr, sizeof(lr)) == sizeof(lr) &&
			 lr.id == C_LINGER, "the lingering close's report");
		reps[id] = lr;
		/* it waited for our read (7 s after the other closes) */
		TP_CHECK(lr.close_us > 3000000, "%s: close() returned after "
			 "%llu us, before the reader read", case_name[id],
			 (unsigned long long)lr.close_us);
	}
	TP_CHECK(got == reps[id].total, "%s: %zu of %llu bytes arrived "
		 "before EOF", case_name[id], got,
		 (unsigned long long)reps[id].total);
	st = tp_conn_stats(s);
	TP_CHECK(st && st->state == TP_STATE_SAN &&
		 st->rx_copy + st->rx_rdma_read + st->rx_rdma_write > 0,
		 "%s: the connection was not carried by the provider "
		 "(state %d)", case_name[id], st ? (int)st->state : -1);
	printf("  %s: %zu bytes (%u kept at close) and EOF after %d s; "
	       "close() took %llu us\n", case_name[id], got, reps[id].kept,
	       READ_AFTER_MS / 1000, (unsigned long long)reps[id].close_us);
}

/*
 * SDP_ORPHAN_TIMEOUT_MS short (this process's environment): the writer's
 * switch gives its closed connection up while the reader sleeps, and the
 * reader, back later, reads what had reached it, then ECONNRESET: never
 * the end of a stream that is not whole. With fork_reader, the reader
 * forks before it reads instead (the connection returns to TCP with the
 * writer's bytes still kept) and must get every byte, then EOF.
 */
#define GIVEUP_TIMEOUT_MS 1000
#define GIVEUP_READ_AFTER_MS 3000

static void giveup(bool fork_reader)
{
	static uint8_t buf[1 << 20];
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const struct sw_conn_stats *st;
	long end = tp_ms() + 5000;
	size_t got = 0, total;
	int l, s, c, done[2], rep[2];
	char b;
	ssize_t r;
	pid_t kid, kid2;

	l = tp_listener(family, 4, &ss, &len);
	TP_CHECK(!pipe(done) && !pipe(rep), "pipe");
	kid = fork();
	TP_CHECK(kid >= 0, "fork");
	if (!kid) {
		close(l);
		close(done[1]);
		c = tp_connect(&ss, len);
		tp_wait_carried(c);
		total = fill(c, 1, FILL_MAX);
		TP_CHECK(!close(c), "close");
		TP_CHECK(write(rep[1], &total, sizeof(total)) ==
			 sizeof(total), "report");
		/* alive: the flusher gives the connection up */
		TP_CHECK(read(done[0], &b, 1) == 0, "waiting for the reader");
		exit(total ? 0 : 1);
	}
	close(done[0]);
	close(rep[1]);
	s = accept(l, NULL, NULL);
	TP_CHECK(s >= 0, "accept");
	while (!(st = tp_conn_stats(s)) || st->state != TP_STATE_SAN) {
		TP_CHECK(tp_ms() < end, "not carried within 5 s");
		send(s, "", 0, MSG_NOSIGNAL);
		usleep(1000);
	}
	if (fork_reader) {
		/* the fork returns the reader's end to TCP while the
		 * writer's switch still holds bytes: they follow on TCP */
		usleep(500 * 1000);
		kid2 = fork();
		TP_CHECK(kid2 >= 0, "fork");
		if (!kid2)
			_exit(0);
		tp_reap(kid2, "the reader's child");
		while ((r = recv(s, buf, sizeof(buf), 0)) > 0) {
			tp_verify(1, got, buf, (size_t)r);
			got += (size_t)r;
		}
		TP_CHECK(r == 0, "recv after %zu bytes", got);
		TP_CHECK(read(rep[0], &total, sizeof(total)) ==
			 sizeof(total), "the writer's count");
		TP_CHECK(got == total, "%zu of %zu bytes arrived before EOF",
			 got, total);
		printf("  reader forked: %zu bytes and EOF\n", got);
		close(rep[0]);
		goto out;
	}
	usleep(GIVEUP_READ_AFTER_MS * 1000);
	while ((r = recv(s, buf, sizeof(buf), 0)) > 0) {
		tp_verify(1, got, buf, (size_t)r);
		got += (size_t)r;
	}
	TP_CHECK(r < 0 && errno == ECONNRESET, "given up after %d ms, the "
		 "stream ended after %zu bytes with %s, not a reset",
		 GIVEUP_TIMEOUT_MS, got, r ? strerror(errno) : "EOF");
	printf("  given up: %zu bytes, then ECONNRESET\n", got);
out:
	close(s);
	close(l);
	close(done[1]);
	tp_reap(kid, "the writer failed");
}

/* A process that holds both ends writes, closes one with bytes kept and
 * exits without reading the other: its exit waits for nobody (the other
 * end goes with it), where waiting for a read would last the whole
 * SDP_ORPHAN_TIMEOUT_MS. */
static void self_peer_exit(void)
{
	long t0 = tp_ms(), took;
	int c, s;
	pid_t kid;

	fflush(stdout);
	kid = fork();
	TP_CHECK(kid >= 0, "fork");
	if (!kid) {
		tp_pair(family, &c, &s);
		tp_carry_both(c, s);
		fill(c, 1, FILL_MAX);
		TP_CHECK(!close(c), "close");
		exit(0);
	}
	tp_reap(kid, "the process with both ends failed");
	took = tp_ms() - t0;
	TP_CHECK(took < 10000, "a process with both ends took %ld ms to "
		 "exit", took);
	printf("  both ends in one process: exit after %ld ms\n", took);
}

/* A case in a process of its own (settings are read once): the give-up
 * case with a short SDP_ORPHAN_TIMEOUT_MS, or the reader that forks. */
static void sub_run(char **argv, const char *which)
{
	char v[16];
	pid_t p;

	fflush(stdout);
	p = fork();
	TP_CHECK(p >= 0, "fork");
	if (!p) {
		snprintf(v, sizeof(v), "%d", GIVEUP_TIMEOUT_MS);
		if (!strcmp(which, "SDP_ITEST_GIVEUP"))
			setenv("SDP_ORPHAN_TIMEOUT_MS", v, 1);
		setenv(which, "1", 1);
		execv("/proc/self/exe", argv);
		tp_fail("exec of /proc/self/exe");
	}
	tp_reap(p, "the case of %s failed", which);
}

int main(int argc, char **argv)
{
	struct report reps[NCASES] = { { 0 } }, r;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int l, i, rep[2], done[2], conns[NCASES], nconn = 0, nrep = 0;
	bool seen[NCASES] = { false };
	pid_t kids[NWRITERS];

	family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	if (getenv("SDP_ITEST_GIVEUP")) {
		tp_start("orphan_close, given up", 20);
		giveup(false);
		tp_pass();
	}
	if (getenv("SDP_ITEST_FORK_READER")) {
		tp_start("orphan_close, reader forks", 20);
		giveup(true);
		tp_pass();
	}
	tp_start("orphan_close", 50);
	l = tp_listener(family, 8, &ss, &len);
	TP_CHECK(!pipe(rep) && !pipe(done), "pipe");
	for (i = 0; i < NWRITERS; i++) {
		kids[i] = fork();
		TP_CHECK(kids[i] >= 0, "fork");
		if (!kids[i]) {
			close(l);
			close(rep[0]);
			close(done[1]);
			writer(i, &ss, len, rep[1], done[0]);
		}
	}
	close(rep[1]);
	close(done[0]);
	rep_rd = rep[0];
	/* every connection accepted, every close reported (but the one that
	 * lingers): nothing read */
	while (nconn < NCASES || nrep < NCASES - 1) {
		struct pollfd pf[2] = { { .fd = l, .events = POLLIN },
					{ .fd = rep[0], .events = POLLIN } };

		long end = tp_ms() + 20000;
		int k;

		/* a server's calls move its upgrades on: empty sends */
		while (!poll(pf, 2, 1)) {
			TP_CHECK(tp_ms() < end, "writers stalled: %d "
				 "connections, %d closes", nconn, nrep);
			for (k = 0; k < nconn; k++) {
				const struct sw_conn_stats *st;

				st = tp_conn_stats(conns[k]);
				if (!st || st->state != TP_STATE_SAN)
					send(conns[k], "", 0, MSG_NOSIGNAL);
			}
		}
		if (pf[0].revents) {
			TP_CHECK(nconn < NCASES, "one connection too many");
			conns[nconn] = accept(l, NULL, NULL);
			TP_CHECK(conns[nconn] >= 0, "accept");
			nconn++;
		}
		if (pf[1].revents) {
			TP_CHECK(read(rep[0], &r, sizeof(r)) == sizeof(r) &&
				 r.id < NCASES, "report");
			reps[r.id] = r;
			nrep++;
		}
	}
	for (i = 0; i < NCASES; i++)
		/* a close that blocked waited 5 s or more: 2 s tells the two
		 * apart on a loaded machine */
		TP_CHECK(i == C_LINGER || reps[i].close_us < 2000000, "%s: close() took %llu "
			 "us", case_name[i],
			 (unsigned long long)reps[i].close_us);
	usleep(READ_AFTER_MS * 1000);
	for (i = 0; i < NCASES; i++)
		read_one(conns[i], reps, seen);
	for (i = 0; i < NCASES; i++)
		close(conns[i]);
	close(done[1]);
	for (i = 0; i < NWRITERS; i++)
		tp_reap(kids[i], "writer %d failed", i);
	self_peer_exit();
	sub_run(argv, "SDP_ITEST_GIVEUP");
	sub_run(argv, "SDP_ITEST_FORK_READER");
	tp_pass();
}

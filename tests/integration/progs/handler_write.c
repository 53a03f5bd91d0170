/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * handler_write.c - a signal handler writes on a carried connection while
 * its thread is inside the switch: asleep in a blocking read of another
 * carried connection, then busy sending on a third (as iperf3's SIGTERM
 * handler writes its last word on the control connection). Every record a
 * handler's write said it sent must arrive, in order, and nothing else:
 * not one byte may reach the TCP socket under the switch, where the peer's
 * switch would take it for a broken protocol and close the connection.
 * Last, a handler forks in the middle of such a read, and the child goes
 * on from the handler for good (PostgreSQL's postmaster starts its workers
 * so): its sockets and files must work as any process's.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include "tp_stats.h"

#define HW_SIGNALS 300
#define HW_REC 8

static int a[2], b[2], c[2];
static volatile sig_atomic_t next_rec;
static uint32_t sent_ok[2 * HW_SIGNALS];
static volatile sig_atomic_t n_ok, n_again, n_other;
static atomic_int signalled;	/* signals sent so far */
static pthread_t main_thread;

static void on_usr1(int sig)
{
	int saved = errno;
	unsigned char rec[HW_REC];
	uint32_t k = (uint32_t)next_rec++;
	ssize_t r;

	(void)sig;
	memset(rec, 0xa5, sizeof(rec));
	memcpy(rec, &k, sizeof(k));
	r = write(b[0], rec, sizeof(rec));
	if (r == HW_REC && n_ok < 2 * HW_SIGNALS)
		sent_ok[n_ok++] = k;
	else if (r < 0 && errno == EAGAIN)
		n_again++;
	else
		n_other++;
	errno = saved;
}

static volatile sig_atomic_t fork_pid;

/* The child of a fork made in a handler never returns from it: a socket
 * it closes must leave no trace, and a file that gets its number must
 * read as a file. */
static void on_usr2(int sig)
{
	char buf[64];
	pid_t pid;
	int fd, f;

	(void)sig;
	pid = fork();
	if (pid) {
		fork_pid = pid;
		return;
	}
	/* a carried socket it inherited: closed, its number taken by a file */
	fd = b[0];
	if (close(fd))
		_exit(2);
	do {
		f = open("/proc/self/stat", O_RDONLY);
	} while (f >= 0 && f < fd);
	if (f != fd)
		_exit(3);
	if (read(f, buf, sizeof(buf)) <= 0)
		_exit(4);
	_exit(0);
}

/* Signals the main thread every millisecond or so (a signal sent while
 * the last is still pending is delivered once: the main thread counts
 * what was sent, not what its handler saw). */
static void *signaller(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < HW_SIGNALS; i++) {
		struct timespec ts = { 0, 1000000L + (i % 7) * 300000L };

		nanosleep(&ts, NULL);
		pthread_kill(main_thread, SIGUSR1);
		atomic_fetch_add(&signalled, 1);
	}
	return NULL;
}

static void *fork_signaller(void *arg)
{
	struct timespec ts = { 0, 50 * 1000000L };

	(void)arg;
	nanosleep(&ts, NULL);
	pthread_kill(main_thread, SIGUSR2);
	return NULL;
}

/* Drains c[1], which the main thread fills in its second phase. */
static void *c_reader(void *arg)
{
	static char buf[1 << 16];
	size_t got = 0;

	(void)arg;
	for (;;) {
		ssize_t r = recv(c[1], buf, sizeof(buf), 0);

		if (r <= 0)
			break;
		tp_verify(3, got, buf, (size_t)r);
		got += (size_t)r;
	}
	return (void *)got;
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	struct sigaction sa;
	pthread_t sig_t, rd_t;
	unsigned char got[2 * HW_SIGNALS * HW_REC];
	size_t off = 0, sent = 0, want;
	void *c_got;
	long end;
	char x;
	int i, half;

	tp_start("handler_write", 40);
	tp_pair(family, &a[0], &a[1]);
	tp_pair(family, &b[0], &b[1]);
	tp_pair(family, &c[0], &c[1]);
	tp_carry_both(a[0], a[1]);
	tp_carry_both(b[0], b[1]);
	tp_carry_both(c[0], c[1]);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;	/* no SA_RESTART: reads end in EINTR */
	sigemptyset(&sa.sa_mask);
	TP_CHECK(!sigaction(SIGUSR1, &sa, NULL), "sigaction");
	main_thread = pthread_self();
	TP_CHECK(!pthread_create(&rd_t, NULL, c_reader, NULL), "thread");
	TP_CHECK(!pthread_create(&sig_t, NULL, signaller, NULL), "thread");

	/* first half: asleep in a blocking read nobody answers */
	half = HW_SIGNALS / 2;
	while (atomic_load(&signalled) < half) {
		ssize_t r = recv(a[1], &x, 1, 0);

		TP_CHECK(r < 0 && errno == EINTR,
			 "a read with nothing sent returned %zd", r);
	}
	/* second half: busy sending 64 KiB pieces on another connection */
	while (atomic_load(&signalled) < HW_SIGNALS) {
		static char buf[1 << 16];
		ssize_t r;

		tp_fill(3, sent, buf, sizeof(buf));
		r = send(c[0], buf, sizeof(buf), 0);
		if (r < 0 && errno == EINTR)
			continue;
		TP_CHECK(r > 0, "send on the busy connection");
		/* a short send after a handler: the rest follows */
		sent += (size_t)r;
		if ((size_t)r < sizeof(buf)) {
			tp_fill(3, sent, buf, sizeof(buf) - (size_t)r);
			tp_send(c[0], 3, sent, sizeof(buf) - (size_t)r);
			sent += sizeof(buf) - (size_t)r;
		}
	}
	pthread_join(sig_t, NULL);
	shutdown(c[0], SHUT_WR);
	pthread_join(rd_t, &c_got);
	TP_CHECK((size_t)c_got == sent, "the busy connection moved %zu of %zu",
		 (size_t)c_got, sent);
	TP_CHECK(n_other == 0, "%d handler writes failed other than EAGAIN",
		 (int)n_other);
	TP_CHECK(n_ok > 0, "no handler write went through");

	/* exactly the records whose writes succeeded, in order */
	want = (size_t)n_ok * HW_REC;
	end = tp_ms() + 10000;
	while (off < want) {
		struct pollfd p = { .fd = b[1], .events = POLLIN };
		ssize_t r;

		TP_CHECK(tp_ms() < end, "%zu of %zu handler bytes arrived",
			 off, want);
		if (poll(&p, 1, 100) != 1)
			continue;
		r = recv(b[1], got + off, want - off, MSG_DONTWAIT);
		TP_CHECK(r > 0 || (r < 0 && errno == EAGAIN),
			 "the handlers' connection broke (%zd)", r);
		if (r > 0)
			off += (size_t)r;
	}
	for (i = 0; i < n_ok; i++) {
		uint32_t k;

		memcpy(&k, got + (size_t)i * HW_REC, sizeof(k));
		TP_CHECK(k == sent_ok[i] && got[(size_t)i * HW_REC + 4] == 0xa5,
			 "record %d is %u, %u was written", i, k, sent_ok[i]);
	}
	{
		struct pollfd p = { .fd = b[1], .events = POLLIN };

		TP_CHECK(poll(&p, 1, 200) == 0,
			 "bytes beyond the handlers' records arrived");
	}
	for (i = 0; i < 2; i++) {
		const struct sw_conn_stats *st = tp_conn_stats(b[i]);

		TP_CHECK(st && st->state == TP_STATE_SAN,
			 "the handlers' connection left the provider");
	}
	/* a fork in a handler, the child staying in it */
	sa.sa_handler = on_usr2;
	TP_CHECK(!sigaction(SIGUSR2, &sa, NULL), "sigaction");
	{
		int st;

		TP_CHECK(!pthread_create(&sig_t, NULL, fork_signaller, NULL),
			 "thread");
		while (!fork_pid) {
			ssize_t r = recv(a[1], &x, 1, 0);

			TP_CHECK(r < 0 && errno == EINTR,
				 "a read with nothing sent returned %zd", r);
		}
		pthread_join(sig_t, NULL);
		TP_CHECK(waitpid(fork_pid, &st, 0) == fork_pid, "waitpid");
		TP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			 "the child forked in a handler failed at step %d "
			 "(2 close, 3 open, 4 read: its file read as a socket)",
			 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	printf("handler_write: %d records through, %d refused (EAGAIN)\n",
	       (int)n_ok, (int)n_again);
	tp_pass();
	return 0;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_threads.c - a server's main thread forks (children that exit at
 * once) every 2 ms while another thread echoes a carried connection both
 * ways: the client, in another process, sends in one thread and reads the
 * echo in another. Each fork returns the connection to TCP while both
 * directions are in flight (a reader asleep on the SAN, the fork taking
 * the peer's bytes aside, the client's switch answering from whichever
 * thread moves its session), and, with re-upgrade on, lifts it to the SAN
 * again between forks. Both ends check every byte.
 *
 * Rounds 0-3: the client writes 8 KiB at a time. Rounds 4-7: writes of
 * changing sizes (1 byte to 24 KiB), while the server's echo pauses every
 * 256 KiB, so the client's switch keeps small writes back (coalescing, its
 * send buffer) when a fork's downgrade comes: those bytes go on TCP right
 * after its marker, before the bytes of any later write. Rounds 8-11:
 * writes up to 256 KiB, large ones offered for the peer to pull (transfer
 * slots) or written into its staging ring, and an echo of up to 256 KiB
 * at a time, so that forks meet transfers in flight both ways.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include "tp_stats.h"

#define N (16u << 20)

struct end {
	int fd;
	int round;
};

static atomic_int echo_started, echo_done;

#define BIG (256u << 10)

static size_t write_len(int round, size_t i)
{
	static const size_t big[] = { 1, 1500, 65536, BIG, 100000, 7 };

	/* 8 KiB; a changing size up to 24 KiB (small ones often); sizes
	 * up to 256 KiB */
	if (round < 4)
		return 8192;
	if (round < 8)
		return 1 + (i * 7919u) % ((i & 3) ? 600u : 24576u);
	return big[i % 6];
}

static void *client_sender(void *arg)
{
	struct end *e = arg;
	static unsigned char buf[BIG];
	size_t off = 0, i = 0;

	while (off < N) {
		size_t n = write_len(e->round, i++);
		ssize_t w;

		if (n > N - off)
			n = N - off;
		tp_fill(90 + e->round, off, buf, n);
		w = send(e->fd, buf, n, MSG_NOSIGNAL);
		TP_CHECK(w > 0, "client send at %zu", off);
		off += (size_t)w;
	}
	TP_CHECK(!shutdown(e->fd, SHUT_WR), "client shutdown");
	return NULL;
}

static void client(const struct sockaddr_storage *ss, socklen_t len,
		   int round)
{
	static char name[64];
	struct end e = { tp_connect(ss, len), round };
	pthread_t t;
	char b;

	snprintf(name, sizeof(name), "fork_threads (client, round %d)", round);
	tp_name = name;
	tp_wait_carried(e.fd);
	TP_CHECK(!pthread_create(&t, NULL, client_sender, &e), "thread");
	tp_recv(e.fd, 90 + round, 0, N);
	TP_CHECK(recv(e.fd, &b, 1, 0) == 0, "no EOF after the echo");
	pthread_join(t, NULL);
	close(e.fd);
	_exit(0);
}

static void *echo(void *arg)
{
	struct end *e = arg;
	static unsigned char buf[BIG];
	size_t tot = 0, paused = 0, want = e->round < 8 ? 65536 : BIG;
	ssize_t n;

	while ((n = recv(e->fd, buf, want, 0)) > 0) {
		ssize_t o = 0;

		tp_verify(90 + e->round, tot, buf, (size_t)n);
		tot += (size_t)n;
		atomic_store(&echo_started, 1);
		while (o < n) {
			ssize_t w = send(e->fd, buf + o, (size_t)(n - o),
					 MSG_NOSIGNAL);

			TP_CHECK(w > 0, "echo send at %zu", tot);
			o += w;
		}
		if (e->round >= 4 && e->round < 8 &&
		    tot - paused >= (256u << 10)) {
			paused = tot;
			usleep(2000);	/* the client's writes back up */
		}
	}
	TP_CHECK(n == 0 && tot == N, "echo: recv %zd after %zu of %u", n, tot,
		 N);
	TP_CHECK(!shutdown(e->fd, SHUT_WR), "echo shutdown");
	atomic_store(&echo_done, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	int family = argc > 1 ? AF_INET6 : AF_INET;
	struct sockaddr_storage ss;
	socklen_t len;
	int l, round;

	tp_start("fork_threads", 58);
	l = tp_listener(family, 16, &ss, &len);
	for (round = 0; round < 12; round++) {
		struct end e = { -1, round };
		int forks = 0;
		pthread_t t;
		pid_t cpid;

		cpid = fork();
		TP_CHECK(cpid >= 0, "fork the client");
		if (!cpid)
			client(&ss, len, round);
		e.fd = accept(l, NULL, NULL);
		TP_CHECK(e.fd >= 0, "accept");
		tp_wait_carried(e.fd);
		atomic_store(&echo_started, 0);
		atomic_store(&echo_done, 0);
		TP_CHECK(!pthread_create(&t, NULL, echo, &e), "thread");
		/* the client writes once its end is carried too: from
		 * its first bytes on, the forks meet a carried connection */
		while (!atomic_load(&echo_started) && !atomic_load(&echo_done))
			usleep(1000);
		while (!atomic_load(&echo_done)) {
			pid_t p;

			usleep(2000);
			p = fork();
			TP_CHECK(p >= 0, "fork");
			if (!p)
				_exit(0);
			tp_reap(p, "the server's child failed");
			forks++;
		}
		pthread_join(t, NULL);
		TP_CHECK(forks > 0, "round %d: no fork during the transfer",
			 round);
		close(e.fd);
		tp_reap(cpid, "the client (round %d) failed", round);
	}
	close(l);
	tp_pass();
}

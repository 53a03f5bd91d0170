/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_halfclosed.c - a server forks (a child that exits at once) while a
 * connection is half-closed by its client, which waits for the answer:
 * before the client's bytes are read, halfway through them, after its end
 * of stream, and halfway through the answer. The server reads every byte,
 * then EOF; the client, in another process, gets every byte of the answer,
 * then EOF. Rounds 0-3 with the connection carried first; rounds 4-7 with
 * the client sending at once, so that the fork meets the upgrade at any
 * step (a client whose end of stream went on the SAN before the fork's
 * downgrade must end its stream on TCP too, after its marker); rounds
 * 8-11 as 4-7 with the server's socket non-blocking (the client's bytes
 * before its switch point, more than TCP's window, are still coming at
 * the fork: the switch must wait for them, not take what is there).
 */
#include <poll.h>
#include <sys/wait.h>
#include "tp_stats.h"

#define N (4u << 20)

static void client(const struct sockaddr_storage *ss, socklen_t len,
		   int round)
{
	int c = tp_connect(ss, len);
	char b;

	static char name[64];

	snprintf(name, sizeof(name), "fork_halfclosed (client, round %d)",
		 round);
	tp_name = name;
	/* rounds 0-3: carried before it sends (a client done sending
	 * before its upgrade finished stays on TCP, cut) */
	if (round < 4)
		tp_wait_carried(c);
	tp_send(c, 60 + round, 0, N);
	TP_CHECK(!shutdown(c, SHUT_WR), "shutdown");
	tp_recv(c, 70 + round, 0, N);
	TP_CHECK(recv(c, &b, 1, 0) == 0, "no EOF after the answer (round %d)",
		 round);
	close(c);
	_exit(0);
}

static void pwait(void *ctx, int fd, bool out)
{
	struct pollfd p = { .fd = fd, .events = out ? POLLOUT : POLLIN };

	(void)ctx;
	TP_CHECK(poll(&p, 1, 10000) == 1, "nothing for 10 s on fd %d", fd);
}

static void get(int s, bool nb, unsigned int id, size_t off, size_t n)
{
	if (nb)
		tp_recv_nb(s, id, off, n, pwait, NULL);
	else
		tp_recv(s, id, off, n);
}

static void put(int s, bool nb, unsigned int id, size_t off, size_t n)
{
	if (nb)
		tp_send_nb(s, id, off, n, pwait, NULL);
	else
		tp_send(s, id, off, n);
}

static void fork_now(void)
{
	pid_t pid = fork();

	TP_CHECK(pid >= 0, "fork");
	if (!pid)
		_exit(0);
	tp_reap(pid, "the server's child failed");
}

int main(int argc, char **argv)
{
	int family = argc > 1 ? AF_INET6 : AF_INET;
	struct sockaddr_storage ss;
	socklen_t len;
	int l, s, round;
	char b;
	pid_t cpid;

	tp_start("fork_halfclosed", 58);
	l = tp_listener(family, 16, &ss, &len);
	for (round = 0; round < 12; round++) {
		bool nb = round >= 8;
		ssize_t r;

		cpid = fork();
		TP_CHECK(cpid >= 0, "fork the client");
		if (!cpid)
			client(&ss, len, round);
		s = accept(l, NULL, NULL);
		TP_CHECK(s >= 0, "accept");
		if (nb)
			tp_nonblock(s);
		if (round < 4)
			tp_wait_carried(s);
		else
			usleep(20000);	/* the upgrade under way, or done */
		if (round % 4 == 0)
			fork_now();
		get(s, nb, 60 + round, 0, N / 2);
		if (round % 4 == 1)
			fork_now();
		get(s, nb, 60 + round, N / 2, N / 2);
		do {
			if (nb)
				pwait(NULL, s, false);
			r = recv(s, &b, 1, 0);
		} while (nb && r < 0 && errno == EAGAIN);
		TP_CHECK(r == 0, "no EOF after the request (round %d)", round);
		if (round % 4 == 2)
			fork_now();
		put(s, nb, 70 + round, 0, N / 2);
		if (round % 4 == 3)
			fork_now();
		put(s, nb, 70 + round, N / 2, N / 2);
		close(s);
		tp_reap(cpid, "the client (round %d) failed", round);
	}
	close(l);
	tp_pass();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_silent_peer.c - a server forks while its client's program makes
 * no call at all (it sleeps): the client's switch cannot answer the
 * fork's DOWNGRADE, the fork gives up waiting after its bound, and the
 * connection stays on the SAN with the client's unread bytes set aside.
 * The server must read them at once, in order (TCP would deliver bytes
 * that have arrived without a call of the peer's), not only once the
 * client wakes; then, when the client wakes and sends again, the rest in
 * order, on TCP after its marker. A pipe tells the server when the client
 * woke.
 */
#include <poll.h>
#include <sys/wait.h>
#include "tp_stats.h"

#define FIRST (48u << 10)	/* sent before the client sleeps */
#define READ1 (16u << 10)	/* read by the server before its fork */
#define LATER (16u << 10)	/* sent after the client woke */

int main(int argc, char **argv)
{
	int family = argc > 1 ? AF_INET6 : AF_INET;
	struct sockaddr_storage ss;
	socklen_t len;
	int l, s, woke[2];
	size_t got;
	char b;
	pid_t cpid, p;

	tp_start("fork_silent_peer", 40);
	TP_CHECK(!pipe(woke), "pipe");
	l = tp_listener(family, 4, &ss, &len);
	cpid = fork();
	TP_CHECK(cpid >= 0, "fork the client");
	if (!cpid) {
		int c = tp_connect(&ss, len);

		tp_name = "fork_silent_peer (client)";
		tp_wait_carried(c);
		/* one send, which the credits let go at once: no byte is
		 * kept back for the switch's flusher thread to send (which
		 * would answer the server's DOWNGRADE meanwhile) */
		static unsigned char first[FIRST];

		tp_fill(40, 0, first, FIRST);
		TP_CHECK(send(c, first, FIRST, 0) == (ssize_t)FIRST, "send");
		/* no call on the socket while the server forks */
		sleep(5);
		TP_CHECK(write(woke[1], "w", 1) == 1, "pipe write");
		tp_send(c, 40, FIRST, LATER);
		TP_CHECK(!shutdown(c, SHUT_WR), "shutdown");
		TP_CHECK(recv(c, &b, 1, 0) == 0, "no EOF from the server");
		_exit(0);
	}
	s = accept(l, NULL, NULL);
	TP_CHECK(s >= 0, "accept");
	tp_wait_carried(s);
	tp_recv(s, 40, 0, READ1);
	p = fork();	/* waits for the client's answer, in vain */
	TP_CHECK(p >= 0, "fork");
	if (!p)
		_exit(0);
	tp_reap(p, "the server's child failed");
	tp_nonblock(woke[0]);
	/* FIONREAD counts them, as TCP's would (they have all arrived) */
	got = tp_take_inq(s, 40, READ1);
	TP_CHECK(got == FIRST - READ1,
		 "FIONREAD counted %zu of the %u bytes set aside", got,
		 FIRST - READ1);
	TP_CHECK(read(woke[0], &b, 1) < 0 && errno == EAGAIN,
		 "the bytes that had arrived were read only once the client woke");
	/* the rest, after the client's marker on TCP: FIONREAD never counts
	 * a byte of the switch's (the read that follows would wait) */
	for (got = 0; got < LATER;) {
		struct pollfd pf = { .fd = s, .events = POLLIN };

		TP_CHECK(poll(&pf, 1, 10000) == 1, "poll for the client's rest");
		got += tp_take_inq(s, 40, FIRST + got);
	}
	TP_CHECK(recv(s, &b, 1, 0) == 0, "no EOF after the client's bytes");
	close(s);
	tp_reap(cpid, "the client failed");
	close(l);
	tp_pass();
}

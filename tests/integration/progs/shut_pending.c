/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * shut_pending.c - bytes written while the upgrade is pending, then
 * shutdown(SHUT_WR) before the server has accepted: once the connection is
 * carried by the provider, every one of those bytes still goes, then EOF
 * (the pending FIN must not stop them). The server echoes; the client
 * checks every byte that comes back and the end of stream.
 */
#include <sys/wait.h>
#include "tprog.h"

#define TOTAL (1u << 20)	/* fits the pending buffer (4 MiB) */

static void serve(int s)
{
	static uint8_t buf[65536];
	size_t got = 0;
	ssize_t r, w, o;

	while ((r = recv(s, buf, sizeof(buf), 0)) > 0) {
		tp_verify(1, got, buf, (size_t)r);
		got += (size_t)r;
		for (o = 0; o < r; o += w) {
			w = send(s, buf + o, (size_t)(r - o), MSG_NOSIGNAL);
			TP_CHECK(w > 0, "echo send");
		}
	}
	TP_CHECK(r == 0, "echo recv after %zu bytes", got);
	TP_CHECK(got == TOTAL, "server got %zu of %u bytes before EOF", got,
		 TOTAL);
	close(s);
}

static void client(const struct sockaddr_storage *ss, socklen_t len,
		   int family)
{
	static uint8_t in[65536];
	size_t got = 0;
	int c = tp_connect(ss, len);

	tp_send(c, 1, 0, TOTAL);
	TP_CHECK(!shutdown(c, SHUT_WR), "shutdown");
	for (;;) {
		struct pollfd pf = { .fd = c, .events = POLLIN };
		ssize_t r;

		TP_CHECK(poll(&pf, 1, 10000) == 1,
			 "nothing for 10 s after %zu of %u bytes back", got,
			 TOTAL);
		r = recv(c, in, sizeof(in), MSG_DONTWAIT);
		if (r == 0)
			break;
		if (r < 0) {
			TP_CHECK(errno == EAGAIN, "recv at %zu", got);
			continue;
		}
		tp_verify(1, got, in, (size_t)r);
		got += (size_t)r;
	}
	TP_CHECK(got == TOTAL, "%zu of %u bytes came back", got, TOTAL);
	close(c);
}

int main(int argc, char **argv)
{
	int family = argc > 1 ? AF_INET6 : AF_INET, l, s;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	pid_t kid;

	tp_start("shut_pending", 40);
	l = tp_listener(family, 4, &ss, &len);
	kid = fork();
	TP_CHECK(kid >= 0, "fork");
	if (!kid) {
		close(l);
		tp_start("shut_pending (client)", 30);
		client(&ss, len, family);
		_exit(0);
	}
	/* the upgrade waits for this accept: the client's bytes and its
	 * shutdown happen meanwhile */
	usleep(300000);
	s = accept(l, NULL, NULL);
	TP_CHECK(s >= 0, "accept");
	serve(s);
	tp_reap(kid, "client failed");
	close(l);
	tp_pass();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * upgrade_flush.c - bytes a program writes while its connection is still
 * being upgraded are held by the switch and sent first once it is carried
 * by the provider; sending them must never stop the program from reading
 * the peer's answers (an echo server that blocks on its own sends would
 * otherwise never read again): a non-blocking client writes megabytes at
 * once, then reads the echo in one event loop, and checks every byte.
 * Nor may the server's send wait for a message of the client's while the
 * client's bytes, unread behind that send, hold every buffer the client
 * could send it in. It runs twice: as configured, and with the transfer
 * slots off (SDP_XSLOT=0), where the client's writes fill the server's
 * receive buffers and staging ring, and the server's echo goes by RDMA
 * read, whose end the client must announce (as on the verbs provider).
 */
#include <stdbool.h>
#include <sys/wait.h>
#include "tprog.h"

#define TOTAL (6u << 20)
#define PIECE (1u << 20)
#define CLIENTS 3

/* Blocking echo: every byte back before reading more, then close. */
static void serve(int s)
{
	static uint8_t buf[65536];
	ssize_t r, w, o;

	while ((r = recv(s, buf, sizeof(buf), 0)) > 0)
		for (o = 0; o < r; o += w) {
			w = send(s, buf + o, (size_t)(r - o), MSG_NOSIGNAL);
			TP_CHECK(w > 0, "echo send");
		}
	TP_CHECK(r == 0, "echo recv");
	close(s);
}

static void client(const struct sockaddr_storage *ss, socklen_t len,
		   int family, unsigned int id)
{
	static uint8_t out[PIECE], in[PIECE];
	size_t sent = 0, got = 0, pos = PIECE;
	bool shut = false;
	int c = tp_connect(ss, len);

	tp_nonblock(c);
	for (;;) {
		struct pollfd pf = { .fd = c, .events = POLLIN };
		ssize_t r;

		/* write as much as is taken: the first megabytes while the
		 * upgrade is still pending */
		while (sent < TOTAL) {
			if (pos == PIECE) {
				tp_fill(id, sent, out, PIECE);
				pos = 0;
			}
			r = send(c, out + pos, PIECE - pos, MSG_NOSIGNAL);
			if (r < 0) {
				TP_CHECK(errno == EAGAIN, "send at %zu", sent);
				pf.events |= POLLOUT;
				break;
			}
			pos += (size_t)r;
			sent += (size_t)r;
		}
		if (sent == TOTAL && !shut) {
			TP_CHECK(!shutdown(c, SHUT_WR), "shutdown");
			shut = true;
		}
		r = recv(c, in, sizeof(in), 0);
		if (r > 0) {
			tp_verify(id, got, in, (size_t)r);
			got += (size_t)r;
			continue;
		}
		if (r == 0)
			break;
		TP_CHECK(errno == EAGAIN, "recv at %zu", got);
		TP_CHECK(poll(&pf, 1, 10000) == 1,
			 "nothing for 10 s: %zu bytes sent, %zu back", sent,
			 got);
	}
	TP_CHECK(got == TOTAL, "%zu of %u bytes came back", got, TOTAL);
	close(c);
}

int main(int argc, char **argv)
{
	static const struct tp_step steps[] = {
		{ "slots", NULL }, { "copy", "SDP_XSLOT=0" },
	};
	int family = argc > 1 ? AF_INET6 : AF_INET, l, s;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const char *step = tp_steps(argv, steps, 2);
	unsigned int i;
	pid_t kid;

	if (!step)
		return 0;
	tp_start(strcmp(step, "copy") ? "upgrade_flush" :
		 "upgrade_flush (copy path)", 28);
	l = tp_listener(family, 4, &ss, &len);
	for (i = 0; i < CLIENTS; i++) {
		kid = fork();
		TP_CHECK(kid >= 0, "fork");
		if (!kid) {
			close(l);
			tp_start("upgrade_flush (client)", 26);
			client(&ss, len, family, i + 1);
			_exit(0);
		}
		/* the upgrade waits for this accept: meanwhile the client
		 * fills the switch's pending buffer (4 MiB) */
		usleep(300000);
		s = accept(l, NULL, NULL);
		TP_CHECK(s >= 0, "accept");
		serve(s);
		tp_reap(kid, "client %u failed", i);
	}
	close(l);
	tp_pass();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * prefork.c - a pre-fork server: one listener inherited by several
 * children, each accepting and echoing; the parent's clients check every
 * echoed byte.
 */
#include <signal.h>
#include <sys/wait.h>
#include "tprog.h"

#define CHILDREN 3
#define CLIENTS 8
#define BYTES 30000

static void serve(int l)
{
	char buf[4096];
	ssize_t r;
	int c;

	for (;;) {
		c = accept(l, NULL, NULL);
		if (c < 0)
			_exit(errno == EINTR ? 0 : 3);
		while ((r = recv(c, buf, sizeof(buf), 0)) > 0)
			TP_CHECK(send(c, buf, (size_t)r, MSG_NOSIGNAL) == r,
				 "echo send");
		close(c);
	}
}

int main(int argc, char **argv)
{
	int family = argc > 1 ? AF_INET6 : AF_INET, l, c, i, st;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	pid_t kids[CHILDREN];

	tp_start("prefork", 60);
	l = tp_listener(family, 16, &ss, &len);
	for (i = 0; i < CHILDREN; i++) {
		kids[i] = fork();
		TP_CHECK(kids[i] >= 0, "fork");
		if (!kids[i]) {
			tp_name = "prefork (child)";
			signal(SIGTERM, SIG_DFL);
			serve(l);
		}
	}
	close(l);
	for (i = 0; i < CLIENTS; i++) {
		c = tp_connect(&ss, len);
		tp_send(c, 20 + i, 0, BYTES / 2);
		tp_recv(c, 20 + i, 0, BYTES / 2);
		tp_send(c, 20 + i, BYTES / 2, BYTES / 2);
		TP_CHECK(!shutdown(c, SHUT_WR), "shutdown");
		tp_recv(c, 20 + i, BYTES / 2, BYTES / 2);
		TP_CHECK(recv(c, &st, 1, 0) == 0, "no EOF after the echo");
		close(c);
	}
	for (i = 0; i < CHILDREN; i++) {
		kill(kids[i], SIGTERM);
		TP_CHECK(waitpid(kids[i], &st, 0) == kids[i], "waitpid");
		TP_CHECK(WIFSIGNALED(st) || WEXITSTATUS(st) == 0,
			 "child %d failed with %d", i, WEXITSTATUS(st));
	}
	tp_pass();
}

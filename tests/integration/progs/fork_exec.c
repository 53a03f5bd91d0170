/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_exec.c - sshd's pattern: the server forks a child as soon as it has
 * accepted a connection, and the child execs a new program that inherits
 * the socket as a plain fd (sshd re-execs itself with -R). The client, in
 * another process, runs the switch too and writes its first bytes a little
 * later (ssh loads its keys between connect and its banner), so its hello
 * may come after the fork. The exec'd program must read exactly the
 * client's bytes: nothing of the switch's in front of them.
 */
#include <sys/wait.h>
#include "tprog.h"

#define FE_ROUNDS 6
#define FE_REQ 3000
#define FE_ANSWER 50000

static void fe_client(const struct sockaddr_storage *ss, socklen_t len,
		      int family, int round)
{
	int c = tp_connect(ss, len);
	char b;

	/* no delay, then longer ones: the hello before or after the fork */
	usleep(round * 10000);
	tp_send(c, 1 + 2 * round, 0, FE_REQ);
	tp_recv(c, 2 + 2 * round, 0, FE_ANSWER);
	TP_CHECK(recv(c, &b, 1, 0) == 0, "round %d: no EOF after the answer",
		 round);
	close(c);
}

/* The exec'd program: fd is the connection, a plain fd to it. */
static int fe_exec_child(int fd, int round)
{
	tp_name = "fork_exec (exec'd child)";
	tp_recv(fd, 1 + 2 * round, 0, FE_REQ);
	tp_send(fd, 2 + 2 * round, 0, FE_ANSWER);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	int family = AF_INET;
	int l, s, i;
	socklen_t len = sizeof(ss);
	pid_t cli, ch;

	if (argc == 4 && !strcmp(argv[1], "child"))
		return fe_exec_child(atoi(argv[2]), atoi(argv[3]));
	if (argc > 1)
		family = AF_INET6;
	tp_start("fork_exec", 50);
	l = tp_listener(family, 4, &ss, &len);
	cli = tp_fork_client(l, "fork_exec (client)", FE_ROUNDS, fe_client, &ss, len,
			     family);
	for (i = 0; i < FE_ROUNDS; i++) {
		char fds[16], rounds[16];

		s = accept(l, NULL, NULL);
		TP_CHECK(s >= 0, "accept");
		ch = fork();
		TP_CHECK(ch >= 0, "fork");
		if (ch == 0) {
			close(l);
			snprintf(fds, sizeof(fds), "%d", s);
			snprintf(rounds, sizeof(rounds), "%d", i);
			execl("/proc/self/exe", argv[0], "child", fds, rounds,
			      (char *)NULL);
			tp_fail("exec");
		}
		close(s);
		tp_reap(ch, "round %d: the exec'd child failed", i);
	}
	tp_reap(cli, "the client failed");
	close(l);
	tp_pass();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_exec.c - sshd's pattern: the server forks a child as soon as it has
 * accepted a connection, and the child execs a new program that inherits
 * the socket as a plain fd (sshd re-execs itself with -R). The client, in
 * another process, runs the switch too and writes its first bytes a little
 * later (ssh loads its keys between connect and its banner), so its hello
 * may come after the fork. The exec'd program must read exactly the
 * client's bytes: nothing of the switch's in front of them. The last
 * rounds move the socket as sshd does: dup2 onto 0 and 1 before the exec;
 * the new program closes the old number, reads a dup of 0 and puts
 * /dev/null on 0 and 1, and the hello comes well after all that.
 */
#include <sys/wait.h>
#include "tprog.h"

#define FE_ROUNDS 8
#define FE_SSHD_FROM 6	/* rounds from here on: sshd's fd moves */
#define FE_REQ 3000
#define FE_ANSWER 50000

static void fe_client(const struct sockaddr_storage *ss, socklen_t len,
		      int family, int round)
{
	int c = tp_connect(ss, len);
	char b;

	/* no delay, then longer ones: the hello before or after the fork;
	 * sshd's rounds: after the exec'd program is done moving fds (and
	 * after a close's wait for a hello, 200 ms) */
	usleep(round < FE_SSHD_FROM ? round * 10000 : 400000);
	tp_send(c, 1 + 2 * round, 0, FE_REQ);
	tp_recv(c, 2 + 2 * round, 0, FE_ANSWER);
	TP_CHECK(recv(c, &b, 1, 0) == 0, "round %d: no EOF after the answer",
		 round);
	close(c);
}

/* The exec'd program: fd is the connection, a plain fd to it (sshd's
 * rounds: also on 0 and 1, and it reads a dup of 0 instead). */
static int fe_exec_child(int fd, int round)
{
	tp_name = "fork_exec (exec'd child)";
	if (round >= FE_SSHD_FROM) {
		int null = open("/dev/null", O_RDWR);

		TP_CHECK(null > 2, "open /dev/null");
		close(fd);
		fd = dup(0);
		TP_CHECK(fd >= 0, "dup");
		TP_CHECK(dup2(null, 0) == 0 && dup2(null, 1) == 1, "dup2");
		close(null);
	}
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
			if (i >= FE_SSHD_FROM)
				TP_CHECK(dup2(s, 0) == 0 && dup2(0, 1) == 1,
					 "dup2");
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

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_conn.c - a connection made before fork, used by the child in both
 * directions while the parent uses the other end, then by the parent again
 * after the child exits; every byte checked.
 */
#include <sys/wait.h>
#include "tprog.h"

int main(int argc, char **argv)
{
	int c, s, family = argc > 1 ? AF_INET6 : AF_INET;
	pid_t pid;

	tp_start("fork_conn", 30);
	tp_pair(family, &c, &s);
	tp_send(c, 9, 0, 5000);		/* before the fork */
	pid = fork();
	TP_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		tp_name = "fork_conn (child)";
		tp_recv(s, 9, 0, 5000);
		tp_send(s, 10, 0, 300000);
		tp_recv(s, 9, 5000, 200000);
		_exit(0);
	}
	tp_recv(c, 10, 0, 300000);
	tp_send(c, 9, 5000, 200000);
	tp_reap(pid, "child failed");
	/* The parent's copy of the connection still works. */
	tp_send(c, 9, 205000, 1000);
	tp_recv(s, 9, 205000, 1000);
	tp_send(s, 10, 300000, 1000);
	tp_recv(c, 10, 300000, 1000);
	close(s);
	close(c);
	tp_pass();
}

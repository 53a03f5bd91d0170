/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vfork_close.c - a server that starts a program with vfork, whose child
 * closes every descriptor it inherited before its exec (Python's
 * subprocess does so), goes on serving: the next connection it accepts is
 * carried, and its bytes arrive exact, with nothing of the switch's among
 * them. Also with the child closing one by one, and with a child that
 * exits without an exec.
 */
#include <sys/wait.h>
#include "tp_stats.h"

/* The child's ways out: close_range and exec; close one by one and exec;
 * close one by one and _exit. */
static pid_t spawn(int how)
{
	pid_t pid = vfork();
	int fd;

	if (pid)
		return pid;
	if (how == 0) {
		close_range(3, ~0u, 0);
	} else {
		for (fd = 3; fd < 64; fd++)
			close(fd);
	}
	if (how < 2)
		execl("/bin/true", "true", (char *)NULL);
	_exit(how < 2 ? 127 : 0);
}

int main(int argc, char **argv)
{
	int family = argc > 1 ? AF_INET6 : AF_INET;
	struct sockaddr_storage ss;
	socklen_t len;
	int l, c, s, how;
	pid_t pid;

	tp_start("vfork_close", 40);
	l = tp_listener(family, 16, &ss, &len);
	for (how = 0; how < 3; how++) {
		c = tp_connect(&ss, len);
		s = accept(l, NULL, NULL);
		TP_CHECK(s >= 0, "accept (round %d)", how);
		tp_carry_both(c, s);
		/* the child inherits the listener and the connection */
		pid = spawn(how);
		TP_CHECK(pid > 0, "vfork");
		tp_reap(pid, "the child (round %d) failed", how);
		/* the connection made before the child still works */
		tp_send(c, 20 + how, 0, 200000);
		tp_recv(s, 20 + how, 0, 200000);
		tp_send(s, 30 + how, 0, 1000);
		tp_recv(c, 30 + how, 0, 1000);
		close(s);
		close(c);
		/* a connection accepted after it: carried, its bytes exact
		 * (the first ones would be the client's hello if the
		 * listener had gone from the switch's table) */
		c = tp_connect(&ss, len);
		s = accept(l, NULL, NULL);
		TP_CHECK(s >= 0, "accept after the child (round %d)", how);
		tp_send(c, 40 + how, 0, 5000);
		tp_recv(s, 40 + how, 0, 5000);
		tp_carry_both(c, s);
		tp_send(s, 50 + how, 0, 5000);
		tp_recv(c, 50 + how, 0, 5000);
		close(s);
		close(c);
	}
	close(l);
	tp_pass();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fd_closer.c - a program that closes what it does not know, as daemons
 * and ssh do, and then uses sockets: every descriptor from 3 up by close()
 * in a loop, by close_range, by closefrom, by dup2 onto every number the
 * switch holds; then a connection to itself (forked server), its bytes
 * checked, and the switch's log never in it.
 *   fd_closer loop|range|from|dup2|dup2all BYTES
 */
#include <sys/resource.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dirent.h>
#include "tp_stats.h"

/* Every number from 3 up that is open now (the switch's among them: the
 * program cannot tell them apart, as a daemon cannot). */
static int open_fds(int *v, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0, fd;

	TP_CHECK(d, "opendir /proc/self/fd");
	while ((e = readdir(d)) && n < max) {
		fd = atoi(e->d_name);
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd > 2 &&
		    fd != dirfd(d))
			v[n++] = fd;
	}
	closedir(d);
	return n;
}

/* Closes every number from 3 up but keep (-1: none). */
static void close_all(const char *how, int keep)
{
	struct rlimit rl;
	int v[4096], n, i, fd, null;

	if (!strcmp(how, "loop")) {
		TP_CHECK(!getrlimit(RLIMIT_NOFILE, &rl), "getrlimit");
		for (fd = 3; fd < (int)rl.rlim_cur; fd++)
			if (fd != keep)
				close(fd);
		/* and nothing is left that the program could use: the
		 * switch's descriptors are not open, as far as it sees */
		for (fd = 3; fd < (int)rl.rlim_cur; fd++)
			TP_CHECK(fd == keep || (fcntl(fd, F_GETFD) < 0 &&
						errno == EBADF && dup(fd) < 0),
				 "fd %d still open after close()", fd);
	} else if (!strcmp(how, "range")) {
		if (keep > 3)
			TP_CHECK(!close_range(3, keep - 1, 0), "close_range");
		TP_CHECK(!close_range(keep + 1 > 3 ? keep + 1 : 3, ~0u, 0),
			 "close_range");
	} else if (!strcmp(how, "rawrange")) {
		if (keep > 3)
			TP_CHECK(!syscall(SYS_close_range, 3, keep - 1, 0),
				 "syscall(close_range)");
		TP_CHECK(!syscall(SYS_close_range, keep + 1 > 3 ? keep + 1 : 3,
				  ~0u, 0), "syscall(close_range)");
	} else if (!strcmp(how, "from")) {
		for (fd = 3; fd < keep; fd++)
			close(fd);
		closefrom(keep + 1 > 3 ? keep + 1 : 3);
	} else {
		/* dup2 of /dev/null onto every open number, then close it:
		 * what the switch held must move out of the way first */
		null = open("/dev/null", O_RDWR);
		TP_CHECK(null >= 0, "open /dev/null");
		n = open_fds(v, 4096);
		for (i = 0; i < n; i++) {
			if (v[i] == null || v[i] == keep)
				continue;
			if (dup2(null, v[i]) < 0) {
				/* a provider's descriptor: refused, and
				 * the switch says so in its log */
				TP_CHECK(errno == EBUSY, "dup2 onto %d", v[i]);
				printf("busy %d\n", v[i]);
				continue;
			}
			if (!strcmp(how, "dup2all"))
				close(v[i]);
		}
		close(null);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	size_t n;
	pid_t pid;
	int l, c, s, st;

	TP_CHECK(argc == 3, "usage: fd_closer loop|range|rawrange|from|"
		 "dup2|dup2all BYTES");
	tp_start("fd_closer", 60);
	n = strtoull(argv[2], NULL, 0);
	/* the switch is up (its log open, its providers loaded) before the
	 * program closes everything */
	l = socket(AF_INET, SOCK_STREAM, 0);
	TP_CHECK(l >= 0, "socket");
	close(l);
	close_all(argv[1], -1);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	TP_CHECK(l >= 0, "socket");
	TP_CHECK(!bind(l, (void *)&a, sizeof(a)) && !listen(l, 4) &&
		 !getsockname(l, (void *)&a, &alen), "listen");
	pid = fork();
	TP_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		close_all(argv[1], l);	/* the child closes again: ssh does */
		s = accept(l, NULL, NULL);
		TP_CHECK(s >= 0, "accept");
		tp_recv(s, 1, 0, n);
		tp_send(s, 2, 0, n);
		TP_CHECK(recv(s, &st, 1, 0) == 0, "the client's end");
		close(s);
		_exit(0);
	}
	close(l);
	c = socket(AF_INET, SOCK_STREAM, 0);
	TP_CHECK(c >= 0, "socket");
	TP_CHECK(!connect(c, (void *)&a, sizeof(a)), "connect");
	tp_send(c, 1, 0, n);
	tp_recv(c, 2, 0, n);
	{
		const struct sw_conn_stats *cs = tp_conn_stats(c);

		printf("state %d fb %d\n", cs ? (int)cs->state : -1,
		       cs ? (int)cs->fb_reason : -1);
	}
	shutdown(c, SHUT_WR);
	TP_CHECK(recv(c, &st, 1, 0) == 0, "the server's end");
	close(c);
	tp_reap(pid, "server");
	tp_pass();
}

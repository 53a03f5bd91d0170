/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fd_limit.c - with RLIMIT_NOFILE at 64, a server under the switch accepts
 * as many connections as plain TCP lets it: when accept() fails with
 * EMFILE, every descriptor below the limit is the program's own, none the
 * switch's (it keeps a reserve below the limit and leaves such connections
 * on TCP). Every accepted connection echoes its bytes exactly.
 */
#include <limits.h>
#include <sys/resource.h>
#include "tprog.h"

#define FL_LIMIT 64
#define FL_CONNS 80	/* more than the limit lets the server accept */
#define FL_MSG 8

static bool mine[FL_LIMIT];

static void client(const struct sockaddr_storage *ss, socklen_t len,
		   int done_rd)
{
	int c[FL_CONNS], i, n;
	unsigned char b[FL_MSG];

	for (i = 0; i < FL_CONNS; i++) {
		c[i] = tp_connect(ss, len);
		tp_send(c[i], i, 0, FL_MSG);
	}
	/* how many the server accepted */
	TP_CHECK(read(done_rd, &n, sizeof(n)) == sizeof(n), "read count");
	/* the server accepts in the order of the connects */
	for (i = 0; i < n; i++) {
		size_t got = 0;

		while (got < FL_MSG) {
			ssize_t r = recv(c[i], b + got, FL_MSG - got, 0);

			TP_CHECK(r > 0, "echo of connection %d", i);
			got += r;
		}
		tp_verify(i, 0, b, FL_MSG);
	}
	exit(0);
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	struct sockaddr_storage ss;
	struct rlimit rl = { .rlim_cur = FL_LIMIT };
	unsigned char b[FL_MSG];
	int l, p[2], fd, n = 0, theirs = 0;
	socklen_t len;
	pid_t pid;

	tp_start("fd_limit", 40);
	/* the program's own: what it had before any socket call (the
	 * switch starts at the first), and what it makes below */
	for (fd = 0; fd < FL_LIMIT; fd++)
		mine[fd] = fcntl(fd, F_GETFD) >= 0;
	l = tp_listener(family, 128, &ss, &len);
	mine[l] = true;
	TP_CHECK(!pipe(p), "pipe");
	pid = fork();
	TP_CHECK(pid >= 0, "fork");
	if (!pid) {
		close(p[1]);
		client(&ss, len, p[0]);
	}
	close(p[0]);
	mine[p[1]] = true;
	TP_CHECK(!getrlimit(RLIMIT_NOFILE, &rl), "getrlimit");
	rl.rlim_cur = FL_LIMIT;
	TP_CHECK(!setrlimit(RLIMIT_NOFILE, &rl), "setrlimit");
	for (;;) {
		size_t got = 0;

		fd = accept(l, NULL, NULL);
		if (fd < 0) {
			TP_CHECK(errno == EMFILE, "accept");
			break;
		}
		TP_CHECK(fd < FL_LIMIT, "fd %d past the limit", fd);
		mine[fd] = true;
		n++;
		while (got < FL_MSG) {
			ssize_t r = recv(fd, b + got, FL_MSG - got, 0);

			TP_CHECK(r > 0, "recv on accepted connection %d", n);
			got += r;
		}
		/* back as it came: the client checks its pattern */
		TP_CHECK(send(fd, b, FL_MSG, 0) == FL_MSG, "echo");
		/* time for the switch to try an upgrade, as a server does
		 * when it waits for the next request */
		poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 3);
	}
	for (fd = 0; fd < FL_LIMIT; fd++) {
		char path[64], what[PATH_MAX] = "?";
		ssize_t k;

		if (mine[fd] || fcntl(fd, F_GETFD) < 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		k = readlink(path, what, sizeof(what) - 1);
		what[k > 0 ? k : 1] = 0;
		fprintf(stderr, "fd %d is the switch's: %s\n", fd, what);
		theirs++;
	}
	TP_CHECK(!theirs, "accept failed after %d connections while the switch held %d descriptors",
		 n, theirs);
	TP_CHECK(n < FL_CONNS, "all %d accepted under a limit of %d", n,
		 FL_LIMIT);
	TP_CHECK(write(p[1], &n, sizeof(n)) == sizeof(n), "write count");
	tp_reap(pid, "the client");
	/* descriptors again for what runs at exit (a leak checker reads
	 * /proc) */
	for (fd = 0; fd < FL_LIMIT; fd++)
		if (mine[fd] && fd > 2)
			close(fd);
	printf("accepted %d connections under RLIMIT_NOFILE %d\n", n,
	       FL_LIMIT);
	tp_pass();
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * connrate.c - connection set-up rate for the benchmark suite: a server that
 * accepts, answers ROUNDS messages of SIZE bytes (default one of 1) and
 * closes, and a client that counts how many connect + ROUNDS round trips +
 * close cycles it completes per second. One byte measures connections that
 * end before the switch upgrades them; a hundred round trips outlive the
 * upgrade's start (1 ms) and so measure what an upgrade costs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE 65536

static int rounds = 1, size = 1;

static void usage(void)
{
	fprintf(stderr,
		"usage: sdp-bench-connrate server PORT [ROUNDS [SIZE]]\n"
		"       sdp-bench-connrate client PORT SECONDS [ROUNDS [SIZE]]\n"
		"Each connection makes ROUNDS round trips of SIZE bytes\n"
		"(default 1 and 1; SIZE at most %d); give both ends the\n"
		"same. The client prints one JSON line: connections, errors,\n"
		"seconds, rate.\n", MAX_SIZE);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int parse_port(const char *s, struct sockaddr_in *sa)
{
	char *end;
	long p = strtol(s, &end, 10);

	if (*end || p <= 0 || p > 65535) {
		fprintf(stderr, "connrate: bad port '%s': give 1..65535\n", s);
		return -EINVAL;
	}
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short)p);
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return 0;
}

/* The optional ROUNDS and SIZE arguments. */
static int parse_shape(int argc, char **argv)
{
	char *end;
	long v;

	if (argc >= 1) {
		v = strtol(argv[0], &end, 10);
		if (*end || v < 1 || v > 1000000) {
			fprintf(stderr,
				"connrate: bad ROUNDS '%s': give 1..1000000\n",
				argv[0]);
			return -EINVAL;
		}
		rounds = (int)v;
	}
	if (argc >= 2) {
		v = strtol(argv[1], &end, 10);
		if (*end || v < 1 || v > MAX_SIZE) {
			fprintf(stderr,
				"connrate: bad SIZE '%s': give 1..%d\n",
				argv[1], MAX_SIZE);
			return -EINVAL;
		}
		size = (int)v;
	}
	return 0;
}

/* Reads (dir 0) or writes (dir 1) exactly N bytes; -1 on error or EOF. */
static int xfer(int fd, char *p, int n, int dir)
{
	while (n > 0) {
		ssize_t k = dir ? write(fd, p, n) : read(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (int)k;
	}
	return 0;
}

/* Accepts forever: echoes ROUNDS messages of the client's, closes. */
static int run_server(const struct sockaddr_in *sa)
{
	int one = 1;
	int ls;

	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0)
		goto err;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (const struct sockaddr *)sa, sizeof(*sa)) ||
	    listen(ls, 1024))
		goto err_close;
	printf("listening\n");
	fflush(stdout);
	for (;;) {
		static char b[MAX_SIZE];
		int c = accept(ls, NULL, NULL);
		int i;

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			goto err_close;
		}
		for (i = 0; i < rounds; i++) {
			if (xfer(c, b, size, 0))
				break;
			if (xfer(c, b, size, 1)) {
				fprintf(stderr, "connrate: server write: %s\n",
					strerror(errno));
				break;
			}
		}
		close(c);
	}
err_close:
	close(ls);
err:
	fprintf(stderr, "connrate: server: %s\n", strerror(errno));
	return 1;
}

/* One cycle: connect, ROUNDS times send a message and read it back, see
 * EOF, close. Every byte that comes back is checked. */
static int one_conn(const struct sockaddr_in *sa, char tag)
{
	static char b[MAX_SIZE], r[MAX_SIZE];
	int ret = -1;
	int i, s;

	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		return -1;
	if (connect(s, (const struct sockaddr *)sa, sizeof(*sa)))
		goto out_close;
	for (i = 0; i < rounds; i++) {
		memset(b, tag + i, size);
		if (xfer(s, b, size, 1) || xfer(s, r, size, 0))
			goto out_close;
		if (memcmp(b, r, size)) {
			fprintf(stderr,
				"connrate: round %d: the echo differs from "
				"what was sent\n", i);
			errno = EPROTO;
			goto out_close;
		}
	}
	if (read(s, r, 1) != 0)
		goto out_close;
	ret = 0;
out_close:
	close(s);
	return ret;
}

static int run_client(const struct sockaddr_in *sa, double secs)
{
	unsigned long n = 0, errs = 0;
	double t0 = now_s(), t;

	do {
		if (one_conn(sa, (char)('a' + n % 26))) {
			/* counted, reported, and fatal only when persistent */
			if (errs++ < 5)
				fprintf(stderr,
					"connrate: connection %lu failed: %s\n",
					n + errs, strerror(errno));
			if (errs > 100 && errs > n / 10) {
				fprintf(stderr,
					"connrate: %lu of %lu connections "
					"failed; is the server running on "
					"this port?\n", errs, n + errs);
				return 1;
			}
		} else {
			n++;
		}
		t = now_s() - t0;
	} while (t < secs);
	printf("{\"connections\": %lu, \"errors\": %lu, \"rounds\": %d, "
	       "\"size\": %d, \"seconds\": %.6f, \"rate\": %.1f}\n", n,
	       errs, rounds, size, t, n / t);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;

	signal(SIGPIPE, SIG_IGN);
	if (argc >= 3 && argc <= 5 && !strcmp(argv[1], "server")) {
		if (parse_port(argv[2], &sa) ||
		    parse_shape(argc - 3, argv + 3))
			return 2;
		return run_server(&sa);
	}
	if (argc >= 4 && argc <= 6 && !strcmp(argv[1], "client")) {
		double secs = atof(argv[3]);

		if (parse_port(argv[2], &sa) ||
		    parse_shape(argc - 4, argv + 4))
			return 2;
		if (secs <= 0) {
			fprintf(stderr, "connrate: SECONDS must be > 0\n");
			return 2;
		}
		return run_client(&sa, secs);
	}
	usage();
	return 2;
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * connrate.c - connection set-up rate for the benchmark suite: a server that
 * accepts, answers one byte and closes, and a client that counts how many
 * connect + one-byte round trip + close cycles it completes per second.
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

static void usage(void)
{
	fprintf(stderr,
		"usage: sdp-bench-connrate server PORT\n"
		"       sdp-bench-connrate client PORT SECONDS\n"
		"The client prints one JSON line: connections, errors,\n"
		"seconds, rate.\n");
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

/* Accepts forever: reads the client's byte, echoes it, closes. */
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
		char b;
		int c = accept(ls, NULL, NULL);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			goto err_close;
		}
		if (read(c, &b, 1) == 1 && write(c, &b, 1) != 1)
			fprintf(stderr, "connrate: server write: %s\n",
				strerror(errno));
		close(c);
	}
err_close:
	close(ls);
err:
	fprintf(stderr, "connrate: server: %s\n", strerror(errno));
	return 1;
}

/* One cycle: connect, send a byte, read it back, see EOF, close. */
static int one_conn(const struct sockaddr_in *sa, char tag)
{
	char b = tag, r = 0;
	int ret = -1;
	int s;

	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		return -1;
	if (connect(s, (const struct sockaddr *)sa, sizeof(*sa)))
		goto out_close;
	if (write(s, &b, 1) != 1 || read(s, &r, 1) != 1)
		goto out_close;
	if (r != tag) {
		fprintf(stderr, "connrate: sent 0x%02x, got 0x%02x back\n",
			(unsigned char)tag, (unsigned char)r);
		errno = EPROTO;
		goto out_close;
	}
	if (read(s, &r, 1) != 0)
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
	printf("{\"connections\": %lu, \"errors\": %lu, "
	       "\"seconds\": %.6f, \"rate\": %.1f}\n", n, errs, t, n / t);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;

	signal(SIGPIPE, SIG_IGN);
	if (argc == 3 && !strcmp(argv[1], "server")) {
		if (parse_port(argv[2], &sa))
			return 2;
		return run_server(&sa);
	}
	if (argc == 4 && !strcmp(argv[1], "client")) {
		double secs = atof(argv[3]);

		if (parse_port(argv[2], &sa))
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

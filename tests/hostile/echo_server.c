// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * echo_server.c - the server the hostile-peer tests attack, run under
 * LD_PRELOAD=libsdp_switch.so: a thread per connection echoes every byte.
 * A stream must start with HOSTILE_ECHO_MAGIC; any other start (a stray
 * byte from a switch) is reported on stderr and the connection closed.
 *   echo_server PORT [ACCEPT_DELAY_MS]
 * Prints "ready" once listening; runs until killed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hostile.h"

struct conn {
	int fd;
	unsigned int id;
};

static int send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0)
			return -2;	/* a send that took nothing */
		if (k < 0)
			return -1;
		p += k;
		n -= k;
	}
	return 0;
}

static void *serve(void *arg)
{
	struct conn *c = arg;
	uint8_t *buf = malloc(1 << 18);
	unsigned long long total = 0;
	const char *end = "EOF";
	char why[96];
	int sr;

	if (!buf)
		goto out;
	/* HOSTILE_BANNER: a server that speaks first (SMTP, FTP): its
	 * banner must be the first byte any client reads */
	if (getenv("HOSTILE_BANNER") &&
	    send_all(c->fd, (const uint8_t *)HOSTILE_BANNER,
		     HOSTILE_BANNER_LEN))
		goto out;
	for (;;) {
		ssize_t n = recv(c->fd, buf, 1 << 18, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			end = strerror(errno);
			break;
		}
		if (n == 0)
			break;
		/* the stream's first bytes must be the client's magic */
		if (total < HOSTILE_ECHO_MAGIC_LEN) {
			size_t k = HOSTILE_ECHO_MAGIC_LEN - total;

			if (k > (size_t)n)
				k = n;
			if (memcmp(buf, HOSTILE_ECHO_MAGIC + total, k)) {
				fprintf(stderr,
					"echo_server: conn %u: STRAY BYTES: the stream starts with 0x%02x, not the client's magic\n",
					c->id, buf[0]);
				end = "stray bytes";
				break;
			}
		}
		total += n;
		sr = send_all(c->fd, buf, n);
		if (sr) {
			snprintf(why, sizeof(why), "send failed: %s",
				 sr == -2 ? "it returned 0" : strerror(errno));
			end = why;
			break;
		}
	}
	fprintf(stderr, "echo_server: conn %u: closed after %llu bytes (%s)\n",
		c->id, total, end);
	if (!strcmp(end, "EOF"))
		shutdown(c->fd, SHUT_WR);
out:
	close(c->fd);
	free(buf);
	free(c);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	unsigned int ids = 0;
	int ls, one = 1, delay_ms;

	if (argc < 2) {
		fprintf(stderr, "usage: echo_server PORT [ACCEPT_DELAY_MS]\n");
		return 2;
	}
	delay_ms = argc > 2 ? atoi(argv[2]) : 0;
	signal(SIGPIPE, SIG_IGN);
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one,
				 sizeof(one)) ||
	    bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 64)) {
		fprintf(stderr, "echo_server: cannot listen on port %s: %s\n",
			argv[1], strerror(errno));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		struct conn *c;
		pthread_t t;
		int fd;

		if (delay_ms) {
			/* let the client's switch wait for our hello */
			struct timespec ts = { delay_ms / 1000,
					       (delay_ms % 1000) * 1000000L };

			nanosleep(&ts, NULL);
		}
		fd = accept(ls, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fprintf(stderr, "echo_server: accept: %s\n",
				strerror(errno));
			return 1;
		}
		c = malloc(sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->id = ++ids;
		if (pthread_create(&t, NULL, serve, c)) {
			close(fd);
			free(c);
			continue;
		}
		pthread_detach(t);
	}
}

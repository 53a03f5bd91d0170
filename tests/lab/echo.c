// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * echo.c - sdp-echo, an epoll echo server and its checking client for the
 * lab: the server echoes every connection with non-blocking sockets and
 * edge-free epoll (EPOLLIN, EPOLLOUT while a reply is held back); the client
 * drives several connections in turn with chunks of varying size and checks
 * every echoed byte. Both report the path the switch chose per connection.
 *   sdp-echo server PORT NCLIENTS [EXPECT]
 *   sdp-echo client HOST PORT NCONN BYTES [EXPECT]
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rxe_stat.h"

#define BUF (256 * 1024)
#define MAXC 64

struct conn {
	int fd;
	uint8_t *buf;
	size_t have, off;	/* bytes held back, and how many sent */
};

static uint8_t pat(int conn, uint64_t pos)
{
	return (uint8_t)(pos * 131 + (uint64_t)conn * 7 + (pos >> 9));
}

static int serve(int port, int nclients, const char *expect)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	struct epoll_event ev, evs[16];
	struct conn *c[MAXC] = { 0 };
	int lfd, ep, one = 1, done = 0, fails = 0, i, n, k, idle = 0;
	const char *w = getenv("SDP_ECHO_WAIT_MS");
	int wait_ms = w ? atoi(w) : 60000;
	ssize_t r;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(lfd, 16)) {
		perror("sdp-echo: listen");
		return 1;
	}
	ep = epoll_create1(0);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = lfd };
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	while (done < nclients) {
		/* Short waits: see SDP_ECHO_WAIT_MS in docs/rxe-lab.md. */
		n = epoll_wait(ep, evs, 16, wait_ms);
		if (n == 0 && (idle += wait_ms) < 60000)
			continue;
		idle = 0;
		if (n == 0) {
			fprintf(stderr, "sdp-echo: server idle for 60 s with "
				"%d of %d clients done\n", done, nclients);
			return 1;
		}
		for (i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			struct conn *cn;

			if (fd == lfd) {
				int cfd = accept4(lfd, NULL, NULL,
						  SOCK_NONBLOCK);

				if (cfd < 0 || cfd >= MAXC) {
					if (cfd >= 0)
						close(cfd);
					if (cfd < 0 && errno == EAGAIN)
						continue;
					perror("sdp-echo: accept");
					return 1;
				}
				c[cfd] = calloc(1, sizeof(*c[cfd]));
				c[cfd]->fd = cfd;
				c[cfd]->buf = malloc(BUF);
				ev = (struct epoll_event){ .events = EPOLLIN,
							   .data.fd = cfd };
				epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev);
				continue;
			}
			cn = c[fd];
			if (!cn->have) {
				r = read(fd, cn->buf, BUF);
				if (r < 0 && errno == EAGAIN)
					continue;
				if (r <= 0) {
					if (r < 0)
						perror("sdp-echo: read");
					if (rxe_path_check(fd, "server",
							   expect))
						fails++;
					epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
					close(fd);
					free(cn->buf);
					free(cn);
					c[fd] = NULL;
					done++;
					continue;
				}
				cn->have = (size_t)r;
				cn->off = 0;
			}
			while (cn->off < cn->have) {
				r = write(fd, cn->buf + cn->off,
					  cn->have - cn->off);
				if (r < 0 && errno == EAGAIN)
					break;
				if (r <= 0) {
					perror("sdp-echo: write");
					return 1;
				}
				cn->off += (size_t)r;
			}
			k = cn->off < cn->have ? EPOLLOUT : EPOLLIN;
			if (cn->off == cn->have)
				cn->have = 0;
			ev = (struct epoll_event){ .events = (uint32_t)k,
						   .data.fd = fd };
			epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
		}
	}
	printf("server: %d connection(s) echoed, %d on an unexpected path\n",
	       done, fails);
	return fails ? 1 : 0;
}

static int client(const char *host, const char *port, int nconn,
		  uint64_t bytes, const char *expect)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	uint64_t sent[MAXC] = { 0 }, total = 0;
	uint8_t *out = malloc(65536), *in = malloc(65536);
	int fd[MAXC], i, fails = 0, step = 0;
	size_t len, got;
	ssize_t r;

	if (nconn > MAXC || getaddrinfo(host, port, &hints, &res)) {
		fprintf(stderr, "sdp-echo: bad arguments\n");
		return 2;
	}
	for (i = 0; i < nconn; i++) {
		fd[i] = socket(res->ai_family, SOCK_STREAM, 0);
		if (fd[i] < 0 || connect(fd[i], res->ai_addr,
					 res->ai_addrlen)) {
			perror("sdp-echo: connect");
			return 1;
		}
	}
	freeaddrinfo(res);
	while (total < bytes * (uint64_t)nconn) {
		for (i = 0; i < nconn; i++, step++) {
			if (sent[i] >= bytes)
				continue;
			len = 1 + (size_t)((step * 7919u) % 65536u);
			if (len > bytes - sent[i])
				len = (size_t)(bytes - sent[i]);
			for (got = 0; got < len; got++)
				out[got] = pat(i, sent[i] + got);
			for (got = 0; got < len; got += (size_t)r) {
				r = write(fd[i], out + got, len - got);
				if (r <= 0) {
					perror("sdp-echo: write");
					return 1;
				}
			}
			for (got = 0; got < len; got += (size_t)r) {
				r = read(fd[i], in + got, len - got);
				if (r <= 0) {
					fprintf(stderr, "sdp-echo: conn %d: %s "
						"after %llu bytes\n", i,
						r ? strerror(errno) : "EOF",
						(unsigned long long)
						(sent[i] + got));
					return 1;
				}
			}
			if (memcmp(in, out, len)) {
				for (got = 0; in[got] == out[got]; got++)
					;
				fprintf(stderr, "sdp-echo: conn %d: echoed "
					"byte %llu is %#x, sent %#x\n", i,
					(unsigned long long)(sent[i] + got),
					in[got], out[got]);
				return 1;
			}
			sent[i] += len;
			total += len;
		}
	}
	for (i = 0; i < nconn; i++) {
		char who[32];

		snprintf(who, sizeof(who), "client conn %d", i);
		if (rxe_path_check(fd[i], who, expect))
			fails++;
		close(fd[i]);
	}
	free(out);
	free(in);
	printf("client: %d connection(s), %llu bytes each echoed exactly\n",
	       nconn, (unsigned long long)bytes);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "server"))
		return serve(atoi(argv[2]), atoi(argv[3]),
			     argc > 4 ? argv[4] : NULL);
	if (argc >= 6 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], atoi(argv[4]),
			      strtoull(argv[5], NULL, 0),
			      argc > 6 ? argv[6] : NULL);
	fprintf(stderr, "usage: sdp-echo server PORT NCLIENTS [EXPECT]\n"
		"       sdp-echo client HOST PORT NCONN BYTES [EXPECT]\n");
	return 2;
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * xfer.c - sdp-xfer, a netcat-style hashed transfer for the lab: one side
 * sends N bytes of a position-dependent pattern, the other checks every byte
 * and returns its hash, which the sender compares; both print the rate and
 * the path the switch chose (and can require one).
 *   sdp-xfer listen PORT send|recv BYTES [EXPECT]
 *   sdp-xfer connect HOST PORT send|recv BYTES [EXPECT]
 * EXPECT: "tcp" or a provider name ("verbs"); omitted: no check.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rxe_stat.h"

#define CHUNK (1u << 20)

static uint64_t word_at(uint64_t i)
{
	uint64_t z = i + 0x9E3779B97F4A7C15ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* The pattern bytes [pos, pos + len) of the stream; pos is a multiple of 8. */
static void gen(uint8_t *buf, uint64_t pos, size_t len)
{
	uint64_t w;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		w = word_at((pos + i) / 8);
		memcpy(buf + i, &w, 8);
	}
	if (i < len) {
		w = word_at((pos + i) / 8);
		memcpy(buf + i, &w, len - i);
	}
}

static uint64_t hash(uint64_t h, const uint8_t *buf, size_t len)
{
	uint64_t w;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, buf + i, 8);
		h = (h ^ w) * 0x100000001B3ull;
	}
	for (; i < len; i++)
		h = (h ^ buf[i]) * 0x100000001B3ull;
	return h;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			perror("sdp-xfer: write");
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads exactly len bytes; -1 on error or early end of stream. */
static int read_all(int fd, uint8_t *p, size_t len, uint64_t at)
{
	ssize_t n;

	while (len) {
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "sdp-xfer: %s after %llu bytes\n",
				n ? strerror(errno) : "end of stream",
				(unsigned long long)at);
			return -1;
		}
		p += n;
		len -= (size_t)n;
		at += (uint64_t)n;
	}
	return 0;
}

static int do_send(int fd, uint64_t total, uint64_t *h)
{
	uint8_t *buf = malloc(CHUNK);
	uint64_t pos, back;
	size_t len;

	if (!buf)
		return -1;
	*h = 0xCBF29CE484222325ull;
	for (pos = 0; pos < total; pos += len) {
		len = total - pos < CHUNK ? (size_t)(total - pos) : CHUNK;
		gen(buf, pos, len);
		*h = hash(*h, buf, len);
		if (write_all(fd, buf, len) < 0)
			goto fail;
	}
	if (read_all(fd, (uint8_t *)&back, sizeof(back), 0) < 0)
		goto fail;
	free(buf);
	if (back != *h) {
		fprintf(stderr, "sdp-xfer: receiver's hash %016llx, sent "
			"%016llx\n", (unsigned long long)back,
			(unsigned long long)*h);
		return -1;
	}
	return 0;
fail:
	free(buf);
	return -1;
}

static int do_recv(int fd, uint64_t total, uint64_t *h)
{
	uint8_t *buf = malloc(CHUNK), *exp = malloc(CHUNK);
	uint64_t pos;
	size_t len, i;
	int rc = -1;

	if (!buf || !exp)
		goto out;
	*h = 0xCBF29CE484222325ull;
	for (pos = 0; pos < total; pos += len) {
		len = total - pos < CHUNK ? (size_t)(total - pos) : CHUNK;
		if (read_all(fd, buf, len, pos) < 0)
			goto out;
		gen(exp, pos, len);
		if (memcmp(buf, exp, len)) {
			for (i = 0; buf[i] == exp[i]; i++)
				;
			fprintf(stderr, "sdp-xfer: byte %llu is %#x, expected "
				"%#x\n", (unsigned long long)(pos + i), buf[i],
				exp[i]);
			goto out;
		}
		*h = hash(*h, buf, len);
	}
	rc = write_all(fd, (uint8_t *)h, sizeof(*h));
	/* Close only after the sender has its hash and closed (it reads
	 * nothing more), as netcat's -q: the hash must not race our close. */
	if (!rc && read(fd, buf, 1) != 0) {
		fprintf(stderr, "sdp-xfer: sender did not close after the "
			"hash\n");
		rc = -1;
	}
out:
	free(buf);
	free(exp);
	return rc;
}

static int open_conn(int argc, char **argv, int *ai)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	int one = 1, fd, lfd, rc;

	if (!strcmp(argv[1], "listen") && argc >= 5) {
		struct sockaddr_in6 a = { .sin6_family = AF_INET6,
					  .sin6_addr = IN6ADDR_ANY_INIT };
		struct sockaddr_in a4 = { .sin_family = AF_INET };
		int v6 = getenv("XFER_IPV6") != NULL;

		*ai = 3;
		a.sin6_port = a4.sin_port = htons((uint16_t)atoi(argv[2]));
		lfd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
		if (lfd < 0)
			return -1;
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if ((v6 ? bind(lfd, (struct sockaddr *)&a, sizeof(a)) :
			  bind(lfd, (struct sockaddr *)&a4, sizeof(a4))) ||
		    listen(lfd, 4)) {
			perror("sdp-xfer: bind/listen");
			return -1;
		}
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			perror("sdp-xfer: accept");
		close(lfd);
		return fd;
	}
	if (!strcmp(argv[1], "connect") && argc >= 6) {
		*ai = 4;
		rc = getaddrinfo(argv[2], argv[3], &hints, &res);
		if (rc) {
			fprintf(stderr, "sdp-xfer: %s: %s\n", argv[2],
				gai_strerror(rc));
			return -1;
		}
		fd = socket(res->ai_family, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen)) {
			perror("sdp-xfer: connect");
			close(fd);
			fd = -1;
		}
		freeaddrinfo(res);
		return fd;
	}
	fprintf(stderr, "usage: sdp-xfer listen PORT send|recv BYTES "
		"[EXPECT]\n       sdp-xfer connect HOST PORT send|recv "
		"BYTES [EXPECT]\n");
	return -2;
}

int main(int argc, char **argv)
{
	const char *who, *expect;
	uint64_t total, h = 0;
	int ai, fd, send, rc;
	double t0, dt;

	if (argc < 2)
		return open_conn(argc, argv, &ai) == -2 ? 2 : 1;
	fd = open_conn(argc, argv, &ai);
	if (fd < 0)
		return fd == -2 ? 2 : 1;
	send = !strcmp(argv[ai], "send");
	total = strtoull(argv[ai + 1], NULL, 0);
	expect = argc > ai + 2 ? argv[ai + 2] : NULL;
	who = send ? "sender" : "receiver";
	t0 = now();
	rc = send ? do_send(fd, total, &h) : do_recv(fd, total, &h);
	dt = now() - t0;
	if (rxe_path_check(fd, who, expect) < 0)
		rc = -1;
	close(fd);
	if (rc < 0) {
		fprintf(stderr, "sdp-xfer: %s FAILED\n", who);
		return 1;
	}
	printf("RESULT %s bytes=%llu hash=%016llx secs=%.2f MBps=%.1f\n", who,
	       (unsigned long long)total, (unsigned long long)h, dt,
	       (double)total / 1e6 / (dt > 0 ? dt : 1e-9));
	return 0;
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * many_client.c - many connections at once to echo_server, all open
 * together: each sends the echo magic and a pattern of its own, and must get
 * every byte back. For the descriptor tests: a server whose switch took
 * descriptors it should have left to the program fails some of them.
 *   many_client PORT COUNT [BYTES]
 * Prints "N/COUNT connections echoed"; exit 0 only when all were.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hostile.h"

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int count, i, ok = 0, *fds;
	size_t bytes, j;
	uint8_t *buf, *back;

	if (argc < 3) {
		fprintf(stderr, "usage: many_client PORT COUNT [BYTES]\n");
		return 2;
	}
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	count = atoi(argv[2]);
	bytes = argc > 3 ? (size_t)atol(argv[3]) : 65536;
	fds = calloc(count, sizeof(int));
	buf = malloc(bytes + HOSTILE_ECHO_MAGIC_LEN);
	back = malloc(bytes + HOSTILE_ECHO_MAGIC_LEN);
	if (!fds || !buf || !back)
		return 2;
	for (i = 0; i < count; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0 ||
		    connect(fds[i], (struct sockaddr *)&a, sizeof(a))) {
			fprintf(stderr, "connection %d: %s\n", i,
				strerror(errno));
			if (fds[i] >= 0)
				close(fds[i]);
			fds[i] = -1;
		}
	}
	/* all open; now each one's bytes, there and back */
	for (i = 0; i < count; i++) {
		uint64_t st = 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 1);
		size_t got = 0, total = bytes + HOSTILE_ECHO_MAGIC_LEN, off = 0;

		if (fds[i] < 0)
			continue;
		memcpy(buf, HOSTILE_ECHO_MAGIC, HOSTILE_ECHO_MAGIC_LEN);
		for (j = 0; j < bytes; j++)
			buf[HOSTILE_ECHO_MAGIC_LEN + j] = hostile_gen(&st);
		while (got < total) {
			struct pollfd pf = { .fd = fds[i],
					     .events = POLLIN |
						       (off < total ? POLLOUT :
								      0) };
			ssize_t n;

			if (poll(&pf, 1, 10000) != 1)
				break;
			if (off < total && (pf.revents & POLLOUT)) {
				n = send(fds[i], buf + off, total - off,
					 MSG_NOSIGNAL | MSG_DONTWAIT);
				if (n > 0)
					off += n;
				else if (n < 0 && errno != EAGAIN)
					break;
			}
			if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
				n = recv(fds[i], back + got, total - got,
					 MSG_DONTWAIT);
				if (n == 0 || (n < 0 && errno != EAGAIN))
					break;
				if (n > 0)
					got += n;
			}
		}
		if (got == total && !memcmp(buf, back, total))
			ok++;
		else
			fprintf(stderr, "connection %d: %zu of %zu bytes echoed%s\n",
				i, got, total,
				got == total ? ", but different" : "");
	}
	printf("%d/%d connections echoed\n", ok, count);
	return ok == count ? 0 : 1;
}

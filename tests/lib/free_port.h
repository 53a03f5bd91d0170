/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * free_port.h - for C test programs that must name a port before anything
 * listens on it (a provider's own address space, a second process): a TCP
 * port of 127.0.0.1 the kernel picks as unused now. lib.sh and sdptest.py
 * give the shell and Python the same.
 */
#ifndef SDP_TESTS_FREE_PORT_H
#define SDP_TESTS_FREE_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* The port, or 0 when the kernel gave none (no socket, no port left). */
static inline unsigned short tl_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return 0;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		a.sin_port = 0;
	close(fd);
	return ntohs(a.sin_port);
}

#endif /* SDP_TESTS_FREE_PORT_H */

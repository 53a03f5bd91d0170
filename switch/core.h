/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * core.h - process-wide state and helpers (core.c): the loaded providers,
 * the clock, randomness, and small fd helpers the other files share.
 */
#ifndef SW_CORE_H
#define SW_CORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sdp_loader.h"
#include "sock.h"

struct sw_provider {
	struct sdp_module mod;
	int index;		/* position in sw_providers */
	bool usable;
};

extern struct sw_provider sw_providers[SW_MAX_PROVIDERS];

extern int sw_nproviders;

struct sw_provider *sw_provider_by_name(const char *name);

uint64_t sw_now_ns(void);

void sw_random(void *buf, size_t len);

/* Blocks until fd has events or timeout_ms passes (-1 = forever). */
int sw_wait_fd(int fd, short events, int timeout_ms);

/* Writes all of buf on a TCP fd (blocking as needed). */
int sw_tcp_write_all(int fd, const void *buf, size_t len);

void sw_addr_port(const struct sockaddr_storage *ss, uint16_t *port);

void sw_name_copy(char dst[SDP_PROVIDER_NAME_LEN], const char *src);

bool sw_fd_nonblocking(int fd);

#endif /* SW_CORE_H */

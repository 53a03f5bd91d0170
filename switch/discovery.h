/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * discovery.h - whether a switch listens at the peer (discovery.c).
 */
#ifndef SW_DISCOVERY_H
#define SW_DISCOVERY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Does a genuine switch listen at addr through provider p? A same-host
 * listener must belong to the owner of the TCP listener (docs/security.md). */
bool sw_switch_listens_at(struct sw_provider *p,
			  const struct sockaddr *addr, socklen_t len);

#endif /* SW_DISCOVERY_H */

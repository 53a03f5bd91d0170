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

bool sw_switch_listens_at(struct sw_provider *p,
			      const struct sockaddr *addr, socklen_t len);

void sw_speaks_first_note(const struct sockaddr_storage *ss);

bool sw_speaks_first_known(const struct sockaddr_storage *ss);

#endif /* SW_DISCOVERY_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * connect.h - the client's provider listener for one connection
 * (connect.c).
 */
#ifndef SW_CONNECT_H
#define SW_CONNECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Client: does s hold provider listeners for the server to connect to? */
bool sw_client_listening(const struct sw_sock *s);

/* Client: opens them once the upgrade is due (by age or bytes). */
void sw_client_listen_due(struct sw_sock *s);

/* Client: when the listeners are due (sw_now_ns() time). */
uint64_t sw_client_listen_at(const struct sw_sock *s);

#endif /* SW_CONNECT_H */

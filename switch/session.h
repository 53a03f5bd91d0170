/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session.h - set-up and tear-down of a provider session for one
 * connection (session.c).
 */
#ifndef SW_SESSION_H
#define SW_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Sends our SETUP (buffers, staging ring, transfer slot). */
int sw_session_send_setup(struct sw_sock *s);

/* The peer's buffer size and credits, from its hello. */
int sw_session_peer_params(struct sw_sock *s, uint32_t msg_size,
			   uint32_t recv_credits);

void sw_session_free(struct sw_sock *s);

int sw_session_prepare(struct sw_sock *s, struct sw_provider *p);

#endif /* SW_SESSION_H */

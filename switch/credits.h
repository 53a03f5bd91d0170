/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * credits.h - flow control: credits and the adaptive buffer count
 * (credits.c).
 */
#ifndef SW_CREDITS_H
#define SW_CREDITS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Credits needed before sending a message of this type. */
bool sw_credit_can_send(struct sw_session *ss, uint8_t type);

/* POLLOUT for the program: credits and room in the peer's staging ring. */
bool sw_credit_writable(struct sw_session *ss);

void sw_credit_consume(struct sw_session *ss);

void sw_credit_returned(struct sw_session *ss, uint16_t n);

/* Called after reposting: sends a CREDIT message when enough is owed. */
int sw_credit_maybe_update(struct sw_sock *s);

/* Receiver: grows the buffers when the peer runs short, shrinks them (and
 * drops the staging ring) when the connection has been idle. */
void sw_credit_adapt(struct sw_sock *s);

/* Keeps the count of connections holding more than idle buffers. */
void sw_credit_note_size(struct sw_session *ss);

/* Handlers for CREDIT_DELTA and CREDIT_RELEASE. */
int sw_credit_on_delta(struct sw_sock *s, const struct sdp_msg_delta *d);

int sw_credit_on_release(struct sw_sock *s, uint32_t idx,
			 const struct sdp_msg_release *rl);

uint16_t sw_credit_take_owed(struct sw_session *ss);

/* Before this side sleeps: returns the buffers it owes (two or more). */
void sw_credit_return_owed(struct sw_sock *s);
void sw_credit_ask(struct sw_sock *s);

int sw_credit_send_releases(struct sw_sock *s);

#endif /* SW_CREDITS_H */

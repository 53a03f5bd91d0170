/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * buffers.h - the connection's control-message buffers (buffers.c).
 */
#ifndef SW_BUFFERS_H
#define SW_BUFFERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Posts every receive buffer: as soon as the endpoint exists. */
int sw_session_post_recvs(struct sw_sock *s);

/* Releases a receive buffer back to the provider (repost + credit owed). */
int sw_recv_repost(struct sw_sock *s, uint32_t idx);

uint8_t *sw_buf(struct sw_session *ss, uint32_t idx);

int sw_recv_slot_add(struct sw_sock *s, uint32_t idx);

void sw_recv_slot_drop(struct sw_sock *s, uint32_t idx);

/* A free send slot (allocating one if all are busy and room is left). */
int sw_send_slot_get(struct sw_sock *s, uint32_t *idx);

void sw_send_slots_trim(struct sw_sock *s, uint32_t keep);

void sw_bufs_free(struct sw_sock *s);

bool sw_sends_pending(const struct sw_session *ss);

/* Registered bytes this connection holds (buffers and staging). */
size_t sw_bufs_registered(const struct sw_session *ss);

/* Posts receive buffer idx for the first time. */
int sw_recv_post_new(struct sw_sock *s, uint32_t idx);

#endif /* SW_BUFFERS_H */

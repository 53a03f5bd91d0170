/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tcp_inband.h - the switch's own bytes on the program's TCP stream:
 * hellos, doorbells, the downgrade marker (tcp_inband.c).
 */
#ifndef SW_TCP_INBAND_H
#define SW_TCP_INBAND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"
#include "status.h"

/* Sends our hello (a client's) if it is due now, with the program's bytes
 * in msg (NULL: alone). Returns the program's bytes sent, -errno, or
 * SW_NO_HELLO when no hello is due (the caller sends as it would). */
ssize_t sw_hello_send(struct sw_sock *s, const struct msghdr *msg,
		      int flags);

/* A plain read of the program's can take the peer's hello and the bytes
 * behind it in one go (sw_hello_read). */
static inline bool sw_hello_read_merges(const struct sw_sock *s, int flags)
{
	return !(flags & (MSG_PEEK | MSG_OOB)) &&
	       ((s->state == SW_HELLO_WAIT && !s->is_client) ||
		(s->state == SW_HELLO_SENT && !s->hello_got));
}

/* Reads the peer's hello and the program's bytes behind it into msg:
 * bytes, -errno, or SW_HELLO_OTHER when what came is not a hello. */
ssize_t sw_hello_read(struct sw_sock *s, struct msghdr *msg,
		      int flags, bool block);

/* TCP after a fallback: drops the peer's hello if its stream starts with
 * one. 0 when the program's bytes are next, -EAGAIN (!wait). */
int sw_hello_skip(struct sw_sock *s, bool wait);

/* Reads doorbells from the TCP fd; notes EOF. */
void sw_doorbell_drain(struct sw_sock *s);
/* The same, unless another thread sleeps on the TCP fd (s->sleepers): the
 * doorbell then stays to wake it, and the last thread to wake takes it. */
void sw_doorbell_drain_shared(struct sw_sock *s);

/* True once the peer's stream has ended without more to come from the
 * provider: the provider reported the peer gone, or TCP ended and the
 * provider handed over nothing more for SW_EOF_GRACE_NS. */
bool sw_peer_ended(struct sw_sock *s);

/* Rings the peer's doorbell: one byte on TCP. */
void sw_doorbell_ring(struct sw_sock *s);

/* TCP after a downgrade: skips doorbells and the peer's marker. */
int sw_dg_marker_skip(struct sw_sock *s, bool wait);

/* Client: the n bytes at the head of the server's stream are a whole
 * refusal of a server of version 1 to 3 (docs/protocol.md 2.2). */
bool sw_hello_is_refusal(const uint8_t *head, size_t n);

/* Server: 1 with the client's hello taken into s->hello_buf, 0 when the
 * stream does not start with one (nothing taken), -EAGAIN: not all there. */
int sw_hello_server_read(struct sw_sock *s);

/* Before the program stops reading a connection that fell back before the
 * peer's hello came: that hello is taken, so the kernel does not answer it
 * with a reset (a server waits a little for it; s->lock held). */
void sw_hello_drain(struct sw_sock *s);

#endif /* SW_TCP_INBAND_H */

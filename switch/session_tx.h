/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session_tx.h - the sending side of the session and coalescing
 * (session_tx.c).
 */
#ifndef SW_SESSION_TX_H
#define SW_SESSION_TX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

#define SW_PTX_MAX (4 * 1024 * 1024)
/* bytes a send may leave in s->ptx for want of credits (TCP's send
 * buffer, session_tx.c sndbuf_keep) */
#define SW_SNDBUF_KEEP (64 * 1024)

/* The program's bytes on the SAN: bytes sent or -errno (-EPIPE when the
 * peer is gone; the caller raises SIGPIPE). */
ssize_t sw_session_send(struct sw_sock *s, const struct iovec *iov, int iovcnt,
			int flags);

/* Sends the bytes kept in s->ptx as far as credits allow, never waiting. */
int sw_ptx_flush(struct sw_sock *s);
/* The bytes kept in s->ptx go on TCP (our marker went, or a fallback). */
void sw_ptx_to_tcp(struct sw_sock *s);

/* Ends a sendfile's lend (xslot.h) before the next bytes of the stream:
 * what the receiver has not taken goes as other sends go. */
int sw_lend_settle(struct sw_sock *s);
/* Ends the lend if the receiver is done with it; true while it is out. */
bool sw_lend_poll(struct sw_sock *s);

/* Why no byte can be sent any more (a positive errno), or 0. */
int sw_tx_error(struct sw_sock *s);

/* Must the bytes kept back go now (the flusher asks)? */
bool sw_ptx_due(struct sw_sock *s);

#endif /* SW_SESSION_TX_H */

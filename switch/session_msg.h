/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session_msg.h - sending control messages, progress (the completion
 * queue and the dispatch of what arrived) (session_msg.c).
 */
#ifndef SW_SESSION_MSG_H
#define SW_SESSION_MSG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Polls the CQ and handles what arrived. Returns < 0 on a fatal error. */
int sw_progress(struct sw_sock *s);

/* Sends one control message (header + body + payload from iov). */
int sw_send_ctrl(struct sw_sock *s, uint8_t type, const void *body,
		 size_t bodylen, const struct iovec *iov, int iovcnt,
		 size_t paylen);

/* Waits for an RDMA operation that answered SDP_PENDING. */
int sw_rdma_wait(struct sw_sock *s, uint64_t ctx);

/* A malformed or hostile message: closes the connection, logs why.
 * Returns -EPROTO. */
int sw_proto_error(struct sw_sock *s, const char *why);

/* A completion context for an RDMA operation. */
uint64_t sw_rdma_ctx_new(struct sw_session *ss);

#endif /* SW_SESSION_MSG_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session_rx.h - the receiving side of the session and its queue
 * (session_rx.c).
 */
#ifndef SW_SESSION_RX_H
#define SW_SESSION_RX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

void sw_rx_item_free(struct sw_session *ss, struct rx_item *it);

struct rx_item *sw_rx_item_new(struct sw_session *ss);

/* The peer's bytes from the SAN: bytes, 0 at EOF, -errno, or
 * SW_RX_DOWNGRADE when the stream continues on TCP from here. */
ssize_t sw_session_recv(struct sw_sock *s, struct iovec *iov, int iovcnt,
			int flags);

void sw_rxq_push(struct sw_session *ss, struct rx_item *it);

/* Queues len bytes at off in receive buffer idx, which stays held until
 * they are read. 0 or -ENOMEM. */
int sw_rxq_inline(struct sw_session *ss, uint32_t idx, uint64_t off,
		  uint64_t len);

/* Our program is blocked on a message of the peer's (a send waiting for
 * an XFER_DONE, for room in the peer's staging ring, for credits) while
 * the peer, short of credits, waits for a buffer of ours that bytes it
 * sent still hold: copies the oldest such bytes aside, within
 * SW_RX_SPILL_MAX per connection, and gives their buffer back. True when
 * a buffer is now owed to the peer. */
bool sw_rx_spill(struct sw_sock *s);

/* Queues the region an RDATA (kind RX_REMOTE) or an XOFFER (RX_XSLOT)
 * announced, to be pulled when read. 0 or -ENOMEM. */
int sw_rxq_remote(struct sw_session *ss, enum rx_kind kind,
		  const struct sdp_msg_rdata *rd);

#endif /* SW_SESSION_RX_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rdma_read.h - the RDMA-read path: RDATA and its acknowledgement
 * (rdma_read.c).
 */
#ifndef SW_RDMA_READ_H
#define SW_RDMA_READ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Pulls len bytes of an RDATA region into dst (RdmaRead): 0 or -errno.
 * flags: SDP_RDMA_SPREAD when the peer copies nothing meanwhile. */
int sw_rdata_pull(struct sw_sock *s, struct rx_item *it, uint8_t *dst,
		  size_t len, uint32_t flags);

/* Exposes p for the peer to pull, sends RDATA and waits for its
 * acknowledgement: len, or -errno (-ENOBUFS: registration failed). */
ssize_t sw_rdata_send(struct sw_sock *s, uint8_t *p, size_t len);

/* An RDATA from the peer: queues its region to be pulled when read. */
int sw_rdata_on_msg(struct sw_sock *s, uint32_t idx,
		    const struct sdp_msg_hdr *h, const void *body);

/* XFER_DONE and STAGING_FREE from the peer. */
int sw_rdata_on_ack(struct sw_sock *s, uint32_t idx,
		    const struct sdp_msg_hdr *h, const void *body);

#endif /* SW_RDMA_READ_H */

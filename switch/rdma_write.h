/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rdma_write.h - the RDMA-write path: staging ring and WDATA
 * (rdma_write.c).
 */
#ifndef SW_RDMA_WRITE_H
#define SW_RDMA_WRITE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

int sw_staging_create(struct sw_sock *s);

void sw_staging_drop(struct sw_sock *s);

/* A non-blocking sender out of staging space: looks for STAGING_FREE for
 * at most the spin budget, never sleeping. True when room came back. */
bool sw_staging_wait(struct sw_sock *s);

/* RDMA-writes up to len bytes of p into the peer's staging ring and
 * sends WDATA: bytes written, 0 when the ring is full, or -errno. */
ssize_t sw_wdata_send(struct sw_sock *s, uint8_t *p, size_t len);

/* A WDATA from the peer: queues its bytes in our staging ring. */
int sw_wdata_on_msg(struct sw_sock *s, uint32_t idx,
		    const struct sdp_msg_hdr *h, const void *body);

#endif /* SW_RDMA_WRITE_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rdma_write.c - the RDMA-write path (WDATA): the receiver's staging ring
 * (created here, offered in SETUP), the sender's RDMA writes into it in
 * pieces, and the receiver's handling of each WDATA.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "buffers.h"
#include "config.h"
#include "log.h"
#include "providers.h"
#include "rdma_write.h"
#include "session_msg.h"
#include "session_rx.h"
#include "sock.h"
#include "spin.h"
#include "tcp_inband.h"
#include "util.h"
#include "wire.h"

int sw_wdata_on_msg(struct sw_sock *s, uint32_t idx,
		    const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_wdata wd;
	struct rx_item *it;

	memcpy(&wd, body, sizeof(wd));
	if (!ss->staging_len || ss->staging_dead)
		return sw_proto_error(s, "WDATA but no staging ring is offered");
	if (h->len)
		return sw_proto_error(s, "WDATA with payload");
	/* written without a sum that could wrap: offset and length are the
	 * peer's, the ring's size and fill are ours */
	if (!wd.bytes || wd.offset >= ss->staging_len ||
	    wd.bytes > ss->staging_len - wd.offset ||
	    wd.offset != ss->staging_recv_head % ss->staging_len ||
	    wd.bytes > ss->staging_len - (ss->staging_recv_head -
					  ss->staging_consumed))
		return sw_proto_error(s, "WDATA outside the free staging space");
	if (ss->fin_rcvd || ss->dg_rcvd)
		return sw_proto_error(s, "WDATA after FIN or DOWNGRADE");
	it = sw_rx_item_new(ss);
	if (!it)
		return -ENOMEM;
	it->kind = RX_STAGING;
	it->off = wd.offset;
	it->len = wd.bytes;
	ss->staging_recv_head += wd.bytes;
	sw_rxq_push(ss, it);
	if (s->st)
		s->st->rx_rdma_write += wd.bytes;
	return sw_recv_repost(s, idx);
}

/* WDATA piece: small enough for the receiver to copy out the previous one
 * while this one is written, large enough that the messages cost little. */
#define SW_WDATA_PIECE (256 * 1024)

/* WDATA: write up to len bytes from p into the peer's staging ring.
 * Returns bytes written (> 0), 0 when the ring is full, or < 0. */
ssize_t sw_wdata_send(struct sw_sock *s, uint8_t *p, size_t len)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;
	uint64_t ring = ss->peer_staging.length;
	uint64_t used = ss->peer_staging_head - ss->peer_staging_freed;
	uint64_t off = ss->peer_staging_head % ring;
	struct sdp_msg_wdata wd;
	struct sdp_rdma_desc ring_desc;
	struct sdp_sge sge;
	struct sdp_mr *mr;
	uint64_t ctx;
	size_t n = len;
	int r;

	if (used >= ring)
		return 0;
	if (n > ring - used)
		n = ring - used;
	if (n > ring - off)
		n = ring - off;
	/* pieces the receiver can start copying out while the next one is
	 * written */
	if (n > (ss->wdata_piece ? ss->wdata_piece : SW_WDATA_PIECE))
		n = ss->wdata_piece ? ss->wdata_piece : SW_WDATA_PIECE;
	r = pv->mod.ext.register_memory(pv->mod.prov, p, n, 0, &mr);
	if (r) {
		if (s->st)
			s->st->reg_failures++;
		return -ENOBUFS;
	}
	sge.addr = p;
	sge.length = n;
	sge.mr = mr;
	ctx = sw_rdma_ctx_new(ss);
	ring_desc = ss->peer_staging;
	r = pv->mod.ext.rdma_write(ss->ep, &sge, 1, &ss->peer_staging, off,
				   ctx, 0);
	if (r == SDP_PENDING) {
		/* the wait's progress may take the peer's DOWNGRADE: ours
		 * goes after the WDATA that announces these bytes */
		ss->dg_hold++;
		r = sw_rdma_wait(s, ctx);
		ss->dg_hold--;
	}
	pv->mod.ext.deregister_memory(pv->mod.prov, mr);
	/* the wait ran progress: the peer may have taken the ring back (or
	 * offered another) meanwhile; the bytes written there are not
	 * announced and go by copy instead. A write the provider stages
	 * (an extra copy the target makes later) finds the ring already
	 * gone: refused, nothing written, and the same answer. */
	if (memcmp(&ring_desc, &ss->peer_staging, sizeof(ring_desc)))
		return -ENOBUFS;
	if (r == -SDP_EBADKEY || r == -SDP_EBOUNDS || r == -SDP_ERIGHTS)
		/* the peer tore down a ring it still offered: it closed
		 * (or broke the protocol); never a provider code for the
		 * program */
		return -ECONNRESET;
	if (r < 0)
		return r == -EIO || r == -ENOMEM ? -ENOBUFS : r;
	wd.offset = off;
	wd.bytes = n;
	r = sw_send_ctrl(s, SDP_MSG_WDATA, &wd, sizeof(wd), NULL, 0, 0);
	if (r)
		return r;
	ss->peer_staging_head += n;
	if (s->st)
		s->st->tx_rdma_write += n;
	return n;
}

/* A non-blocking sender whose staging space ran out: the receiver usually
 * frees a piece within microseconds, so look for STAGING_FREE for at most
 * the spin budget, without sleeping. True when room came back. */
bool sw_staging_wait(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint64_t end = sw_now_ns() + sw_spin_floor_ns();
	unsigned relax = 0;

	do {
		if (sw_progress(s) < 0 || ss->error || ss->peer_dead ||
		    !ss->peer_staging.length)
			return false;
		if (ss->peer_staging_head - ss->peer_staging_freed <
		    ss->peer_staging.length)
			return true;
		if (ss->peer_wants_wake)
			sw_doorbell_ring(s);
		sw_spin_relax(&relax);
	} while (sw_now_ns() < end);
	return false;
}

int sw_staging_create(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *p = ss->prov;
	size_t len = ss->staging_size ? ss->staging_size : sw_cfg.staging_size;
	void *m;
	int r;

	if (ss->staging)
		return 0;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -ENOMEM;
	r = p->mod.ext.register_rdma_memory(ss->ep, m, len,
					    SDP_ACCESS_REMOTE_WRITE,
					    &ss->staging_desc,
					    &ss->staging_rmr);
	if (r) {
		munmap(m, len);
		if (s->st)
			s->st->reg_failures++;
		if (len <= sw_cfg.staging_size)
			return r;
		/* a larger ring than the plain one (a provider that crosses
		 * a wire) may pass the locked-memory limit (ulimit -l, 8 MiB
		 * by default): the plain size still lets the peer write */
		SW_INFO("fd %d: a %zu-byte staging ring cannot be registered (%s); trying %zu bytes",
			s->fd, len, sdp_strerror(r), sw_cfg.staging_size);
		ss->staging_size = sw_cfg.staging_size;
		return sw_staging_create(s);
	}
	ss->staging = m;
	ss->staging_len = len;
	ss->staging_recv_head = 0;
	ss->staging_consumed = 0;
	ss->staging_freed_unsent = 0;
	ss->staging_dead = false;
	return 0;
}

void sw_staging_drop(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (!ss->staging)
		return;
	if (ss->staging_rmr && ss->ep)
		ss->prov->mod.ext.deregister_rdma_memory(ss->ep,
							 ss->staging_rmr);
	munmap(ss->staging, ss->staging_len);
	ss->staging = NULL;
	ss->staging_rmr = NULL;
	ss->staging_len = 0;
	ss->staging_dead = false;
}

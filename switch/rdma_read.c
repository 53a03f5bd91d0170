/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rdma_read.c - the RDMA-read path (RDATA): the sender exposes the
 * program's buffer and waits for the acknowledgement; the receiver pulls it
 * with RdmaRead straight into the program's buffer and acknowledges.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "buffers.h"
#include "providers.h"
#include "rdma_read.h"
#include "session_msg.h"
#include "session_rx.h"
#include "sock.h"
#include "wakeup.h"
#include "wire.h"

int sw_rdata_on_msg(struct sw_sock *s, uint32_t idx,
		    const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_rdata rd;

	memcpy(&rd, body, sizeof(rd));
	if (!ss->can_read)
		return sw_proto_error(s, "RDATA but RdmaRead was not offered");
	if (!rd.total || rd.total > rd.region.length)
		return sw_proto_error(s, "RDATA total outside its region");
	if (!(rd.region.access & SDP_ACCESS_REMOTE_READ))
		return sw_proto_error(s, "RDATA region not readable");
	if (ss->fin_rcvd || ss->dg_rcvd)
		return sw_proto_error(s, "RDATA after FIN or DOWNGRADE");
	if (h->len &&
	    sw_rxq_inline(ss, idx, sizeof(*h) + sizeof(rd), h->len) < 0)
		return -ENOMEM;
	if (sw_rxq_remote(ss, RX_REMOTE, &rd) < 0)
		return -ENOMEM;
	return h->len ? 0 : sw_recv_repost(s, idx);
}

int sw_rdata_on_ack(struct sw_sock *s, uint32_t idx,
		    const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_ack ack;

	memcpy(&ack, body, sizeof(ack));
	if (h->len)
		return sw_proto_error(s, "acknowledgement with payload");
	if (h->type == SDP_MSG_XFER_DONE) {
		if (!ss->xfer_wait_id || ack.xfer_id != ss->xfer_wait_id ||
		    ss->xfer_done)
			return sw_proto_error(s, "XFER_DONE for no pending transfer");
		if (ack.bytes > ss->xfer_wait_len)
			return sw_proto_error(s, "XFER_DONE beyond the transfer");
		ss->xfer_done = true;
		ss->xfer_done_bytes = ack.bytes;
	} else {
		if (ack.bytes > ss->peer_staging_head - ss->peer_staging_freed)
			return sw_proto_error(s, "STAGING_FREE beyond what was written");
		ss->peer_staging_freed += ack.bytes;
	}
	return sw_recv_repost(s, idx);
}

/* RDATA: expose [p, p+len) read-only, let the receiver pull it, wait for
 * XFER_DONE. Returns bytes sent (len, or fewer when the receiver's
 * RdmaRead was refused in mid-transfer: the caller sends the rest another
 * way) or < 0 (-ENOBUFS: registration failed or the receiver took
 * nothing, nothing sent). */
ssize_t sw_rdata_send(struct sw_sock *s, uint8_t *p, size_t len)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;
	struct sdp_msg_rdata rd;
	struct sdp_rdma_desc desc;
	struct sdp_rmr *rmr;
	int r;

	memset(&rd, 0, sizeof(rd));
	r = pv->mod.ext.register_rdma_memory(ss->ep, p, len,
					     SDP_ACCESS_REMOTE_READ, &desc,
					     &rmr);
	rd.region = desc;
	if (r) {
		if (s->st)
			s->st->reg_failures++;
		return -ENOBUFS;
	}
	rd.xfer_id = ++ss->next_xfer_id ? ss->next_xfer_id : ++ss->next_xfer_id;
	rd.total = len;
	r = sw_send_ctrl(s, SDP_MSG_RDATA, &rd, sizeof(rd), NULL, 0, 0);
	if (r) {
		pv->mod.ext.deregister_rdma_memory(ss->ep, rmr);
		return r;
	}
	ss->xfer_wait_id = rd.xfer_id;
	ss->xfer_wait_len = len;
	ss->xfer_done = false;
	while (!ss->xfer_done) {
		if (ss->error || ss->peer_dead || ss->abort_rcvd ||
		    s->tcp_eof) {
			r = -ECONNRESET;
			break;
		}
		/* exposed memory cannot be taken back while the peer may be
		 * reading it: a signal does not end this wait */
		r = sw_session_wait(s, POLLIN, 0);
		if (r < 0 && r != -ETIMEDOUT && r != -EINTR)
			break;
		r = 0;
	}
	ss->xfer_wait_id = 0;
	/* the descriptor dies now, whatever the peer still holds */
	pv->mod.ext.deregister_rdma_memory(ss->ep, rmr);
	if (r)
		return r;
	if (ss->xfer_done_bytes < len) {
		/* the kernel stopped letting the receiver read us: it took
		 * what it could, the rest goes by the staging ring */
		ss->peer_can_read = false;
		ss->peer_xslot = false;
		len = ss->xfer_done_bytes;
		if (!len)
			return -ENOBUFS;
	}
	if (s->st)
		s->st->tx_rdma_read += len;
	return len;
}

/* Pulls len bytes of a REMOTE item into dst. Registration failure uses a
 * bounce through a receive-sized piece (copy). Returns 0 or < 0. */
int sw_rdata_pull(struct sw_sock *s, struct rx_item *it, uint8_t *dst,
		  size_t len, uint32_t flags)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;
	struct sdp_sge sge;
	struct sdp_mr *mr;
	uint64_t ctx;
	int r = 0, tries;

	/* a failed registration may succeed again: a few tries */
	for (tries = 0; tries < 3; tries++) {
		r = pv->mod.ext.register_memory(pv->mod.prov, dst, len,
						SDP_ACCESS_LOCAL_WRITE, &mr);
		if (!r)
			break;
		if (s->st)
			s->st->reg_failures++;
	}
	if (r)
		return r;
	sge.addr = dst;
	sge.length = len;
	sge.mr = mr;
	ctx = sw_rdma_ctx_new(ss);
	r = pv->mod.ext.rdma_read(ss->ep, &sge, 1, &it->desc, it->off, ctx,
				  flags);
	if (r == SDP_PENDING)
		r = sw_rdma_wait(s, ctx);
	pv->mod.ext.deregister_memory(pv->mod.prov, mr);
	if (r == 0 && s->st)
		s->st->rx_rdma_read += len;
	return r;
}

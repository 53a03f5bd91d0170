/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session.c - set-up and tear-down of one provider session (DESIGN.md
 * section 5): choosing the data paths, the peer's parameters, our SETUP,
 * and freeing it all.
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
#include "config.h"
#include "credits.h"
#include "log.h"
#include "providers.h"
#include "rdma_write.h"
#include "session.h"
#include "session_msg.h"
#include "sock.h"
#include "util.h"
#include "wire.h"
#include "xslot.h"

/*
 * What this connection offers its peer as receiver, chosen once from the
 * provider's caps. A local-only provider (shm) keeps the plain settings:
 * large blocking sends are pulled by this side (RDATA) and a small staging
 * ring serves non-blocking senders. On a provider that crosses a wire
 * (verbs) each pull costs the blocking writer a round trip during which
 * nothing else moves, so this side offers no RdmaRead and a larger ring:
 * the sender writes ahead into it (WDATA) while this side copies out.
 * SDP_PATH and SDP_STAGING_SIZE, when set, apply to every provider.
 */
static void session_choose_path(struct sw_session *ss)
{
	bool wire = !(ss->prov->mod.info.caps & SDP_CAP_LOCAL_ONLY);

	ss->offer_read = ss->can_read && sw_cfg.path != SW_PATH_WRITE &&
			 sw_cfg.path != SW_PATH_COPY &&
			 (!wire || sw_cfg.path == SW_PATH_READ);
	ss->staging_size = wire ? sw_cfg.staging_size_wire :
				  sw_cfg.staging_size;
	/* each piece costs a registration, a completion wait, a WDATA and
	 * often a doorbell: across a wire, a quarter of the ring (four
	 * pieces in flight for the receiver to copy out) */
	ss->wdata_piece = sw_cfg.wdata_piece ? sw_cfg.wdata_piece :
			  wire ? ss->staging_size / 4 : 0;
}

int sw_session_prepare(struct sw_sock *s, struct sw_provider *p)
{
	struct sw_session *ss = &s->ss;
	uint32_t i;
	int r;

	ss->prov = p;
	ss->msg_size = sw_cfg.msg_size;
	ss->can_read = p->mod.ext.rdma_read != NULL;
	session_choose_path(ss);
	r = p->mod.ops.cq_create(p->mod.prov, 2 * SW_MAX_BUFS + 16, &ss->cq);
	if (r) {
		ss->cq = NULL;
		goto fail;
	}
	for (i = 0; i < sw_cfg.recv_bufs; i++) {
		r = sw_recv_slot_add(s, i);
		if (r)
			goto fail;
	}
	ss->last_rx_ns = sw_now_ns();
	return 0;
fail:
	sw_session_free(s);
	return r < 0 ? r : -ENOMEM;
}

void sw_session_free(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *p = ss->prov;
	struct rx_item *it;

	if (!p)
		return;
	/* a lend still out dies with the connection (the peer is gone,
	 * or took nothing for SDP_ORPHAN_TIMEOUT_MS) */
	sw_xslot_lend_free(s, &ss->lend);
	free(ss->ahead);
	sw_staging_drop(s);
	if (ss->ep)
		p->mod.ops.ep_close(ss->ep);
	ss->ep = NULL;
	sw_bufs_free(s);
	sw_credit_note_size(ss);
	if (ss->cq)
		p->mod.ops.cq_destroy(ss->cq);
	while ((it = ss->rxq)) {
		ss->rxq = it->next;
		if (it->kind == RX_SPILL)
			free(it->mem);
		free(it);
	}
	while ((it = ss->rx_free)) {
		ss->rx_free = it->next;
		free(it);
	}
	memset(ss, 0, sizeof(*ss));
}

int sw_session_peer_params(struct sw_sock *s, uint32_t msg_size,
			   uint32_t recv_credits)
{
	struct sw_session *ss = &s->ss;

	if (msg_size < 256 || msg_size > (1u << 20) || recv_credits < 2 ||
	    recv_credits > 4096) {
		SW_WARN("fd %d: peer announced %u buffers of %u bytes: out of range",
			s->fd, recv_credits, msg_size);
		return -EPROTO;
	}
	ss->peer_msg_size = msg_size;
	ss->peer_nrecv = recv_credits;
	ss->credits = recv_credits;
	return 0;
}


/* What this connected endpoint cannot do although its provider can (the
 * kernel may let us read one peer process and not another): known before
 * SETUP says what this side offers, so no transfer depends on a path that
 * would fail in mid-stream. */
static void session_ep_limits(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sdp_ep_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	if (ss->prov->mod.ops.ep_query(ss->ep, &a) || a.size < sizeof(a))
		return;
	ss->write_staged = (a.flags & SDP_EP_F_WRITE_STAGED) != 0;
	if ((a.flags & SDP_EP_F_NO_RDMA_READ) && ss->can_read) {
		SW_INFO("fd %d: the provider cannot read this peer's memory: its large sends come through the staging ring",
			s->fd);
		ss->can_read = false;
		session_choose_path(ss);
		/* every large send of the peer now comes through the ring:
		 * a larger one lets it write ahead while this side copies
		 * out, as across a wire (1 MiB: 45 Gbit/s, 4 MiB and more:
		 * 75, iperf3 with 1 MiB writes from root to nobody) */
		ss->staging_size = sw_cfg.staging_size_wire;
	}
}

int sw_session_send_setup(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_setup setup;
	int r;

	session_ep_limits(s);
	sw_xslot_attach(s);
	memset(&setup, 0, sizeof(setup));
	setup.msg_size = ss->msg_size;
	setup.recv_credits = ss->nrecv;
	if (ss->offer_read)
		setup.flags |= SDP_SETUP_F_RDMA_READ;
	/* offers we cannot read we have pushed whole (RDMA_READ unset) */
	if (ss->xs_mine)
		setup.flags |= SDP_SETUP_F_XSLOT;
	/* the staging ring: target of the peer's RDMA writes */
	if (sw_cfg.path != SW_PATH_COPY && sw_cfg.path != SW_PATH_READ) {
		if (sw_staging_create(s) == 0)
			setup.staging = ss->staging_desc;
		else
			SW_INFO("fd %d: no staging ring (registration failed): the peer copies instead",
				s->fd);
	}
	r = sw_send_ctrl(s, SDP_MSG_SETUP, &setup, sizeof(setup), NULL, 0, 0);
	if (r)
		return r;
	ss->setup_sent = true;
	return 0;
}

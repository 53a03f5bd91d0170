/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session_msg.c - control messages: sending one (sw_send_ctrl), polling
 * the completion queue, and the dispatch of received messages through a
 * table by type, with every field validated (docs/protocol.md section 3).
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
#include "downgrade.h"
#include "log.h"
#include "msg_decode.h"
#include "providers.h"
#include "rdma_read.h"
#include "rdma_write.h"
#include "session_msg.h"
#include "session_rx.h"
#include "session_tx.h"
#include "sock.h"
#include "sys.h"
#include "tcp_inband.h"
#include "upgrade.h"
#include "util.h"
#include "wakeup.h"
#include "wire.h"
#include "xslot.h"

#define CTX_SEND_BASE 0x100000000ull	/* send buffer contexts */
#define CTX_RDMA_BASE 0x200000000ull	/* RDMA operation contexts */

static int send_buf_get(struct sw_sock *s, uint32_t *idx)
{
	int spins = 0;

	for (;;) {
		int r = sw_send_slot_get(s, idx);

		if (r != -EAGAIN)
			return r;
		/* all pending: their completions come without the peer */
		if (sw_progress(s) < 0)
			return -ECONNRESET;
		/* except on a provider whose sends wait for room at the
		 * peer (shm with a ring smaller than our credits): a peer
		 * asleep in a wait of its own takes nothing until a doorbell
		 * wakes it (sw_credit_ask paces them) */
		if (++spins % 64 == 0)
			sw_credit_ask(s);
		if (spins > 1000000)
			return -ETIMEDOUT;
	}
}

static void msg_hdr_fill(struct sw_sock *s, struct sdp_msg_hdr *h,
			 uint8_t type, size_t paylen)
{
	struct sw_session *ss = &s->ss;

	h->type = type;
	h->flags = ss->switch_rcvd ? SDP_MSG_F_SWITCHED : 0;
	h->credits = sw_credit_take_owed(ss);
	h->len = paylen;
	h->seq = ss->tx_seq;
	h->reserved = 0;
}

/*
 * The message straight from the caller's memory into the provider
 * (SDP_SEND_INLINE): no send buffer, and one copy of the payload fewer
 * (on shm: from the program's buffer into the peer's ring, not through a
 * buffer of ours first). -EAGAIN when the provider cannot take it so
 * (no such send, too many pieces, its ring full): nothing went, and the
 * caller sends it the buffered way.
 */
#define INLINE_HEAD 128
#define SW_INLINE_SGE 4	/* header and body, then up to 3 pieces */

static int send_inline(struct sw_sock *s, uint8_t type, const void *body,
		       size_t bodylen, const struct iovec *iov, int iovcnt,
		       size_t paylen, uint16_t *credits)
{
	struct sw_session *ss = &s->ss;
	union {
		uint8_t b[INLINE_HEAD];
		struct sdp_msg_hdr h;
	} head;
	struct sdp_sge sge[SW_INLINE_SGE];
	size_t left = paylen;
	int n = 1, i, r;

	if (!(ss->prov->mod.info.caps & SDP_CAP_SEND_INLINE) ||
	    sizeof(head.h) + bodylen > sizeof(head))
		return -EAGAIN;
	for (i = 0; i < iovcnt && left; i++) {
		size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;

		if (!k)
			continue;
		if (n == SW_INLINE_SGE)
			return -EAGAIN;
		sge[n].addr = iov[i].iov_base;
		sge[n].length = k;
		sge[n].mr = NULL;
		n++;
		left -= k;
	}
	msg_hdr_fill(s, &head.h, type, paylen);
	if (bodylen)
		memcpy(head.b + sizeof(head.h), body, bodylen);
	sge[0].addr = head.b;
	sge[0].length = sizeof(head.h) + bodylen;
	sge[0].mr = NULL;
	r = ss->prov->mod.ops.post_send(ss->ep, sge, n, 0, SDP_SEND_INLINE);
	if (r < 0 || r == SDP_PENDING) {
		/* nothing went out: the credits stay owed */
		ss->credits_owed += head.h.credits;
		ss->peer_credits -= head.h.credits;
		/* more pieces than this provider gathers: the buffered way */
		return r == -EINVAL ? -EAGAIN : r < 0 ? r : -EIO;
	}
	*credits = head.h.credits;
	return 0;
}

int sw_send_ctrl(struct sw_sock *s, uint8_t type, const void *body,
		 size_t bodylen, const struct iovec *iov, int iovcnt,
		 size_t paylen)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_hdr *h;
	struct sdp_sge sge;
	uint32_t k;
	uint8_t *buf, *p;
	size_t left = paylen;
	uint16_t credits = 0;
	bool peer_starved, peer_short, news;
	int i, r;

	if (sizeof(*h) + bodylen + paylen > ss->peer_msg_size &&
	    type != SDP_MSG_SETUP)
		return -EMSGSIZE;
	if (type == SDP_MSG_DOWNGRADE && s->ptx_len) {
		/* the program's bytes still waiting for credits go on the
		 * SAN before the stream moves to TCP; the callers retry */
		r = sw_ptx_flush(s);
		if (r)
			return r;
		if (s->ptx_len)
			return -EAGAIN;
	}
	/*
	 * The credit this message uses, looked at again: the caller's look
	 * may be older than progress it made since (an RDMA write's wait, or
	 * the kept bytes a DOWNGRADE sends first), and a message beyond
	 * the credits granted is a protocol error at the peer, which closes
	 * the connection. -EAGAIN: the caller waits for credits as before
	 * its look. SETUP and SWITCH open the session, with every credit
	 * the peer announced still ours.
	 */
	if (type != SDP_MSG_SETUP && type != SDP_MSG_SWITCH &&
	    !sw_credit_can_send(ss, type)) {
		SW_DBG("fd %d: message type %u waits: %d credit(s), %u owed%s",
		       s->fd, type, ss->credits, ss->credits_owed,
		       ss->send_waiting ? ", another message waits for a send slot" : "");
		return -EAGAIN;
	}
	peer_starved = ss->peer_credits <= 1;
	/* the peer short of buffers: a credit return may be what it waits
	 * for, if it asked (its count here can be high by the messages
	 * still on their way, so "short" is generous: half the pool) */
	peer_short = peer_starved ||
		     ss->peer_credits * 2 <= (int32_t)ss->nrecv;
	r = send_inline(s, type, body, bodylen, iov, iovcnt, paylen, &credits);
	if (r == -EAGAIN) {
		/* its progress may take the peer's DOWNGRADE: ours goes
		 * after this message, not inside it */
		ss->dg_hold++;
		ss->send_waiting++;
		r = send_buf_get(s, &k);
		ss->send_waiting--;
		ss->dg_hold--;
		if (r)
			return r;
		buf = ss->sslot[k].mem;
		h = (struct sdp_msg_hdr *)buf;
		msg_hdr_fill(s, h, type, paylen);
		credits = h->credits;
		p = buf + sizeof(*h);
		if (bodylen) {
			memcpy(p, body, bodylen);
			p += bodylen;
		}
		for (i = 0; i < iovcnt && left; i++) {
			size_t n = iov[i].iov_len < left ? iov[i].iov_len :
							     left;

			memcpy(p, iov[i].iov_base, n);
			p += n;
			left -= n;
		}
		sge.addr = buf;
		sge.length = p - buf;
		sge.mr = ss->sslot[k].mr;
		r = ss->prov->mod.ops.post_send(ss->ep, &sge, 1,
						CTX_SEND_BASE + k, 0);
		if (r < 0) {
			/* nothing went out: the credits stay owed */
			ss->credits_owed += credits;
			ss->peer_credits -= credits;
			return r;
		}
		if (r == SDP_PENDING) {
			ss->send_busy[k] = 1;
			ss->sends_pending++;
		}
	} else if (r < 0) {
		return r;
	}
	ss->tx_seq++;
	/* credits returned (in any message's header) to a peer short of
	 * them are news; a WAKE_ME or CREDIT otherwise tells a sleeping
	 * peer nothing to wake for (two idle readers rang each other awake
	 * with them, 1,800 times a second each way). Nor does the return
	 * of the one buffer the peer's own WAKE_ME took: the peer had that
	 * credit when it went to sleep. Two idle ends at the idle pool's
	 * two buffers each were short again after every WAKE_ME, and the
	 * return of its buffer woke the sleeper, which asked again: 5,000
	 * messages and doorbells a second per idle connection. A writer
	 * that waits for credits is woken by a return beyond that one. */
	news = (peer_short && credits > (ss->wake_refund ? 1 : 0)) ||
	       (type != SDP_MSG_WAKE_ME && type != SDP_MSG_CREDIT);
	if (credits)
		ss->wake_refund = false;
	if (news)
		ss->tx_news_seq = ss->tx_seq;
	sw_credit_consume(ss);
	if (type == SDP_MSG_DATA || type == SDP_MSG_RDATA ||
	    type == SDP_MSG_WDATA || type == SDP_MSG_FIN ||
	    type == SDP_MSG_XOFFER)
		ss->peer_waiting = false;
	if (s->st)
		s->st->msgs_tx++;
	/* a credit return to a peer that had none must wake it, unless it
	 * answers that peer's own doorbell (it looks again by itself, and
	 * two ends must not ring each other for ever) */
	if (peer_starved && credits && !ss->quiet_return)
		ss->peer_wants_wake = true;
	/* so must the first bytes after our switch point */
	if (ss->switch_bell &&
	    (type == SDP_MSG_DATA || type == SDP_MSG_RDATA ||
	     type == SDP_MSG_WDATA || type == SDP_MSG_XOFFER ||
	     type == SDP_MSG_OOB || type == SDP_MSG_FIN))
		sw_switch_bell(s);
	if (ss->peer_wants_wake && news)
		sw_doorbell_ring(s);
	return 0;
}

/*
 * A malformed or hostile message: close this connection, say why. Before
 * this side is committed to the upgrade (docs/protocol.md 2.5) every byte
 * of the stream is still on TCP and the peer cannot have switched: the
 * upgrade is given up instead (upgrading() falls back, bad-hello), and the
 * program keeps its connection. A peer of a later version whose SETUP
 * says what this one does not know ends up here.
 */
int sw_proto_error(struct sw_sock *s, const char *why)
{
	if (s->state == SW_UPGRADING && sw_upgrade_can_give_up(s)) {
		if (!s->ss.error)
			SW_WARN("fd %d: the peer's upgrade message is malformed (%s): staying on TCP; run the same sdp-switch version on both ends",
				s->fd, why);
		s->ss.error = EPROTO;
		sw_event(s);
		return -EPROTO;
	}
	SW_ERR("fd %d: closing the connection: malformed message from the peer: %s",
	       s->fd, why);
	if (!s->ss.error) {
		s->ss.error = EPROTO;
		/* the peer's program must not take the stream cut here for
		 * its end: ABORT reads as ECONNRESET there, where TCP's FIN
		 * alone would read as EOF (best effort: a credit, a send
		 * slot; the error is set first, so the progress a send
		 * makes cannot come back here to send another). Only after
		 * our SWITCH: before it, a stream message is the peer's
		 * protocol error, and every byte of ours went on TCP */
		if (s->tx_san && s->ss.ep &&
		    sw_credit_can_send(&s->ss, SDP_MSG_ABORT))
			sw_send_ctrl(s, SDP_MSG_ABORT, NULL, 0, NULL, 0, 0);
	}
	sdp_sys.shutdown(s->fd, SHUT_RDWR);
	sw_event(s);
	return -EPROTO;
}

typedef int (*msg_handler)(struct sw_sock *s, uint32_t idx,
			   const struct sdp_msg_hdr *h, const void *body);

static int on_setup(struct sw_sock *s, uint32_t idx,
		    const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_setup su;
	int r;

	memcpy(&su, body, sizeof(su));
	if (ss->setup_rcvd)
		return sw_proto_error(s, "second SETUP");
	if (su.msg_size != ss->peer_msg_size ||
	    su.recv_credits != ss->peer_nrecv)
		return sw_proto_error(s, "SETUP differs from the peer's hello");
	if (h->len)
		return sw_proto_error(s, "SETUP with payload");
	if (su.staging.length > (1ull << 32) ||
	    (su.staging.length && !(su.staging.access &
				    SDP_ACCESS_REMOTE_WRITE)))
		return sw_proto_error(s, "SETUP staging ring too large or not writable");
	ss->setup_rcvd = true;
	SW_DBG("fd %d: the peer's SETUP came", s->fd);
	ss->peer_staging = su.staging;
	ss->peer_can_read = (su.flags & SDP_SETUP_F_RDMA_READ) != 0;
	/* offers need our slot (made when our SETUP goes, which may be
	 * after this one came: sw_xslot_attach looks again), and the peer's
	 * RdmaRead to take them */
	ss->peer_takes_xoffer = (su.flags & SDP_SETUP_F_XSLOT) != 0;
	sw_xslot_decide(s);
	r = sw_recv_repost(s, idx);
	if (r)
		return r;
	return sw_upgrade_step(s);
}

/* SWITCH: the peer's bytes on TCP end after tcp_bytes; the rest of its
 * stream follows here (docs/protocol.md 2.5). */
static int on_switch(struct sw_sock *s, uint32_t idx,
		     const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_switch sw;
	int r;

	memcpy(&sw, body, sizeof(sw));
	if (ss->switch_rcvd)
		return sw_proto_error(s, "second SWITCH");
	/* the client switches once the server's SETUP committed it, the
	 * server once the client's SWITCH came (docs/protocol.md 2.5) */
	if (s->is_client ? !s->tx_san : !ss->setup_sent)
		return sw_proto_error(s, "SWITCH out of turn");
	if (sw.tcp_bytes < s->tcp_rx)
		return sw_proto_error(s, "SWITCH before bytes already read on TCP");
	ss->switch_rcvd = true;
	s->tcp_rx_limit = sw.tcp_bytes;
	if (s->tcp_rx == s->tcp_rx_limit)
		s->rx_san = true;
	SW_DBG("fd %d: the peer's bytes leave TCP after %llu", s->fd,
	       (unsigned long long)sw.tcp_bytes);
	sw_event(s);
	r = sw_recv_repost(s, idx);
	if (r)
		return r;
	return sw_upgrade_step(s);
}

static int on_data(struct sw_sock *s, uint32_t idx,
		   const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;

	if (!h->len)
		return sw_proto_error(s, "DATA without payload");
	if (ss->fin_rcvd || ss->dg_rcvd)
		return sw_proto_error(s, "DATA after FIN or DOWNGRADE");
	if (sw_rxq_inline(ss, idx, sizeof(*h), h->len) < 0)
		return -ENOMEM;
	if (s->st)
		s->st->rx_copy += h->len;
	return 0;
}

static int on_control(struct sw_sock *s, uint32_t idx,
		      const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;

	switch (h->type) {
	case SDP_MSG_CREDIT:
		if (h->len)
			return sw_proto_error(s, "CREDIT with payload");
		break;
	case SDP_MSG_WAKE_ME: {
		struct sdp_msg_wake w;

		memcpy(&w, body, sizeof(w));
		if (h->len || w.reserved)
			return sw_proto_error(s, "malformed WAKE_ME");
		ss->peer_waiting = true;
		ss->wake_refund = true;
		/* news sent before the peer asked: it may sleep on it unseen
		 * (seen_seq counts the messages it has taken) */
		if ((int32_t)(ss->tx_news_seq - w.seen_seq) > 0)
			sw_doorbell_ring(s);
		else
			ss->peer_wants_wake = true;
		break;
	}
	case SDP_MSG_FIN:
		if (h->len)
			return sw_proto_error(s, "FIN with payload");
		if (ss->dg_rcvd)
			return sw_proto_error(s, "FIN after DOWNGRADE");
		ss->fin_rcvd = true;
		ss->peer_fin = true;
		break;
	case SDP_MSG_ABORT:
		ss->abort_rcvd = true;
		break;
	case SDP_MSG_OOB:
		if (h->len != 1)
			return sw_proto_error(s, "OOB must carry one byte");
		ss->oob_byte = *((const uint8_t *)(h + 1));
		ss->oob_valid = true;
		break;
	case SDP_MSG_DOWNGRADE: {
		struct rx_item *it;

		if (h->len || ss->dg_rcvd)
			return sw_proto_error(s, "malformed or second DOWNGRADE");
		it = sw_rx_item_new(ss);
		if (!it)
			return -ENOMEM;
		it->kind = RX_DOWNGRADE;
		sw_rxq_push(ss, it);
		ss->dg_rcvd = true;
		/* the other direction follows at once */
		if (!ss->dg_sent)
			sw_downgrade_start(s);
		break;
	}
	}
	return sw_recv_repost(s, idx);
}

static int on_delta(struct sw_sock *s, uint32_t idx,
		    const struct sdp_msg_hdr *h, const void *body)
{
	struct sdp_msg_delta d;

	memcpy(&d, body, sizeof(d));
	if (sw_credit_on_delta(s, &d))
		return sw_proto_error(s, "CREDIT_DELTA the connection cannot take");
	return sw_recv_repost(s, idx);
}

static int on_release(struct sw_sock *s, uint32_t idx,
		      const struct sdp_msg_hdr *h, const void *body)
{
	struct sdp_msg_release rl;

	memcpy(&rl, body, sizeof(rl));
	if (sw_credit_on_release(s, idx, &rl))
		return sw_proto_error(s, "CREDIT_RELEASE not asked for");
	return 0;
}

static const msg_handler handlers[SDP_MSG_TYPE_MAX] = {
	[SDP_MSG_SETUP] = on_setup,
	[SDP_MSG_DATA] = on_data,
	[SDP_MSG_RDATA] = sw_rdata_on_msg,
	[SDP_MSG_WDATA] = sw_wdata_on_msg,
	[SDP_MSG_XFER_DONE] = sw_rdata_on_ack,
	[SDP_MSG_STAGING_FREE] = sw_rdata_on_ack,
	[SDP_MSG_CREDIT] = on_control,
	[SDP_MSG_WAKE_ME] = on_control,
	[SDP_MSG_FIN] = on_control,
	[SDP_MSG_ABORT] = on_control,
	[SDP_MSG_OOB] = on_control,
	[SDP_MSG_DOWNGRADE] = on_control,
	[SDP_MSG_CREDIT_DELTA] = on_delta,
	[SDP_MSG_CREDIT_RELEASE] = on_release,
	[SDP_MSG_XOFFER] = sw_xslot_on_offer,
	[SDP_MSG_SWITCH] = on_switch,
};

static int on_recv(struct sw_sock *s, uint32_t idx, uint64_t bytes)
{
	struct sw_session *ss = &s->ss;
	const uint8_t *buf = sw_buf(ss, idx);
	struct sdp_msg_view v;
	struct sdp_msg_hdr h;
	char why[128];

	if (bytes > ss->msg_size)
		return sw_proto_error(s, "message longer than the receive buffer");
	if (sdp_msg_decode(buf, bytes, &v, why, sizeof(why)))
		return sw_proto_error(s, why);
	h = v.hdr;
	if (h.seq != ss->rx_seq) {
		snprintf(why, sizeof(why), "sequence %u where %u was due",
			 h.seq, ss->rx_seq);
		return sw_proto_error(s, why);
	}
	if (!ss->setup_rcvd && h.type != SDP_MSG_SETUP)
		return sw_proto_error(s, "first message is not SETUP");
	/* bytes of the stream, and its end, come only after the switch
	 * point that says where the peer's TCP bytes end */
	if (!ss->switch_rcvd &&
	    (h.type == SDP_MSG_DATA || h.type == SDP_MSG_RDATA ||
	     h.type == SDP_MSG_WDATA || h.type == SDP_MSG_XOFFER ||
	     h.type == SDP_MSG_OOB || h.type == SDP_MSG_FIN ||
	     h.type == SDP_MSG_ABORT || h.type == SDP_MSG_DOWNGRADE))
		return sw_proto_error(s, "stream message before SWITCH");
	if ((h.flags & SDP_MSG_F_SWITCHED) && !s->tx_san)
		return sw_proto_error(s, "SWITCHED flag before our SWITCH");
	if (h.credits && (uint64_t)ss->credits + h.credits > ss->peer_nrecv)
		return sw_proto_error(s, "credit return beyond the peer's buffers");
	if (ss->peer_credits <= 0)
		return sw_proto_error(s, "message beyond the credits granted");
	ss->rx_seq++;
	ss->peer_credits--;
	if (s->st)
		s->st->msgs_rx++;
	/* what a waiter can see changes with data, end of stream, and a
	 * starved sender getting credits back: those are the events */
	if (h.type == SDP_MSG_DATA || h.type == SDP_MSG_RDATA ||
	    h.type == SDP_MSG_WDATA || h.type == SDP_MSG_OOB ||
	    h.type == SDP_MSG_XOFFER) {
		ss->last_rx_ns = sw_now_ns();
		ss->lone_return = true;
		if (ss->peer_credits <= 2 && ss->nrecv < sw_cfg.recv_bufs)
			ss->grow_wanted = true;
		sw_event(s);
	} else if (h.type == SDP_MSG_FIN || h.type == SDP_MSG_ABORT ||
		   h.type == SDP_MSG_DOWNGRADE) {
		sw_event(s);
	}
	else if (h.credits && ss->credits < 2 && ss->credits + h.credits >= 2)
		sw_event(s);
	else if (h.type == SDP_MSG_XFER_DONE || h.type == SDP_MSG_STAGING_FREE)
		sw_event(s);
	sw_credit_returned(ss, h.credits);
	if (h.flags & SDP_MSG_F_WAKE_ME)
		ss->peer_wants_wake = true;
	if (h.flags & SDP_MSG_F_SWITCHED)
		ss->peer_knows_switch = true;
	return handlers[h.type](s, idx, &h, v.body);
}

int sw_progress(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sdp_completion c[16];
	int n, i, r, total = 0, err = 0;
	uint64_t ev0;

	if (!ss->cq)
		return 0;
	ev0 = atomic_load_explicit(&s->event_seq, memory_order_relaxed);
	/* every completion taken from the queue is handled, whatever an
	 * earlier one of the batch returned: a message dropped here would
	 * be a hole in the stream */
	do {
		n = ss->prov->mod.ops.cq_poll(ss->cq, c, 16);
		if (n < 0)
			return n;
		for (i = 0; i < n; i++) {
			switch (c[i].op) {
			case SDP_OP_CONNECT:
				if (c[i].status)
					return c[i].status;
				if (s->state == SW_UPGRADING &&
				    !ss->connected) {
					ss->connected = true;
					r = sw_upgrade_step(s);
					if (r)
						return r;
				}
				break;
			case SDP_OP_RECV:
				if (c[i].status == -EMSGSIZE) {
					sw_proto_error(s, "message longer than the receive buffer");
					break;
				}
				if (c[i].status) {
					if (!ss->peer_dead)
						SW_DBG("fd %d: provider reports the peer gone: %s",
						       s->fd,
						       sdp_strerror(c[i].status));
					ss->peer_dead = true;
					sw_event(s);
					break;
				}
				if (ss->error)
					break;
				r = on_recv(s, (uint32_t)c[i].context,
					    c[i].bytes);
				if (r < 0 && r != -EPROTO && !err)
					err = r;
				break;
			case SDP_OP_SEND:
				if (c[i].context >= CTX_SEND_BASE &&
				    c[i].context < CTX_SEND_BASE + SW_MAX_BUFS &&
				    ss->send_busy[c[i].context -
						  CTX_SEND_BASE]) {
					ss->send_busy[c[i].context -
						      CTX_SEND_BASE] = 0;
					ss->sends_pending--;
				}
				if (c[i].status)
					ss->peer_dead = true;
				break;
			case SDP_OP_RDMA_READ:
			case SDP_OP_RDMA_WRITE:
				ss->rdma_ctx_done = c[i].context;
				ss->rdma_status = c[i].status;
				/* what sw_rdma_wait waits for: a wait about
				 * to sleep (its last progress took this
				 * completion, and the peer's ring that told
				 * of it came before the wait armed) must not */
				sw_event(s);
				break;
			}
		}
		total += n;
	} while (n == 16);
	if (s->state == SW_SAN && !ss->error && !ss->peer_dead) {
		/* a send that fails here (the peer closed its endpoint) does
		 * not end the stream: the messages it sent before still wait
		 * for our receives, and the provider hands them out before
		 * its receive completions say the peer is gone (peer_dead);
		 * the program's own sends see the close through TCP */
		/* kept bytes first: their DATA's header returns what is
		 * owed, where a CREDIT sent before would take the credit the
		 * data needs (two idle ends traded WAKE_ME and CREDIT for
		 * ever while their kept bytes waited) */
		if (s->ptx_len && sw_ptx_due(s))
			sw_ptx_flush(s);
		sw_credit_maybe_update(s);
		if (ss->grow_wanted)
			sw_credit_adapt(s);
		if (s->ptx_len && sw_ptx_due(s))
			sw_ptx_flush(s);
		/* the peer's DOWNGRADE came when no credit let ours go
		 * (on_control): it goes as soon as one does, whichever
		 * thread moves the session, so that a sender waiting for
		 * credits stops putting data on the SAN */
		if (ss->dg_rcvd && !ss->dg_sent)
			sw_downgrade_start(s);
	}
	/* news another thread of ours may sleep for: it is woken (the
	 * peer's doorbell, if any, is left for it, but the messages it
	 * announced are taken) */
	if (atomic_load_explicit(&s->event_seq, memory_order_relaxed) != ev0)
		sw_sleep_wake_others(s);
	return err;
}

/*
 * A write the provider stages waits for the peer's progress: the peer
 * copies our chunks out when it polls its CQ, and sends no message for
 * it. A peer asleep needs a doorbell: the one it asked for (WAKE_ME), or,
 * when it may have had no credit to ask with (by our count it holds one
 * at most: its last goes only with a buffer it returns, and it may owe
 * none), one it did not ask for. The buffers we owe such a peer go back
 * first, so that it can ask the next time. Otherwise a reader whose pool
 * had shrunk (an idle direction), asleep in poll() with no doorbell asked
 * for, would leave us waiting for it to copy out a staged write.
 */
static void rdma_wait_wake_peer(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (!ss->peer_wants_wake) {
		if (ss->peer_credits > 1)
			return;
		if (ss->credits_owed && sw_credit_can_send(ss, SDP_MSG_CREDIT)) {
			/* no doorbell of its own: ours follows */
			ss->quiet_return = true;
			sw_send_ctrl(s, SDP_MSG_CREDIT, NULL, 0, NULL, 0, 0);
			ss->quiet_return = false;
		}
	}
	sw_doorbell_ring(s);
}

int sw_rdma_wait(struct sw_sock *s, uint64_t ctx)
{
	struct sw_session *ss = &s->ss;

	while (ss->rdma_ctx_done != ctx) {
		int r = sw_progress(s);

		if (r < 0)
			return r;
		if (ss->peer_dead || ss->error)
			return -ECONNRESET;
		if (ss->rdma_ctx_done == ctx)
			break;
		/* the staging mode needs the peer's progress: a doorbell
		 * wakes the peer; what it then does sends no message (it
		 * copies our chunks out), so no doorbell comes back: the
		 * provider's CQ tells of it (sw_cq_sleep_fd) */
		rdma_wait_wake_peer(s);
		ss->rdma_waiting = true;
		r = sw_session_wait(s, POLLIN, 0);
		ss->rdma_waiting = false;
		if (r < 0 && r != -ETIMEDOUT && r != -EINTR)
			return r;
	}
	return ss->rdma_status;
}

uint64_t sw_rdma_ctx_new(struct sw_session *ss)
{
	return CTX_RDMA_BASE + ++ss->rdma_ctx_next;
}

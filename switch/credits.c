/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * credits.c - flow control (DESIGN.md section 5, seed 003): a sender never
 * has more messages in flight than the receiver has posted buffers. Every
 * message returns the buffers its sender reposted since its last message;
 * a CREDIT message does so when nothing else is going that way. One credit
 * stays in reserve for CREDIT and WAKE_ME so a side can always announce.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "buffers.h"
#include "config.h"
#include "credits.h"
#include "log.h"
#include "rdma_write.h"
#include "session_msg.h"
#include "session_tx.h"
#include "sock.h"
#include "sys.h"
#include "tcp_inband.h"
#include "util.h"
#include "wire.h"

bool sw_credit_can_send(struct sw_session *ss, uint8_t type)
{
	/* messages that carry program data need two: the last credit is kept
	 * for messages that only return credits, acknowledge or ask for a
	 * wake-up, so a side can always tell the other what it needs. So
	 * does CREDIT_RELEASE: the peer frees the buffer it lands in rather
	 * than handing it back, so a release sent with the last credit
	 * would leave this side none, for good, while the peer may hold the
	 * rest of its buffers with bytes its program has not read (and not
	 * read them: it waits in a send of its own for our credit return) */
	int32_t need = (type == SDP_MSG_DATA || type == SDP_MSG_RDATA ||
			type == SDP_MSG_WDATA || type == SDP_MSG_OOB ||
			type == SDP_MSG_XOFFER ||
			type == SDP_MSG_CREDIT_RELEASE) ?
			       2 : 1;

	if (!ss->peer_nrecv || ss->credits < need || ss->send_waiting)
		return false;
	/*
	 * The last credit goes only with a buffer returned in its header
	 * (or on ABORT, after which nothing more is sent): then the peer
	 * holds a credit when this side holds none, and two sides can never
	 * both be left without one while each owes the other buffers, where
	 * neither could send the return the other waits for.
	 */
	return ss->credits > 1 || ss->credits_owed > 0 ||
	       type == SDP_MSG_ABORT;
}

/*
 * Writable, as poll tells a program of a TCP socket: a send of any size
 * makes progress without waiting. Credits for data, and, where the peer
 * offers a staging ring (the send buffer of large writes), a third of it
 * free, as TCP wants a third of its send buffer free (sk_stream_wspace):
 * a program told writable with the ring full would block in its write,
 * and one whose peer does the same (socat in both directions) would wait
 * for it forever instead of reading.
 */
bool sw_credit_writable(struct sw_session *ss)
{
	uint64_t used = ss->peer_staging_head - ss->peer_staging_freed;

	return sw_credit_can_send(ss, SDP_MSG_DATA) &&
	       (!ss->peer_staging.length ||
		used + ss->peer_staging.length / 3 <= ss->peer_staging.length);
}

void sw_credit_consume(struct sw_session *ss)
{
	ss->credits--;
}

void sw_credit_returned(struct sw_session *ss, uint16_t n)
{
	ss->credits += n;
}

uint16_t sw_credit_take_owed(struct sw_session *ss)
{
	uint32_t n = ss->credits_owed > 0xffff ? 0xffff : ss->credits_owed;

	ss->credits_owed -= n;
	ss->peer_credits += n;
	return (uint16_t)n;
}

/* Sends what is owed to the peer: a pending transfer acknowledgement, a
 * pending FIN, and a CREDIT message when enough buffers wait to be
 * announced or the peer is short of them. */

/*
 * A sender of data left with one credit cannot send it (data needs two,
 * and its last credit goes only with a returned buffer, which a one-way
 * sender never owes): once we have consumed everything it sent and owe it
 * a single buffer, that buffer goes back now, or the sender would wait
 * for our next message of our own (a bounded nap) with its bytes kept.
 * Only data re-arms this: a return costs the peer a buffer of ours, and
 * two sides that send nothing must not trade CREDIT messages for ever.
 */
static bool lone_return_due(struct sw_session *ss)
{
	return ss->credits_owed == 1 && ss->peer_credits <= 1 &&
	       ss->lone_return && !ss->rxq;
}

/*
 * A doorbell we had not asked for: the peer holds bytes (or a FIN) for us
 * and has no credit to send them, nor any buffer of ours to return with
 * its last one, so it cannot say so in a message (sw_credit_ask). Once we
 * have taken everything queued, the buffers we owe go back at once if by
 * our count the peer is short. Our program may never sleep on this
 * connection (it polls other fds that are always ready, or loops on a
 * non-blocking recv), so no WAKE_ME of ours would carry them. The CREDIT
 * rings no doorbell of its own: the peer looks for it, and a ring would
 * be an unasked doorbell there, answered the same way, for ever.
 */
static int bell_return(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	int r;

	if (!ss->bell_unasked || ss->rxq)
		return 0;
	ss->bell_unasked = false;
	if (!ss->credits_owed || ss->peer_credits > 1 ||
	    !sw_credit_can_send(ss, SDP_MSG_CREDIT))
		return 0;
	ss->quiet_return = true;
	r = sw_send_ctrl(s, SDP_MSG_CREDIT, NULL, 0, NULL, 0, 0);
	ss->quiet_return = false;
	return r;
}

static int lone_return(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (!lone_return_due(ss) || !sw_credit_can_send(ss, SDP_MSG_CREDIT))
		return 0;
	ss->lone_return = false;
	return sw_send_ctrl(s, SDP_MSG_CREDIT, NULL, 0, NULL, 0, 0);
}

static int maybe_update(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint32_t threshold = ss->nrecv / 2 > 2 ? ss->nrecv / 2 : 2;
	int r;

	/* after our DOWNGRADE our stream goes on on TCP, behind our marker:
	 * TCP's FIN ends it there (a FIN message after the DOWNGRADE would
	 * be a protocol error at the peer, which closes the connection) */
	if (ss->fin_pending && ss->dg_sent) {
		if (sdp_sys.shutdown(s->fd, SHUT_WR) && errno != ENOTCONN)
			return -errno;
		ss->fin_pending = false;
		ss->fin_sent = true;
	}
	if (!ss->peer_nrecv || !ss->ep)
		return 0;
	if (ss->xfer_ack_pending && sw_credit_can_send(ss, SDP_MSG_XFER_DONE)) {
		struct sdp_msg_ack ack = { .xfer_id = ss->xfer_ack_id,
					   .bytes = ss->xfer_ack_bytes };

		r = sw_send_ctrl(s, SDP_MSG_XFER_DONE, &ack, sizeof(ack), NULL,
				 0, 0);
		if (r)
			return r;
		ss->xfer_ack_pending = false;
	}
	if (ss->staging_freed_unsent &&
	    (ss->staging_freed_unsent >= ss->staging_len / 4 ||
	     ss->staging_freed_unsent >= 256 * 1024 ||
	     !ss->rx_queued) &&
	    sw_credit_can_send(ss, SDP_MSG_STAGING_FREE)) {
		struct sdp_msg_ack ack = { .bytes = ss->staging_freed_unsent };

		r = sw_send_ctrl(s, SDP_MSG_STAGING_FREE, &ack, sizeof(ack),
				 NULL, 0, 0);
		if (r)
			return r;
		ss->staging_freed_unsent = 0;
	}
	if (ss->release_owed) {
		r = sw_credit_send_releases(s);
		if (r)
			return r;
	}
	/* FIN follows every byte, those written during the upgrade or kept
	 * back to coalesce too */
	if (ss->fin_pending && s->ptx_len) {
		r = sw_ptx_flush(s);
		if (r)
			return r;
	}
	if (ss->fin_pending && !s->ptx_len &&
	    sw_credit_can_send(ss, SDP_MSG_FIN)) {
		r = sw_send_ctrl(s, SDP_MSG_FIN, NULL, 0, NULL, 0, 0);
		if (r)
			return r;
		ss->fin_pending = false;
		ss->fin_sent = true;
	}
	if (ss->credits_owed >= threshold ||
	    (ss->credits_owed && ss->peer_credits <= 0) ||
	    (ss->credits_owed >= 2 && ss->peer_credits <= 1)) {
		if (!sw_credit_can_send(ss, SDP_MSG_CREDIT))
			return -EAGAIN;
		r = sw_send_ctrl(s, SDP_MSG_CREDIT, NULL, 0, NULL, 0, 0);
		if (r)
			return r;
	}
	r = bell_return(s);
	if (r)
		return r;
	return lone_return(s);
}

/*
 * A send of ours that finds every send buffer in flight moves the session
 * on while it waits for one (send_buf_get), and that progress comes back
 * here: it must not send again what the send under way already stands for
 * (an XFER_DONE, a STAGING_FREE, a FIN, the next CREDIT_RELEASE with its
 * count not yet taken down), which the peer takes as a protocol error and
 * which, with the release count wrapping, recursed until the stack ran out.
 * The outer call goes on with the rest once its send is out.
 */
int sw_credit_maybe_update(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	int r;

	if (ss->updating)
		return 0;
	ss->updating = true;
	r = maybe_update(s);
	ss->updating = false;
	return r;
}

/*
 * Before this side waits: the buffers it has reposted go back to the peer
 * now rather than at half the pool, so that a peer holding bytes back to
 * coalesce (session_tx.c) sees at once that everything it sent has been
 * consumed. One owed buffer stays for the next message: a CREDIT costs
 * the peer a buffer too, and two idle sides must not trade them forever.
 */
void sw_credit_return_owed(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (s->state != SW_SAN || !ss->peer_nrecv || !ss->ep || ss->error ||
	    ss->peer_dead)
		return;
	if (ss->credits_owed < 2) {
		lone_return(s);
		return;
	}
	if (!sw_credit_can_send(ss, SDP_MSG_CREDIT))
		return;
	sw_send_ctrl(s, SDP_MSG_CREDIT, NULL, 0, NULL, 0, 0);
}

/* How often a sender short of credits asks a peer that did not ask to be
 * woken, while no message comes from it. */
#define SW_ASK_AGAIN_NS 100000000ull

/*
 * A sender short of credits for data asks the peer for them: a doorbell,
 * which costs no credit. A peer asleep on this connection asked for it
 * (WAKE_ME): its wait wakes, takes what came and asks again to be woken;
 * that WAKE_ME returns every buffer it owes. A peer that did not ask may
 * still be in its program's calls on the connection without ever
 * sleeping there (its poll has another fd ready each time, or it loops on
 * a non-blocking recv), holding the one buffer we need: no message of
 * ours can ask for it (our last credit goes only with a returned buffer),
 * so the doorbell does, unasked, and the peer's switch returns what it
 * owes (bell_return). Asked again after each message of the peer's, else
 * every SW_ASK_AGAIN_NS: a peer in no call reads it on its next one.
 */
void sw_credit_ask(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint64_t now;

	if (s->state != SW_SAN || ss->error || ss->peer_dead)
		return;
	if (ss->peer_wants_wake) {
		sw_doorbell_ring(s);
		return;
	}
	now = sw_now_ns();
	if (ss->ask_ns && ss->ask_rx_seq == ss->rx_seq &&
	    now - ss->ask_ns < SW_ASK_AGAIN_NS)
		return;
	ss->ask_rx_seq = ss->rx_seq;
	ss->ask_ns = now;
	sw_doorbell_ring(s);
}

/* ---- credit deltas: buffers follow the traffic ----------------------------- */

static atomic_int big_conns;

void sw_credit_note_size(struct sw_session *ss)
{
	bool big = ss->prov && (ss->nrecv > sw_cfg.recv_bufs_idle ||
				ss->staging);
	struct sw_sock *s = (struct sw_sock *)((char *)ss -
					       offsetof(struct sw_sock, ss));

	if (s->st) {
		s->st->reg_bytes = sw_bufs_registered(ss);
		s->st->recv_bufs = ss->nrecv;
	}
	if (big != ss->big) {
		atomic_fetch_add(&big_conns, big ? 1 : -1);
		ss->big = big;
	}
}

int sw_idle_sleep_ms(void)
{
	return atomic_load(&big_conns) > 0 ? (int)sw_cfg.idle_ms : -1;
}

/* Receiver: the peer is short of buffers: post more, offer staging. */
static void grow(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_delta d;
	uint32_t i, added = 0;

	memset(&d, 0, sizeof(d));
	for (i = 0; i < SW_MAX_BUFS && ss->nrecv < sw_cfg.recv_bufs; i++) {
		if (ss->rslot[i].mem)
			continue;
		if (sw_recv_slot_add(s, i))
			break;
		if (sw_recv_post_new(s, i)) {
			sw_recv_slot_drop(s, i);
			break;
		}
		added++;
	}
	if (!ss->staging && !ss->staging_dead &&
	    sw_cfg.path != SW_PATH_COPY && sw_cfg.path != SW_PATH_READ &&
	    sw_staging_create(s) == 0) {
		d.flags |= SDP_DELTA_F_STAGING;
		d.staging = ss->staging_desc;
	}
	if (!added && !d.flags)
		return;
	if (!added) {
		/* a staging offer rides on a delta of one buffer */
		for (i = 0; i < SW_MAX_BUFS && ss->rslot[i].mem; i++)
			;
		if (i == SW_MAX_BUFS || sw_recv_slot_add(s, i) ||
		    sw_recv_post_new(s, i)) {
			if (i < SW_MAX_BUFS)
				sw_recv_slot_drop(s, i);
			sw_staging_drop(s);
			return;
		}
		added = 1;
	}
	d.delta = (int32_t)added;
	if (sw_send_ctrl(s, SDP_MSG_CREDIT_DELTA, &d, sizeof(d), NULL, 0, 0))
		return;
	ss->peer_credits += added;
	SW_DBG("fd %d: %u more receive buffers%s", s->fd, added,
	       d.flags ? " and a staging ring" : "");
}

/* Receiver: idle for a while: ask the peer to give buffers back. */
static void shrink(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_delta d;
	uint32_t n = ss->nrecv > sw_cfg.recv_bufs_idle ?
			     ss->nrecv - sw_cfg.recv_bufs_idle : 0;
	bool revoke = ss->staging && !ss->staging_dead &&
		      ss->staging_consumed == ss->staging_recv_head;

	/* buffers holding unread data are not ours to give */
	if (n > (uint32_t)(ss->peer_credits > 2 ? ss->peer_credits - 2 : 0))
		n = ss->peer_credits > 2 ? ss->peer_credits - 2 : 0;
	if (!n && !revoke)
		return;
	memset(&d, 0, sizeof(d));
	d.delta = -(int32_t)n;
	if (revoke)
		d.flags = SDP_DELTA_F_REVOKE_STAGING;
	if (sw_send_ctrl(s, SDP_MSG_CREDIT_DELTA, &d, sizeof(d), NULL, 0, 0))
		return;
	ss->release_expect = n ? n : 1;
	ss->release_free = n;
	ss->revoke_pending = revoke;
	SW_DBG("fd %d: idle: asking %u receive buffers back%s", s->fd, n,
	       revoke ? " and the staging ring" : "");
}

void sw_credit_adapt(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	/* called before this side sleeps: bytes kept back to coalesce go
	 * now, whatever the peer's pace, and so do owed credits */
	if (s->ptx_len && s->state == SW_SAN)
		sw_ptx_flush(s);
	sw_credit_return_owed(s);

	if (s->state != SW_SAN || !ss->setup_rcvd || ss->dg_sent ||
	    ss->dg_rcvd || ss->error || ss->peer_dead || ss->release_expect ||
	    !sw_credit_can_send(ss, SDP_MSG_CREDIT_DELTA))
		return;
	if (ss->grow_wanted) {
		/* the peer sends data faster than it gets buffers back */
		ss->grow_wanted = false;
		if (ss->nrecv < sw_cfg.recv_bufs) {
			grow(s);
			sw_credit_note_size(ss);
			return;
		}
	}
	if (!ss->rxq && sw_now_ns() - ss->last_rx_ns >
			       (uint64_t)sw_cfg.idle_ms * 1000000ull) {
		shrink(s);
		sw_send_slots_trim(s, 2);
	}
	sw_credit_note_size(ss);
}

int sw_credit_on_delta(struct sw_sock *s, const struct sdp_msg_delta *d)
{
	struct sw_session *ss = &s->ss;

	if (ss->release_owed)
		return -EPROTO;	/* one delta at a time */
	if (d->delta > 0) {
		if (ss->peer_nrecv + (uint32_t)d->delta > 4096)
			return -EPROTO;
		ss->credits += d->delta;
		ss->peer_nrecv += d->delta;
		if (d->flags & SDP_DELTA_F_STAGING) {
			ss->peer_staging = d->staging;
			ss->peer_staging_head = 0;
			ss->peer_staging_freed = 0;
		}
		return 0;
	}
	if ((uint32_t)-d->delta + 2 > ss->peer_nrecv)
		return -EPROTO;
	if (d->flags & SDP_DELTA_F_REVOKE_STAGING) {
		if (!ss->peer_staging.length)
			return -EPROTO;
		ss->peer_staging.length = 0; /* no more writes into it */
	}
	ss->release_drop = (uint32_t)-d->delta;
	ss->release_owed = ss->release_drop ? ss->release_drop : 1;
	return 0;
}

/* Sender: the releases the peer asked for. */
int sw_credit_send_releases(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	while (ss->release_owed &&
	       sw_credit_can_send(ss, SDP_MSG_CREDIT_RELEASE)) {
		uint32_t owed = ss->release_owed;
		struct sdp_msg_release rl = { .last = owed == 1 };
		int r = sw_send_ctrl(s, SDP_MSG_CREDIT_RELEASE, &rl,
				     sizeof(rl), NULL, 0, 0);

		if (r)
			return r;
		/* a count that moved under the send (sw_credit_maybe_update
		 * keeps it from) must not wrap into endless releases */
		if (ss->release_owed != owed)
			return -EPROTO;
		if (--ss->release_owed == 0) {
			ss->peer_nrecv -= ss->release_drop;
			ss->release_drop = 0;
		}
	}
	return 0;
}

int sw_credit_on_release(struct sw_sock *s, uint32_t idx,
			 const struct sdp_msg_release *rl)
{
	struct sw_session *ss = &s->ss;

	if (!ss->release_expect || rl->last != (ss->release_expect == 1))
		return -EPROTO;
	if (ss->revoke_pending) {
		/* the peer has stopped writing into the staging ring */
		ss->revoke_pending = false;
		if (ss->staging_consumed == ss->staging_recv_head)
			sw_staging_drop(s);
		else
			ss->staging_dead = true;
	}
	ss->release_expect--;
	if (ss->release_free) {
		ss->release_free--;
		sw_recv_slot_drop(s, idx);
		sw_credit_note_size(ss);
		return 0;
	}
	return sw_recv_repost(s, idx);
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * xslot.c - the transfer slot (XOFFER): a shared area where the sender
 * offers a large send and the receiver claims it, each copying half; the
 * slot's set-up, the offer, the claim and the offer taken back.
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
#include "rdma_read.h"
#include "session_msg.h"
#include "session_rx.h"
#include "session_tx.h"
#include "sock.h"
#include "spin.h"
#include "tcp_inband.h"
#include "util.h"
#include "wire.h"
#include "xslot.h"

/* The transfer slots live in the provider's shared area, when it has one
 * (SharedArea extension, fetched by GUID: only a provider whose two ends
 * share memory offers it). Without one, no XOFFER either way. Across
 * users one side may reach the other and not the reverse (root facing an
 * unprivileged worker): root offers, and has the worker push nothing;
 * the worker offers too, and root writes all of each offer it takes. */
void sw_xslot_attach(struct sw_sock *s)
{
	static const struct sdp_guid g = SDP_GUID_SHARED_AREA;
	struct sw_session *ss = &s->ss;
	struct sw_provider *p = ss->prov;
	sdp_shared_area_fn fn = NULL;
	void *mine, *peers;
	size_t len;

	ss->xs_mine = ss->xs_peer = NULL;
	if (!sw_cfg.xslot || sw_cfg.path != SW_PATH_AUTO ||
	    !p->mod.ext.rdma_read)
		return;
	if (p->mod.ops.ioctl(p->mod.prov,
			     SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER, &g,
			     sizeof(g), &fn, sizeof(fn)) || !fn)
		return;
	if (fn(ss->ep, &mine, &peers, &len) ||
	    len < sizeof(struct sdp_xslot) || ((uintptr_t)mine & 63) ||
	    ((uintptr_t)peers & 63))
		return;
	ss->xs_mine = mine;
	ss->xs_peer = peers;
	sw_xslot_decide(s);
	/* ours starts idle: no claim of an old offer can match */
	atomic_store(&ss->xs_mine->push, 0);
	atomic_store(&ss->xs_mine->consumed, 0);
	__atomic_store_n(&ss->xs_mine->reserved, 0, __ATOMIC_RELAXED);
	atomic_store(&ss->xs_mine->state, 0);
}

/* Do we offer in our slot? The peer takes offers it reads itself (with
 * our push of half, when we can write it), or, when it cannot read us,
 * offers we write all of into its buffer: root facing an unprivileged
 * peer, whose memory root may reach but not the reverse. Decided when our
 * slot is attached and when the peer's SETUP comes, whichever is last. */
void sw_xslot_decide(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	ss->peer_xslot = ss->xs_mine && ss->peer_takes_xoffer &&
			 (ss->peer_can_read || !ss->write_staged);
	SW_DBG("fd %d: the peer %s, %s; we %s", s->fd,
	       ss->peer_can_read ? "reads us" : "cannot read us",
	       ss->peer_takes_xoffer ? "takes offers" : "takes no offer",
	       !ss->xs_mine ? "have no transfer slot yet" :
	       ss->peer_xslot ? "offer large sends" : "make no offer");
}

/* XOFFER: bytes wait in the peer's transfer slot; queued in stream
 * order, claimed when the program reads them (sw_xslot_take). */
int sw_xslot_on_offer(struct sw_sock *s, uint32_t idx,
		      const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_rdata rd;

	memcpy(&rd, body, sizeof(rd));
	/* SETUP said we take offers, read or pushed: we have a slot */
	if (!ss->xs_peer)
		return sw_proto_error(s, "XOFFER but no transfer slot was offered");
	if (h->len || !rd.xfer_id || !rd.total ||
	    rd.total > rd.region.length ||
	    !(rd.region.access & SDP_ACCESS_REMOTE_READ))
		return sw_proto_error(s, "malformed XOFFER");
	if (ss->fin_rcvd || ss->dg_rcvd)
		return sw_proto_error(s, "XOFFER after FIN or DOWNGRADE");
	if (sw_rxq_remote(ss, RX_XSLOT, &rd) < 0)
		return -ENOMEM;
	return sw_recv_repost(s, idx);
}

/*
 * A wait for a copy of SW_XSLOT_NAP_MIN bytes or more that the peer makes
 * alone (across users, only one side may reach the other's memory) polls
 * SW_XSLOT_POLL_NS, then sleeps on the slot's word (sw_shared_wait) for at
 * most SW_XSLOT_NAP_NS at a time: the peer spreads that copy over two
 * threads, and a third one polling beside them took a core from them.
 * Shorter copies are polled for: a wake-up costs more than they take (64
 * KiB writes from nobody to root ran at half the rate with naps). A peer
 * that copies on one thread (it may use one CPU only, or its switch
 * predates the wake-up) wakes no one: after
 * SW_XSLOT_NAP_MISSES naps in a row that ended without a wake, the waits
 * of that kind poll again, as they should when the peer's one CPU is not
 * ours, and try sleeping again every SW_XSLOT_NAP_RETRY offers.
 */
#define SW_XSLOT_NAP_MIN (512u << 10)
#define SW_XSLOT_POLL_NS 4000ull
#define SW_XSLOT_NAP_NS 200000ull
#define SW_XSLOT_NAP_MISSES 2
#define SW_XSLOT_NAP_RETRY 256

/* A nap on the slot's word while it holds cur (the low half). A wake-up
 * clears *missed; a nap that ran out while the word changed (the peer
 * finished without waking us) counts in it; a word that had changed
 * before the nap tells neither. */
static void xslot_nap(_Atomic uint64_t *word, uint64_t cur, uint8_t *missed)
{
	switch (sw_shared_wait(word, (uint32_t)cur, SW_XSLOT_NAP_NS)) {
	case SW_WAIT_WOKEN:
		*missed = 0;
		break;
	case SW_WAIT_TIMEOUT:
		if (atomic_load(word) != cur && *missed < SW_XSLOT_NAP_MISSES)
			(*missed)++;
		break;
	case SW_WAIT_CHANGED:
		break;
	}
}

/* The copying side's end of a nap: after a copy of n bytes made alone
 * (the peer may not reach us, so it waits), wake the peer if it may be
 * asleep on word, that is if the copy was large and ran on two threads. */
static void xslot_wake(const struct sw_session *ss, _Atomic uint64_t *word,
		       uint64_t n)
{
	if (!ss->peer_can_read && n >= SW_XSLOT_NAP_MIN && sw_cpus_several())
		sw_shared_wake(word);
}

/* Offers the receiver took in pieces smaller than this on average make the
 * next SW_XSLOT_BACKOFF large sends use the other paths. */
#define SW_XSLOT_SMALL_READ (64 * 1024)
#define SW_XSLOT_BACKOFF 32
/* So does an offer the receiver took longer than SW_XSLOT_LATE_NS plus a
 * nanosecond per SW_XSLOT_LATE_BYTES bytes to take (or never took): its
 * program was not waiting in a read, or got the CPU only now and then.
 * An offer makes the two programs take turns, one offer per turn: a
 * receiver short of CPU (other runnable threads in its scheduling group)
 * took 1 MiB offers milliseconds apart, one per slice it got, and ran at
 * an eighth of TCP's rate. Through the staging ring the sender runs ahead
 * of it, as TCP's does through the socket buffer. */
#define SW_XSLOT_LATE_NS 500000ull
#define SW_XSLOT_LATE_BYTES 8

/* The receiver asked for a push: write [push_off, push_off + push_len) of
 * the offer into its sink. Everything read from the slot is the peer's:
 * each field is read once, the range must lie inside the offer and inside
 * the sink's length, and the sink is only ever used through rdma_write,
 * which the provider checks against the peer's registration. Returns NULL,
 * or what the peer broke (the push is marked FAILED). */
static const char *xslot_push(struct sw_sock *s, struct sdp_xslot *xs,
			      uint32_t seq, uint8_t *p, size_t len,
			      struct sdp_mr *mr, uint64_t *pushed)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;
	uint64_t req = SDP_XS_WORD(seq, SDP_XP_REQ);
	uint64_t off, n, ctx;
	struct sdp_rdma_desc sink;
	struct sdp_sge sge;
	const char *bad = NULL;
	bool whole;
	int r;

	/* a write that costs us a copy more than the receiver's own pull
	 * (the kernel lets it read us, not us write it): it pulls instead */
	if (ss->write_staged) {
		atomic_compare_exchange_strong(&xs->push, &req,
					       SDP_XS_WORD(seq, SDP_XP_FAILED));
		return NULL;
	}
	if (!atomic_compare_exchange_strong(&xs->push, &req,
					    SDP_XS_WORD(seq, SDP_XP_STARTED)))
		return NULL;	/* taken back */
	off = __atomic_load_n(&xs->push_off, __ATOMIC_RELAXED);
	n = __atomic_load_n(&xs->push_len, __ATOMIC_RELAXED);
	memcpy(&sink, &xs->sink, sizeof(sink));
	/* from where the receiver stands in the offer: all of its read is
	 * ours, and it may sleep until we are done (only a wake-up hangs on
	 * this guess) */
	whole = off == __atomic_load_n(&xs->consumed, __ATOMIC_RELAXED);
	r = -EINVAL;
	if (off > len || !n || n > len - off) {
		bad = "transfer slot push range outside the offer";
	} else if (n > sink.length) {
		bad = "transfer slot push longer than its sink";
	} else {
		sge.addr = p + off;
		sge.length = n;
		sge.mr = mr;
		ctx = sw_rdma_ctx_new(ss);
		/* a receiver that cannot read us waits for all of it: the
		 * copy may take both cores */
		r = pv->mod.ext.rdma_write(ss->ep, &sge, 1, &sink, 0, ctx,
					   ss->peer_can_read ? 0 :
					   SDP_RDMA_SPREAD);
		if (r == SDP_PENDING)
			r = sw_rdma_wait(s, ctx);
		/* the peer described memory it does not expose */
		if (r == -SDP_EBADKEY || r == -SDP_EBOUNDS ||
		    r == -SDP_ERIGHTS)
			bad = "transfer slot push sink refused by the provider";
	}
	if (!r)
		*pushed += n;
	atomic_store_explicit(&xs->push,
			      SDP_XS_WORD(seq, r ? SDP_XP_FAILED : SDP_XP_DONE),
			      memory_order_release);
	/* a receiver that cannot read us sleeps while we write, and so does
	 * one that could but left us all of a large read (its CPU is
	 * crowded): that one is woken whatever our CPUs, since it naps for
	 * good once it has left a read to us (xslot_wake's rule would let
	 * it sleep out every nap while we copy on one CPU) */
	if (whole && n >= SW_XSLOT_NAP_MIN && ss->peer_can_read)
		sw_shared_wake(&xs->push);
	else
		xslot_wake(ss, &xs->push, n);
	return bad;
}

/* Is w a push word the receiver may leave in our slot during offer seq?
 * NONE (0 from the offer's start, or a request taken back), REQ, or the
 * DONE or FAILED we stored. STARTED is ours only inside xslot_push. */
static bool xslot_push_word_ok(uint64_t w, uint32_t seq)
{
	if (w == 0)
		return true;
	if ((uint32_t)(w >> 32) != seq)
		return false;
	switch ((uint32_t)w) {
	case SDP_XP_NONE:
	case SDP_XP_REQ:
	case SDP_XP_DONE:
	case SDP_XP_FAILED:
		return true;
	}
	return false;
}

/* Puts o (p and len set) in our transfer slot and sends XOFFER. Returns
 * 0, -ENOBUFS (registration failed, nothing offered) or < 0 (the XOFFER
 * could not go). */
static int xslot_offer(struct sw_sock *s, struct sw_xoffer *o)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;
	struct sdp_xslot *xs = ss->xs_mine;
	struct sdp_msg_rdata rd;
	struct sdp_rdma_desc desc;
	int r;

	r = pv->mod.ext.register_memory(pv->mod.prov, o->p, o->len, 0, &o->mr);
	if (r)
		goto reg_failed;
	r = pv->mod.ext.register_rdma_memory(ss->ep, o->p, o->len,
					     SDP_ACCESS_REMOTE_READ, &desc,
					     &o->rmr);
	if (r)
		goto dereg_mr;
	o->seq = ++ss->xs_seq ? ss->xs_seq : ++ss->xs_seq;
	if (!(o->seq % SW_XSLOT_NAP_RETRY))
		ss->xs_nap_missed_tx = 0;
	atomic_store_explicit(&xs->consumed, 0, memory_order_relaxed);
	atomic_store_explicit(&xs->push, 0, memory_order_relaxed);
	__atomic_store_n(&xs->reserved, 0, __ATOMIC_RELAXED);
	atomic_store_explicit(&xs->state, SDP_XS_WORD(o->seq, SDP_XS_OFFERED),
			      memory_order_release);
	memset(&rd, 0, sizeof(rd));
	rd.xfer_id = o->seq;
	rd.total = o->len;
	rd.region = desc;
	r = sw_send_ctrl(s, SDP_MSG_XOFFER, &rd, sizeof(rd), NULL, 0, 0);
	if (!r)
		return 0;
	atomic_store(&xs->state, 0);
	pv->mod.ext.deregister_rdma_memory(ss->ep, o->rmr);
dereg_mr:
	pv->mod.ext.deregister_memory(pv->mod.prov, o->mr);
	if (r == -ECONNRESET || r == -EPIPE || r == -EAGAIN)
		return r;
reg_failed:
	if (s->st)
		s->st->reg_failures++;
	return -ENOBUFS;
}

/*
 * Works with the receiver on offer o until it has taken all of it: it
 * claims the offer when its program reads, copies a part itself (RdmaRead)
 * and may ask this side to write another part into its buffer (push). An
 * offer nobody claims within bound_ns (counted from the last sign of
 * progress; 0: at once) is taken back by CAS; a claim in progress is a
 * bounded copy and is waited for. Then the slot is idle again and the
 * offer's memory deregistered (a lent offer's mapping is left to the
 * caller, which may need the rest). Returns the bytes the receiver took
 * (the caller sends the rest another way), or < 0.
 */
static ssize_t xslot_finish(struct sw_sock *s, struct sw_xoffer *o,
			    uint64_t bound)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;
	struct sdp_xslot *xs = ss->xs_mine;
	uint64_t claim_bound = (uint64_t)sw_cfg.xslot_claim_ms * 1000000;
	uint64_t got = 0, last = 0, pushed = 0, now, deadline, claim_end, w;
	const char *bad = NULL;
	unsigned spins = 0, steps = 0, relax = 0;
	uint64_t claimed_at = 0, offered_at = sw_now_ns();
	uint32_t seq = o->seq;
	size_t len = o->len;
	bool hurry;

	deadline = offered_at + bound;
	claim_end = sw_now_ns() + claim_bound;
	for (;;) {
		w = atomic_load_explicit(&xs->state, memory_order_acquire);
		/* nobody may write the reserved word */
		if (__atomic_load_n(&xs->reserved, __ATOMIC_RELAXED)) {
			bad = "transfer slot reserved word not zero";
			break;
		}
		if (w == SDP_XS_WORD(seq, SDP_XS_OFFERED)) {
			/* the receiver's count only grows, up to the offer */
			got = atomic_load_explicit(&xs->consumed,
						   memory_order_relaxed);
			if (got > len || got < last) {
				bad = got > len ?
				      "transfer slot count beyond the offer" :
				      "transfer slot count went back";
				break;
			}
			if (got == len)
				break;
			now = sw_now_ns();
			if (got != last) {
				last = got;
				steps++;
				deadline = now + bound;
			}
			claim_end = now + claim_bound;
			/* another thread of ours waits for this socket's
			 * lock (a reader the peer's own offer may wait for:
			 * Java's echo clients jammed both ends until the
			 * bound ran out): the offer goes back at once */
			hurry = atomic_load(&s->users) > 1;
			/* a receiver told its data is readable must find
			 * bytes when it reads: take the offer back only
			 * when a DATA message can follow at once (or,
			 * without credits, after ten bounds) */
			if (((now >= deadline || hurry) &&
			     (sw_credit_can_send(ss, SDP_MSG_DATA) ||
			      now >= deadline + 9 * bound)) || sw_tx_error(s)) {
				if (!atomic_compare_exchange_strong(
					    &xs->state, &w,
					    SDP_XS_WORD(seq,
							SDP_XS_CANCELLED)))
					continue;
				/* a claim may have come and gone since the
				 * count was read (the state word is the
				 * same again): read it once more, now that
				 * no claim can change it */
				got = atomic_load(&xs->consumed);
				if (got > len || got < last) {
					bad = got > len ?
					      "transfer slot count beyond the offer" :
					      "transfer slot count went back";
					break;
				}
				break;
			}
		} else if (w == SDP_XS_WORD(seq, SDP_XS_REFUSED)) {
			/* the receiver can no longer read us: what it took
			 * went, the rest and every later send go by staging */
			ss->peer_xslot = false;
			ss->peer_can_read = false;
			got = atomic_load(&xs->consumed);
			if (got > len || got < last)
				bad = got > len ?
				      "transfer slot count beyond the offer" :
				      "transfer slot count went back";
			break;
		} else if (w == SDP_XS_WORD(seq, SDP_XS_CLAIMED)) {
			uint64_t pw = atomic_load_explicit(
				&xs->push, memory_order_acquire);

			if (!xslot_push_word_ok(pw, seq)) {
				bad = "transfer slot push word the receiver may not set";
				break;
			}
			if (pw == SDP_XS_WORD(seq, SDP_XP_REQ)) {
				bad = xslot_push(s, xs, seq, o->p, len, o->mr,
						 &pushed);
				if (bad)
					break;
				claim_end = sw_now_ns() + claim_bound;
			}
			/* a claim is a bounded copy, but not across the
			 * peer's death */
			if (ss->peer_dead || ss->error || ss->abort_rcvd)
				break;
			/* nor forever: a receiver that keeps the claim
			 * (a hostile one, or one stopped mid-copy) ends
			 * the connection, not the program's write */
			now = sw_now_ns();
			if (now >= claim_end) {
				bad = "transfer slot claimed for longer than SDP_XSLOT_CLAIM_MS";
				break;
			}
			deadline = now + bound;
			if (!claimed_at)
				claimed_at = now;
			/* we cannot write the receiver, so it copies all of
			 * the claim: sleep until it wakes us at the end */
			if (ss->write_staged && len - last >= SW_XSLOT_NAP_MIN &&
			    now - claimed_at >= SW_XSLOT_POLL_NS &&
			    ss->xs_nap_missed_tx < SW_XSLOT_NAP_MISSES) {
				xslot_nap(&xs->state, w,
					  &ss->xs_nap_missed_tx);
				spins |= 63;	/* look at the peer now */
			}
			goto relax;
		} else {
			/* only the receiver writes something else here */
			bad = "transfer slot in a state the receiver may not set";
			break;
		}
		claimed_at = 0;
relax:
		if (!(++spins & 63)) {
			if (sw_progress(s) < 0)
				ss->peer_dead = true;
			if (ss->peer_wants_wake)
				sw_doorbell_ring(s);
		}
		sw_spin_relax(&relax);
	}
	/* a broken slot, a dead peer or an error: what the receiver had
	 * counted when we last looked is what went */
	if (bad || w == SDP_XS_WORD(seq, SDP_XS_CLAIMED))
		got = last;
	if (bad)
		sw_proto_error(s, bad);
	atomic_store_explicit(&xs->state, SDP_XS_WORD(seq, SDP_XS_IDLE),
			      memory_order_release);
	/* a program that reads in small pieces pays a system call per piece
	 * here, and this side spins meanwhile: its staging ring serves it
	 * better (one memcpy per piece), for the next sends (a lent offer
	 * costs this side no spin while the program reads it) */
	if (!o->map &&
	    ((steps && got / steps < SW_XSLOT_SMALL_READ) ||
	     sw_now_ns() - offered_at >=
		     SW_XSLOT_LATE_NS + len / SW_XSLOT_LATE_BYTES))
		ss->xs_backoff = SW_XSLOT_BACKOFF;
	if (s->st) {
		s->st->tx_rdma_write += pushed;
		s->st->tx_rdma_read += got - (pushed < got ? pushed : got);
	}
	/* the descriptor dies now, whatever the peer still holds */
	pv->mod.ext.deregister_rdma_memory(ss->ep, o->rmr);
	pv->mod.ext.deregister_memory(pv->mod.prov, o->mr);
	o->mr = NULL;
	o->rmr = NULL;
	return got;
}

/*
 * XOFFER: offers [p, p+len) in our transfer slot until the receiver has
 * taken it all or the bound (nb: SDP_XSLOT_NB_US, else SDP_XSLOT_BLOCK_US)
 * ran out. Returns the bytes the receiver took (0: none; the caller sends
 * them another way) or < 0 (-ENOBUFS: registration failed, nothing
 * offered).
 */
ssize_t sw_xslot_send(struct sw_sock *s, uint8_t *p, size_t len, bool nb)
{
	struct sw_xoffer o = { .p = p, .len = len };
	int r;

	r = xslot_offer(s, &o);
	if (r)
		return r;
	return xslot_finish(s, &o, (uint64_t)(nb ? sw_cfg.xslot_nb_us :
					      sw_cfg.xslot_block_us) * 1000);
}

bool sw_xslot_can_lend(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	return s->state == SW_SAN && ss->peer_xslot && ss->peer_can_read &&
	       !ss->lend.len && !ss->dg_sent && !ss->dg_rcvd &&
	       !s->ptx_len && !sw_tx_error(s) &&
	       sw_credit_can_send(ss, SDP_MSG_XOFFER);
}

int sw_xslot_lend(struct sw_sock *s, uint8_t *p, size_t len, void *map,
		  size_t map_len)
{
	struct sw_xoffer *o = &s->ss.lend;
	int r;

	o->p = p;
	o->len = len;
	r = xslot_offer(s, o);
	if (r) {
		memset(o, 0, sizeof(*o));
		return r;
	}
	o->map = map;
	o->map_len = map_len;
	return 0;
}

int sw_xslot_lend_state(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sw_xoffer *o = &ss->lend;
	uint64_t w;

	if (!o->len)
		return SW_LEND_NONE;
	if (ss->peer_dead || ss->error || ss->abort_rcvd || !ss->xs_mine)
		return SW_LEND_ENDED;
	w = atomic_load_explicit(&ss->xs_mine->state, memory_order_acquire);
	if (w == SDP_XS_WORD(o->seq, SDP_XS_CLAIMED))
		return SW_LEND_OUT;
	if (w == SDP_XS_WORD(o->seq, SDP_XS_OFFERED) &&
	    atomic_load_explicit(&ss->xs_mine->consumed,
				 memory_order_relaxed) < o->len)
		return SW_LEND_OUT;
	/* taken whole, refused, or a state only a broken peer leaves:
	 * sw_xslot_lend_end says which */
	return SW_LEND_ENDED;
}

uint64_t sw_xslot_lend_left(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint64_t c;

	if (!ss->lend.len || !ss->xs_mine)
		return ss->lend.len;
	c = atomic_load_explicit(&ss->xs_mine->consumed, memory_order_relaxed);
	return c < ss->lend.len ? ss->lend.len - c : 0;
}

ssize_t sw_xslot_lend_end(struct sw_sock *s, struct sw_xoffer *o)
{
	struct sw_session *ss = &s->ss;

	if (!o->len)
		return 0;
	if (!ss->xs_mine || !ss->ep)
		return -EPIPE;
	return xslot_finish(s, o, 0);
}

void sw_xslot_lend_free(struct sw_sock *s, struct sw_xoffer *o)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;

	if (!o->len)
		return;
	if (pv && o->rmr && ss->ep)
		pv->mod.ext.deregister_rdma_memory(ss->ep, o->rmr);
	if (pv && o->mr)
		pv->mod.ext.deregister_memory(pv->mod.prov, o->mr);
	if (o->map)
		munmap(o->map, o->map_len);
	memset(o, 0, sizeof(*o));
}

/* Waits for the sender to finish the push of len bytes asked for in the
 * slot. Returns 0 when it wrote the bytes, 1 or 2 when this side must pull
 * them itself (1: the sender failed; 2: it did not start within
 * SDP_SPIN_US and the request was taken back; with keep, which a side
 * that cannot pull asks for, the budget is SDP_XSLOT_CLAIM_MS), < 0 when
 * the sender is gone
 * (-ECONNRESET), broke the protocol (-EPROTO) or kept the push STARTED for
 * SDP_XSLOT_CLAIM_MS (-ETIMEDOUT). whole: the push is all of the read, so
 * this side has nothing to copy meanwhile and may sleep. The sink stays
 * registered until this returns: while the push is STARTED the sender may
 * be writing into it. */
static int xslot_push_wait(struct sw_sock *s, struct sdp_xslot *xs,
			   uint32_t seq, bool keep, bool whole, size_t len)
{
	struct sw_session *ss = &s->ss;
	uint64_t now = sw_now_ns();
	uint64_t give_up = now + (uint64_t)sw_cfg.xslot_claim_ms * 1000000;
	/* the sender polls its slot while it offers: a request it has not
	 * started within SDP_SPIN_US it is not looking at. Not the crowded
	 * thread's budget of 0: that took every request back at once, and a
	 * receiver short of CPU copied all of each read itself. */
	uint64_t end = keep ? give_up :
		       now + (uint64_t)sw_cfg.spin_us * 1000;
	unsigned spins = 0, relax = 0;
	uint64_t w;

	for (;;) {
		w = atomic_load_explicit(&xs->push, memory_order_acquire);
		if (w == SDP_XS_WORD(seq, SDP_XP_DONE))
			return 0;
		if (w == SDP_XS_WORD(seq, SDP_XP_FAILED))
			return 1;
		if (w == SDP_XS_WORD(seq, SDP_XP_REQ)) {
			if (sw_now_ns() >= end &&
			    atomic_compare_exchange_strong(
				    &xs->push, &w,
				    SDP_XS_WORD(seq, SDP_XP_NONE)))
				return 2;
		} else if (w != SDP_XS_WORD(seq, SDP_XP_STARTED)) {
			return -EPROTO;
		}
		/* all of it is the sender's copy: sleep until it wakes us
		 * (xslot_push), looking at the peer after each nap */
		if (whole && len >= SW_XSLOT_NAP_MIN &&
		    ss->xs_nap_missed_rx < SW_XSLOT_NAP_MISSES &&
		    sw_now_ns() - now >= SW_XSLOT_POLL_NS) {
			xslot_nap(&xs->push, w, &ss->xs_nap_missed_rx);
			spins |= 63;
		}
		if (!(++spins & 63)) {
			sw_progress(s);
			if (ss->peer_dead || ss->abort_rcvd)
				return -ECONNRESET;
			/* a push is one bounded write: a sender that
			 * started it and never ends it is broken */
			if (sw_now_ns() >= give_up &&
			    w == SDP_XS_WORD(seq, SDP_XP_STARTED))
				return -ETIMEDOUT;
			if (ss->peer_wants_wake)
				sw_doorbell_ring(s);
		}
		sw_spin_relax(&relax);
	}
}

/* Why a claim of offer seq failed, from the state word found instead:
 * NULL when the sender may have left it there (it took the offer back,
 * or made later offers since), else what is wrong. The sender stores
 * OFFERED before it sends XOFFER, and nobody but us claims. */
static const char *xslot_claim_failed(uint64_t w, uint32_t seq)
{
	uint32_t wseq = (uint32_t)(w >> 32), st = (uint32_t)w;

	if (st > SDP_XS_CANCELLED)
		return "transfer slot state the sender may not set";
	if ((int32_t)(wseq - seq) < 0)
		return "transfer slot state older than the offer";
	if (st == SDP_XS_CLAIMED)
		return "transfer slot claimed by someone else";
	if (wseq == seq && st == SDP_XS_OFFERED)
		return "transfer slot state changed during our claim";
	return NULL;
}

/* Takes len bytes at offset skip of an XSLOT item into dst: claims the
 * offer, copies (a large read: the first half by RdmaRead here while the
 * sender writes the second half into dst), and hands the claim back with
 * the new count (none for MSG_PEEK). Returns len, -EAGAIN when the offer
 * is over (taken back by the sender: the item ends here), -EPROTO when
 * the sender broke the slot (logged, the connection is closed), or < 0.
 * Nothing is read from the slot but the state and push words and the
 * reserved word; total and lengths come from XOFFER. */
ssize_t sw_xslot_take(struct sw_sock *s, struct rx_item *it, uint8_t *dst,
		      size_t len, uint64_t skip, bool consume)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;
	struct sdp_xslot *xs = ss->xs_peer;
	uint32_t seq = it->xfer_id;
	uint64_t w = SDP_XS_WORD(seq, SDP_XS_OFFERED);
	uint64_t base = it->off + skip;
	struct sdp_rmr *sink_rmr = NULL;
	struct rx_item tmp = *it;
	const char *bad = NULL;
	size_t half = len;
	bool refused;
	int r, pw;

	/* a slot found broken before stays broken: said once */
	if (ss->error == EPROTO)
		return -EPROTO;
	if (__atomic_load_n(&xs->reserved, __ATOMIC_RELAXED)) {
		sw_proto_error(s, "transfer slot reserved word not zero");
		return -EPROTO;
	}
	if (!atomic_compare_exchange_strong(&xs->state, &w,
					    SDP_XS_WORD(seq, SDP_XS_CLAIMED))) {
		bad = xslot_claim_failed(w, seq);
		if (!bad)
			return -EAGAIN;
		sw_proto_error(s, bad);
		return -EPROTO;
	}
	/* how much we pull (half): all when the sender cannot write us,
	 * spread over our cores (it waits); none when we cannot read it
	 * (our SETUP said XSLOT without RDMA_READ: it offers only when it
	 * can write us); else half of a large read, while the sender pushes
	 * the other half, or none of it when this thread's CPU is crowded:
	 * the sender, which polls its slot meanwhile, has a CPU to copy
	 * with, and this side sleeps until it is done */
	if (!(seq % SW_XSLOT_NAP_RETRY))
		ss->xs_nap_missed_rx = 0;
	if (!ss->can_read)
		half = 0;
	else if (consume && len >= sw_cfg.xslot_split && ss->peer_can_read &&
		 !it->no_push)
		half = sw_cpu_crowded() ? 0 : (len / 2) & ~(size_t)63;
	if (half < len) {
		struct sdp_rdma_desc sink;

		if (!pv->mod.ext.register_rdma_memory(ss->ep, dst + half,
						      len - half,
						      SDP_ACCESS_REMOTE_WRITE,
						      &sink, &sink_rmr)) {
			memcpy(&xs->sink, &sink, sizeof(sink));
			xs->push_off = base + half;
			xs->push_len = len - half;
			atomic_store_explicit(&xs->push,
					      SDP_XS_WORD(seq, SDP_XP_REQ),
					      memory_order_release);
		} else {
			sink_rmr = NULL;
			half = len;
		}
	}
	r = 0;
	tmp.off = base;
	if (half && !ss->can_read) {
		r = -EOPNOTSUPP;	/* no sink: the sender sends it again */
	} else if (half) {
		/* a sender that cannot write us pushes nothing: it waits */
		bool alone = !ss->peer_can_read;

		r = sw_rdata_pull(s, &tmp, dst, half,
				  alone ? SDP_RDMA_SPREAD : 0);
		if (!r && alone && s->st)
			s->st->flags |= SW_CONN_RX_ALONE;
	}
	if (sink_rmr) {
		pw = xslot_push_wait(s, xs, seq, !ss->can_read, !half,
				     len - half);
		/* a sender that lets a request stand unstarted is not
		 * looking at its slot: it lent the offer and went on (a
		 * sendfile); the rest of this offer is pulled alone */
		if (pw == 2) {
			it->no_push = true;
			pw = 1;
		}
		if (pw == 1 && !r && !ss->can_read) {
			/* the sender could not write us after all: the rest
			 * of this offer and every later send go another way */
			r = -EOPNOTSUPP;
		} else if (pw == 1 && !r) {
			tmp.off = base + half;
			r = sw_rdata_pull(s, &tmp, dst + half, len - half, 0);
		} else if (pw == -EPROTO) {
			bad = "transfer slot push in a state the sender may not set";
		} else if (pw == -ETIMEDOUT) {
			bad = "transfer slot push started but not finished within SDP_XSLOT_CLAIM_MS";
		} else if (pw < 0) {
			r = pw;
		} else if (pw == 0 && s->st) {
			s->st->rx_rdma_write += len - half;
			if (!half)
				s->st->flags |= SW_CONN_RX_PUSHED;
		}
		pv->mod.ext.deregister_rdma_memory(ss->ep, sink_rmr);
	}
	if (!r && !bad && consume)
		atomic_store_explicit(&xs->consumed, base + len,
				      memory_order_relaxed);
	/* the kernel refused our RdmaRead since SETUP (the sender changed
	 * its credentials): this offer ends at what we counted, and the
	 * sender makes no more (REFUSED); the program sees no error */
	refused = r == -EOPNOTSUPP && !bad;
	if (refused)
		ss->can_read = false;
	/* the claim is ours: only a broken sender changes it meanwhile */
	w = SDP_XS_WORD(seq, SDP_XS_CLAIMED);
	if (!atomic_compare_exchange_strong(&xs->state, &w,
					    SDP_XS_WORD(seq, refused ?
							SDP_XS_REFUSED :
							SDP_XS_OFFERED)) &&
	    !bad && !ss->peer_dead)
		bad = "transfer slot state changed during our claim";
	/* a sender that cannot write us sleeps while we pull */
	xslot_wake(ss, &xs->state, half);
	if (bad) {
		sw_proto_error(s, bad);
		return -EPROTO;
	}
	if (refused)
		return -EAGAIN;
	return r ? r : (ssize_t)len;
}

/* An offer that ended before the program read all of it: the sender took
 * the rest back and sends it again after this point of the stream. */
void sw_xslot_drop(struct sw_session *ss, struct rx_item *it,
		   struct rx_item **peek_it, uint64_t *peek_off)
{
	struct rx_item **pp = &ss->rxq, *prev = NULL;

	while (*pp && *pp != it) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return;
	*pp = it->next;
	ss->xs_dropped = true;
	if (ss->rxq_tail == it)
		ss->rxq_tail = prev;
	ss->rx_queued -= it->len;
	if (peek_it && *peek_it == it) {
		*peek_it = it->next;
		*peek_off = 0;
	}
	sw_rx_item_free(ss, it);
}

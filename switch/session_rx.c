/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session_rx.c - the receiving side of the session protocol: delivers the
 * queued pieces of the byte stream to the program in order (inline data
 * from receive buffers, WDATA from the staging ring, RDATA pulled straight
 * into the program's buffer by RdmaRead, XOFFER taken from the sender's
 * transfer slot with the sender writing half of a large read), honouring
 * MSG_PEEK, MSG_WAITALL and MSG_DONTWAIT, and reports EOF only after every
 * byte before it.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "sw_internal.h"

uint64_t sw_rdma_ctx_new(struct sw_session *ss);
int sw_proto_error(struct sw_sock *s, const char *why);

/* Pulls len bytes of a REMOTE item into dst. Registration failure uses a
 * bounce through a receive-sized piece (copy). Returns 0 or < 0. */
static int pull_remote(struct sw_sock *s, struct rx_item *it, uint8_t *dst,
		       size_t len)
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
	r = pv->mod.ext.rdma_read(ss->ep, &sge, 1, &it->desc, it->off, ctx, 0);
	if (r == SDP_PENDING)
		r = sw_rdma_wait(s, ctx);
	pv->mod.ext.deregister_memory(pv->mod.prov, mr);
	if (r == 0 && s->st)
		s->st->rx_rdma_read += len;
	return r;
}

/* A read that found its offer taken back waits this long at most for the
 * bytes the sender sends instead at once: only a descheduled sender (a busy
 * machine) takes more than microseconds. */
#define SW_XSLOT_REFILL_NS (50 * 1000000ull)

/* Waits for the sender to finish the push asked for in the slot. Returns
 * 0 when it wrote the bytes, 1 when this side must pull them itself (the
 * sender failed, or did not start within the spin budget and the request
 * was taken back), < 0 when the sender is gone (-ECONNRESET), broke the
 * protocol (-EPROTO) or kept the push STARTED for SDP_XSLOT_CLAIM_MS
 * (-ETIMEDOUT). The sink stays registered until this returns: while the
 * push is STARTED the sender may be writing into it. */
static int xslot_push_wait(struct sw_sock *s, struct sdp_xslot *xs,
			   uint32_t seq)
{
	struct sw_session *ss = &s->ss;
	uint64_t now = sw_now_ns();
	uint64_t end = now + (uint64_t)sw_cfg.spin_us * 1000;
	uint64_t give_up = now + (uint64_t)sw_cfg.xslot_claim_ms * 1000000;
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
				return 1;
		} else if (w != SDP_XS_WORD(seq, SDP_XP_STARTED)) {
			return -EPROTO;
		}
		if (!(++spins & 63)) {
			sw_progress(s);
			if (ss->peer_dead || ss->abort_rcvd)
				return -ECONNRESET;
			/* a push is one bounded write: a sender that
			 * started it and never ends it is broken */
			if (sw_now_ns() >= give_up)
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
static ssize_t xslot_take(struct sw_sock *s, struct rx_item *it, uint8_t *dst,
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
	if (consume && len >= sw_cfg.xslot_split) {
		struct sdp_rdma_desc sink;

		half = (len / 2) & ~(size_t)63;
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
	tmp.off = base;
	r = pull_remote(s, &tmp, dst, half);
	if (sink_rmr) {
		pw = xslot_push_wait(s, xs, seq);
		if (pw == 1 && !r) {
			tmp.off = base + half;
			r = pull_remote(s, &tmp, dst + half, len - half);
		} else if (pw == -EPROTO) {
			bad = "transfer slot push in a state the sender may not set";
		} else if (pw == -ETIMEDOUT) {
			bad = "transfer slot push started but not finished within SDP_XSLOT_CLAIM_MS";
		} else if (pw < 0) {
			r = pw;
		} else if (pw == 0 && s->st) {
			s->st->rx_rdma_write += len - half;
		}
		pv->mod.ext.deregister_rdma_memory(ss->ep, sink_rmr);
	}
	if (!r && !bad && consume)
		atomic_store_explicit(&xs->consumed, base + len,
				      memory_order_relaxed);
	/* the claim is ours: only a broken sender changes it meanwhile */
	w = SDP_XS_WORD(seq, SDP_XS_CLAIMED);
	if (!atomic_compare_exchange_strong(&xs->state, &w,
					    SDP_XS_WORD(seq, SDP_XS_OFFERED)) &&
	    !bad && !ss->peer_dead)
		bad = "transfer slot state changed during our claim";
	if (bad) {
		sw_proto_error(s, bad);
		return -EPROTO;
	}
	return r ? r : (ssize_t)len;
}

/* An offer that ended before the program read all of it: the sender took
 * the rest back and sends it again after this point of the stream. */
static void xslot_drop(struct sw_session *ss, struct rx_item *it,
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

/* Copies up to len bytes from the head of the queue into dst. consume:
 * advance the queue (not for MSG_PEEK). Returns bytes or < 0. */
static ssize_t rx_copy(struct sw_sock *s, uint8_t *dst, size_t len,
		       bool consume, struct rx_item **peek_it,
		       uint64_t *peek_off)
{
	struct sw_session *ss = &s->ss;
	struct rx_item *it = consume ? ss->rxq : *peek_it;
	uint64_t skip = consume ? 0 : *peek_off;
	size_t n;
	int r;

	if (!it)
		return 0;
	n = it->len - skip;
	if (n > len)
		n = len;
	switch (it->kind) {
	case RX_INLINE:
		memcpy(dst, sw_buf(ss, it->buf) + it->off + skip, n);
		break;
	case RX_STAGING: {
		uint64_t o = (it->off + skip) % ss->staging_len;

		/* on_wdata keeps items inside the ring; stay there anyway */
		if (n > ss->staging_len - o)
			n = ss->staging_len - o;
		memcpy(dst, ss->staging + o, n);
		break;
	}
	case RX_REMOTE: {
		struct rx_item tmp = *it;

		tmp.off += skip;
		r = pull_remote(s, &tmp, dst, n);
		if (r == -SDP_EBADKEY || r == -SDP_EBOUNDS ||
		    r == -SDP_ERIGHTS) {
			/* the peer described memory it does not expose */
			sw_proto_error(s, "RDATA region refused by the provider");
			return -ECONNRESET;
		}
		if (r < 0)
			return r;
		break;
	}
	case RX_XSLOT: {
		ssize_t m = xslot_take(s, it, dst, n, skip, consume);

		if (m == -EAGAIN) {
			xslot_drop(ss, it, consume ? NULL : peek_it, peek_off);
			return -EAGAIN;
		}
		if (m == -SDP_EBADKEY || m == -SDP_EBOUNDS ||
		    m == -SDP_ERIGHTS) {
			sw_proto_error(s, "XOFFER region refused by the provider");
			return -ECONNRESET;
		}
		if (m == -EPROTO)	/* logged: the connection is closed */
			return -ECONNRESET;
		if (m < 0)
			return m;
		break;
	}
	case RX_DOWNGRADE:
		return 0; /* callers stop before it */
	}
	if (!consume) {
		*peek_off += n;
		if (*peek_off == it->len) {
			*peek_it = it->next;
			*peek_off = 0;
		}
		return n;
	}
	it->off += n;
	it->len -= n;
	ss->rx_queued -= n;
	if (it->kind == RX_STAGING) {
		ss->staging_consumed += n;
		ss->staging_freed_unsent += n;
		/* a revoked ring goes once its last bytes are read */
		if (ss->staging_dead &&
		    ss->staging_consumed == ss->staging_recv_head) {
			ss->staging_freed_unsent = 0;
			sw_staging_drop(s);
		}
	}
	if (it->len == 0) {
		ss->rxq = it->next;
		if (!ss->rxq)
			ss->rxq_tail = NULL;
		if (it->kind == RX_INLINE) {
			r = sw_recv_repost(s, it->buf);
			if (r < 0)
				ss->peer_dead = true;
		} else if (it->kind == RX_REMOTE) {
			ss->xfer_ack_pending = true;
			ss->xfer_ack_id = it->xfer_id;
			ss->xfer_ack_bytes = it->off;
		}
		sw_rx_item_free(ss, it);
	}
	return n;
}

static ssize_t rx_deliver(struct sw_sock *s, struct iovec *iov, int iovcnt,
			  size_t want, bool peek)
{
	struct rx_item *pit = s->ss.rxq;
	uint64_t poff = 0;
	size_t got = 0;
	int i;

	for (i = 0; i < iovcnt && got < want; i++) {
		size_t done = 0;

		while (done < iov[i].iov_len && got < want) {
			size_t room = iov[i].iov_len - done;
			ssize_t n;

			if (room > want - got)
				room = want - got;
			if (peek ? !pit : !s->ss.rxq)
				return got;
			if ((peek ? pit : s->ss.rxq)->kind == RX_DOWNGRADE)
				return got;
			n = rx_copy(s, (uint8_t *)iov[i].iov_base + done, room,
				    !peek, &pit, &poff);
			if (n == -EAGAIN)
				continue;	/* an offer ended: the next */
			if (n < 0)
				return got ? (ssize_t)got : n;
			if (n == 0)
				return got;
			done += n;
			got += n;
		}
	}
	return got;
}

ssize_t sw_session_recv(struct sw_sock *s, struct iovec *iov, int iovcnt,
			int flags)
{
	struct sw_session *ss = &s->ss;
	size_t want = 0, got = 0;
	bool nb = sw_nonblocking(s, flags);
	bool peek = flags & MSG_PEEK;
	bool waitall = (flags & MSG_WAITALL) && !peek;
	int i;

	for (i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	if (flags & MSG_OOB) {
		if (!ss->oob_valid) {
			errno = EINVAL;
			return -1;
		}
		if (!want)
			return 0;
		*(uint8_t *)iov[0].iov_base = ss->oob_byte;
		if (!peek)
			ss->oob_valid = false;
		return 1;
	}
	if (!want)
		return 0;
	for (;;) {
		ssize_t n;

		sw_progress(s);
		if (ss->rxq && ss->rxq->kind == RX_DOWNGRADE) {
			/* the peer's data continues on TCP */
			if (got)
				break;
			return -2;
		}
		if (ss->rxq) {
			struct iovec part[16];
			int k = 0;
			size_t off = got, left = want - got;

			/* the part of iov not filled yet */
			for (i = 0; i < iovcnt && k < 16 && left; i++) {
				size_t l;

				if (off >= iov[i].iov_len) {
					off -= iov[i].iov_len;
					continue;
				}
				l = iov[i].iov_len - off;
				if (l > left)
					l = left;
				part[k].iov_base =
					(uint8_t *)iov[i].iov_base + off;
				part[k++].iov_len = l;
				left -= l;
				off = 0;
			}
			n = rx_deliver(s, part, k, want - got, peek);
			if (n < 0) {
				if (got)
					break;
				errno = -n == ECONNRESET ? ECONNRESET : EIO;
				return -1;
			}
			if (n == 0 && ss->xs_dropped) {
				/* offers ended: the sender sends the rest at
				 * once; the program was told there was data,
				 * so wait for it a little */
				uint64_t end = sw_now_ns() + SW_XSLOT_REFILL_NS;
				unsigned relax = 0;

				ss->xs_dropped = false;
				while (!ss->rxq && !ss->peer_dead &&
				       !ss->error && !ss->abort_rcvd &&
				       sw_now_ns() < end) {
					sw_progress(s);
					sw_spin_relax(&relax);
				}
				continue;
			}
			got += n;
			/* the grace of sw_peer_ended() runs from here too */
			ss->last_rx_ns = sw_now_ns();
			if (!peek)
				sw_credit_maybe_update(s);
			if (got == want || !waitall)
				break;
			continue;
		}
		if (got && !waitall)
			break;
		if (ss->abort_rcvd || ss->error) {
			if (got)
				break;
			errno = ECONNRESET;
			return -1;
		}
		/* another thread closed the socket (or dup2'ed a file over
		 * it, as the JDK does to interrupt a blocked read): the read
		 * ends as on the file that now has the number, at its end */
		if (ss->fin_rcvd || s->closed)
			break;
		if (sw_peer_ended(s)) {
			SW_DBG("fd %d: end of stream without FIN (provider: peer gone %d, TCP closed %d)",
			       s->fd, ss->peer_dead, s->tcp_eof);
			/* the peer is gone without a FIN: what TCP shows
			 * for a process that died is EOF */
			break;
		}
		if (nb) {
			if (got)
				break;
			errno = EAGAIN;
			return -1;
		}
		if (sw_session_wait(s, POLLIN, 0) == -EINTR && !ss->rxq) {
			if (got)
				break;
			errno = EINTR;
			return -1;
		}
	}
	return got;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session_tx.c - the sending side of the session protocol: small sends are
 * copied into control messages (DATA), optionally coalesced while the peer
 * is behind; large sends from a blocking socket expose the program's buffer
 * for the receiver to pull (RDATA, RdmaRead) when the receiver can; large
 * sends from a non-blocking one are RDMA-written into the receiver's
 * staging ring in pieces (WDATA). Registration failures fall back to copy.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "sw_internal.h"

uint64_t sw_rdma_ctx_new(struct sw_session *ss);

static size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	int i;

	for (i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* The contiguous piece of the iovec at byte offset off. */
static void iov_at(const struct iovec *iov, int n, size_t off, uint8_t **p,
		   size_t *len)
{
	int i;

	for (i = 0; i < n; i++) {
		if (off < iov[i].iov_len) {
			*p = (uint8_t *)iov[i].iov_base + off;
			*len = iov[i].iov_len - off;
			return;
		}
		off -= iov[i].iov_len;
	}
	*p = NULL;
	*len = 0;
}

/* A sub-iovec [off, off+len) of iov, at most 16 pieces. */
static int iov_slice(const struct iovec *iov, int n, size_t off, size_t len,
		     struct iovec *out)
{
	int i, k = 0;

	for (i = 0; i < n && len && k < 16; i++) {
		size_t l;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		l = iov[i].iov_len - off;
		if (l > len)
			l = len;
		out[k].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[k].iov_len = l;
		k++;
		len -= l;
		off = 0;
	}
	return k;
}

/* WDATA piece: small enough for the receiver to copy out the previous one
 * while this one is written, large enough that the messages cost little. */
#define SW_WDATA_PIECE (256 * 1024)

static size_t inline_max(struct sw_session *ss)
{
	return ss->peer_msg_size - sizeof(struct sdp_msg_hdr);
}

/* RDATA: expose [p, p+len) read-only, let the receiver pull it, wait for
 * XFER_DONE. Returns bytes sent (len) or < 0 (-ENOBUFS: registration
 * failed, nothing sent). */
static ssize_t send_rdata(struct sw_sock *s, uint8_t *p, size_t len)
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
	if (s->st)
		s->st->tx_rdma_read += len;
	return len;
}

int sw_proto_error(struct sw_sock *s, const char *why);
static int tx_error(struct sw_sock *s);

/* Offers the receiver took in pieces smaller than this on average make the
 * next SW_XSLOT_BACKOFF large sends use the other paths. */
#define SW_XSLOT_SMALL_READ (64 * 1024)
#define SW_XSLOT_BACKOFF 32

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
	int r;

	if (!atomic_compare_exchange_strong(&xs->push, &req,
					    SDP_XS_WORD(seq, SDP_XP_STARTED)))
		return NULL;	/* taken back */
	off = __atomic_load_n(&xs->push_off, __ATOMIC_RELAXED);
	n = __atomic_load_n(&xs->push_len, __ATOMIC_RELAXED);
	memcpy(&sink, &xs->sink, sizeof(sink));
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
		r = pv->mod.ext.rdma_write(ss->ep, &sge, 1, &sink, 0, ctx, 0);
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

/*
 * XOFFER: offers [p, p+len) in our transfer slot and works with the
 * receiver until it has taken all of it: it claims the offer when its
 * program reads, copies a part itself (RdmaRead) and may ask this side to
 * write another part into its buffer (push). An offer nobody claims within
 * the bound (nb: SDP_XSLOT_NB_US, else SDP_XSLOT_BLOCK_US, counted from
 * the last sign of progress) is taken back by CAS; a claim in progress is
 * a bounded copy and is waited for. Returns the bytes the receiver took
 * (0: none; the caller sends them another way) or < 0 (-ENOBUFS:
 * registration failed, nothing offered).
 */
static ssize_t send_xoffer(struct sw_sock *s, uint8_t *p, size_t len,
			   bool nb)
{
	struct sw_session *ss = &s->ss;
	struct sw_provider *pv = ss->prov;
	struct sdp_xslot *xs = ss->xs_mine;
	uint64_t bound = (uint64_t)(nb ? sw_cfg.xslot_nb_us :
				    sw_cfg.xslot_block_us) * 1000;
	uint64_t claim_bound = (uint64_t)sw_cfg.xslot_claim_ms * 1000000;
	uint64_t got = 0, last = 0, pushed = 0, now, deadline, claim_end, w;
	const char *bad = NULL;
	struct sdp_msg_rdata rd;
	struct sdp_rdma_desc desc;
	struct sdp_rmr *rmr;
	struct sdp_mr *mr;
	unsigned spins = 0, steps = 0, relax = 0;
	bool hurry;
	uint32_t seq;
	int r;

	r = pv->mod.ext.register_memory(pv->mod.prov, p, len, 0, &mr);
	if (r)
		goto reg_failed;
	r = pv->mod.ext.register_rdma_memory(ss->ep, p, len,
					     SDP_ACCESS_REMOTE_READ, &desc,
					     &rmr);
	if (r)
		goto dereg_mr;
	seq = ++ss->xs_seq ? ss->xs_seq : ++ss->xs_seq;
	atomic_store_explicit(&xs->consumed, 0, memory_order_relaxed);
	atomic_store_explicit(&xs->push, 0, memory_order_relaxed);
	__atomic_store_n(&xs->reserved, 0, __ATOMIC_RELAXED);
	atomic_store_explicit(&xs->state, SDP_XS_WORD(seq, SDP_XS_OFFERED),
			      memory_order_release);
	memset(&rd, 0, sizeof(rd));
	rd.xfer_id = seq;
	rd.total = len;
	rd.region = desc;
	r = sw_send_ctrl(s, SDP_MSG_XOFFER, &rd, sizeof(rd), NULL, 0, 0);
	if (r) {
		atomic_store(&xs->state, 0);
		goto dereg_rmr;
	}
	deadline = sw_now_ns() + bound;
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
			      now >= deadline + 9 * bound)) || tx_error(s)) {
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
		} else if (w == SDP_XS_WORD(seq, SDP_XS_CLAIMED)) {
			uint64_t pw = atomic_load_explicit(
				&xs->push, memory_order_acquire);

			if (!xslot_push_word_ok(pw, seq)) {
				bad = "transfer slot push word the receiver may not set";
				break;
			}
			if (pw == SDP_XS_WORD(seq, SDP_XP_REQ)) {
				bad = xslot_push(s, xs, seq, p, len, mr,
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
			if (sw_now_ns() >= claim_end) {
				bad = "transfer slot claimed for longer than SDP_XSLOT_CLAIM_MS";
				break;
			}
			deadline = sw_now_ns() + bound;
		} else {
			/* only the receiver writes something else here */
			bad = "transfer slot in a state the receiver may not set";
			break;
		}
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
	if (bad || (w == SDP_XS_WORD(seq, SDP_XS_CLAIMED)))
		got = last;
	if (bad)
		sw_proto_error(s, bad);
	atomic_store_explicit(&xs->state, SDP_XS_WORD(seq, SDP_XS_IDLE),
			      memory_order_release);
	/* a program that reads in small pieces pays a system call per piece
	 * here, and this side spins meanwhile: its staging ring serves it
	 * better (one memcpy per piece), for the next sends */
	if (steps && got / steps < SW_XSLOT_SMALL_READ)
		ss->xs_backoff = SW_XSLOT_BACKOFF;
	if (s->st) {
		s->st->tx_rdma_write += pushed;
		s->st->tx_rdma_read += got - (pushed < got ? pushed : got);
	}
	r = 0;
dereg_rmr:
	/* the descriptor dies now, whatever the peer still holds */
	pv->mod.ext.deregister_rdma_memory(ss->ep, rmr);
dereg_mr:
	pv->mod.ext.deregister_memory(pv->mod.prov, mr);
	if (!r)
		return got;
	if (r == -ECONNRESET || r == -EPIPE)
		return r;
reg_failed:
	if (s->st)
		s->st->reg_failures++;
	return -ENOBUFS;
}

/* WDATA: write up to len bytes from p into the peer's staging ring.
 * Returns bytes written (> 0), 0 when the ring is full, or < 0. */
static ssize_t send_wdata(struct sw_sock *s, uint8_t *p, size_t len)
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
		if (ss->peer_wants_wake)
			sw_doorbell_ring(s);
		r = sw_rdma_wait(s, ctx);
	}
	pv->mod.ext.deregister_memory(pv->mod.prov, mr);
	if (r < 0)
		return r == -EIO || r == -ENOMEM ? -ENOBUFS : r;
	/* the wait ran progress: the peer may have taken the ring back (or
	 * offered another) meanwhile; the bytes written there are not
	 * announced and go by copy instead */
	if (memcmp(&ring_desc, &ss->peer_staging, sizeof(ring_desc)))
		return -ENOBUFS;
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
static bool staging_wait(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint64_t end = sw_now_ns() + (uint64_t)sw_cfg.spin_us * 1000;
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

/* Set while this thread sends the pending-upgrade bytes (s->ptx): the
 * progress calls made on the way must not start the flush again. */
static __thread bool ptx_busy;

static int tx_error(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (ss->abort_rcvd || ss->error)
		return ECONNRESET;
	/* closed by another thread: its session is gone */
	if (s->closed && !ss->prov)
		return EPIPE;
	/* a FIN waiting to go waits for the bytes kept in s->ptx: they were
	 * written before the close or shutdown, and go first */
	if (ss->fin_sent || (ss->fin_pending && !ptx_busy))
		return EPIPE;
	if (ss->peer_dead || s->tcp_eof)
		return EPIPE;
	return 0;
}

static ssize_t session_send(struct sw_sock *s, const struct iovec *iov,
			    int iovcnt, int flags, bool copy_only);

/* Sends what the program wrote while the upgrade was pending (s->ptx), as
 * far as credits allow, without waiting and without releasing the lock
 * (copies only), so it may run from any progress call. What is left stays
 * at the front of s->ptx. Returns 0 or < 0 (the peer is gone). */
int sw_ptx_flush(struct sw_sock *s)
{
	size_t done = 0;
	int r = 0;

	if (ptx_busy || !s->ptx_len || s->state != SW_SAN)
		return 0;
	ptx_busy = true;
	while (done < s->ptx_len) {
		struct iovec iov = { s->ptx + done, s->ptx_len - done };
		ssize_t n = session_send(s, &iov, 1, MSG_DONTWAIT, true);

		if (n <= 0) {
			if (n < 0 && errno != EAGAIN)
				r = errno == EPIPE ? -ECONNRESET : -errno;
			break;
		}
		done += n;
	}
	ptx_busy = false;
	if (done == s->ptx_len) {
		free(s->ptx);
		s->ptx = NULL;
		s->ptx_cap = 0;
		s->ptx_len = 0;
		atomic_store_explicit(&s->ptx_since_ns, 0,
				      memory_order_relaxed);
	} else if (done) {
		memmove(s->ptx, s->ptx + done, s->ptx_len - done);
		s->ptx_len -= done;
	}
	return r;
}

/* Appends the whole of iov to s->ptx (the bytes that wait for credits).
 * Returns false when it does not fit within limit or memory is short. */
static bool ptx_keep(struct sw_sock *s, const struct iovec *iov, int iovcnt,
		     size_t total, size_t limit)
{
	size_t done = 0;
	int i;

	if (s->ptx_len + total > limit)
		return false;
	if (s->ptx_len + total > s->ptx_cap) {
		size_t cap = s->ptx_cap ? s->ptx_cap : 16384;
		uint8_t *p;

		while (cap < s->ptx_len + total)
			cap *= 2;
		p = realloc(s->ptx, cap);
		if (!p)
			return false;
		s->ptx = p;
		s->ptx_cap = cap;
	}
	for (i = 0; i < iovcnt; i++) {
		memcpy(s->ptx + s->ptx_len + done, iov[i].iov_base,
		       iov[i].iov_len);
		done += iov[i].iov_len;
	}
	s->ptx_len += total;
	return true;
}

/* The peer has not consumed what went before: more than one of its
 * buffers is still out (it returns them before it waits). */
static bool peer_behind(struct sw_session *ss)
{
	return ss->credits < (int32_t)ss->peer_nrecv - 1;
}

/*
 * Small sends coalesce while the peer is behind (SDP_COALESCE, on by
 * default): when two or more of its receive buffers are still out (it
 * returns them before it waits, credits.c), a send that fits in one
 * message joins the bytes waiting in s->ptx instead of taking a message of
 * its own; progress sends them, packed into full messages, as soon as the
 * peer has caught up, and every wait, FIN and DOWNGRADE sends them first.
 * Nothing is delayed while the peer keeps up. A program that writes and
 * then blocks elsewhere (waitpid, a pipe, another socket) calls none of
 * those: the flusher thread (flusher.c) sends what has been kept for
 * SDP_COALESCE_US. Returns true when the bytes were kept.
 */
static bool coalesce(struct sw_sock *s, const struct iovec *iov, int iovcnt,
		     size_t total)
{
	struct sw_session *ss = &s->ss;

	if (!sw_cfg.coalesce_max || total >= inline_max(ss) || tx_error(s) ||
	    ss->dg_sent || s->state != SW_SAN)
		return false;
	if (!s->ptx_len && !peer_behind(ss))
		return false;
	if (sw_flusher_watch(s))
		return false;
	if (!ptx_keep(s, iov, iovcnt, total, sw_cfg.coalesce_max))
		return false;
	if (!atomic_load_explicit(&s->ptx_since_ns, memory_order_relaxed))
		atomic_store_explicit(&s->ptx_since_ns, sw_now_ns(),
				      memory_order_relaxed);
	return true;
}

bool sw_ptx_due(struct sw_sock *s);
/* Should progress send the kept bytes now? Yes once the peer has caught
 * up (credits came back) or a full message is waiting; the waits, FIN and
 * DOWNGRADE send them whatever this says. */
bool sw_ptx_due(struct sw_sock *s)
{
	return !sw_cfg.coalesce_max || s->ptx_len >= inline_max(&s->ss) ||
	       !peer_behind(&s->ss);
}

ssize_t sw_session_send(struct sw_sock *s, const struct iovec *iov,
			int iovcnt, int flags)
{
	bool nb = sw_nonblocking(s, flags);
	size_t total = iov_total(iov, iovcnt);
	int e, r;

	if (!total)
		return 0;
	sw_switch_bell(s);
	if (sw_cfg.coalesce_max && (s->ptx_len || peer_behind(&s->ss))) {
		/* while bytes gather, the completion queue is looked at once
		 * per KiB kept, not per send: that is what lets a sender of
		 * small messages outrun a copy per message */
		if (!s->ptx_len || s->ptx_len + total >= inline_max(&s->ss) ||
		    (s->ptx_len >> 10) != ((s->ptx_len + total) >> 10))
			sw_progress(s);
		if (coalesce(s, iov, iovcnt, total))
			return total;
	}
	/* bytes written during the upgrade go before these */
	while (s->ptx_len) {
		r = sw_ptx_flush(s);
		if (r < 0) {
			errno = EPIPE;
			return -1;
		}
		if (!s->ptx_len)
			break;
		e = tx_error(s);
		if (e || nb) {
			errno = e ? e : EAGAIN;
			return -1;
		}
		if (sw_session_wait(s, POLLOUT, 0) == -EINTR) {
			errno = EINTR;
			return -1;
		}
	}
	return session_send(s, iov, iovcnt, flags,
			    sw_cfg.path == SW_PATH_COPY);
}

static ssize_t session_send(struct sw_sock *s, const struct iovec *iov,
			    int iovcnt, int flags, bool copy_only)
{
	struct sw_session *ss = &s->ss;
	size_t total = iov_total(iov, iovcnt), sent = 0;
	ssize_t n = 0;
	bool stalled = false;
	bool nb = sw_nonblocking(s, flags);
	bool xslot = !copy_only && s->ss.peer_xslot && !s->ss.xs_backoff;
	bool force_copy = false;
	int e;

	if (total == 0)
		return 0;
	if (!xslot && s->ss.xs_backoff && total >= sw_cfg.rdma_min)
		s->ss.xs_backoff--;
	if (!ptx_busy)
		sw_progress(s);
	while (sent < total) {
		size_t left = total - sent;
		uint8_t *p;
		size_t plen;

		e = tx_error(s);
		if (e) {
			if (sent)
				break;
			errno = e;
			return -1;
		}
		if (!sw_credit_can_send(ss, SDP_MSG_DATA)) {
			if (s->st && !stalled)
				s->st->credit_stalls++;
			stalled = true;
			if (nb)
				break;
			if (sw_session_wait(s, POLLOUT, 0) == -EINTR) {
				if (sent)
					break;
				errno = EINTR;
				return -1;
			}
			continue;
		}
		if (force_copy) {
			force_copy = false;
			goto copy;
		}
		iov_at(iov, iovcnt, sent, &p, &plen);
		/* the offer spins with the socket's lock held: another
		 * thread in a call on this socket (a reader, which the peer
		 * may be waiting for) would wait for the whole offer */
		if (xslot && plen >= sw_cfg.rdma_min &&
		    atomic_load(&s->users) <= 1) {
			n = send_xoffer(s, p, plen, nb);
			if (n > 0)
				sent += n;
			if (n == (ssize_t)plen)
				continue;
			if (n < 0 && n != -ENOBUFS)
				goto fail;
			/* taken back: the receiver is not reading now; the
			 * rest of this call goes like TCP's send buffer, and
			 * a DATA message goes first: the receiver may have
			 * been told the offer was readable */
			xslot = false;
			force_copy = true;
			continue;
		}
		if (!copy_only && left >= sw_cfg.rdma_min &&
		    plen >= sw_cfg.rdma_min) {
			/*
			 * A blocking sender lends its buffer: the receiver
			 * pulls it (RDATA, one copy) and the call returns
			 * once it has. Not where slots exist: an offer not
			 * made or taken back means the receiver is not
			 * reading now, and a loan cannot be taken back (two
			 * blocking writers would wait for each other's
			 * pull). A non-blocking sender cannot wait for
			 * that: its bytes go into the receiver's staging ring
			 * (WDATA) in pieces the receiver copies out while the
			 * next ones are written, which keeps both CPUs busy.
			 */
			bool use_read = ss->peer_can_read && !nb &&
					!ss->peer_xslot &&
					sw_cfg.path != SW_PATH_WRITE;
			bool use_write = !use_read &&
					 ss->peer_staging.length &&
					 sw_cfg.path != SW_PATH_READ &&
					 sw_cfg.path != SW_PATH_COPY;

			if (use_read) {
				n = send_rdata(s, p, plen);
				if (n > 0) {
					sent += n;
					continue;
				}
				if (n != -ENOBUFS)
					goto fail;
			} else if (use_write) {
				n = send_wdata(s, p, plen);
				if (n > 0) {
					sent += n;
					continue;
				}
				if (n == 0 && (!nb || staging_wait(s))) {
					/* staging full: wait for STAGING_FREE */
					if (s->st && !stalled)
						s->st->credit_stalls++;
					stalled = true;
					/* a signal handler ran: return what
					 * went, or EINTR, as a blocked TCP
					 * send does */
					if (!nb && sw_session_wait(s, POLLOUT,
							0) == -EINTR) {
						if (sent)
							break;
						errno = EINTR;
						return -1;
					}
					continue;
				}
				/* non-blocking and the ring stays full: what was
				 * written is the answer; with nothing written,
				 * what the credits allow goes by copy (writable
				 * means some bytes go) */
				if (n == 0 && sent)
					break;
				if (n == 0)
					goto copy;
				if (n != -ENOBUFS)
					goto fail;
			}
			/* registration failed: the bytes go by copy */
		}
copy:
		{
			struct iovec part[16];
			size_t chunk = left < inline_max(ss) ? left :
							       inline_max(ss);
			int k = iov_slice(iov, iovcnt, sent, chunk, part);
			size_t got = 0;
			int i, r;

			for (i = 0; i < k; i++)
				got += part[i].iov_len;
			r = sw_send_ctrl(s, SDP_MSG_DATA, NULL, 0, part, k, got);
			if (r) {
				n = r;
				goto fail;
			}
			sent += got;
			if (s->st)
				s->st->tx_copy += got;
		}
	}
	if (!sent) {
		errno = EAGAIN;
		return -1;
	}
	return sent;
fail:
	if (sent)
		return sent;
	errno = n == -ENOBUFS ? ENOBUFS : (n == -ECONNRESET ? EPIPE : -n);
	return -1;
}

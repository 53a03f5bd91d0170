/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session_tx.c - the sending side of the session protocol: small sends
 * copied into DATA messages, coalescing while the peer is behind (the
 * flusher sends what is kept), and the choice of the large-data path
 * (rdma_read.c, rdma_write.c, xslot.c) for each send.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "config.h"
#include "credits.h"
#include "downgrade.h"
#include "flusher.h"
#include "iov.h"
#include "log.h"
#include "rdma_read.h"
#include "rdma_write.h"
#include "session_msg.h"
#include "session_tx.h"
#include "sock.h"
#include "status.h"
#include "sys.h"
#include "util.h"
#include "wakeup.h"
#include "wire.h"
#include "xslot.h"

static size_t inline_max(struct sw_session *ss)
{
	return ss->peer_msg_size - sizeof(struct sdp_msg_hdr);
}


/* Set while this thread sends the pending-upgrade bytes (s->ptx): the
 * progress calls made on the way must not start the flush again. */
static __thread bool ptx_busy;

int sw_tx_error(struct sw_sock *s)
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

/* How session_send may move the bytes: any path; not through the
 * transfer slot; only copied into DATA messages. */
enum tx_paths { TX_ANY, TX_NO_OFFER, TX_COPY };

static ssize_t session_send(struct sw_sock *s, const struct iovec *iov,
			    int iovcnt, int flags, enum tx_paths paths);
static bool ptx_keep(struct sw_sock *s, const struct iovec *iov, int iovcnt,
		     size_t total, size_t limit);

/* Makes room in s->ptx for need bytes in all (doubling from 16 KiB).
 * False when memory is short. */
static bool ptx_room(struct sw_sock *s, size_t need)
{
	size_t cap = s->ptx_cap ? s->ptx_cap : 16384;
	uint8_t *p;

	if (need <= s->ptx_cap)
		return true;
	while (cap < need)
		cap *= 2;
	p = realloc(s->ptx, cap);
	if (!p)
		return false;
	s->ptx = p;
	s->ptx_cap = cap;
	return true;
}

static void ptx_drop(struct sw_sock *s)
{
	free(s->ptx);
	s->ptx = NULL;
	s->ptx_cap = 0;
	s->ptx_len = 0;
	atomic_store_explicit(&s->ptx_since_ns, 0, memory_order_relaxed);
}

/* Sends what the program wrote while the upgrade was pending (s->ptx), as
 * far as credits allow, without waiting and without releasing the lock
 * (copies only), so it may run from any progress call. What is left stays
 * at the front of s->ptx. Returns 0 or < 0 (the peer is gone). */
static int ptx_flush(struct sw_sock *s, enum tx_paths paths)
{
	size_t done = 0;
	int r = 0;

	if (ptx_busy || !s->ptx_len || s->state != SW_SAN)
		return 0;
	ptx_busy = true;
	while (done < s->ptx_len) {
		struct iovec iov = { s->ptx + done, s->ptx_len - done };
		ssize_t n = session_send(s, &iov, 1, MSG_DONTWAIT, paths);

		if (n <= 0) {
			/* session_send returns -errno; errno itself may be
			 * left from an earlier call of the program's (an
			 * EINTR of its own wait made this a reset). Only the
			 * peer's end is an error here: anything else (no
			 * credit, no send slot, no memory) leaves the bytes
			 * for a later flush */
			if (n == -EPIPE || n == -ECONNRESET)
				r = -ECONNRESET;
			break;
		}
		done += n;
	}
	ptx_busy = false;
	if (done == s->ptx_len) {
		ptx_drop(s);
	} else if (done) {
		memmove(s->ptx, s->ptx + done, s->ptx_len - done);
		s->ptx_len -= done;
	}
	/* our DOWNGRADE went during the flush (sw_downgrade_start left
	 * the rest to us): the rest follows the marker */
	if (s->ptx_len && s->ss.dg_sent)
		sw_ptx_to_tcp(s);
	return r;
}

int sw_ptx_flush(struct sw_sock *s)
{
	return ptx_flush(s, TX_COPY);
}

/* The connection's bytes go on TCP from here (our downgrade marker went,
 * or it fell back): the bytes kept in s->ptx, sends the program was told
 * went, go there now, before the bytes of any later send, which go on TCP
 * directly. Not from inside a flush of them (it calls this when done). */
void sw_ptx_to_tcp(struct sw_sock *s)
{
	int r;

	if (ptx_busy || !s->ptx_len)
		return;
	r = sw_tcp_write_all(s->fd, s->ptx, s->ptx_len);
	if (!r && s->st)
		s->st->tx_tcp += s->ptx_len;
	else if (r)
		SW_WARN("fd %d: %zu byte(s) the program sent, kept for the SAN, could not go on TCP (%s): the connection is broken",
			s->fd, s->ptx_len, strerror(-r));
	ptx_drop(s);
}

/*
 * Copies len bytes out of a lent file mapping. A plain read of a page the
 * file no longer has (truncated since the lend) raises SIGBUS in the
 * program; process_vm_readv on this process reports EFAULT instead.
 * Returns false when some byte could not be read.
 */
static bool lent_copy(uint8_t *dst, const uint8_t *src, size_t len)
{
	struct iovec l = { dst, len }, r = { (void *)src, len };
	ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);

	return n == (ssize_t)len;
}

/*
 * Ends the lend a sendfile left (sw_xslot_lend) before anything else of
 * the stream goes. Taken whole by the receiver, it just ends. Otherwise
 * the receiver is the slower side (it has not read what was lent by the
 * time this side sends more): waiting for it would leave this side idle,
 * so the rest is taken back at once (a claim in progress is waited for)
 * and this side copies it, as other sends go: into the receiver's staging
 * ring as far as it has room, the rest kept in s->ptx, which goes first
 * (the flusher sends it if the program does not); and the next
 * SW_LEND_BACKOFF sendfile calls lend nothing. Returns 0 or < 0 (the
 * connection is broken; the program's call fails).
 */
#define SW_LEND_BACKOFF 32

int sw_lend_settle(struct sw_sock *s)
{
	struct sw_xoffer lend = s->ss.lend, *o = &lend;
	ssize_t got;
	size_t rest;
	int r = 0;

	if (!o->len)
		return 0;
	/* ours alone from here: sending the rest may release the lock
	 * (a staged RDMA write waits for the peer), and the flusher or
	 * another thread must not end the same lend again */
	memset(&s->ss.lend, 0, sizeof(s->ss.lend));
	got = sw_xslot_lend_end(s, o);
	if (got < 0) {
		r = (int)got;
		goto out;
	}
	rest = o->len - (size_t)got;
	if (!rest)
		goto out;
	s->ss.lend_backoff = SW_LEND_BACKOFF;
	if (s->ss.fin_sent || s->ss.peer_dead || s->ss.abort_rcvd ||
	    s->ss.error) {
		/* no way left for them: the stream ended or broke */
		r = -EPIPE;
		goto out;
	}
	if (!ptx_room(s, s->ptx_len + rest)) {
		r = -ENOMEM;
		goto broken;
	}
	memmove(s->ptx + rest, s->ptx, s->ptx_len);
	if (!lent_copy(s->ptx, o->p + got, rest)) {
		memmove(s->ptx, s->ptx + rest, s->ptx_len);
		r = -EFAULT;
		goto broken;
	}
	s->ptx_len += rest;
	if (!atomic_load_explicit(&s->ptx_since_ns, memory_order_relaxed))
		atomic_store_explicit(&s->ptx_since_ns, sw_now_ns(),
				      memory_order_relaxed);
	/* into the peer's staging ring as far as it has room (the
	 * peer's memory: they outlive this process), the rest kept. Not
	 * where our RDMA writes are staged: one waits for the peer with
	 * the lock released, and another thread could flush s->ptx then */
	ptx_flush(s, s->ss.write_staged ? TX_COPY : TX_NO_OFFER);
	if (s->ptx_len)
		sw_flusher_watch(s);
	SW_DBG("fd %d: %zu byte(s) of a sendfile's %zu taken back from the transfer slot: they go as other sends (%zu kept)",
	       s->fd, rest, o->len, s->ptx_len);
	goto out;
broken:
	/* bytes the program was told went cannot go: the connection ends
	 * with an error rather than with a hole in the stream */
	SW_WARN("fd %d: %zu byte(s) a sendfile lent from its file could not be sent again (%s); the connection is reset",
		s->fd, rest, r == -EFAULT ?
		"the file shrank before the peer read them" : strerror(-r));
	if (sw_credit_can_send(&s->ss, SDP_MSG_ABORT))
		sw_send_ctrl(s, SDP_MSG_ABORT, NULL, 0, NULL, 0, 0);
	s->ss.error = EIO;
	sdp_sys.shutdown(s->fd, SHUT_RDWR);
	sw_event(s);
out:
	sw_xslot_lend_free(s, o);
	return r;
}

/* The lend's end when no one must wait for it: once the receiver took it
 * all (or can no longer take it), it ends here. True while it is out. */
bool sw_lend_poll(struct sw_sock *s)
{
	switch (sw_xslot_lend_state(s)) {
	case SW_LEND_NONE:
		return false;
	case SW_LEND_OUT:
		return true;
	}
	sw_lend_settle(s);
	return false;
}

/* Appends the whole of iov to s->ptx (the bytes that wait for credits).
 * Returns false when it does not fit within limit or memory is short. */
static bool ptx_keep(struct sw_sock *s, const struct iovec *iov, int iovcnt,
		     size_t total, size_t limit)
{
	size_t done = 0;
	int i;

	if (s->ptx_len + total > limit || !ptx_room(s, s->ptx_len + total))
		return false;
	for (i = 0; i < iovcnt; i++) {
		memcpy(s->ptx + s->ptx_len + done, iov[i].iov_base,
		       iov[i].iov_len);
		done += iov[i].iov_len;
	}
	s->ptx_len += total;
	return true;
}

/*
 * TCP's send buffer: a send the credits do not let go now (the peer's
 * switch has not returned its buffers: its program is in no call, or
 * computes) keeps the bytes from off on in s->ptx, up to SW_SNDBUF_KEEP in
 * all, and returns as a TCP send returns once its buffer took the bytes.
 * The flusher thread (flusher.c) sends them when the credits come back,
 * whatever this program does meanwhile; so a sender never waits for its
 * peer's next call for bytes TCP would have buffered (docs/protocol.md 5).
 * Returns true when the bytes were kept.
 */
static bool sndbuf_keep(struct sw_sock *s, const struct iovec *iov,
			int iovcnt, size_t off, size_t total)
{
	struct sw_session *ss = &s->ss;
	size_t left = total - off, done = 0;

	if (ptx_busy || s->state != SW_SAN || ss->dg_sent || sw_tx_error(s) ||
	    s->ptx_len + left > SW_SNDBUF_KEEP)
		return false;
	if (sw_flusher_watch(s))
		return false;
	while (done < left) {
		struct iovec one;
		uint8_t *p;
		size_t plen;

		sw_iov_at(iov, iovcnt, off + done, &p, &plen);
		if (plen > left - done)
			plen = left - done;
		one.iov_base = p;
		one.iov_len = plen;
		if (!ptx_keep(s, &one, 1, plen, SW_SNDBUF_KEEP)) {
			s->ptx_len -= done;	/* none of it was kept */
			return false;
		}
		done += plen;
	}
	if (!atomic_load_explicit(&s->ptx_since_ns, memory_order_relaxed))
		atomic_store_explicit(&s->ptx_since_ns, sw_now_ns(),
				      memory_order_relaxed);
	return true;
}

/* A blocking send's wait for room, bounded by the program's SO_SNDTIMEO
 * (*timeo, kept across the call's waits); sent: the bytes the call has
 * sent. Returns 0 to look again, -EINTR (a signal handler ran) or -EAGAIN
 * (the timeout ran out), as TCP's send. */
static int tx_wait(struct sw_sock *s, struct sw_timeo *timeo, size_t sent)
{
	int r;

	r = sw_session_wait_timeo(s, POLLOUT, timeo);
	if (r == -EINTR)
		/* with nothing sent, restarted as the kernel would */
		return !sent && sw_intr_restarts(s, false) ? 0 : -EINTR;
	if (r == -ETIMEDOUT)
		return -EAGAIN;
	return 0;
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

	if (!sw_cfg.coalesce_max || total >= inline_max(ss) || sw_tx_error(s) ||
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
	size_t total = sw_iov_total(iov, iovcnt);
	struct sw_timeo timeo = { .rcv = false };	/* SO_SNDTIMEO */
	int e, r;

	if (!total)
		return 0;
	/* a sendfile's lend goes first: ended, or its rest sent */
	if (s->ss.lend.len) {
		r = sw_lend_settle(s);
		if (r < 0)
			return r == -EPIPE || r == -ECONNRESET ? r : -EPIPE;
	}
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
			return -EPIPE;
		}
		if (!s->ptx_len)
			break;
		e = sw_tx_error(s);
		if (!e && sndbuf_keep(s, iov, iovcnt, 0, total))
			return total;
		if (e || nb) {
			return -(e ? e : EAGAIN);
		}
		r = tx_wait(s, &timeo, 0);
		if (r)
			return r;
	}
	return session_send(s, iov, iovcnt, flags,
			    sw_cfg.path == SW_PATH_COPY ? TX_COPY : TX_ANY);
}

static ssize_t session_send(struct sw_sock *s, const struct iovec *iov,
			    int iovcnt, int flags, enum tx_paths paths)
{
	bool copy_only = paths == TX_COPY;
	struct sw_session *ss = &s->ss;
	size_t total = sw_iov_total(iov, iovcnt), sent = 0;
	ssize_t n = 0;
	bool stalled = false;
	bool nb = sw_nonblocking(s, flags);
	bool xslot = paths == TX_ANY && s->ss.peer_xslot && !s->ss.xs_backoff;
	bool force_copy = false;
	struct sw_timeo timeo = { .rcv = false };	/* SO_SNDTIMEO */
	int e, r;

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

		/* the peer's DOWNGRADE came while this call waited (lock
		 * released) or inside a message of ours (sw_send_ctrl): ours
		 * answers it here, between two messages. Once it went, the
		 * peer takes nothing more on the SAN; the rest follows our
		 * marker on TCP (the caller sends it), whatever becomes of
		 * the provider connection (the peer closes it once both
		 * DOWNGRADEs went: not an error of this stream, which TCP
		 * carries on) */
		if (ss->dg_rcvd && !ss->dg_sent && !sw_tx_error(s))
			sw_downgrade_start(s);
		if (ss->dg_sent || s->state != SW_SAN) {
			if (sent)
				break;
			return SW_TX_DOWNGRADE;
		}
		e = sw_tx_error(s);
		if (e) {
			if (sent)
				break;
			return -e;
		}
		if (!sw_credit_can_send(ss, SDP_MSG_DATA)) {
			if (s->st && !stalled)
				s->st->credit_stalls++;
			stalled = true;
			if (sndbuf_keep(s, iov, iovcnt, sent, total)) {
				sent = total;
				break;
			}
			if (nb)
				break;
			r = tx_wait(s, &timeo, sent);
			if (r) {
				if (sent)
					break;
				return r;
			}
			continue;
		}
		if (force_copy) {
			force_copy = false;
			goto copy;
		}
		sw_iov_at(iov, iovcnt, sent, &p, &plen);
		/* the offer spins with the socket's lock held: another
		 * thread in a call on this socket (a reader, which the peer
		 * may be waiting for) would wait for the whole offer */
		if (xslot && plen >= sw_cfg.rdma_min &&
		    atomic_load(&s->users) <= 1) {
			n = sw_xslot_send(s, p, plen, nb);
			if (n > 0)
				sent += n;
			if (n == (ssize_t)plen)
				continue;
			if (n == -EAGAIN)	/* no credit for XOFFER */
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
				n = sw_rdata_send(s, p, plen);
				if (n > 0) {
					sent += n;
					continue;
				}
				if (n == -EAGAIN)	/* no credit left */
					continue;
				if (n != -ENOBUFS)
					goto fail;
			} else if (use_write) {
				n = sw_wdata_send(s, p, plen);
				if (n > 0) {
					sent += n;
					continue;
				}
				if (n == 0 && (!nb || sw_staging_wait(s))) {
					/* staging full: wait for STAGING_FREE */
					if (s->st && !stalled)
						s->st->credit_stalls++;
					stalled = true;
					/* a signal handler ran: return what
					 * went, or EINTR, as a blocked TCP
					 * send does */
					r = nb ? 0 : tx_wait(s, &timeo, sent);
					if (r) {
						if (sent)
							break;
						return r;
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
				/* the write's wait spent the credit of its
				 * WDATA: the bytes, written but not announced,
				 * are written again once credits come */
				if (n == -EAGAIN)
					continue;
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
			int k = sw_iov_slice(iov, iovcnt, sent, chunk, part);
			size_t got = 0;
			int i;

			for (i = 0; i < k; i++)
				got += part[i].iov_len;
			r = sw_send_ctrl(s, SDP_MSG_DATA, NULL, 0, part, k, got);
			if (r == -EAGAIN)	/* no credit left */
				continue;
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
		return -EAGAIN;
	}
	return sent;
fail:
	if (sent)
		return sent;
	return n == -ENOBUFS ? -ENOBUFS : (n == -ECONNRESET ? -EPIPE : n);
}

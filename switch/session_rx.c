/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session_rx.c - the receiving side of the session protocol: the queue of
 * received pieces of the byte stream, delivered to the program in order
 * with MSG_PEEK, MSG_WAITALL and MSG_DONTWAIT; EOF only after every byte.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "buffers.h"
#include "credits.h"
#include "fork_exec.h"
#include "iov.h"
#include "log.h"
#include "rdma_read.h"
#include "rdma_write.h"
#include "session_msg.h"
#include "session_rx.h"
#include "sock.h"
#include "spin.h"
#include "status.h"
#include "tcp_inband.h"
#include "util.h"
#include "wakeup.h"
#include "xslot.h"

struct rx_item *sw_rx_item_new(struct sw_session *ss)
{
	struct rx_item *it = ss->rx_free;

	if (it)
		ss->rx_free = it->next;
	else
		it = malloc(sizeof(*it));
	if (it)
		memset(it, 0, sizeof(*it));
	return it;
}

void sw_rx_item_free(struct sw_session *ss, struct rx_item *it)
{
	it->next = ss->rx_free;
	ss->rx_free = it;
}

void sw_rxq_push(struct sw_session *ss, struct rx_item *it)
{
	it->next = NULL;
	if (ss->rxq_tail)
		ss->rxq_tail->next = it;
	else
		ss->rxq = it;
	ss->rxq_tail = it;
	ss->rx_queued += it->len;
}

int sw_rxq_inline(struct sw_session *ss, uint32_t idx, uint64_t off,
		  uint64_t len)
{
	struct rx_item *it = sw_rx_item_new(ss);

	if (!it)
		return -ENOMEM;
	it->kind = RX_INLINE;
	it->buf = idx;
	it->off = off;
	it->len = len;
	ss->recv_held[idx] = 1;
	sw_rxq_push(ss, it);
	return 0;
}

/*
 * The peer's bytes in our receive buffers wait there for our program to
 * read them; each holds a buffer the peer cannot send into. A program
 * that writes before it reads on (an echo server) blocks in a send whose
 * end needs a message of the peer's, and a peer that used its credits on
 * data holds its last one, which goes only with a buffer it returns: the
 * two would wait for each other for ever. TCP has no such wait, since its
 * acknowledgements need no room at the receiver; so the switch, like the
 * kernel's socket buffer, takes the bytes into memory of its own and
 * returns the buffer, at most SW_RX_SPILL_MAX bytes per connection. Past
 * that the program has left megabytes unread while it waits for its
 * peer to read, which over TCP stalls as well.
 */
#define SW_RX_SPILL_MAX (4u << 20)

bool sw_rx_spill(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct rx_item *it;
	uint8_t *mem;

	if (ss->credits_owed)
		return true;
	for (it = ss->rxq; it && it->kind != RX_INLINE; it = it->next)
		if (it->kind == RX_DOWNGRADE)
			return false;	/* the rest is TCP's */
	if (!it || ss->rx_spilled + it->len > SW_RX_SPILL_MAX)
		return false;
	mem = malloc(it->len ? it->len : 1);
	if (!mem)
		return false;
	memcpy(mem, sw_buf(ss, it->buf) + it->off, it->len);
	it->kind = RX_SPILL;
	it->mem = mem;
	it->off = 0;
	ss->rx_spilled += it->len;
	if (sw_recv_repost(s, it->buf) < 0)
		ss->peer_dead = true;
	return ss->credits_owed > 0;
}

int sw_rxq_remote(struct sw_session *ss, enum rx_kind kind,
		  const struct sdp_msg_rdata *rd)
{
	struct rx_item *it = sw_rx_item_new(ss);

	if (!it)
		return -ENOMEM;
	it->kind = kind;
	it->desc = rd->region;
	it->xfer_id = rd->xfer_id;
	it->off = 0;
	it->len = rd->total;
	sw_rxq_push(ss, it);
	return 0;
}


/*
 * A program that reads an offer in small pieces (an HTTP client's 8 or 16
 * KiB) would pay a claim and a cross-process copy, a system call, per
 * piece: reads below SW_AHEAD_MIN take up to SW_AHEAD bytes of the offer
 * at once into a buffer of this side's, and the next reads copy from it.
 */
#define SW_AHEAD_MIN (32 * 1024)
#define SW_AHEAD (256 * 1024)

static void rx_ahead_free(struct sw_session *ss)
{
	free(ss->ahead);
	ss->ahead = NULL;
	ss->ahead_len = 0;
}

/* Pulls up to SW_AHEAD bytes of the head offer it and copies the first n
 * into dst. Returns n, 0 (not pulled ahead: the caller takes n itself), or
 * what sw_xslot_take returned. */
static ssize_t rx_xslot_ahead(struct sw_sock *s, struct rx_item *it,
			      uint8_t *dst, size_t n, bool consume)
{
	struct sw_session *ss = &s->ss;
	size_t a = it->len < SW_AHEAD ? it->len : SW_AHEAD;
	uint8_t *buf;
	ssize_t m;

	if (!consume || n >= SW_AHEAD_MIN || a <= n)
		return 0;
	/* the buffer stays while its offer lasts: new pages each time
	 * cost a fault and a cleared page per 4 KiB */
	buf = ss->ahead ? ss->ahead : malloc(SW_AHEAD);
	if (!buf)
		return 0;
	ss->ahead = NULL;
	/* a copy into our own buffer, short: no push asked of the sender */
	it->no_push = true;
	m = sw_xslot_take(s, it, buf, a, 0, true);
	if (m != (ssize_t)a) {
		free(buf);
		return m;
	}
	ss->ahead = buf;
	ss->ahead_at = it->off;
	ss->ahead_len = a;
	ss->ahead_seq = it->xfer_id;
	memcpy(dst, buf, n);
	return n;
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
	case RX_SPILL:
		memcpy(dst, it->mem + it->off + skip, n);
		break;
	case RX_STAGING: {
		uint64_t o = (it->off + skip) % ss->staging_len;

		/* sw_wdata_on_msg keeps items inside the ring; stay there anyway */
		if (n > ss->staging_len - o)
			n = ss->staging_len - o;
		memcpy(dst, ss->staging + o, n);
		break;
	}
	case RX_REMOTE: {
		struct rx_item tmp = *it;

		tmp.off += skip;
		/* the sender waits for our XFER_DONE: the copy may
		 * take both cores */
		r = sw_rdata_pull(s, &tmp, dst, n, SDP_RDMA_SPREAD);
		if (!r && s->st)
			s->st->flags |= SW_CONN_RX_ALONE;
		if (r == -EOPNOTSUPP) {
			/* RdmaRead refused since SETUP: the sender sends
			 * the rest of this transfer again, by staging */
			ss->can_read = false;
			ss->xfer_ack_pending = true;
			ss->xfer_ack_id = it->xfer_id;
			ss->xfer_ack_bytes = it->off;
			sw_xslot_drop(ss, it, consume ? NULL : peek_it,
				      peek_off);
			return -EAGAIN;
		}
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
		uint64_t at = it->off + skip;
		ssize_t m;

		if (ss->ahead_len && ss->ahead_seq == it->xfer_id &&
		    at >= ss->ahead_at && at < ss->ahead_at + ss->ahead_len) {
			size_t k = ss->ahead_at + ss->ahead_len - at;

			if (n > k)
				n = k;
			memcpy(dst, ss->ahead + (at - ss->ahead_at), n);
			/* used up: the buffer serves the offer's next bytes,
			 * and goes with its last */
			if (consume && at + n == ss->ahead_at + ss->ahead_len)
				ss->ahead_len = 0;
			if (consume && it->len == n)
				rx_ahead_free(ss);
			break;
		}
		m = rx_xslot_ahead(s, it, dst, n, consume);
		if (!m)
			m = sw_xslot_take(s, it, dst, n, skip, consume);

		if (m == -EAGAIN) {
			sw_xslot_drop(ss, it, consume ? NULL : peek_it, peek_off);
			return -EAGAIN;
		}
		if (m == -SDP_EBADKEY || m == -SDP_EBOUNDS ||
		    m == -SDP_ERIGHTS) {
			sw_proto_error(s, "XOFFER region refused by the provider");
			return -ECONNRESET;
		}
		if (m == -EPROTO)	/* logged: the connection is closed */
			return -ECONNRESET;
		if (m == -EFAULT) {
			/* the offer's memory is gone from the sender (a
			 * file it lent to a sendfile was truncated) */
			sw_proto_error(s, "XOFFER region unreadable: the sender's memory changed under its offer");
			return -ECONNRESET;
		}
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
	if (it->kind == RX_SPILL)
		ss->rx_spilled -= n;
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
		} else if (it->kind == RX_SPILL) {
			free(it->mem);
			it->mem = NULL;
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
	struct sw_timeo timeo = { .rcv = true };	/* SO_RCVTIMEO */
	size_t target;		/* bytes a blocking call waits for */
	int i, r, lowat = atomic_load(&s->rcvlowat);

	for (i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	if (flags & MSG_OOB) {
		if (!ss->oob_valid) {
			return -EINVAL;
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
	/* as TCP: the whole request with MSG_WAITALL, else SO_RCVLOWAT's
	 * bytes (1 by default), never more than asked */
	target = waitall ? want : lowat > 1 ? (size_t)lowat : 1;
	if (target > want)
		target = want;
	for (;;) {
		ssize_t n;

		sw_progress(s);
		/* a fork's downgrade, in another thread, is taking the
		 * peer's bytes aside (s->rx_held): nothing is delivered
		 * here, nor the end or the peer's DOWNGRADE seen, until it
		 * has put them in s->fork_buf (a few milliseconds; the
		 * connection is then on TCP, below). Taken here, the
		 * DOWNGRADE would let this thread read TCP's bytes, which
		 * follow those */
		if (sw_rx_held_elsewhere(s)) {
			if (got)
				break;
			if (nb)
				return -EAGAIN;
			pthread_mutex_unlock(&s->lock);
			usleep(100);
			pthread_mutex_lock(&s->lock);
			continue;
		}
		/* bytes a fork's downgrade set aside when the peer did not
		 * answer it in time (fork_exec.c) precede the queue */
		if (sw_fork_buf_unread(s)) {
			struct iovec part[16];
			struct msghdr m = { .msg_iov = part };

			m.msg_iovlen = sw_iov_slice(iov, iovcnt, got,
						    want - got, part);
			got += sw_fork_buf_read(s, &m, peek ? MSG_PEEK : 0);
			if (got >= target || peek)
				break;
			continue;
		}
		/* the peer's data continues on TCP: at its DOWNGRADE, or
		 * once another thread (a fork's, fork_exec.c) took the
		 * connection back to TCP while this one waited */
		if ((ss->rxq && ss->rxq->kind == RX_DOWNGRADE) ||
		    s->state == SW_TCP) {
			if (got)
				break;
			return SW_RX_DOWNGRADE;
		}
		if (ss->rxq) {
			struct iovec part[16];
			/* the part of iov not filled yet */
			int k = sw_iov_slice(iov, iovcnt, got, want - got,
					     part);

			n = rx_deliver(s, part, k, want - got, peek);
			if (n < 0) {
				if (got)
					break;
				return n == -ECONNRESET ? -ECONNRESET : -EIO;
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
			if (got >= target)
				break;
			continue;
		}
		if (got >= target)
			break;
		if (ss->abort_rcvd || ss->error) {
			if (got)
				break;
			return -ECONNRESET;
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
			/* a program that loops on recv never sleeps here, so
			 * the peer's doorbells stay on TCP: while we owe a
			 * peer short of credits, one may be its request for
			 * them (credits.c, bell_return) */
			if (ss->credits_owed && ss->peer_credits <= 1 &&
			    s->state == SW_SAN) {
				sw_doorbell_drain_shared(s);
				sw_progress(s);
				if (ss->rxq)
					continue;
			}
			return -EAGAIN;
		}
		r = sw_session_wait_timeo(s, POLLIN, &timeo);
		if (r == -EINTR && !ss->rxq) {
			if (got)
				break;
			if (!sw_intr_restarts(s, true))
				return -EINTR;
		}
		if (r == -ETIMEDOUT && !ss->rxq) {
			/* SO_RCVTIMEO ran out: what came, or EAGAIN */
			if (got)
				break;
			return -EAGAIN;
		}
	}
	return got;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * orphan.c - carried connections the program closed while bytes it wrote
 * or its FIN were still to go: close returns at once, as a TCP socket's
 * does, and the switch keeps the connection (session, provider endpoint,
 * its own copy of the TCP fd) until the peer took everything, the peer is
 * gone, or nothing moved for SDP_ORPHAN_TIMEOUT_MS (docs/semantics.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "buffers.h"
#include "config.h"
#include "credits.h"
#include "downgrade.h"
#include "flusher.h"
#include "log.h"
#include "orphan.h"
#include "ownfd.h"
#include "session_msg.h"
#include "session_rx.h"
#include "session_tx.h"
#include "sock.h"
#include "status.h"
#include "sys.h"
#include "tcp_inband.h"
#include "util.h"

/* What is left to go: kept bytes, the FIN, messages the provider holds. */
static bool drained(struct sw_sock *s)
{
	return !s->ptx_len && !s->ss.fin_pending &&
	       !sw_sends_pending(&s->ss);
}

/* Our bytes go on TCP now: the peer returned the connection there (it
 * forked or exec'd while we still sent), and ours followed. */
static bool on_tcp(struct sw_sock *s)
{
	return s->ss.dg_sent || s->state == SW_TCP;
}

/* The peer takes nothing more: on the provider, or on TCP after it. */
static bool peer_gone(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (s->tcp_eof)
		return true;
	if (on_tcp(s))
		return false;
	return s->state != SW_SAN || !ss->cq || ss->peer_dead || ss->error ||
	       ss->abort_rcvd;
}

static uint64_t idle_bound_ns(void)
{
	return (uint64_t)sw_cfg.orphan_timeout_ms * 1000000ull;
}

static void snapshot(struct sw_sock *s)
{
	s->orphan_kept = s->ptx_len + (s->ss.fin_pending ? 1 : 0);
	s->orphan_credits = s->ss.credits;
	s->orphan_sends = s->ss.sends_pending;
}

void sw_orphan_begin(struct sw_sock *s)
{
	s->orphan_moved_ns = sw_now_ns();
	snapshot(s);
}

/* Anything moved since the last look: fewer bytes kept (or the FIN
 * gone), credits back, messages the provider let go. */
static bool moved(struct sw_sock *s)
{
	size_t kept = s->ptx_len + (s->ss.fin_pending ? 1 : 0);
	bool m = kept < s->orphan_kept || s->ss.credits > s->orphan_credits ||
		 s->ss.sends_pending < s->orphan_sends;

	snapshot(s);
	return m;
}

/* What the peer sends to a closed connection is dropped, so that its
 * buffers go back (and ours with its messages); TCP would answer it with
 * a reset, which would throw away our bytes still on the way. */
static void drop_rx(struct sw_sock *s)
{
	uint8_t buf[4096];
	struct iovec iov = { buf, sizeof(buf) };
	int i;

	/* (the queue, not its byte count: the peer's DOWNGRADE is an item
	 * of no bytes, and must be taken for its marker to be awaited) */
	for (i = 0; i < 64 && s->ss.rxq && !peer_gone(s); i++) {
		ssize_t n = sw_session_recv(s, &iov, 1, MSG_DONTWAIT);

		if (n == SW_RX_DOWNGRADE) {
			/* both directions return to TCP (ours answered
			 * already, or does now) */
			sw_downgrade_rx_point(s);
			break;
		}
		if (n <= 0)
			break;
	}
}

/* After a return to TCP: the kept bytes follow our marker there, then
 * TCP's FIN; the kernel sends them on from its buffer. */
static void tcp_rest(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	ssize_t n;

	while (s->ptx_len) {
		n = sdp_sys.send(s->fd, s->ptx, s->ptx_len,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
				s->tcp_eof = true;	/* the peer is gone */
			return;
		}
		memmove(s->ptx, s->ptx + n, s->ptx_len - (size_t)n);
		s->ptx_len -= (size_t)n;
		if (s->st)
			s->st->tx_tcp += (uint64_t)n;
	}
	if (ss->fin_pending && !sdp_sys.shutdown(s->fd, SHUT_WR)) {
		ss->fin_pending = false;
		ss->fin_sent = true;
	}
}

bool sw_orphan_step(struct sw_sock *s, uint64_t now)
{
	struct sw_session *ss = &s->ss;

	if (s->orphan_ended)
		return true;
	if (s->state == SW_SAN && ss->cq && !peer_gone(s)) {
		sw_progress(s);
		sw_doorbell_drain(s);
		drop_rx(s);
	}
	if (on_tcp(s)) {
		tcp_rest(s);
	} else if (!peer_gone(s)) {
		if (s->ptx_len)
			sw_ptx_flush(s);
		/* the FIN after them, as TCP's goes after its buffer */
		if (!s->ptx_len && ss->fin_pending)
			sw_credit_maybe_update(s);
		if (!drained(s) && !sw_credit_can_send(ss, SDP_MSG_DATA))
			sw_credit_ask(s);
	}
	if (moved(s))
		s->orphan_moved_ns = now;
	return drained(s) || peer_gone(s) ||
	       now - s->orphan_moved_ns >= idle_bound_ns();
}

void sw_orphan_end(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	bool gone = peer_gone(s);

	if (s->linger0) {
		/* an abort: the program gave up what was left */
		sw_close_end(s);
		return;
	}
	if (s->orphan && s->linger_ns) {
		/* the program's linger was served in its close: what the
		 * switch's copy leaves on TCP is doorbells only */
		struct linger l = { 0, 0 };

		sdp_sys.setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &l,
				   sizeof(l));
	}
	if (s->ptx_len && s->orphan_peer_here)
		SW_WARN("fd %d (closed): %zu byte(s) the program wrote lost: the other end is this process's own, and it ends",
			s->orphan_prog_fd, s->ptx_len);
	else if (s->ptx_len && gone)
		SW_WARN("fd %d (closed): %zu byte(s) the program wrote not delivered: the peer is gone (%s)",
			s->orphan_prog_fd, s->ptx_len,
			ss->abort_rcvd ? "it reset the connection" :
			ss->peer_dead ? "its provider endpoint closed" :
			s->tcp_eof ? "its TCP connection closed" :
			"provider error");
	else if (s->ptx_len)
		SW_WARN("fd %d (closed): %zu byte(s) the program wrote lost: the peer took nothing for %u ms (SDP_ORPHAN_TIMEOUT_MS); the connection is reset",
			s->orphan_prog_fd, s->ptx_len,
			sw_cfg.orphan_timeout_ms);
	else if (ss->fin_pending && !gone)
		SW_INFO("fd %d (closed): the peer took nothing for %u ms (SDP_ORPHAN_TIMEOUT_MS): the connection is reset",
			s->orphan_prog_fd, sw_cfg.orphan_timeout_ms);
	else if (s->orphan && drained(s))
		SW_DBG("fd %d (closed): every byte and the end of stream went to the peer",
		       s->orphan_prog_fd);
	if (!drained(s) && !gone && (s->ptx_len || ss->fin_pending)) {
		/* as TCP gives up an orphan: the peer is told with a
		 * reset, not a clean end of stream */
		struct linger l = { 1, 0 };

		if (sw_credit_can_send(ss, SDP_MSG_ABORT))
			sw_send_ctrl(s, SDP_MSG_ABORT, NULL, 0, NULL, 0, 0);
		sdp_sys.setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &l,
				   sizeof(l));
	}
	sw_close_end(s);
}

int sw_orphan_adopt(struct sw_sock *s, int fd)
{
	int d, own, r;

	d = sdp_sys.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (d < 0)
		return -errno;
	/* above the program's numbers, out of its reach; when the program
	 * takes the number with dup2, the copy moves and s->fd follows */
	s->fd = d;
	own = sw_fd_own(d, &s->fd);
	if (own < 0) {
		s->fd = fd;
		sdp_sys.close(d);
		return own;
	}
	__atomic_store_n(&s->fd, own, __ATOMIC_RELEASE);
	if (s->st)
		s->st->fd = own;
	s->orphan = true;
	r = sw_flusher_adopt(s);
	if (r) {
		s->orphan = false;
		sw_fd_forget(own);
		sdp_sys.close(own);
		s->fd = fd;
		if (s->st)
			s->st->fd = fd;
		return r;
	}
	SW_DBG("fd %d: closed with %zu byte(s)%s still to go: the switch sends them (its copy of the connection is fd %d)",
	       fd, s->ptx_len, s->ss.fin_pending ? " and the FIN" : "", own);
	return 0;
}

static bool addr_same(const struct sockaddr_storage *a, socklen_t alen,
		      const struct sockaddr_storage *b, socklen_t blen)
{
	return alen == blen && !memcmp(a, b, alen);
}

bool sw_orphan_peer_here(struct sw_sock *s)
{
	struct sockaddr_storage me, peer, a, b;
	socklen_t mel = sizeof(me), peerl = sizeof(peer), al, bl;
	struct sw_sock **v;
	bool here = false;
	int n, i;

	if (getsockname(s->fd, (struct sockaddr *)&me, &mel) ||
	    getpeername(s->fd, (struct sockaddr *)&peer, &peerl))
		return false;
	n = sw_sock_list(&v);
	for (i = 0; i < n; i++) {
		struct sw_sock *t = v[i];
		int fd = __atomic_load_n(&t->fd, __ATOMIC_RELAXED);

		al = sizeof(a);
		bl = sizeof(b);
		if (!here && t != s && fd >= 0 && !t->orphan_ended &&
		    !getsockname(fd, (struct sockaddr *)&a, &al) &&
		    !getpeername(fd, (struct sockaddr *)&b, &bl) &&
		    addr_same(&a, al, &peer, peerl) &&
		    addr_same(&b, bl, &me, mel))
			here = true;
		sw_sock_unref(t);
	}
	free(v);
	return here;
}

void sw_marker_take(struct sw_sock *s)
{
	uint64_t end = sw_now_ns() + 1000000000ull;

	/* the peer's marker, sent after its DOWNGRADE, may still be on its
	 * way: arriving after the close, it would be answered with a reset
	 * (a second at most, for a peer that sends it) */
	while (s->state == SW_TCP && s->dg_marker && sw_now_ns() < end &&
	       sw_dg_marker_skip(s, false) == -EAGAIN)
		sw_wait_fd(s->fd, POLLIN, 10);
}

void sw_orphan_close(struct sw_sock *s)
{
	int fd = __atomic_load_n(&s->fd, __ATOMIC_ACQUIRE);

	if (s->orphan_ended)
		return;
	sw_orphan_end(s);
	if (s->state == SW_TCP) {
		/* what the peer sent on TCP after its return (its marker,
		 * doorbells, data) is taken: unread, it would turn our FIN
		 * into a reset that drops what the kernel still sends */
		uint8_t buf[4096];
		int i;

		sw_marker_take(s);
		for (i = 0; i < 64; i++)
			if (sdp_sys.recv(fd, buf, sizeof(buf),
					 MSG_DONTWAIT) <= 0)
				break;
	}
	s->orphan_ended = true;
	sw_fd_forget(fd);
	sdp_sys.close(fd);
}

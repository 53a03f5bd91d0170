/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session.c - one provider session (DESIGN.md section 5): the pool of
 * registered control buffers, the staging ring, the SETUP exchange, progress
 * (completions and the dispatch of received messages by type, with every
 * field validated), doorbells on the TCP fd and the bounded wait.
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

#include "bind.h"
#include "msg_decode.h"
#include "session.h"
#include "sw_internal.h"

#define CTX_SEND_BASE 0x100000000ull	/* send buffer contexts */
#define CTX_RDMA_BASE 0x200000000ull	/* RDMA operation contexts */

uint8_t *sw_buf(struct sw_session *ss, uint32_t idx)
{
	return ss->rslot[idx].mem;
}

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
		free(it);
	}
	while ((it = ss->rx_free)) {
		ss->rx_free = it->next;
		free(it);
	}
	memset(ss, 0, sizeof(*ss));
}

static int post_recv(struct sw_sock *s, uint32_t idx)
{
	struct sw_session *ss = &s->ss;
	struct sdp_sge sge = { ss->rslot[idx].mem, ss->msg_size,
			       ss->rslot[idx].mr };
	int r = ss->prov->mod.ops.post_recv(ss->ep, &sge, 1, idx);

	return r == SDP_PENDING ? 0 : r;
}

/* Posts a buffer added by a credit increase. */
int sw_recv_post_new(struct sw_sock *s, uint32_t idx);
int sw_recv_post_new(struct sw_sock *s, uint32_t idx)
{
	return post_recv(s, idx);
}

int sw_recv_repost(struct sw_sock *s, uint32_t idx)
{
	struct sw_session *ss = &s->ss;
	int r;

	ss->recv_held[idx] = 0;
	r = post_recv(s, idx);
	if (r == -ENOBUFS || r == -EINVAL)
		return r;	/* our accounting is wrong: an error */
	if (r) {
		/* the endpoint takes no more receives: the provider has
		 * ended the connection (it hands out what arrived before,
		 * which is already in its completion queue) */
		if (!ss->peer_dead)
			SW_DBG("fd %d: provider refuses receives: %s", s->fd,
			       sdp_strerror(r));
		ss->peer_dead = true;
		sw_event(s);
		return 0;
	}
	ss->credits_owed++;
	return 0;
}

int sw_session_post_recvs(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint32_t i;
	int r;

	for (i = 0; i < ss->nrecv; i++) {
		r = post_recv(s, i);
		if (r)
			return r;
	}
	ss->peer_credits = ss->nrecv;
	return 0;
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

int sw_ptx_flush(struct sw_sock *s);
bool sw_ptx_due(struct sw_sock *s);
void sw_credit_return_owed(struct sw_sock *s);

/* The transfer slots live in the provider's shared area, when it has one
 * (SharedArea extension, fetched by GUID: only a provider whose two ends
 * share memory offers it). Without one, no XOFFER either way. */
static void xslot_attach(struct sw_sock *s)
{
	static const struct sdp_guid g = SDP_GUID_SHARED_AREA;
	struct sw_session *ss = &s->ss;
	struct sw_provider *p = ss->prov;
	sdp_shared_area_fn fn = NULL;
	void *mine, *peers;
	size_t len;

	ss->xs_mine = ss->xs_peer = NULL;
	if (!sw_cfg.xslot || sw_cfg.path != SW_PATH_AUTO || !ss->can_read)
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
	ss->peer_xslot = ss->peer_takes_xoffer && ss->peer_can_read;
	/* ours starts idle: no claim of an old offer can match */
	atomic_store(&ss->xs_mine->push, 0);
	atomic_store(&ss->xs_mine->consumed, 0);
	__atomic_store_n(&ss->xs_mine->reserved, 0, __ATOMIC_RELAXED);
	atomic_store(&ss->xs_mine->state, 0);
}

int sw_session_send_setup(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_setup setup;
	int r;

	sw_bind_ep_caps(s);
	xslot_attach(s);
	memset(&setup, 0, sizeof(setup));
	setup.msg_size = ss->msg_size;
	setup.recv_credits = ss->nrecv;
	if (ss->offer_read)
		setup.flags |= SDP_SETUP_F_RDMA_READ;
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

/* ---- sending ----------------------------------------------------------------- */

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
		if (++spins > 1000000)
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
	peer_starved = ss->peer_credits <= 1;
	/* the peer short of buffers: a credit return may be what it waits
	 * for, if it asked (its count here can be high by the messages
	 * still on their way, so "short" is generous: half the pool) */
	peer_short = peer_starved ||
		     ss->peer_credits * 2 <= (int32_t)ss->nrecv;
	r = send_inline(s, type, body, bodylen, iov, iovcnt, paylen, &credits);
	if (r == -EAGAIN) {
		r = send_buf_get(s, &k);
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
	 * with them, 1,800 times a second each way) */
	news = (peer_short && credits) ||
	       (type != SDP_MSG_WAKE_ME && type != SDP_MSG_CREDIT);
	if (news)
		ss->tx_news_seq = ss->tx_seq;
	sw_credit_consume(ss);
	if (type == SDP_MSG_DATA || type == SDP_MSG_RDATA ||
	    type == SDP_MSG_WDATA || type == SDP_MSG_FIN ||
	    type == SDP_MSG_XOFFER)
		ss->peer_waiting = false;
	if (s->st)
		s->st->msgs_tx++;
	/* a credit return to a peer that had none must wake it */
	if (peer_starved && credits)
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

/* ---- doorbells on the TCP connection ---------------------------------------- */

/*
 * The program's first bytes after our switch point are on their way: a
 * peer asleep on TCP in its program's read would not look at the provider,
 * nor would its provider move what needs both sides (staging-mode RDMA):
 * one doorbell wakes it, unless it said it looks at the SAN already.
 */
void sw_switch_bell(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (!ss->switch_bell)
		return;
	ss->switch_bell = false;
	if (!ss->peer_knows_switch)
		sw_doorbell_ring(s);
}

void sw_doorbell_ring(struct sw_sock *s)
{
	uint8_t b = SDP_DOORBELL;

	/* Before our SWITCH, and after our DOWNGRADE marker, TCP carries the
	 * program's bytes: a doorbell there would reach the peer's program
	 * as data (the marker itself wakes the peer). Across a wire the peer
	 * may see a doorbell before our SWITCH that says where our bytes on
	 * TCP end: none until it took the SWITCH (it sleeps on its CQ too). */
	if (!s->tx_san || s->ss.dg_sent ||
	    (!s->ss.peer_knows_switch &&
	     !(s->ss.prov->mod.info.caps & SDP_CAP_LOCAL_ONLY)))
		return;
	s->ss.peer_wants_wake = false;
	if (sdp_sys.send(s->fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 &&
	    s->st)
		s->st->doorbells++;
}

static void tcp_ended(struct sw_sock *s)
{
	if (!s->tcp_eof)
		s->tcp_eof_ns = sw_now_ns();
	s->tcp_eof = true;
}

/*
 * The peer sends its FIN message, sees it complete, then closes TCP; yet
 * TCP's end can be seen here before the provider has handed over the
 * messages before that FIN (they wait in its queue until polled, or until
 * receive buffers are posted again). So TCP's end alone ends the stream
 * only when the provider has had a grace period without handing anything
 * over; a provider that sees the peer gone says so sooner (peer_dead).
 */
#define SW_EOF_GRACE_NS 1000000000ull

bool sw_peer_ended(struct sw_sock *s)
{
	uint64_t since;

	if (s->ss.peer_dead)
		return true;
	if (!s->tcp_eof)
		return false;
	since = s->tcp_eof_ns > s->ss.last_rx_ns ? s->tcp_eof_ns :
						   s->ss.last_rx_ns;
	return sw_now_ns() - since > SW_EOF_GRACE_NS;
}

void sw_doorbell_drain(struct sw_sock *s)
{
	uint8_t buf[256];

	/* the peer's program bytes are still on TCP before its doorbells */
	if (!s->rx_san)
		return;

	for (;;) {
		ssize_t n = sdp_sys.recv(s->fd, buf, sizeof(buf),
					 MSG_PEEK | MSG_DONTWAIT);
		ssize_t i = 0;

		if (n > 0) {
			while (i < n && buf[i] == SDP_DOORBELL)
				i++;
			if (i) {
				sdp_sys.recv(s->fd, buf, i, MSG_DONTWAIT);
				s->ss.wake_armed = false;
				if (s->st)
					s->st->wakeups += i;
			}
			if (i == n && (size_t)n == sizeof(buf))
				continue;
			if (i < n && buf[i] != (uint8_t)SDP_HELLO_MAGIC[0]) {
				/* only doorbells and markers travel here */
				SW_WARN("fd %d: byte 0x%02x on TCP while carried by the provider: closing",
					s->fd, buf[i]);
				s->ss.error = EPROTO;
				tcp_ended(s);
				sw_event(s);
			}
			/* a marker stays for the downgrade to read */
			return;
		}
		if (n == 0) {
			tcp_ended(s);
			sw_event(s);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			tcp_ended(s);
			sw_event(s);
		}
		return;
	}
}

/* ---- receiving: validation and dispatch ------------------------------------- */

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

static void rxq_push(struct sw_session *ss, struct rx_item *it)
{
	it->next = NULL;
	if (ss->rxq_tail)
		ss->rxq_tail->next = it;
	else
		ss->rxq = it;
	ss->rxq_tail = it;
	ss->rx_queued += it->len;
}

/* A malformed or hostile message: close this connection, say why. */
int sw_proto_error(struct sw_sock *s, const char *why);
#define proto_error sw_proto_error
int sw_proto_error(struct sw_sock *s, const char *why)
{
	SW_ERR("fd %d: closing the connection: malformed message from the peer: %s",
	       s->fd, why);
	s->ss.error = EPROTO;
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
		return proto_error(s, "second SETUP");
	if (su.msg_size != ss->peer_msg_size ||
	    su.recv_credits != ss->peer_nrecv)
		return proto_error(s, "SETUP differs from the peer's hello");
	if (h->len)
		return proto_error(s, "SETUP with payload");
	if (su.staging.length > (1ull << 32) ||
	    (su.staging.length && !(su.staging.access &
				    SDP_ACCESS_REMOTE_WRITE)))
		return proto_error(s, "SETUP staging ring too large or not writable");
	ss->setup_rcvd = true;
	ss->peer_staging = su.staging;
	ss->peer_can_read = (su.flags & SDP_SETUP_F_RDMA_READ) != 0;
	/* offers need our slot (made when our SETUP goes, which may be
	 * after this one came: xslot_attach looks again), and the peer's
	 * RdmaRead to take them */
	ss->peer_takes_xoffer = (su.flags & SDP_SETUP_F_XSLOT) != 0;
	ss->peer_xslot = ss->peer_takes_xoffer && ss->xs_mine &&
			 ss->peer_can_read;
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
		return proto_error(s, "second SWITCH");
	/* the client switches once the server's SETUP committed it, the
	 * server once the client's SWITCH came (docs/protocol.md 2.5) */
	if (s->is_client ? !s->tx_san : !ss->setup_sent)
		return proto_error(s, "SWITCH out of turn");
	if (sw.tcp_bytes < s->tcp_rx)
		return proto_error(s, "SWITCH before bytes already read on TCP");
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
	struct rx_item *it;

	if (!h->len)
		return proto_error(s, "DATA without payload");
	if (ss->fin_rcvd || ss->dg_rcvd)
		return proto_error(s, "DATA after FIN or DOWNGRADE");
	it = sw_rx_item_new(ss);
	if (!it)
		return -ENOMEM;
	it->kind = RX_INLINE;
	it->buf = idx;
	it->off = sizeof(*h);
	it->len = h->len;
	ss->recv_held[idx] = 1;
	rxq_push(ss, it);
	if (s->st)
		s->st->rx_copy += h->len;
	return 0;
}

static int on_rdata(struct sw_sock *s, uint32_t idx,
		    const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_rdata rd;
	struct rx_item *it;

	memcpy(&rd, body, sizeof(rd));
	if (!ss->can_read)
		return proto_error(s, "RDATA but RdmaRead was not offered");
	if (!rd.total || rd.total > rd.region.length)
		return proto_error(s, "RDATA total outside its region");
	if (!(rd.region.access & SDP_ACCESS_REMOTE_READ))
		return proto_error(s, "RDATA region not readable");
	if (ss->fin_rcvd || ss->dg_rcvd)
		return proto_error(s, "RDATA after FIN or DOWNGRADE");
	if (h->len) {
		it = sw_rx_item_new(ss);
		if (!it)
			return -ENOMEM;
		it->kind = RX_INLINE;
		it->buf = idx;
		it->off = sizeof(*h) + sizeof(rd);
		it->len = h->len;
		ss->recv_held[idx] = 1;
		rxq_push(ss, it);
	}
	it = sw_rx_item_new(ss);
	if (!it)
		return -ENOMEM;
	it->kind = RX_REMOTE;
	it->desc = rd.region;
	it->xfer_id = rd.xfer_id;
	it->off = 0;
	it->len = rd.total;
	rxq_push(ss, it);
	return h->len ? 0 : sw_recv_repost(s, idx);
}

/* XOFFER: bytes wait in the peer's transfer slot; queued in stream
 * order, claimed when the program reads them (session_rx.c). */
static int on_xoffer(struct sw_sock *s, uint32_t idx,
		     const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_rdata rd;
	struct rx_item *it;

	memcpy(&rd, body, sizeof(rd));
	if (!ss->xs_peer || !ss->can_read)
		return proto_error(s, "XOFFER but no transfer slot was offered");
	if (h->len || !rd.xfer_id || !rd.total ||
	    rd.total > rd.region.length ||
	    !(rd.region.access & SDP_ACCESS_REMOTE_READ))
		return proto_error(s, "malformed XOFFER");
	if (ss->fin_rcvd || ss->dg_rcvd)
		return proto_error(s, "XOFFER after FIN or DOWNGRADE");
	it = sw_rx_item_new(ss);
	if (!it)
		return -ENOMEM;
	it->kind = RX_XSLOT;
	it->desc = rd.region;
	it->xfer_id = rd.xfer_id;
	it->off = 0;
	it->len = rd.total;
	rxq_push(ss, it);
	return sw_recv_repost(s, idx);
}

static int on_wdata(struct sw_sock *s, uint32_t idx,
		    const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_wdata wd;
	struct rx_item *it;

	memcpy(&wd, body, sizeof(wd));
	if (!ss->staging_len || ss->staging_dead)
		return proto_error(s, "WDATA but no staging ring is offered");
	if (h->len)
		return proto_error(s, "WDATA with payload");
	/* written without a sum that could wrap: offset and length are the
	 * peer's, the ring's size and fill are ours */
	if (!wd.bytes || wd.offset >= ss->staging_len ||
	    wd.bytes > ss->staging_len - wd.offset ||
	    wd.offset != ss->staging_recv_head % ss->staging_len ||
	    wd.bytes > ss->staging_len - (ss->staging_recv_head -
					  ss->staging_consumed))
		return proto_error(s, "WDATA outside the free staging space");
	if (ss->fin_rcvd || ss->dg_rcvd)
		return proto_error(s, "WDATA after FIN or DOWNGRADE");
	it = sw_rx_item_new(ss);
	if (!it)
		return -ENOMEM;
	it->kind = RX_STAGING;
	it->off = wd.offset;
	it->len = wd.bytes;
	ss->staging_recv_head += wd.bytes;
	rxq_push(ss, it);
	if (s->st)
		s->st->rx_rdma_write += wd.bytes;
	return sw_recv_repost(s, idx);
}

static int on_ack(struct sw_sock *s, uint32_t idx,
		  const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_ack ack;

	memcpy(&ack, body, sizeof(ack));
	if (h->len)
		return proto_error(s, "acknowledgement with payload");
	if (h->type == SDP_MSG_XFER_DONE) {
		if (!ss->xfer_wait_id || ack.xfer_id != ss->xfer_wait_id ||
		    ss->xfer_done)
			return proto_error(s, "XFER_DONE for no pending transfer");
		ss->xfer_done = true;
	} else {
		if (ack.bytes > ss->peer_staging_head - ss->peer_staging_freed)
			return proto_error(s, "STAGING_FREE beyond what was written");
		ss->peer_staging_freed += ack.bytes;
	}
	return sw_recv_repost(s, idx);
}

static int on_control(struct sw_sock *s, uint32_t idx,
		      const struct sdp_msg_hdr *h, const void *body)
{
	struct sw_session *ss = &s->ss;

	switch (h->type) {
	case SDP_MSG_CREDIT:
		if (h->len)
			return proto_error(s, "CREDIT with payload");
		break;
	case SDP_MSG_WAKE_ME: {
		struct sdp_msg_wake w;

		memcpy(&w, body, sizeof(w));
		if (h->len || w.reserved)
			return proto_error(s, "malformed WAKE_ME");
		ss->peer_waiting = true;
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
			return proto_error(s, "FIN with payload");
		if (ss->dg_rcvd)
			return proto_error(s, "FIN after DOWNGRADE");
		ss->fin_rcvd = true;
		break;
	case SDP_MSG_ABORT:
		ss->abort_rcvd = true;
		break;
	case SDP_MSG_OOB:
		if (h->len != 1)
			return proto_error(s, "OOB must carry one byte");
		ss->oob_byte = *((const uint8_t *)(h + 1));
		ss->oob_valid = true;
		break;
	case SDP_MSG_DOWNGRADE: {
		struct rx_item *it;

		if (h->len || ss->dg_rcvd)
			return proto_error(s, "malformed or second DOWNGRADE");
		it = sw_rx_item_new(ss);
		if (!it)
			return -ENOMEM;
		it->kind = RX_DOWNGRADE;
		rxq_push(ss, it);
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
		return proto_error(s, "CREDIT_DELTA the connection cannot take");
	return sw_recv_repost(s, idx);
}

static int on_release(struct sw_sock *s, uint32_t idx,
		      const struct sdp_msg_hdr *h, const void *body)
{
	struct sdp_msg_release rl;

	memcpy(&rl, body, sizeof(rl));
	if (sw_credit_on_release(s, idx, &rl))
		return proto_error(s, "CREDIT_RELEASE not asked for");
	return 0;
}

static const msg_handler handlers[SDP_MSG_TYPE_MAX] = {
	[SDP_MSG_SETUP] = on_setup,
	[SDP_MSG_DATA] = on_data,
	[SDP_MSG_RDATA] = on_rdata,
	[SDP_MSG_WDATA] = on_wdata,
	[SDP_MSG_XFER_DONE] = on_ack,
	[SDP_MSG_STAGING_FREE] = on_ack,
	[SDP_MSG_CREDIT] = on_control,
	[SDP_MSG_WAKE_ME] = on_control,
	[SDP_MSG_FIN] = on_control,
	[SDP_MSG_ABORT] = on_control,
	[SDP_MSG_OOB] = on_control,
	[SDP_MSG_DOWNGRADE] = on_control,
	[SDP_MSG_CREDIT_DELTA] = on_delta,
	[SDP_MSG_CREDIT_RELEASE] = on_release,
	[SDP_MSG_XOFFER] = on_xoffer,
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
		return proto_error(s, "message longer than the receive buffer");
	if (sdp_msg_decode(buf, bytes, &v, why, sizeof(why)))
		return proto_error(s, why);
	h = v.hdr;
	if (h.seq != ss->rx_seq) {
		snprintf(why, sizeof(why), "sequence %u where %u was due",
			 h.seq, ss->rx_seq);
		return proto_error(s, why);
	}
	if (!ss->setup_rcvd && h.type != SDP_MSG_SETUP)
		return proto_error(s, "first message is not SETUP");
	/* bytes of the stream, and its end, come only after the switch
	 * point that says where the peer's TCP bytes end */
	if (!ss->switch_rcvd &&
	    (h.type == SDP_MSG_DATA || h.type == SDP_MSG_RDATA ||
	     h.type == SDP_MSG_WDATA || h.type == SDP_MSG_XOFFER ||
	     h.type == SDP_MSG_OOB || h.type == SDP_MSG_FIN ||
	     h.type == SDP_MSG_ABORT || h.type == SDP_MSG_DOWNGRADE))
		return proto_error(s, "stream message before SWITCH");
	if ((h.flags & SDP_MSG_F_SWITCHED) && !s->tx_san)
		return proto_error(s, "SWITCHED flag before our SWITCH");
	if (h.credits && (uint64_t)ss->credits + h.credits > ss->peer_nrecv)
		return proto_error(s, "credit return beyond the peer's buffers");
	if (ss->peer_credits <= 0)
		return proto_error(s, "message beyond the credits granted");
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

	if (!ss->cq)
		return 0;
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
					proto_error(s, "message longer than the receive buffer");
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
		sw_credit_maybe_update(s);
		if (ss->grow_wanted)
			sw_credit_adapt(s);
		if (s->ptx_len && sw_ptx_due(s))
			sw_ptx_flush(s);
	}
	return err;
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
		if (ss->peer_wants_wake)
			sw_doorbell_ring(s);
		ss->rdma_waiting = true;
		r = sw_session_wait(s, POLLIN, 0);
		ss->rdma_waiting = false;
		if (r < 0 && r != -ETIMEDOUT && r != -EINTR)
			return r;
	}
	return ss->rdma_status;
}

uint64_t sw_rdma_ctx_new(struct sw_session *ss);
uint64_t sw_rdma_ctx_new(struct sw_session *ss)
{
	return CTX_RDMA_BASE + ++ss->rdma_ctx_next;
}

/* ---- waiting ------------------------------------------------------------------ */

int sw_session_arm(struct sw_sock *s)
{
	struct sdp_msg_wake w = { .seen_seq = s->ss.rx_seq };

	return sw_send_ctrl(s, SDP_MSG_WAKE_ME, &w, sizeof(w), NULL, 0, 0);
}

/* Asks the peer for a doorbell. Returns false when no credit allows it
 * (the peer then rings on its own when it returns credits). */
static bool arm_wake(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (ss->wake_armed)
		return true;
	/* a doorbell is a byte after the peer's switch point: asked for only
	 * once that point is known, so that it is never read as data */
	if (!ss->switch_rcvd || !sw_credit_can_send(ss, SDP_MSG_WAKE_ME))
		return false;
	if (sw_session_arm(s))
		return false;
	ss->wake_armed = true;
	return true;
}

/*
 * A provider that reaches other hosts delivers a message some time after its
 * sender posted it: the doorbell on TCP can overtake the message it
 * announces (the waiter wakes, finds nothing, and sleeps again with no
 * doorbell left to come), and our own sends and RDMA complete with no
 * doorbell at all. Such a wait sleeps on the provider's CQ as well, armed
 * here before the last check. A local provider's messages are in place
 * before the doorbell goes: its CQ keeps no fd (SDP_CAP_LOCAL_ONLY), except
 * for a wait on our own PENDING RDMA (shm's staging mode), which the
 * peer's progress completes without a message, hence without a doorbell.
 * Returns the fd to add to the sleep, or -1.
 */
int sw_cq_sleep_fd(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	int fd;

	if (!ss->cq || ((ss->prov->mod.info.caps & SDP_CAP_LOCAL_ONLY) &&
			!ss->rdma_waiting))
		return -1;
	fd = ss->prov->mod.ops.cq_notify_fd(ss->cq);
	if (fd < 0 || ss->prov->mod.ops.cq_arm(ss->cq))
		return -1;
	return fd;
}

int sw_session_wait(struct sw_sock *s, short events, uint64_t deadline_ns)
{
	struct sw_session *ss = &s->ss;
	uint64_t seq;

	/* bytes kept back to coalesce go before this side waits */
	if (s->ptx_len && s->state == SW_SAN)
		sw_ptx_flush(s);
	sw_credit_return_owed(s);
	seq = atomic_load(&s->event_seq);
	uint64_t spin_end = sw_now_ns() + sw_spin_budget_ns(&s->spin);
	uint64_t slept;
	unsigned spins = 0;
	int timeout, r, cfd;

	/* poll first: this is where the latency is won */
	while (sw_now_ns() < spin_end) {
		int i;

		/* a few hundred cycles off the lock without a system call
		 * (the peer usually runs on another core); every eighth
		 * round yields, in case the peer waits for this core */
		pthread_mutex_unlock(&s->lock);
		if (!(++spins & 7))
			sched_yield();
		else
			for (i = 0; i < 16; i++)
				__builtin_ia32_pause();
		pthread_mutex_lock(&s->lock);
		if (atomic_load(&s->event_seq) != seq)
			return 0;
		r = sw_progress(s);
		if (r < 0)
			return r;
		if (atomic_load(&s->event_seq) != seq)
			return 0;
	}
	/* then ask to be woken, check once more, and sleep in the kernel */
	sw_credit_adapt(s);
	/* a sender held by its last credit (data needs two) whose wake-up
	 * request is already out: the peer returns a single owed buffer only
	 * to a peer it believes has none, so it may never answer (a pool
	 * shrunk to two idle buffers hung here). The last credit goes as a
	 * CREDIT: the peer then owes two and returns them, ringing. */
	if ((events & POLLOUT) && ss->wake_armed && ss->credits == 1 &&
	    s->state == SW_SAN && !ss->error && !ss->peer_dead)
		sw_send_ctrl(s, SDP_MSG_CREDIT, NULL, 0, NULL, 0, 0);
	arm_wake(s);
	cfd = sw_cq_sleep_fd(s);
	r = sw_progress(s);
	if (r < 0)
		return r;
	if (atomic_load(&s->event_seq) != seq)
		return 0;
	/* what we wait for may need the peer's progress (our queued sends,
	 * our RDMA in the provider's staging mode): a peer asleep must be
	 * woken for it. Nothing of ours pending: no doorbell, or two idle
	 * ends wake each other for ever. */
	if (ss->peer_wants_wake && (ss->sends_pending || ss->rdma_waiting))
		sw_doorbell_ring(s);
	if (deadline_ns) {
		uint64_t now = sw_now_ns();

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		timeout = (int)((deadline_ns - now) / 1000000) + 1;
	} else {
		timeout = -1;
	}
	if (atomic_load(&s->users) > 1 && (timeout < 0 || timeout > 2))
		timeout = 2;
	else if (sw_idle_sleep_ms() >= 0 &&
		 (timeout < 0 || timeout > sw_idle_sleep_ms()))
		timeout = sw_idle_sleep_ms();
	/* the peer's program bytes still on TCP keep it readable: no doorbell
	 * can be told apart there yet, so nap instead (a sender's short wait
	 * for credits while it has not read all the peer's TCP bytes) */
	if (!s->rx_san && (timeout < 0 || timeout > 1))
		timeout = 1;
	pthread_mutex_unlock(&s->lock);
	{
		struct pollfd pfd[2] = {
			{ .fd = s->fd, .events = s->rx_san ? POLLIN : 0 },
			{ .fd = cfd, .events = POLLIN },
		};

		slept = sw_now_ns();
		r = sdp_sys.poll(pfd, cfd >= 0 ? 2 : 1, timeout);
		if (r < 0)
			r = -errno;
		slept = sw_now_ns() - slept;
	}
	pthread_mutex_lock(&s->lock);
	sw_spin_slept(&s->spin, slept, r > 0);
	/* closed by another thread meanwhile: the session is gone and the
	 * fd number may already name another file, whose bytes are not
	 * ours to drain */
	if (s->closed && !ss->prov)
		return -EBADF;
	if (cfd >= 0 && ss->cq)
		ss->prov->mod.ops.cq_ack(ss->cq);
	sw_doorbell_drain(s);
	/* a signal handler ran: the program's call returns EINTR, as a
	 * blocking socket call does when a handler interrupts it */
	if (r == -EINTR) {
		sw_progress(s);
		return -EINTR;
	}
	return sw_progress(s);
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * fuzz_session.c - libFuzzer target for a sequence of control messages: each
 * goes through the real decoder (switch/msg_decode.c), then through a model
 * of the stateful checks of switch/session.c (on_recv and its handlers), and
 * the model asserts what those checks exist to guarantee: staging reads stay
 * inside the ring, credits never exceed the buffers, no data after FIN.
 * The model mirrors session.c's checks; keep the two in step.
 *
 * Input: byte 0 selects the session's parameters; then records of
 * [u8 op][u16 len, little-endian][len bytes]: op 0 = a received message,
 * op 1 = the program reads up to len bytes (no payload follows).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct piece {
	int staging;		/* 1: bytes in the staging ring */
	uint64_t off, len;
};

struct model {
	/* parameters, as the hellos and SETUP set them */
	uint32_t peer_nrecv;
	uint64_t staging_len;
	bool can_read;
	/* state, as struct sw_session holds it */
	uint32_t rx_seq;
	uint32_t credits;
	bool setup_rcvd, switch_rcvd, fin_rcvd, dg_rcvd;
	uint64_t tcp_rx;	/* the peer's bytes read on TCP so far */
	uint32_t xfer_wait_id;
	bool xfer_done;
	uint64_t staging_recv_head, staging_consumed;
	uint64_t peer_staging_head, peer_staging_freed;
	/* what the program will read, in order */
	struct piece q[64];
	int qh, qn;
};

static void broken(const char *what)
{
	fprintf(stderr, "fuzz_session: accepted sequence breaks: %s\n", what);
	abort();
}

static void push(struct model *m, int staging, uint64_t off, uint64_t len)
{
	struct piece *p;

	if (m->qn == 64) {
		/* the program reads the oldest piece whole */
		p = &m->q[m->qh];
		if (p->staging)
			m->staging_consumed += p->len;
		m->qh = (m->qh + 1) % 64;
		m->qn--;
	}
	p = &m->q[(m->qh + m->qn) % 64];
	p->staging = staging;
	p->off = off;
	p->len = len;
	m->qn++;
}

/* The program reads up to n bytes: what session_rx.c's rx_copy does,
 * with the bounds rx_copy relies on asserted. */
static void program_reads(struct model *m, uint64_t n)
{
	while (n && m->qn) {
		struct piece *p = &m->q[m->qh];
		uint64_t k = p->len < n ? p->len : n;

		if (p->staging) {
			uint64_t o = p->off % m->staging_len;

			/* rx_copy copies k bytes from staging + o */
			if (o + k < o || o + k > m->staging_len)
				broken("staging read past the ring's end");
			m->staging_consumed += k;
		}
		p->off += k;
		p->len -= k;
		n -= k;
		if (!p->len) {
			m->qh = (m->qh + 1) % 64;
			m->qn--;
		}
	}
}

/* 0 = accepted, -1 = the session would close the connection. */
static int on_message(struct model *m, const struct sdp_msg_view *v)
{
	const struct sdp_msg_hdr *h = &v->hdr;

	if (h->seq != m->rx_seq)
		return -1;
	if (!m->setup_rcvd && h->type != SDP_MSG_SETUP)
		return -1;
	/* the stream's bytes and its end only after the switch point */
	if (!m->switch_rcvd &&
	    (h->type == SDP_MSG_DATA || h->type == SDP_MSG_RDATA ||
	     h->type == SDP_MSG_WDATA || h->type == SDP_MSG_XOFFER ||
	     h->type == SDP_MSG_OOB || h->type == SDP_MSG_FIN ||
	     h->type == SDP_MSG_ABORT || h->type == SDP_MSG_DOWNGRADE))
		return -1;
	if (h->credits && (uint64_t)m->credits + h->credits > m->peer_nrecv)
		return -1;
	m->rx_seq++;
	m->credits += h->credits;

	switch (h->type) {
	case SDP_MSG_SETUP:
		if (m->setup_rcvd)
			return -1;
		m->setup_rcvd = true;
		break;
	case SDP_MSG_DATA:
		if (m->fin_rcvd || m->dg_rcvd)
			return -1;
		push(m, 0, 0, h->len);
		break;
	case SDP_MSG_RDATA: {
		struct sdp_msg_rdata rd;

		memcpy(&rd, v->body, sizeof(rd));
		if (!m->can_read)
			return -1;
		if (!rd.total || rd.total > rd.region.length)
			return -1;
		if (m->fin_rcvd || m->dg_rcvd)
			return -1;
		if (h->len)
			push(m, 0, 0, h->len);
		push(m, 0, 0, rd.total);
		break;
	}
	case SDP_MSG_XOFFER: {
		struct sdp_msg_rdata rd;

		memcpy(&rd, v->body, sizeof(rd));
		/* the slot exists only with RdmaRead (session.c) */
		if (!m->can_read)
			return -1;
		if (h->len || !rd.xfer_id || !rd.total ||
		    rd.total > rd.region.length)
			broken("decoder let a malformed XOFFER through");
		if (m->fin_rcvd || m->dg_rcvd)
			return -1;
		push(m, 0, 0, rd.total);
		break;
	}
	case SDP_MSG_WDATA: {
		struct sdp_msg_wdata wd;

		memcpy(&wd, v->body, sizeof(wd));
		if (!m->staging_len)
			return -1;
		/* session.c on_wdata, as it stands */
		if (!wd.bytes || wd.offset >= m->staging_len ||
		    wd.bytes > m->staging_len - wd.offset ||
		    wd.offset != m->staging_recv_head % m->staging_len ||
		    wd.bytes > m->staging_len - (m->staging_recv_head -
						 m->staging_consumed))
			return -1;
		if (m->fin_rcvd || m->dg_rcvd)
			return -1;
		/* what the checks above must guarantee */
		if (wd.offset + wd.bytes < wd.offset)
			broken("WDATA range wraps around 2^64");
		if (wd.offset + wd.bytes > m->staging_len)
			broken("WDATA range past the ring's end");
		m->staging_recv_head += wd.bytes;
		if (m->staging_recv_head - m->staging_consumed >
		    m->staging_len)
			broken("more staging bytes queued than the ring holds");
		push(m, 1, wd.offset, wd.bytes);
		break;
	}
	case SDP_MSG_XFER_DONE: {
		struct sdp_msg_ack a;

		memcpy(&a, v->body, sizeof(a));
		if (!m->xfer_wait_id || a.xfer_id != m->xfer_wait_id ||
		    m->xfer_done)
			return -1;
		m->xfer_done = true;
		break;
	}
	case SDP_MSG_STAGING_FREE: {
		struct sdp_msg_ack a;

		memcpy(&a, v->body, sizeof(a));
		if (a.bytes > m->peer_staging_head - m->peer_staging_freed)
			return -1;
		m->peer_staging_freed += a.bytes;
		if (m->peer_staging_freed > m->peer_staging_head)
			broken("peer freed more staging than was written");
		break;
	}
	case SDP_MSG_SWITCH: {
		struct sdp_msg_switch sw;

		memcpy(&sw, v->body, sizeof(sw));
		if (h->len || sw.reserved)
			broken("decoder let a malformed SWITCH through");
		if (m->switch_rcvd || sw.tcp_bytes < m->tcp_rx)
			return -1;
		m->switch_rcvd = true;
		break;
	}
	case SDP_MSG_FIN:
		if (m->dg_rcvd)
			return -1;
		m->fin_rcvd = true;
		break;
	case SDP_MSG_DOWNGRADE:
		if (m->dg_rcvd)
			return -1;
		m->dg_rcvd = true;
		break;
	default:
		break;
	}
	if (m->credits > m->peer_nrecv)
		broken("credits beyond the peer's buffers");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model m;
	size_t pos = 1;

	if (size < 1)
		return 0;
	memset(&m, 0, sizeof(m));
	m.peer_nrecv = 4 + (data[0] & 0x0f);
	m.staging_len = (data[0] & 0x30) == 0x30 ? 0 :
			4096ull << ((data[0] >> 4) & 3);
	m.can_read = data[0] & 0x40;
	m.credits = m.peer_nrecv;
	/* as if this side had an RDATA transfer and staging bytes out, and
	 * had read some of the peer's bytes on TCP */
	m.xfer_wait_id = (data[0] & 0x80) ? 7 : 0;
	m.tcp_rx = data[0] & 0x08 ? 100 : 0;
	m.peer_staging_head = 65536;
	while (pos + 3 <= size) {
		uint8_t op = data[pos];
		size_t len = data[pos + 1] | (size_t)data[pos + 2] << 8;
		struct sdp_msg_view v;
		char why[128];
		uint8_t *buf;
		int r;

		pos += 3;
		if (op & 1) {
			program_reads(&m, len);
			continue;
		}
		if (len > size - pos)
			len = size - pos;
		buf = malloc(len ? len : 1);
		if (!buf)
			return 0;
		memcpy(buf, data + pos, len);
		pos += len;
		r = sdp_msg_decode(buf, len, &v, why, sizeof(why));
		if (!r)
			r = on_message(&m, &v);
		free(buf);
		if (r)
			break;	/* the connection closes here */
	}
	return 0;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * msg_decode.c - validation of a received control message against the wire
 * format (docs/protocol.md section 3): nothing here trusts a length or a
 * type before checking it, and nothing reads outside [buf, buf + len).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "msg_decode.h"

static const uint16_t body_len[SDP_MSG_TYPE_MAX] = {
	[SDP_MSG_SETUP] = sizeof(struct sdp_msg_setup),
	[SDP_MSG_RDATA] = sizeof(struct sdp_msg_rdata),
	[SDP_MSG_WDATA] = sizeof(struct sdp_msg_wdata),
	[SDP_MSG_XFER_DONE] = sizeof(struct sdp_msg_ack),
	[SDP_MSG_STAGING_FREE] = sizeof(struct sdp_msg_ack),
	[SDP_MSG_WAKE_ME] = sizeof(struct sdp_msg_wake),
	[SDP_MSG_CREDIT_DELTA] = sizeof(struct sdp_msg_delta),
	[SDP_MSG_CREDIT_RELEASE] = sizeof(struct sdp_msg_release),
	[SDP_MSG_XOFFER] = sizeof(struct sdp_msg_rdata),
	[SDP_MSG_SWITCH] = sizeof(struct sdp_msg_switch),
};

static int bad(char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -EPROTO;
}

int sdp_msg_decode(const uint8_t *buf, size_t len, struct sdp_msg_view *v,
		   char *why, size_t whylen)
{
	struct sdp_msg_hdr *h = &v->hdr;
	size_t blen;

	if (len < sizeof(*h))
		return bad(why, whylen, "message of %zu bytes is shorter than its header", len);
	memcpy(h, buf, sizeof(*h));
	if (h->type == 0 || h->type >= SDP_MSG_TYPE_MAX)
		return bad(why, whylen, "unknown message type %u", h->type);
	if (h->flags & ~(SDP_MSG_F_WAKE_ME | SDP_MSG_F_SWITCHED))
		return bad(why, whylen, "unknown flags 0x%x", h->flags);
	if (h->reserved)
		return bad(why, whylen,
			   "reserved header field is %u, not zero",
			   h->reserved);
	blen = body_len[h->type];
	if ((uint64_t)sizeof(*h) + blen + h->len != len)
		return bad(why, whylen,
			   "type %u: header says %llu bytes, not what arrived",
			   h->type, (unsigned long long)sizeof(*h) + blen + h->len);
	memcpy(v->body, buf + sizeof(*h), blen);
	v->body_len = blen;
	v->payload = buf + sizeof(*h) + blen;
	v->paylen = h->len;

	switch (h->type) {
	case SDP_MSG_DATA:
		if (!h->len)
			return bad(why, whylen, "DATA without payload");
		break;
	case SDP_MSG_OOB:
		if (h->len != 1)
			return bad(why, whylen,
				   "OOB carries %u bytes, not one",
				   h->len);
		break;
	case SDP_MSG_XOFFER: {
		struct sdp_msg_rdata rd;

		memcpy(&rd, v->body, sizeof(rd));
		if (h->len || !rd.xfer_id || rd.reserved || !rd.total ||
		    rd.total > rd.region.length ||
		    !(rd.region.access & SDP_ACCESS_REMOTE_READ))
			return bad(why, whylen,
				   "malformed XOFFER (payload %u, offer %u, %llu bytes, access 0x%x)",
				   h->len, rd.xfer_id,
				   (unsigned long long)rd.total,
				   rd.region.access);
		break;
	}
	case SDP_MSG_RDATA: {
		struct sdp_msg_rdata rd;

		memcpy(&rd, v->body, sizeof(rd));
		if (!rd.total || rd.total > rd.region.length)
			return bad(why, whylen,
				   "RDATA total %llu outside its region",
				   (unsigned long long)rd.total);
		if (!(rd.region.access & SDP_ACCESS_REMOTE_READ))
			return bad(why, whylen,
				   "RDATA region access 0x%x lacks read",
				   rd.region.access);
		if (rd.reserved)
			return bad(why, whylen,
				   "RDATA reserved field %u not zero",
				   rd.reserved);
		break;
	}
	case SDP_MSG_WDATA: {
		struct sdp_msg_wdata wd;

		memcpy(&wd, v->body, sizeof(wd));
		if (h->len || !wd.bytes)
			return bad(why, whylen,
				   "WDATA with payload %u or %llu bytes",
				   h->len, (unsigned long long)wd.bytes);
		break;
	}
	case SDP_MSG_WAKE_ME: {
		struct sdp_msg_wake w;

		memcpy(&w, v->body, sizeof(w));
		if (h->len || w.reserved)
			return bad(why, whylen,
				   "malformed WAKE_ME (payload %u, reserved %u)",
				   h->len, w.reserved);
		break;
	}
	case SDP_MSG_SETUP: {
		struct sdp_msg_setup su;

		memcpy(&su, v->body, sizeof(su));
		if (h->len || su.reserved ||
		    (su.flags & ~(SDP_SETUP_F_RDMA_READ | SDP_SETUP_F_XSLOT)))
			return bad(why, whylen,
				   "malformed SETUP (payload %u, flags 0x%x)",
				   h->len, su.flags);
		if (su.staging.length > (1ull << 32) ||
		    (su.staging.length &&
		     !(su.staging.access & SDP_ACCESS_REMOTE_WRITE)))
			return bad(why, whylen,
				   "SETUP staging ring (access 0x%x, %llu bytes) unusable",
				   su.staging.access,
				   (unsigned long long)su.staging.length);
		break;
	}
	case SDP_MSG_CREDIT_DELTA: {
		struct sdp_msg_delta d;

		memcpy(&d, v->body, sizeof(d));
		if (h->len || (d.flags & ~(SDP_DELTA_F_STAGING |
					   SDP_DELTA_F_REVOKE_STAGING)))
			return bad(why, whylen,
				   "malformed CREDIT_DELTA (payload %u, flags 0x%x)",
				   h->len, d.flags);
		if (d.delta < -4096 || d.delta > 4096)
			return bad(why, whylen, "CREDIT_DELTA of %d", d.delta);
		if ((d.flags & SDP_DELTA_F_STAGING) &&
		    (d.delta <= 0 || !d.staging.length ||
		     d.staging.length > (1ull << 32) ||
		     !(d.staging.access & SDP_ACCESS_REMOTE_WRITE)))
			return bad(why, whylen,
				   "CREDIT_DELTA offers an unusable staging ring (%llu bytes)",
				   (unsigned long long)d.staging.length);
		break;
	}
	case SDP_MSG_SWITCH: {
		struct sdp_msg_switch sw;

		memcpy(&sw, v->body, sizeof(sw));
		if (h->len || sw.reserved)
			return bad(why, whylen,
				   "malformed SWITCH (payload %u, reserved %llu)",
				   h->len, (unsigned long long)sw.reserved);
		break;
	}
	case SDP_MSG_CREDIT_RELEASE: {
		struct sdp_msg_release rl;

		memcpy(&rl, v->body, sizeof(rl));
		if (h->len || rl.reserved || rl.last > 1)
			return bad(why, whylen,
				   "malformed CREDIT_RELEASE (payload %u, last %u)",
				   h->len, rl.last);
		break;
	}
	case SDP_MSG_ABORT:
	case SDP_MSG_CREDIT:
	case SDP_MSG_FIN:
	case SDP_MSG_DOWNGRADE:
	case SDP_MSG_XFER_DONE:
	case SDP_MSG_STAGING_FREE:
		if (h->len)
			return bad(why, whylen,
				   "type %u carries %u payload bytes", h->type,
				   h->len);
		break;
	}
	return 0;
}

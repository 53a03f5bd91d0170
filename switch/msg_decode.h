/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * msg_decode.h - the stateless half of receiving a control message: checks
 * every field a peer sends against the wire format alone (type, lengths,
 * reserved fields, per-type limits) before anything acts on it. The
 * session adds the checks that need its state (sequence, credits, staging
 * bounds). Pure: the fuzz target calls it directly.
 */
#ifndef SDP_MSG_DECODE_H
#define SDP_MSG_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

struct sdp_msg_view {
	struct sdp_msg_hdr hdr;
	uint8_t body[64];	/* the type's body, copied (aligned) */
	size_t body_len;
	const uint8_t *payload;	/* inline payload inside the buffer */
	uint32_t paylen;
};

/* 0 and *v filled, or -EPROTO with why saying what was wrong. */
int sdp_msg_decode(const uint8_t *buf, size_t len, struct sdp_msg_view *v,
		   char *why, size_t whylen);

#endif /* SDP_MSG_DECODE_H */

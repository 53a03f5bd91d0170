// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * fuzz_msg_decode.c - libFuzzer target for the stateless control-message
 * decoder (switch/msg_decode.c): arbitrary bytes in, and every message it
 * accepts must satisfy the wire format's invariants (docs/protocol.md 3).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Stops the run with a message libFuzzer saves a reproducer for. */
static void broken(const char *what)
{
	fprintf(stderr, "fuzz_msg_decode: accepted message breaks: %s\n",
		what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sdp_msg_view v;
	char why[128];
	uint8_t *buf;
	int r;

	/* an exact-size heap copy: ASan sees any read past the message */
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	memset(why, 0x5a, sizeof(why));
	r = sdp_msg_decode(buf, size, &v, why, sizeof(why));
	if (r) {
		if (r != -71 /* -EPROTO */)
			broken("error other than -EPROTO");
		if (!memchr(why, 0, sizeof(why)) || !why[0])
			broken("rejection without a reason");
		goto out;
	}
	if (v.hdr.type == 0 || v.hdr.type >= SDP_MSG_TYPE_MAX)
		broken("unknown type");
	if (v.hdr.flags & ~(SDP_MSG_F_WAKE_ME | SDP_MSG_F_SWITCHED))
		broken("unknown flags");
	if (v.hdr.reserved)
		broken("reserved header field set");
	if (v.body_len > sizeof(v.body))
		broken("body longer than the view");
	if (sizeof(struct sdp_msg_hdr) + v.body_len + v.paylen != size)
		broken("lengths do not add up to what arrived");
	if (v.payload != buf + sizeof(struct sdp_msg_hdr) + v.body_len)
		broken("payload pointer not after the body");
	if (v.paylen != v.hdr.len)
		broken("payload length differs from the header");
	if (memcmp(v.body, buf + sizeof(struct sdp_msg_hdr), v.body_len))
		broken("body copy differs from the message");
	if (v.hdr.type == SDP_MSG_DATA && !v.paylen)
		broken("empty DATA");
	if (v.hdr.type == SDP_MSG_OOB && v.paylen != 1)
		broken("OOB without exactly one byte");
	if (v.hdr.type == SDP_MSG_RDATA) {
		struct sdp_msg_rdata rd;

		memcpy(&rd, v.body, sizeof(rd));
		if (!rd.total || rd.total > rd.region.length)
			broken("RDATA total outside its region");
		if (!(rd.region.access & SDP_ACCESS_REMOTE_READ))
			broken("RDATA region not readable");
	}
	if (v.hdr.type == SDP_MSG_XOFFER) {
		struct sdp_msg_rdata rd;

		memcpy(&rd, v.body, sizeof(rd));
		if (v.paylen || !rd.xfer_id || rd.reserved || !rd.total ||
		    rd.total > rd.region.length ||
		    !(rd.region.access & SDP_ACCESS_REMOTE_READ))
			broken("malformed XOFFER accepted");
	}
	if (v.hdr.type == SDP_MSG_SWITCH) {
		struct sdp_msg_switch sw;

		memcpy(&sw, v.body, sizeof(sw));
		if (v.paylen || sw.reserved)
			broken("malformed SWITCH accepted");
	}
	if (v.hdr.type == SDP_MSG_SETUP) {
		struct sdp_msg_setup su;

		memcpy(&su, v.body, sizeof(su));
		if (su.staging.length > (1ull << 32))
			broken("SETUP staging ring beyond 4 GiB");
	}
	/* touch every payload byte: out-of-bounds shows up under ASan */
	{
		volatile uint8_t sum = 0;
		uint32_t i;

		for (i = 0; i < v.paylen; i++)
			sum ^= v.payload[i];
		(void)sum;
	}
out:
	free(buf);
	return 0;
}

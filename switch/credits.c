/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * credits.c - flow control (DESIGN.md section 5, seed 003): a sender never
 * has more messages in flight than the receiver has posted buffers. Every
 * message returns the buffers its sender reposted since its last message;
 * a CREDIT message does so when nothing else is going that way. One credit
 * stays in reserve for CREDIT and WAKE_ME so a side can always announce.
 */
#include <errno.h>

#include "sw_internal.h"

bool sw_credit_can_send(struct sw_session *ss, uint8_t type)
{
	/* messages that carry program data need two: the last credit is kept
	 * for messages that only return credits, acknowledge or ask for a
	 * wake-up, so a side can always tell the other what it needs */
	int32_t need = (type == SDP_MSG_DATA || type == SDP_MSG_RDATA ||
			type == SDP_MSG_WDATA || type == SDP_MSG_OOB) ?
			       2 : 1;

	return ss->peer_nrecv && ss->credits >= need;
}

void sw_credit_consume(struct sw_session *ss)
{
	ss->credits--;
}

void sw_credit_returned(struct sw_session *ss, uint16_t n)
{
	ss->credits += n;
}

uint16_t sw_credit_take_owed(struct sw_session *ss)
{
	uint32_t n = ss->credits_owed > 0xffff ? 0xffff : ss->credits_owed;

	ss->credits_owed -= n;
	ss->peer_credits += n;
	return (uint16_t)n;
}

/* Sends what is owed to the peer: a pending transfer acknowledgement, a
 * pending FIN, and a CREDIT message when enough buffers wait to be
 * announced or the peer is short of them. */
int sw_credit_maybe_update(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint32_t threshold = ss->nrecv / 2 > 2 ? ss->nrecv / 2 : 2;
	int r;

	if (!ss->peer_nrecv || !ss->ep)
		return 0;
	if (ss->xfer_ack_pending && sw_credit_can_send(ss, SDP_MSG_XFER_DONE)) {
		struct sdp_msg_ack ack = { .xfer_id = ss->xfer_ack_id,
					   .bytes = ss->xfer_ack_bytes };

		r = sw_send_ctrl(s, SDP_MSG_XFER_DONE, &ack, sizeof(ack), NULL,
				 0, 0);
		if (r)
			return r;
		ss->xfer_ack_pending = false;
	}
	if (ss->staging_freed_unsent &&
	    (ss->staging_freed_unsent >= ss->staging_len / 4 ||
	     !ss->rx_queued) &&
	    sw_credit_can_send(ss, SDP_MSG_STAGING_FREE)) {
		struct sdp_msg_ack ack = { .bytes = ss->staging_freed_unsent };

		r = sw_send_ctrl(s, SDP_MSG_STAGING_FREE, &ack, sizeof(ack),
				 NULL, 0, 0);
		if (r)
			return r;
		ss->staging_freed_unsent = 0;
	}
	if (ss->fin_pending && sw_credit_can_send(ss, SDP_MSG_FIN)) {
		r = sw_send_ctrl(s, SDP_MSG_FIN, NULL, 0, NULL, 0, 0);
		if (r)
			return r;
		ss->fin_pending = false;
		ss->fin_sent = true;
	}
	if (ss->credits_owed >= threshold ||
	    (ss->credits_owed && ss->peer_credits <= 0) ||
	    (ss->credits_owed >= 2 && ss->peer_credits <= 1)) {
		if (!sw_credit_can_send(ss, SDP_MSG_CREDIT))
			return -EAGAIN;
		r = sw_send_ctrl(s, SDP_MSG_CREDIT, NULL, 0, NULL, 0, 0);
		if (r)
			return r;
	}
	return 0;
}

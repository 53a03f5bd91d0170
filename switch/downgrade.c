/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * downgrade.c - returning a connection from the SAN to TCP mid-stream
 * (DESIGN.md section 4), each direction at the byte where its sender put a
 * DOWNGRADE message on the SAN and a marker on TCP.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "credits.h"
#include "downgrade.h"
#include "fallback.h"
#include "holders.h"
#include "log.h"
#include "orphan.h"
#include "reupgrade.h"
#include "session_msg.h"
#include "session_rx.h"
#include "session_tx.h"
#include "sock.h"
#include "util.h"
#include "wire.h"

/*
 * At exit: a connection back on TCP whose program never read since (a
 * sender that writes and exits, closing nothing) still has the peer's
 * doorbells and downgrade marker in its kernel receive queue, and the
 * kernel's close of a socket with unread bytes is a reset, after which
 * the peer's kernel drops what its program had not read yet. They are
 * taken first, as close does (sw_marker_take): the peer's DOWNGRADE that
 * heads the receive queue (no byte of the peer's before it) is taken for
 * its marker to be awaited. Hooked once this process sent a DOWNGRADE.
 */
static bool markers_hooked;

void sw_markers_settle(void)
{
	uint64_t deadline = sw_now_ns() + 1000000000ull;
	struct sw_sock **v;
	int n, i;

	if (!markers_hooked)
		return;
	n = sw_sock_list(&v);
	for (i = 0; i < n; i++) {
		struct sw_sock *s = v[i];
		bool locked = sw_sock_lock_by(s, deadline);

		/* one that another process holds too is its to read */
		if (locked && !s->closed && !sw_holders_others(s)) {
			if (s->state == SW_SAN && s->ss.dg_sent && s->ss.cq &&
			    !s->ss.peer_dead && !s->ss.error) {
				sw_progress(s);
				sw_downgrade_rx_point(s);
			}
			sw_marker_take(s);
		}
		if (locked)
			pthread_mutex_unlock(&s->lock);
		sw_sock_unref(s);
	}
	free(v);
}

static void markers_watch(void)
{
	if (__atomic_exchange_n(&markers_hooked, true, __ATOMIC_RELAXED))
		return;
	atexit(sw_markers_settle);
}

int sw_downgrade_start(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sdp_marker m;
	int r;

	if (ss->dg_sent)
		return 0;
	/* a sendfile's lend cannot outlive the provider connection: what
	 * the peer has not taken goes first, before the marker */
	if (ss->lend.len && !ss->dg_hold) {
		ss->dg_hold++;
		sw_lend_settle(s);
		ss->dg_hold--;
	}
	if (ss->dg_hold || !sw_credit_can_send(ss, SDP_MSG_DOWNGRADE))
		return -EAGAIN;
	r = sw_send_ctrl(s, SDP_MSG_DOWNGRADE, NULL, 0, NULL, 0, 0);
	if (r)
		return r;
	ss->dg_sent = true;
	markers_watch();
	memcpy(m.magic, SDP_DOWNGRADE_MAGIC, SDP_MAGIC_LEN);
	memcpy(m.key, s->key, sizeof(m.key));
	r = sw_tcp_write_all(s->fd, &m, sizeof(m));
	if (r) {
		ss->error = -r;
	} else {
		sw_reup_tx_base(s);
		/* bytes the program sent that wait for credits go first:
		 * a later send goes on TCP directly */
		sw_ptx_to_tcp(s);
	}
	/* our stream ended on the SAN (FIN) before this: it ends on TCP
	 * right after the marker, where the peer reads it from now on (a
	 * peer that reads on would wait for our end for ever) */
	if (!r && ss->fin_sent &&
	    sdp_sys.shutdown(s->fd, SHUT_WR) && errno != ENOTCONN)
		SW_DBG("fd %d: shutdown after the marker: %s", s->fd,
		       strerror(errno));
	/* the peer may sleep on TCP: the marker itself wakes it; our
	 * threads waiting to send look again (their bytes go on TCP) */
	sw_event(s);
	SW_DBG("fd %d: our data returns to TCP", s->fd);
	return r;
}

void sw_downgrade_rx_point(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct rx_item *it = ss->rxq;

	/* a fork's thread takes the bytes before it aside first */
	if (!it || it->kind != RX_DOWNGRADE || sw_rx_held_elsewhere(s))
		return;
	if (!ss->dg_sent && sw_downgrade_start(s))
		return; /* no credit yet: try again on the next call */
	ss->rxq = it->next;
	if (!ss->rxq)
		ss->rxq_tail = NULL;
	sw_rx_item_free(ss, it);
	/* both directions are on TCP; the peer's doorbells and marker
	 * precede its data there */
	s->dg_marker = true;
	sw_fallback(s, SW_FB_DOWNGRADED, NULL);
	sw_reup_arm(s);
}

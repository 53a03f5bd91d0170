/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fallback.c - the one way into plain TCP: records and counts the reason,
 * logs it, and releases what the upgrade or the session held. One-way: a
 * connection that fell back never tries again.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "fallback.h"
#include "hello_token.h"
#include "log.h"
#include "session.h"
#include "session_tx.h"
#include "sock.h"
#include "stats.h"
#include "upgrade_turns.h"
#include "util.h"
#include "wire.h"

static void peer_text(const struct sw_sock *s, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (s->peer.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)&s->peer;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		port = ntohs(in->sin_port);
	} else if (s->peer.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)&s->peer;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		port = ntohs(in6->sin6_port);
	}
	snprintf(buf, len, "%s:%d", ip, port);
}

void sw_peer_text(const struct sw_sock *s, char *buf, size_t len)
{
	peer_text(s, buf, len);
}

bool sw_peer_known(struct sw_sock *s)
{
	if (!s->peerlen) {
		s->peerlen = sizeof(s->peer);
		if (getpeername(s->fd, (struct sockaddr *)&s->peer,
				&s->peerlen)) {
			s->peerlen = 0;
			return false;
		}
	}
	if (s->st && !s->st->peer[0]) {
		peer_text(s, s->st->peer, sizeof(s->st->peer));
		s->st->is_client = s->is_client;
		s->st->local_port = s->local_port;
	}
	return true;
}

/* A carried connection whose both directions are back on TCP
 * (downgrade.c): no fallback, nothing counted. */
static void downgraded(struct sw_sock *s)
{
	sw_session_free(s);
	s->state = SW_TCP;
	if (s->st)
		s->st->state = SW_TCP;
	sw_event(s);
}

void sw_fallback(struct sw_sock *s, int reason, const char *detail)
{
	struct sw_proc_stats *ps = sw_stats_proc();
	char peer[64];

	if (s->state == SW_TCP)
		return;
	if (reason == SW_FB_DOWNGRADED) {
		downgraded(s);
		return;
	}
	if (sw_cfg.log_level >= 6 && sw_peer_known(s))
		peer_text(s, peer, sizeof(peer));
	else
		snprintf(peer, sizeof(peer), "?");
	s->fb_reason = reason;
	if (ps) {
		if (reason > 0 && reason < SW_STATS_FB_MAX)
			SW_STAT_COUNT(ps->fallbacks[reason]);
		SW_STAT_COUNT(ps->conns_tcp);
	}
	if (s->st) {
		s->st->fb_reason = reason;
		s->st->state = SW_TCP;
	}
	/* the peer may still send its hello (it saw ours, or our listener):
	 * the TCP path drops it (sw_hello_skip). Not when what came first
	 * was already found to be the program's bytes. */
	if (reason != SDP_FB_BAD_HELLO && reason != SDP_FB_NO_PEER_SWITCH &&
	    (s->state == SW_HELLO_PENDING || s->state == SW_HELLO_WAIT ||
	     (s->state == SW_HELLO_SENT &&
	      s->hello_got < sizeof(struct sdp_hello))))
		s->skip_hello = true;
	SW_INFO("fd %d %s %s: plain TCP: %s%s%s", s->fd,
		s->is_client ? "to" : "from", peer, sdp_fallback_name(reason),
		detail ? ": " : "", detail ? detail : "");
	if (s->is_client)
		sw_hello_token_check(s);
	sw_listeners_close(s);
	sw_session_free(s);
	s->state = SW_TCP;
	sw_turn_give(s);
	/* bytes kept while the upgrade was pending go first */
	sw_ptx_to_tcp(s);
	sw_event(s);
}

void sw_fallback_untaken(int fd, int reason, bool client,
			 const struct sockaddr *peer, socklen_t peerlen)
{
	/* listed (with the kernel's byte counts) and counted, nothing more:
	 * not one byte of the switch goes on such a connection */
	sw_stats_tcp_only(fd, reason, client, peer, peerlen);
}

void sw_fallback_inherited(struct sw_sock *s, int reason)
{
	s->fb_reason = reason;
	if (s->st)
		s->st->fb_reason = reason;
}

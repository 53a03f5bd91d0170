/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * connect.c - the client side's entry: connect() on TCP first, then, when
 * discovery sees a switch at the peer, the provider listener the server's
 * switch will connect to for this connection. docs/protocol.md 2.1.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bind.h"
#include "blind.h"
#include "config.h"
#include "connect.h"
#include "discovery.h"
#include "fallback.h"
#include "fd_budget.h"
#include "log.h"
#include "providers.h"
#include "rules.h"
#include "sock.h"
#include "sys.h"
#include "upgrade.h"
#include "upgrade_turns.h"
#include "util.h"

/*
 * Client: the provider listener the server connects to for this connection,
 * named by the connection's own local address (which connect() chose), on
 * each provider that saw a switch at the peer. Opened when the upgrade is
 * due (sw_client_listen_due), not at connect: a connection that ends sooner
 * never pays for it. The server connects once our hello came
 * (sw_upgrade_server_hello_take); one that connects before the listener
 * exists is refused and tries again (server_connect). Its wait
 * for the server's connection (SDP_UPGRADE_TIMEOUT_MS) begins here.
 * Returns 0, or the reason to stay on TCP.
 */
static int client_listen(struct sw_sock *s)
{
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	int i, r, n = 0;

	if (sw_blind())
		return SDP_FB_BLIND;
	/* a listener with its epoll set (shm_listener_fd), and the
	 * connection it accepts with its set-up's */
	if (!sw_fd_may_open(4))
		return SDP_FB_DESCRIPTORS;
	if (getsockname(s->fd, (struct sockaddr *)&local, &llen))
		return SDP_FB_LOCAL_SETUP;
	sw_addr_port(&local, &s->local_port);
	if (s->st)
		s->st->local_port = s->local_port;
	for (i = 0; i < sw_nproviders; i++) {
		if (!(s->cand_provs & (1u << i)) || s->plisten[i])
			continue;
		r = sw_bind_listen(&sw_providers[i], s->fd,
				   (struct sockaddr *)&local, llen, 4,
				   &s->plisten[i]);
		if (r) {
			s->plisten[i] = NULL;
			SW_INFO("fd %d: provider %s: cannot listen on port %u: %s",
				s->fd, sw_providers[i].mod.name,
				s->local_port, sdp_strerror(r));
			continue;
		}
		n++;
	}
	if (!n)
		return SDP_FB_LOCAL_SETUP;
	sw_upgrade_deadline_from(s, sw_now_ns() +
				    (uint64_t)sw_cfg.upgrade_after_us * 1000);
	SW_DBG("fd %d: provider listener open", s->fd);
	return 0;
}

bool sw_client_listening(const struct sw_sock *s)
{
	int i;

	for (i = 0; i < sw_nproviders; i++)
		if (s->plisten[i])
			return true;
	return false;
}

/* When the client's listener is due: half the server's wait for its
 * connection (sw_upgrade_server_hello_take), counted from connect, so that
 * it is there before the server comes for a connection the program uses;
 * ten times as long while the program's calls do not show that the
 * connection lives on (sw_upgrade_lively), as for the server. */
uint64_t sw_client_listen_at(const struct sw_sock *s)
{
	uint64_t half = (uint64_t)sw_cfg.upgrade_after_us * 500;

	return s->born_ns +
	       (sw_upgrade_lively(s) ? half : SW_IDLE_FACTOR * half);
}

void sw_client_listen_due(struct sw_sock *s)
{
	int r;

	if (!s->is_client || sw_client_listening(s) || s->ss.ep ||
	    (sw_now_ns() < sw_client_listen_at(s) &&
	     2 * (s->tcp_rx + s->tcp_tx) < sw_cfg.upgrade_after_bytes))
		return;
	/* A listener is what an upgrade holds: only with a turn. Before our
	 * hello only one that is free now (the program moves such a
	 * connection on); after, in order (the upgrade thread). */
	if (!sw_turn_take(s, s->state == SW_UPGRADING ||
			     s->state == SW_HELLO_SENT))
		return;
	r = client_listen(s);
	if (r)
		sw_fallback(s, r, "cannot open a provider listener");
}

/* connect(2) of a socket the switch leaves on TCP for reason: listed so once
 * the kernel took it (done, or in progress), and *plain set then. errno is
 * connect's. */
static int connect_untaken(int fd, const struct sockaddr *addr, socklen_t len,
			   int reason, bool *plain)
{
	int r = sdp_sys.connect(fd, addr, len), e = errno;

	if (r == 0 || e == EINPROGRESS) {
		sw_fallback_untaken(fd, reason, true, addr, len);
		*plain = true;
	}
	errno = e;
	return r;
}

int sw_connect(int fd, int family, const struct sockaddr *addr, socklen_t len,
	       struct sw_sock **out, bool *plain)
{
	struct sw_sock *s;
	int i, cr, e, saved = errno;
	uint32_t cand = 0;
	bool now;
	int rule;

	*out = NULL;
	*plain = false;
	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return sdp_sys.connect(fd, addr, len);
	if (!sw_init()) {
		/* providers loaded but none has a device, or none loaded */
		return connect_untaken(fd, addr, len, sw_nproviders ?
				       SDP_FB_NO_DEVICE : SDP_FB_NO_PROVIDER, plain);
	}
	rule = sw_rules_decide('c', addr);
	if (rule == SDP_RULE_TCP) {
		return connect_untaken(fd, addr, len, SDP_FB_RULE, plain);
	}
	if (sw_blind_check(false)) {
		/* not even a san rule: the program would read our hello */
		return connect_untaken(fd, addr, len, SDP_FB_BLIND, plain);
	}
	/* discovery: which providers see a switch listening at addr? A
	 * provider whose connects cross a wire gets its listener at once: a
	 * refused connect there is not cheaply tried again. */
	now = false;
	for (i = 0; i < sw_nproviders; i++) {
		if (!sw_providers[i].usable)
			continue;
		if (sw_switch_listens_at(&sw_providers[i], addr, len)) {
			cand |= 1u << i;
			if (!(sw_providers[i].mod.info.caps &
			      SDP_CAP_LOCAL_ONLY))
				now = true;
		}
	}
	if (!cand) {
		if (rule == SDP_RULE_SAN) {
			SW_WARN("fd %d: a rule requires the SAN but no switch listens at the peer; refusing",
				fd);
			errno = ECONNREFUSED;
			return -1;
		}
		errno = saved;
		return connect_untaken(fd, addr, len, SDP_FB_NO_PEER_SWITCH, plain);
	}
	cr = sdp_sys.connect(fd, addr, len);
	if (cr && errno != EINPROGRESS)
		return cr;	/* nothing to upgrade */
	e = cr ? errno : saved;
	s = sw_sock_new(fd, SW_CONNECTING);
	if (!s)
		goto untaken;
	s->family = family;
	s->is_client = true;
	s->nonblock = sw_fd_nonblocking(fd);
	s->born_ns = sw_now_ns();
	s->cand_provs = cand;
	memcpy(&s->peer, addr, len < sizeof(s->peer) ? len : sizeof(s->peer));
	s->peerlen = len;
	/* (without a turn free now, the listener comes when due) */
	if ((now || !sw_cfg.upgrade_after_us) && sw_turn_take(s, false)) {
		int fb = client_listen(s);

		if (fb) {
			sw_turn_give(s);
			sw_sock_unref(s);
			sw_fallback(NULL, fb, NULL);
			errno = e;
			return cr;
		}
	}
	sw_random(s->key, sizeof(s->key));
	if (s->st) {
		s->st->is_client = 1;
		sw_peer_text(s, s->st->peer, sizeof(s->st->peer));
	}
	/* no waiting, and no hello yet: it goes with the program's first
	 * bytes, or when the program first reads */
	s->state = cr ? SW_CONNECTING : SW_HELLO_PENDING;
	/* transmit timestamps asked for before connect: TCP's own */
	sw_ts_tx_new(s);
	*out = s;
	errno = e;
	return cr;
untaken:
	sw_fallback_untaken(fd, SDP_FB_LOCAL_SETUP, true, addr, len);
	*plain = true;
	errno = e;
	return cr;
}

int sw_connect_again(struct sw_sock *s, const struct sockaddr *addr,
		     socklen_t len)
{
	int r;

	pthread_mutex_lock(&s->lock);
	r = sdp_sys.connect(s->fd, addr, len);
	if ((r == 0 || errno == EISCONN) && s->state == SW_CONNECTING) {
		int e = errno;

		sw_upgrade_progress(s);
		errno = e;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * listen.c - the server side's entry: listen() puts provider listeners
 * beside the TCP listener (discovery, DESIGN.md section 4), and accept()
 * takes a connection on and starts its upgrade. docs/protocol.md 2.1.
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

#include "blind.h"
#include "config.h"
#include "fallback.h"
#include "fd_budget.h"
#include "hello_token.h"
#include "log.h"
#include "probe_answer.h"
#include "providers.h"
#include "rules.h"
#include "sdp_switch.h"
#include "sock.h"
#include "sys.h"
#include "util.h"

int sw_listen(int fd, int family, int backlog, struct sw_sock **out)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	struct sw_sock *s = NULL;
	int i, n = 0, r;

	*out = NULL;
	r = sdp_sys.listen(fd, backlog);
	if (r)
		return r;
	if (!sw_init())
		return 0;
	if (getsockname(fd, (struct sockaddr *)&local, &len))
		return 0;
	/* a ring looked for before the listener announces itself */
	if (sw_blind_check(true) ||
	    sw_rules_decide('s', (struct sockaddr *)&local) == SDP_RULE_TCP) {
		/* kept so that its connections count as TCP by rule */
		s = sw_sock_new(fd, SW_LISTENER);
		if (s) {
			s->family = family;
			s->rule_tcp = true;
		}
		*out = s;
		return 0;
	}
	for (i = 0; i < sw_nproviders; i++) {
		struct sw_provider *p = &sw_providers[i];
		struct sdp_listener *l = NULL;
		int e;

		if (!p->usable)
			continue;
		if (!sw_fd_may_open(1)) {
			SW_WARN("listener fd %d: no provider listener beside it: the program is near RLIMIT_NOFILE",
				fd);
			break;
		}
		e = p->mod.ops.listen(p->mod.prov, (struct sockaddr *)&local,
				      len, backlog > 0 ? backlog : 128, &l);
		if (e) {
			SW_WARN("listener fd %d: provider %s cannot listen beside it: %s",
				fd, p->mod.name, sdp_strerror(e));
			continue;
		}
		if (!s) {
			s = sw_sock_new(fd, SW_LISTENER);
			if (!s) {
				p->mod.ops.listener_close(l);
				return 0;
			}
			s->family = family;
		}
		s->plisten[i] = l;
		n++;
	}
	if (s) {
		sw_addr_port(&local, &s->local_port);
		if (s->st)
			s->st->local_port = s->local_port;
		SW_DBG("listener fd %d port %u: %d provider listener(s)", fd,
		       s->local_port, n);
		/* probes across a wire are answered as they come */
		sw_probe_answer_watch(s);
	}
	*out = s;
	return 0;
}

/* The accepted connection s: whether a switch is at the other end is told
 * by the stream's first bytes, looked at when the program first uses the
 * connection (sw_upgrade_server_hello_in). Returns true when s stays managed. */
static bool server_upgrade(struct sw_sock *ls, struct sw_sock *s)
{
	int i;

	for (i = 0; i < sw_nproviders; i++)
		if (ls->plisten[i] && sw_providers[i].usable) {
			s->lsn_provs |= 1u << i;
			if (!s->up_prov)
				s->up_prov = &sw_providers[i];
		}
	if (!s->up_prov && ls->fd_shed) {
		/* Its provider listeners went back (sw_fd_shed): a client
		 * that saw them before may have sent its hello all the same.
		 * Managed, so that a hello is answered with a refusal and
		 * never reaches the program. */
		for (i = 0; i < sw_nproviders && !s->up_prov; i++)
			if (sw_providers[i].usable)
				s->up_prov = &sw_providers[i];
		s->fd_shed = true;
	}
	if (!s->up_prov) {
		sw_fallback_untaken(s->fd, SDP_FB_NO_PEER_SWITCH, false,
				    s->peerlen ? (struct sockaddr *)&s->peer :
						 NULL, s->peerlen);
		return false;
	}
	s->state = SW_HELLO_WAIT;
	return true;
}

int sw_accept(struct sw_sock *ls, struct sockaddr *addr, socklen_t *addrlen,
	      int flags, struct sw_sock **out)
{
	struct sw_sock *s;
	int fd, saved = errno;

	*out = NULL;
	fd = sdp_sys.accept4(ls->fd, addr, addrlen, flags);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE) && sw_fd_shed())
		/* the switch's descriptors were in the way */
		fd = sdp_sys.accept4(ls->fd, addr, addrlen, flags);
	if (fd < 0) {
		/* the program sees accept's own errno (EINTR, EAGAIN, ...),
		 * not one left by the probes' calls */
		saved = errno;
		sw_probes_drain(ls, false);
		errno = saved;
		return fd;
	}
	sw_probes_drain(ls, false);
	sw_probe_answer_ensure(ls);
	if (ls->quiet_ns && sw_now_ns() - ls->quiet_ns <
			    (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull &&
	    (s = sw_sock_new(fd, SW_HELLO_WAIT)) != NULL) {
		/* a client that saw this listener announced before the
		 * process stopped carrying may send its hello yet: kept,
		 * so that none comes after now and one under way is
		 * dropped (docs/protocol.md 2.2b) */
		s->family = ls->family;
		s->local_port = ls->local_port;
		s->nonblock = flags & SOCK_NONBLOCK;
		sw_fallback(s, SDP_FB_BLIND,
			    "accepted after the process stopped carrying");
		sw_hello_fence_sock(s);
		*out = s;
		errno = saved;
		return fd;
	}
	if (ls->rule_tcp || sw_blind_check(false)) {
		sw_fallback_untaken(fd, sw_blind() ? SDP_FB_BLIND : SDP_FB_RULE,
				    false, NULL, 0);
		errno = saved;
		return fd;
	}
	s = sw_sock_new(fd, SW_TCP);
	if (!s) {
		sw_fallback_untaken(fd, SDP_FB_LOCAL_SETUP, false, NULL, 0);
		errno = saved;
		return fd;
	}
	s->family = ls->family;
	s->local_port = ls->local_port;
	s->nonblock = flags & SOCK_NONBLOCK;
	if (s->st)
		s->st->local_port = s->local_port;
	/* the client's address as accept gave it to the program; asked of
	 * the kernel only when needed (sw_peer_known): most connections
	 * that end soon never need it */
	if (addr && addrlen && *addrlen >= (ls->family == AF_INET6 ?
					    sizeof(struct sockaddr_in6) :
					    sizeof(struct sockaddr_in)) &&
	    addr->sa_family == ls->family) {
		s->peerlen = *addrlen < sizeof(s->peer) ? *addrlen :
							    sizeof(s->peer);
		memcpy(&s->peer, addr, s->peerlen);
		sw_peer_known(s);
	}
	if (!server_upgrade(ls, s)) {
		sw_sock_unref(s);
		errno = saved;
		return fd;
	}
	/* transmit timestamps inherited from the listener: TCP's own */
	sw_ts_tx_new(s);
	*out = s;
	errno = saved;
	return fd;
}

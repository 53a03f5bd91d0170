/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * upgrade.c - the upgrade's state machine (docs/protocol.md section 2):
 * from the hellos through the provider connection and the SETUPs to each
 * side's SWITCH, never making the program wait; gives up (sw_fallback) only
 * while no byte can be lost.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "bind.h"
#include "buffers.h"
#include "config.h"
#include "connect.h"
#include "hello_token.h"
#include "credits.h"
#include "downgrade.h"
#include "discovery.h"
#include "fallback.h"
#include "fd_budget.h"
#include "holders.h"
#include "log.h"
#include "peer_seen.h"
#include "providers.h"
#include "session.h"
#include "session_msg.h"
#include "sock.h"
#include "stats.h"
#include "sys.h"
#include "tcp_inband.h"
#include "blind.h"
#include "upgrade.h"
#include "upgrade_turns.h"
#include "util.h"
#include "wakeup.h"
#include "wire.h"

/* The peer's end of TCP has come (or comes within a millisecond: a
 * process that exits closes its fds one by one): a step of the upgrade
 * that failed with it failed because the connection is ending, not for
 * the upgrade. */
static int unless_ended(struct sw_sock *s, int reason)
{
	struct pollfd pf = { .fd = s->fd, .events = POLLRDHUP };

	return sdp_sys.poll(&pf, 1, 1) == 1 &&
		       (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)) ?
		       SDP_FB_ENDED : reason;
}

/* Does the client of accepted connection s hold a provider listener for it
 * (its hello is on the way)? */
static bool client_listens(struct sw_sock *s)
{
	return sw_peer_known(s) &&
	       !sw_bind_probe(s->up_prov, s->fd, (struct sockaddr *)&s->peer,
			      s->peerlen);
}

/* A refusal: the server never connects, and the client's wait for it runs
 * out (no byte of the server's switch goes on TCP toward a client that may
 * have stopped looking at it: docs/protocol.md 2.1 step 6). */
static void refuse(struct sw_sock *s, int reason, const char *why)
{
	sw_fallback(s, reason, why);
}

/* Server: the client's hello is in s->hello_buf. Checks it; refuses, or
 * chooses the provider and leaves the connection to it for later. */
void sw_upgrade_server_hello_take(struct sw_sock *s)
{
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;
	struct sw_provider *chosen = NULL;
	int i;

	/* from here on the client is a switch, which waits for our
	 * provider connect */
	s->state = SW_UPGRADING;
	if (h->type != SDP_HELLO_CLIENT || h->nproviders == 0 ||
	    h->nproviders > SDP_MAX_HELLO_PROVIDERS || h->status ||
	    (h->version == SDP_PROTO_VERSION &&
	     memcmp(h->reserved, (const uint8_t[24]){ 0 },
		    sizeof(h->reserved)))) {
		refuse(s, SDP_FB_BAD_HELLO, "malformed client hello");
		return;
	}
	memcpy(s->key, h->key, sizeof(s->key));
	if (h->version != SDP_PROTO_VERSION) {
		refuse(s, SDP_FB_VERSION, "client speaks another version");
		return;
	}
	for (i = 0; i < h->nproviders && !chosen; i++) {
		char name[SDP_PROVIDER_NAME_LEN + 1] = { 0 };
		struct sw_provider *c;

		memcpy(name, h->providers[i], SDP_PROVIDER_NAME_LEN);
		c = sw_provider_by_name(name);
		if (c && (s->lsn_provs & (1u << c->index)))
			chosen = c;
	}
	if (!chosen) {
		refuse(s, s->fd_shed ? SDP_FB_DESCRIPTORS : SDP_FB_NO_COMMON,
		       NULL);
		return;
	}
	/* The provider connection is made later (server_connect): at the
	 * program's first call on the connection once it is older than
	 * SDP_UPGRADE_AFTER_US or has moved SDP_UPGRADE_AFTER_BYTES on TCP.
	 * A connection that ends sooner never pays for it; its bytes were on
	 * TCP all along. The client takes the connection whenever it comes
	 * (within its SDP_UPGRADE_TIMEOUT_MS). */
	s->up_prov = chosen;
	s->upgrade_at_ns = sw_now_ns() +
			   (uint64_t)sw_cfg.upgrade_after_us * 1000;
	/* its turn among the upgrades, in the order the hellos came, which
	 * is the order the client's turns come in too (sw_client_listen_due);
	 * no use looking for the client's listener before it is due */
	s->turn_look_ns = s->upgrade_at_ns;
	sw_turn_take(s, true);
	SW_DBG("fd %d: client hello taken, %s connection to follow", s->fd,
	       chosen->mod.name);
}

/*
 * Server: the first bytes of the accepted stream tell whether the client
 * runs a switch (its hello) or not (anything else, or its end). writing:
 * the program is about to send before the client's hello came. Its bytes
 * go as they are (no hello of ours ever goes on TCP): a plain client
 * reads only them, and a switch client, whose hello may come a moment
 * later (the kernel ends the TCP handshake, and our accept() returns,
 * before the client's connect() does), learns what our hello would have
 * said from our provider connect. From then on a client hello must come
 * within SDP_UPGRADE_TIMEOUT_MS (spoke_first).
 */
void sw_upgrade_server_hello_in(struct sw_sock *s, bool writing)
{
	int r;

	/* a hello already taken stays as it was checked */
	if (s->state != SW_HELLO_WAIT)
		return;
	r = sw_hello_server_read(s);
	if (s->state != SW_HELLO_WAIT)
		return;
	if (r == 1) {
		sw_upgrade_server_hello_take(s);
		return;
	}
	if (r == -EAGAIN && s->spoke_first) {
		/* a switch client sends its hello with its program's first
		 * call on the connection; one that has not called by now
		 * stays on TCP too (its listener waits in vain) */
		if (sw_now_ns() - s->spoke_first_ns <
		    (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull)
			return;
	} else if (r == -EAGAIN) {
		if (!writing)
			return;
		SW_DBG("fd %d: the program writes before the client's hello came",
		       s->fd);
		s->spoke_first = true;
		s->spoke_first_ns = sw_now_ns();
		return;
	}
	SW_DBG("fd %d: accepted stream starts without a hello: plain TCP",
	       s->fd);
	/* no hello came in time after our program spoke: a client hello
	 * that comes later still is dropped */
	if (r == -EAGAIN)
		s->skip_hello = true;
	sw_fallback(s, SDP_FB_NO_PEER_SWITCH, NULL);
}

/*
 * Server: the client's listener is not there (yet): a client opens it only
 * once its connection is due for the upgrade, and one asleep in a read
 * opens it when it wakes (sw_client_listen_due). The connect is tried again
 * 0.25, 0.5, 1 .. 64 ms later, until SDP_UPGRADE_TIMEOUT_MS after the first
 * try; nothing is committed meanwhile, so giving up then loses nothing. The
 * first tries come soon: against a peer that floods TCP each millisecond
 * moves megabytes there, and the client's listener is usually a read away
 * (both ends' upgrades are due at the same 64 KiB). Returns 0 when another
 * try is due, -ETIMEDOUT when it is time to give up.
 */
#define AGAIN_FIRST_NS 250000ull
#define AGAIN_MAX_NS 64000000ull

static uint64_t again_ns(uint32_t tries)
{
	return tries < 8 ? AGAIN_FIRST_NS << tries : AGAIN_MAX_NS;
}

static int connect_again(struct sw_sock *s)
{
	uint64_t now = sw_now_ns(), wait;

	if (!s->connect_tries)
		s->deadline_ns = now + (uint64_t)sw_cfg.upgrade_timeout_ms *
					       1000000ull;
	if (now >= s->deadline_ns)
		return -ETIMEDOUT;
	sw_session_free(s);
	wait = again_ns(s->connect_tries++);
	s->upgrade_at_ns = now + wait;
	SW_DBG("fd %d: no provider listener at the client yet: again in %llu us",
	       s->fd, (unsigned long long)wait / 1000);
	return 0;
}

bool sw_upgrade_client_ready(struct sw_sock *s, bool clock)
{
	uint64_t now = sw_now_ns(), wait;

	/* across a wire the client listens from connect() on */
	if (!(s->up_prov->mod.info.caps & SDP_CAP_LOCAL_ONLY) ||
	    client_listens(s))
		return true;
	if (!clock && !s->connect_tries) {
		/* the client opens listeners only in its turns, in the
		 * order it connected: its listener for a connection this
		 * far back cannot be due yet, so its wait does not run */
		s->turn_look_ns = now + SW_LOOK_UNCLOCKED_MS * 1000000ull;
		return false;
	}
	if (!s->connect_tries) {
		s->deadline_ns = now + (uint64_t)sw_cfg.upgrade_timeout_ms *
					       1000000ull;
	} else if (now >= s->deadline_ns) {
		sw_fallback(s, unless_ended(s, SDP_FB_PROVIDER_CONNECT),
			    "no provider listener at the client");
		return false;
	}
	wait = again_ns(s->connect_tries++);
	s->turn_look_ns = now + wait;
	SW_DBG("fd %d: no provider listener at the client yet: looks again in %llu us",
	       s->fd, (unsigned long long)wait / 1000);
	return false;
}

/* The session of s on provider p, sized by the peer's hello h. Returns 0
 * or -errno. */
static int session_from_hello(struct sw_sock *s, struct sw_provider *p,
			      const struct sdp_hello *h)
{
	int r;

	s->ss.peer_can_read = h->flags & SDP_HELLO_F_RDMA_READ;
	r = sw_session_prepare(s, p);
	if (!r)
		r = sw_session_peer_params(s, h->msg_size, h->recv_credits);
	return r;
}

/* Server: the provider connection to the client's listener, proving K. */
static void server_connect(struct sw_sock *s)
{
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;
	struct sw_provider *chosen = s->up_prov;
	struct sdp_connect_priv_hello cp;
	int r;

	/* the provider connection's own descriptors, and those its set-up
	 * passes, come out of the program's budget first */
	if (!sw_fd_may_open(3)) {
		refuse(s, SDP_FB_DESCRIPTORS,
		       "the program is near RLIMIT_NOFILE");
		return;
	}
	if (!sw_peer_known(s)) {
		sw_fallback(s, unless_ended(s, SDP_FB_LOCAL_SETUP),
			    "cannot learn the client's address");
		return;
	}
	/* after a refusal, a look before the costly session: is the
	 * client's listener there now? */
	if (s->connect_tries && (chosen->mod.info.caps & SDP_CAP_LOCAL_ONLY) &&
	    !client_listens(s)) {
		if (connect_again(s))
			sw_fallback(s, unless_ended(s, SDP_FB_PROVIDER_CONNECT),
				    "no provider listener at the client");
		return;
	}
	r = session_from_hello(s, chosen, h);
	if (r) {
		sw_fallback(s, SDP_FB_REGISTRATION, sdp_strerror(r));
		return;
	}
	memset(&cp, 0, sizeof(cp));
	memcpy(cp.base.magic, "SDPc", 4);
	cp.base.version = SDP_PROTO_VERSION;
	memcpy(cp.base.key, s->key, sizeof(cp.base.key));
	/* no hello of ours on TCP: what it would have said */
	cp.base.flags = SDP_CONNECT_F_HELLO;
	cp.hello_flags = chosen->mod.ext.rdma_read ? SDP_HELLO_F_RDMA_READ : 0;
	cp.msg_size = sw_cfg.msg_size;
	cp.recv_credits = sw_cfg.recv_bufs;
	r = sw_bind_connect(chosen, s->fd, s->ss.cq,
			    (struct sockaddr *)&s->peer, s->peerlen, &cp,
			    sizeof(cp), s, &s->ss.ep);
	if (r >= 0) {
		/* receives go up at once: the client may send as soon as it
		 * takes the connection, before this side sees it complete */
		int e = sw_session_post_recvs(s);

		if (e)
			r = e;
	}
	if (r == -ECONNREFUSED &&
	    (chosen->mod.info.caps & SDP_CAP_LOCAL_ONLY) &&
	    !connect_again(s))
		return;
	if (r < 0) {
		/* no listener at the client: it may just have left */
		sw_fallback(s, unless_ended(s, SDP_FB_PROVIDER_CONNECT),
			    sdp_strerror(r));
		return;
	}
	SW_DBG("fd %d: %s connection to the client %s", s->fd,
	       chosen->mod.name, r ? "pending" : "done");
	/* the program's bytes flow on TCP meanwhile; the handshake goes on
	 * as the provider connection completes and the client's SETUP
	 * comes (sw_progress, sw_upgrade_step) */
	if (r == 0)
		s->ss.connected = true;
}

/* Client: the TCP connect of a non-blocking socket may have finished. */
static void client_connecting(struct sw_sock *s)
{
	struct pollfd pf = { .fd = s->fd, .events = POLLOUT };
	int r;

	do
		r = sdp_sys.poll(&pf, 1, 0);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return;
	if (pf.revents & (POLLERR | POLLHUP)) {
		/* the connect failed; SO_ERROR stays for the program */
		sw_fallback(s, SDP_FB_NONE, "connect failed");
		return;
	}
	s->state = SW_HELLO_PENDING;
}

/* Client: the server's hello fields from its provider connect (cp, len
 * bytes) into s->hello_buf. Returns false when they cannot be used. */
static bool client_hello_from_connect(struct sw_sock *s, const void *cp,
				      size_t len)
{
	const struct sdp_connect_priv_hello *ch = cp;
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;

	if (len != sizeof(*ch) || ch->base.version != SDP_PROTO_VERSION ||
	    ch->base.flags != SDP_CONNECT_F_HELLO || ch->reserved)
		return false;
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, SDP_HELLO_MAGIC, SDP_MAGIC_LEN);
	h->type = SDP_HELLO_SERVER;
	h->version = SDP_PROTO_VERSION;
	h->flags = ch->hello_flags;
	h->msg_size = ch->msg_size;
	h->recv_credits = ch->recv_credits;
	s->hello_got = sizeof(*h);
	return true;
}

/* Client: the server's provider connection, which must prove K. Taken as
 * soon as it is there; given up (the listener closes, which fails the
 * server's connect) when it is not there in time. */
/*
 * When this process last took a server's provider connection. A server
 * answers the hellos in the order they came, a bounded number at a time
 * (upgrade_turns.c): under a burst (10,000 connects in a second) a client's
 * answer may come well after its own timeout while the server works
 * through the line. A client whose answer is late gives up only once the
 * answers have stopped coming for a whole timeout (or four timeouts past
 * its own deadline): a refusal, a server gone quiet or blind, still ends
 * in the fallback, never a connection the server is about to make.
 */
static _Atomic uint64_t last_answer_ns;

static bool client_wait_over(struct sw_sock *s, uint64_t now)
{
	uint64_t t = (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;

	return now > s->deadline_ns &&
	       (now > s->deadline_ns + 4 * t ||
		now > atomic_load(&last_answer_ns) + t);
}

static void client_take_request(struct sw_sock *s)
{
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;
	struct sw_provider *p = NULL;
	struct sdp_conn_req *req;
	uint64_t now;
	int i, r = -EAGAIN;

	/* no listener yet: its turn has not come (sw_client_listen_due), and
	 * its wait for the server begins with it; or another process holds
	 * the connection too (holders.c) */
	if (!sw_client_listening(s) || !sw_holders_alone(s) ||
	    sw_upgrade_held(s))
		return;
	/* the server connects no sooner than this (sw_upgrade_server_hello_take),
	 * or once 64 KiB went its way, which may be before this side read
	 * them: a program's call does not look before; the upgrade thread
	 * looks when the listener wakes it */
	if (!sw_turn_in_thread() && sw_now_ns() < s->upgrade_at_ns &&
	    s->tcp_rx + s->tcp_tx < sw_cfg.upgrade_after_bytes)
		return;
	/* the server chose among ours: its request tells which */
	for (i = 0; i < sw_nproviders && !p; i++) {
		if (!s->plisten[i])
			continue;
		for (;;) {
			struct sdp_connect_priv_hello cp;
			size_t plen = sizeof(cp);

			r = sw_providers[i].mod.ops.get_request(
				s->plisten[i], &req, &cp, &plen);
			if (r)
				break;
			/* the server sends no hello on TCP: its connect
			 * says what that would have */
			if (plen >= sizeof(cp.base) &&
			    !memcmp(cp.base.magic, "SDPc", 4) &&
			    !memcmp(cp.base.key, s->key, sizeof(s->key)) &&
			    client_hello_from_connect(s, &cp, plen)) {
				p = &sw_providers[i];
				break;
			}
			SW_WARN("fd %d: provider connection without the key of this TCP connection: refused",
				s->fd);
			s->key_refused = true;
			sw_providers[i].mod.ops.reject(req);
		}
		if (r && r != -EAGAIN) {
			sw_fallback(s, SDP_FB_PROVIDER_CONNECT,
				    sdp_strerror(r));
			return;
		}
	}
	if (!p) {
		if (sw_now_ns() > s->deadline_ns && s->key_refused)
			sw_fallback(s, SDP_FB_AUTH,
				    "only provider connections without the key came");
		else if (client_wait_over(s, sw_now_ns())) {
			/* ask again next time: that server may run no
			 * switch any more */
			for (i = 0; i < sw_nproviders; i++)
				if (s->plisten[i])
					sw_seen_drop(i, (struct sockaddr *)
						     &s->peer, s->peerlen);
			sw_fallback(s, SDP_FB_TIMEOUT,
				    "no provider connection from the server");
		}
		return;
	}
	now = sw_now_ns();
	atomic_store(&last_answer_ns, now);
	/* a late answer taken: the SETUP that follows gets its own timeout */
	sw_upgrade_deadline_from(s, now);
	/* a server that connects has written no hello on TCP, and never
	 * will: whatever its stream holds is its program's */
	if (s->state == SW_HELLO_SENT) {
		s->state = SW_UPGRADING;
		s->spoke_first = true;
	}
	if (h->msg_size < 256 || h->msg_size > (1u << 20) ||
	    h->recv_credits < 2 || h->recv_credits > 4096) {
		p->mod.ops.reject(req);
		sw_fallback(s, SDP_FB_REGISTRATION,
			    "server connect announces unusable buffers");
		return;
	}
	r = session_from_hello(s, p, h);
	if (r) {
		p->mod.ops.reject(req);
		sw_fallback(s, SDP_FB_REGISTRATION, sdp_strerror(r));
		return;
	}
	r = p->mod.ops.accept(req, s->ss.cq, NULL, 0, s, &s->ss.ep);
	if (r >= 0) {
		int e = sw_session_post_recvs(s);

		if (e)
			r = e;
	}
	if (r < 0) {
		sw_fallback(s, SDP_FB_PROVIDER_CONNECT, sdp_strerror(r));
		return;
	}
	sw_listeners_close(s);
	/* the server's switch answered for this address and port: the
	 * program's next connections there need no probe (peer_seen.c) */
	sw_seen_note(p->index, (struct sockaddr *)&s->peer, s->peerlen, now);
	SW_DBG("fd %d: took the server's %s connection (%s)", s->fd,
	       p->mod.name, r == SDP_PENDING ? "pending" : "done");
	/* a pending accept completes in sw_progress */
	if (r == 0) {
		s->ss.connected = true;
		r = sw_upgrade_step(s);
		if (r)
			sw_fallback(s, SDP_FB_PROVIDER_CONNECT,
				    sdp_strerror(r));
	}
}

/*
 * Client: our hello is out (client_hello_send). The server writes no hello
 * on TCP: what it would say comes with its provider connect
 * (SDP_CONNECT_F_HELLO), and its refusal is that it never connects (our
 * wait runs out, having lost nothing). So nothing of its switch's is still
 * to come on TCP, whatever this process does next (io_uring: blind.c). The
 * connection takes its place in line for a turn now, in the order our
 * hellos went, which is the order of the server's line
 * (sw_upgrade_server_hello_take); its listener opens once its turn came
 * and it is due (sw_client_listen_due). A line joined only once due would
 * be in the order the program happens to call on its connections again:
 * a client that opens thousands at once would hold its turns on
 * connections far back in the server's line, which the server does not
 * look at, and both ends would time out on them.
 */
void sw_upgrade_client_hello_out(struct sw_sock *s)
{
	s->upgrade_at_ns = sw_now_ns() +
			   (uint64_t)sw_cfg.upgrade_after_us * 1000;
	sw_upgrade_deadline_from(s, s->upgrade_at_ns);
	sw_turn_take(s, true);
}

void sw_upgrade_deadline_from(struct sw_sock *s, uint64_t from_ns)
{
	uint64_t dl = from_ns + (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;

	if (s->deadline_ns < dl)
		s->deadline_ns = dl;
}

/*
 * Client: the server's stream starts with its program's bytes, not a
 * hello (only a server of an older version writes one, 2.2): they count as
 * the server's on TCP from the first, and the server's provider connection
 * is next.
 */
void sw_upgrade_client_spoke_first(struct sw_sock *s)
{
	SW_DBG("fd %d: the server's program's bytes come first: its parameters come with its connect",
	       s->fd);
	s->spoke_first = true;
	s->state = SW_UPGRADING;
	client_take_request(s);
}

/* Client: the head of the server's TCP stream, after our hello: its
 * program's bytes, or an older server's refusal (2.2). An older server
 * writes its refusal in one send in front of its program's bytes, on a
 * connection that has room for it, so all 96 bytes come in one segment:
 * the first look that sees any byte decides, and a head of fewer bytes
 * (a program's lone 0xd5 included) is the program's, never waited on. */
void sw_upgrade_client_hello_sent(struct sw_sock *s)
{
	struct sdp_hello *h = (struct sdp_hello *)s->hello_buf;
	ssize_t n;

	if (s->hello_got < sizeof(struct sdp_hello)) {
		do
			n = sdp_sys.recv(s->fd, s->hello_buf,
					 sizeof(struct sdp_hello),
					 MSG_PEEK | MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				sw_fallback(s, SDP_FB_BAD_HELLO,
					    strerror(errno));
			return;
		}
		if (n == 0) {
			/* the program sees the end */
			s->tcp_eof = true;
			sw_fallback(s, SDP_FB_BAD_HELLO,
				    "peer closed before its first byte");
			return;
		}
		if (!sw_hello_is_refusal(s->hello_buf, (size_t)n)) {
			/* the server's program's bytes, left where they
			 * are */
			sw_upgrade_client_spoke_first(s);
			return;
		}
		if (sdp_sys.recv(s->fd, s->hello_buf, sizeof(struct sdp_hello),
				 MSG_DONTWAIT) != (ssize_t)sizeof(*h)) {
			sw_fallback(s, SDP_FB_BAD_HELLO,
				    "server hello went from the socket");
			return;
		}
		s->hello_got = sizeof(*h);
	}
	/* a server of version 3 or before, which answers a hello of another
	 * version on TCP with a refusal; a server of this version never
	 * writes one */
	sw_fallback(s, SDP_FB_PEER_FALLBACK, sdp_fallback_name(h->status));
}

/*
 * Both sides: the provider connection is up or on its way, and the SETUPs
 * and SWITCHes follow (sw_progress, sw_upgrade_step). Until this side is
 * committed, the peer cannot have switched, so a failure here leaves every
 * byte on TCP; once committed, the peer's provider connection ending means
 * it gave the upgrade up before it switched (docs/protocol.md 2.5).
 */
static void upgrading(struct sw_sock *s)
{
	int r = sw_progress(s);

	if (s->state != SW_UPGRADING)
		return;
	if (s->ss.error && sw_upgrade_can_give_up(s))
		/* the peer's message, refused (sw_proto_error): TCP goes on */
		sw_fallback(s, SDP_FB_BAD_HELLO,
			    "malformed upgrade message from the peer");
	else if (s->ss.error)	/* committed: the connection was closed */
		sw_fallback(s, SDP_FB_PROVIDER_CONNECT,
			    "protocol error during the upgrade");
	else if (r < 0)
		sw_fallback(s, unless_ended(s, SDP_FB_PROVIDER_CONNECT),
			    sdp_strerror(r));
	else if (s->ss.peer_dead)
		sw_fallback(s, unless_ended(s, SDP_FB_PEER_ABANDONED),
			    "the peer closed its provider connection");
	else if (s->is_client && sw_upgrade_can_give_up(s) &&
		 sw_now_ns() > s->deadline_ns)
		/* the server went quiet before it committed: it may have
		 * given up (a fork or an exec) without a word */
		sw_fallback(s, SDP_FB_TIMEOUT, "no SETUP from the server");
}

/*
 * The costly steps of an upgrade (the server's provider connect, the
 * client's accept: buffers and regions made, registered and first
 * touched; 0.4 to 1.4 ms each on a 2-CPU machine whose page faults cost
 * 11 us) take at most half of the process's time. A program that opened
 * many connections at once (wrk, a connection pool) used to run all their
 * upgrades back to back inside one call: 16 of them held every request of
 * nginx and wrk 20-30 ms, which was wrk's p99 (it adds the requests such
 * a wait held up). Now the next one waits as long as the last one took,
 * and the connections' bytes flow on TCP meanwhile; a sleeping program
 * naps no longer than a millisecond at a time until its turn.
 */
static _Atomic uint64_t costly_next_ns;

static bool costly_step_may(void)
{
	return sw_now_ns() >= atomic_load_explicit(&costly_next_ns,
						   memory_order_relaxed);
}

static void costly_step_took(uint64_t since)
{
	uint64_t now = sw_now_ns();

	atomic_store_explicit(&costly_next_ns, now + (now - since),
			      memory_order_relaxed);
}

bool sw_upgrade_lively(const struct sw_sock *s)
{
	unsigned int turns = sw_cfg.upgrade_turns;
	unsigned int calls = SW_LIVELY_CALLS;

	if (!turns)
		return true;
	if (s->is_client) {
		turns--;
		calls /= 2;
	}
	return s->head_turns >= turns || s->head_calls >= calls;
}

uint64_t sw_upgrade_server_at(const struct sw_sock *s)
{
	/* after a refusal: at the time connect_again set */
	if (s->connect_tries || sw_upgrade_lively(s))
		return s->upgrade_at_ns;
	return s->upgrade_at_ns + (uint64_t)(SW_IDLE_FACTOR - 1) *
				  sw_cfg.upgrade_after_us * 1000;
}

/* Server: is its provider connect due? SDP_UPGRADE_AFTER_US after the
 * client's hello for a connection that shows it lives on (ten times that
 * for one that does not yet), or once SDP_UPGRADE_AFTER_BYTES moved;
 * after a refusal at the time connect_again set. A connection waiting in
 * line after a look found no listener is looked at again at
 * sw_turn_claim's pace. */
static bool server_due(const struct sw_sock *s)
{
	if (s->connect_tries && atomic_load(&s->turn) == SW_TURN_WAITING)
		return true;
	return sw_now_ns() >= sw_upgrade_server_at(s) ||
	       (!s->connect_tries &&
		s->tcp_rx + s->tcp_tx >= sw_cfg.upgrade_after_bytes);
}

int sw_upgrade_progress(struct sw_sock *s)
{
	uint64_t t0;

	sw_holders_settle(s);
	if (s->is_client)
		sw_hello_token_check(s);
	if (s->state == SW_HELLO_WAIT)
		sw_upgrade_server_hello_in(s, false);
	if (s->state == SW_CONNECTING)
		client_connecting(s);
	/* (the upgrade thread never reads a byte of a TCP stream) */
	if (s->state == SW_HELLO_SENT && !sw_turn_in_thread())
		sw_upgrade_client_hello_sent(s);
	if (s->state == SW_HELLO_PENDING || s->state == SW_HELLO_SENT ||
	    s->state == SW_UPGRADING)
		sw_client_listen_due(s);
	/* a client whose hello is out takes the server's connect even before
	 * the server's first byte (a server that only reads), once nothing
	 * of the head was taken as a possible older server's hello */
	if (s->state == SW_UPGRADING ||
	    (s->state == SW_HELLO_SENT && !s->hello_got)) {
		if (s->ss.ep) {
			upgrading(s);
		} else if (!sw_holders_alone(s) || sw_upgrade_held(s)) {
			/* another process holds the connection too, or a
			 * standard stream names it: nothing is committed
			 * until it is gone (holders.c, blind.c) */
		} else if (!costly_step_may() && !sw_turn_in_thread()) {
			/* its turn comes (sw_upgrade_nap_ms); the upgrade
			 * thread's steps take none of the program's time */
		} else if (s->is_client) {
			t0 = sw_now_ns();
			client_take_request(s);
			if (s->ss.ep) {
				costly_step_took(t0);
				SW_DBG("fd %d: provider accept took %llu us",
				       s->fd, (unsigned long long)
				       (sw_now_ns() - t0) / 1000);
			}
		} else if (server_due(s) &&
			   (sw_turn_take(s, true) || sw_turn_claim(s))) {
			/* (without a turn it waits on TCP for one, in order:
			 * the upgrade thread then takes this step) */
			t0 = sw_now_ns();
			server_connect(s);
			costly_step_took(t0);
			SW_DBG("fd %d: provider connect took %llu us", s->fd,
			       (unsigned long long)(sw_now_ns() - t0) / 1000);
		}
	}
	if (s->st)
		s->st->state = s->state;
	return 0;
}

bool sw_upgrade_can_give_up(const struct sw_sock *s)
{
	return s->is_client ? !s->ss.setup_rcvd : !s->ss.setup_sent;
}

/* Whether the provider of s's upgrade (chosen, or one its client listens
 * on) crosses a wire: its peer's SWITCH then rings no doorbell. */
static bool upgrade_crosses_wire(const struct sw_sock *s)
{
	int i;

	if (s->ss.prov)
		return !(s->ss.prov->mod.info.caps & SDP_CAP_LOCAL_ONLY);
	if (!s->is_client)
		return s->up_prov &&
		       !(s->up_prov->mod.info.caps & SDP_CAP_LOCAL_ONLY);
	for (i = 0; i < sw_nproviders; i++)
		if (s->plisten[i] &&
		    !(sw_providers[i].mod.info.caps & SDP_CAP_LOCAL_ONLY))
			return true;
	return false;
}

int sw_upgrade_turn_nap_ms(struct sw_sock *s)
{
	if (!upgrade_crosses_wire(s))
		return 0;
	s->nap_ms = s->nap_ms ? s->nap_ms * 2 : 1;
	if (s->nap_ms > SW_TURN_NAP_MAX_MS)
		s->nap_ms = SW_TURN_NAP_MAX_MS;
	return (int)s->nap_ms;
}

int sw_upgrade_nap_ms(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	uint64_t now;

	/* another process still holds it: looked at again now and then */
	if (s->holders && (s->state == SW_UPGRADING ||
			   (s->is_client && s->state == SW_HELLO_SENT)) &&
	    !ss->ep)
		return 10;
	if (s->is_client && !ss->ep && sw_pending(s) &&
	    s->state != SW_CONNECTING && !sw_client_listening(s)) {
		/* our listener is due then (sw_client_listen_due) */
		now = sw_now_ns();
		return now >= sw_client_listen_at(s) ? 1 :
		       (int)((sw_client_listen_at(s) - now + 999999) / 1000000);
	}
	if (s->state != SW_UPGRADING) {
		s->nap_ms = 0;
		return 0;
	}
	if (!s->is_client && !ss->ep) {
		/* our provider connection is due then (sw_upgrade_server_hello_take), or
		 * when the last costly step's time is up (costly_step_may) */
		uint64_t at = sw_upgrade_server_at(s);

		now = sw_now_ns();
		return now >= at ? 1 : (int)((at - now + 999999) / 1000000);
	}
	/* No wake-up tells of the peer's next step here: the server's of
	 * the connection completing and of the client's SETUP, the client's
	 * of the server's SETUP (nothing rings before a switch point). Look
	 * now and then, less often the longer nothing changes. */
	if (!ss->ep || (s->is_client ? !ss->setup_sent || ss->setup_rcvd :
				       ss->setup_sent)) {
		s->nap_ms = 0;
		return 0;
	}
	s->nap_ms = s->nap_ms ? s->nap_ms * 2 : 1;
	if (s->nap_ms > 128)
		s->nap_ms = 128;
	return (int)s->nap_ms;
}

bool sw_upgrade_cut(struct sw_sock *s)
{
	sw_holders_settle(s);
	/* a client hello already here is dropped now (one that comes later
	 * is dropped when it comes: sw_hello_skip). Only read: taking it
	 * would ask for a turn, and start the upgrade thread, in a process
	 * about to exec or to enter a sandbox */
	if (s->state == SW_HELLO_WAIT) {
		int r = sw_hello_server_read(s);

		if (r == 1) {
			s->state = SW_UPGRADING;	/* nothing to skip */
		} else if (r == 0) {
			/* the program's bytes, or the end: a plain client */
			sw_fallback(s, SDP_FB_NO_PEER_SWITCH, NULL);
			return false;
		}
	}
	if (!sw_pending(s) || !sw_upgrade_can_give_up(s))
		return sw_pending(s);
	/* the peer cannot be sending to the provider: nothing is lost by
	 * staying on TCP; a client waiting for our connect waits in vain
	 * (no byte of ours is due on TCP) */
	sw_fallback(s, SDP_FB_CUT, NULL);
	return false;
}

/* How long a shutdown or urgent byte waits for an upgrade whose provider
 * connection is up (the rest of its stream then goes on the SAN, not TCP),
 * before it gives it up. */
#define SETTLE_FINISH_NS 20000000ull

void sw_upgrade_finish_near(struct sw_sock *s, bool connecting)
{
	uint64_t end = sw_now_ns() + SETTLE_FINISH_NS;

	/* the provider connection being made: until the peer's answer,
	 * or the upgrade's own deadline (bounded as a fork's downgrade) */
	if (connecting) {
		end = sw_now_ns() + DG_TIMEOUT_NS;
		if (s->deadline_ns && s->deadline_ns < end)
			end = s->deadline_ns;
	}

	/* a few steps from done: worth a short wait */
	while (sw_pending(s) && s->ss.ep && (connecting || s->ss.connected) &&
	       sw_now_ns() < end) {
		sw_upgrade_progress(s);
		if (!sw_pending(s))
			return;
		pthread_mutex_unlock(&s->lock);
		sw_wait_fd(s->fd, 0, 1);
		pthread_mutex_lock(&s->lock);
	}
}

void sw_upgrade_settle(struct sw_sock *s)
{
	uint64_t end;

	sw_upgrade_finish_near(s, false);
	end = sw_now_ns() + (uint64_t)sw_cfg.upgrade_timeout_ms * 1000000ull;
	for (;;) {
		if (!sw_upgrade_cut(s))
			return;
		/* a committed server: the client's SWITCH comes as soon as
		 * its switch looks, or its provider connection ends */
		sw_upgrade_progress(s);
		if (!sw_pending(s))
			return;
		if (sw_now_ns() > end) {
			SW_WARN("fd %d: the client did not answer the upgrade within %u ms; staying on TCP (what it sends to the provider later is lost)",
				s->fd, sw_cfg.upgrade_timeout_ms);
			sw_fallback(s, SDP_FB_TIMEOUT, "no SWITCH from the client");
			return;
		}
		pthread_mutex_unlock(&s->lock);
		sw_wait_fd(s->fd, 0, 1);
		pthread_mutex_lock(&s->lock);
	}
}

int sw_upgrade_step(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	struct sdp_msg_switch sw = { .tcp_bytes = s->tcp_tx };
	struct sw_proc_stats *ps = sw_stats_proc();
	int r, one = 1, zero = 0;

	if (s->state != SW_UPGRADING || !ss->connected)
		return 0;
	/* the client's SETUP says it is ready; the server's, sent once it
	 * has that, commits both */
	if (!ss->setup_sent && (s->is_client || ss->setup_rcvd)) {
		r = sw_session_send_setup(s);
		if (r)
			return r;
	}
	/* the client switches on the server's SETUP, the server on the
	 * client's SWITCH: neither switches before the other is committed */
	if (!ss->setup_sent || !(s->is_client ? ss->setup_rcvd :
					      ss->switch_rcvd))
		return 0;
	r = sw_send_ctrl(s, SDP_MSG_SWITCH, &sw, sizeof(sw), NULL, 0, 0);
	/* the server with the client's SWITCH in hand: the client's bytes
	 * after its switch point went to the SAN, and its TCP stream holds
	 * only doorbells from there, so TCP is no way back; a provider
	 * connection that ended meanwhile is a peer gone, on the SAN */
	if (r && r != -EAGAIN && !s->is_client && ss->switch_rcvd)
		ss->peer_dead = true;
	else if (r)
		return r;
	s->tx_san = true;
	s->state = SW_SAN;
	/* idle (the pool's shrink) counts from the switch point, not from
	 * the set-up, which a slow provider connection can make seconds
	 * long: the first data would meet a shrink at once, then a grow */
	ss->last_rx_ns = sw_now_ns();
	sw_turn_give(s);
	/* From here our TCP stream carries only one-byte doorbells: each
	 * must leave at once, not wait behind an unacknowledged one for the
	 * peer's delayed ACK (Nagle; up to 40 ms a doorbell) nor in a cork
	 * the program set for its own bytes, which are all out of it now. */
	sdp_sys.setsockopt(s->fd, IPPROTO_TCP, TCP_CORK, &zero, sizeof(zero));
	sdp_sys.setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (ps)
		SW_STAT_COUNT(ps->conns_san);
	if (s->st) {
		s->st->state = SW_SAN;
		snprintf(s->st->provider, sizeof(s->st->provider), "%.15s",
			 ss->prov->mod.name);
	}
	SW_DBG("fd %d: carried by %s after %llu bytes on TCP", s->fd,
	       ss->prov->mod.name, (unsigned long long)s->tcp_tx);
	sw_credit_note_size(ss);
	sw_event(s);
	/* a peer asleep on TCP in its program's read would not look at the
	 * provider: our first byte there rings it awake (sw_send_ctrl). Not
	 * now: a doorbell that the peer's program closes before reading
	 * turns its FIN into a reset, and one the peer needs only comes
	 * with data; nor before our last TCP bytes, which wake it anyway. */
	ss->switch_bell = true;
	return 0;
}

/* Takes the upgrade's next steps, never waiting (the program's bytes go on
 * TCP until the switch, so nothing needs it finished). */
void sw_upgrade_advance(struct sw_sock *s)
{
	if (sw_pending(s))
		sw_upgrade_progress(s);
}

/*
 * The fds besides the TCP fd whose events move the pending upgrade of s on,
 * up to max into fds: the provider listeners of a client waiting for the
 * server's connection, or, across a wire, the CQ that brings the peer's
 * SWITCH (a local provider's peer rings a doorbell on TCP instead). *cq_fd:
 * the CQ's fd among them, armed (the caller acks it after its sleep), or -1.
 * Returns their number.
 */
int sw_upgrade_fds(struct sw_sock *s, int *fds, int max, int *cq_fd)
{
	int n = 0, i, fd;

	*cq_fd = -1;
	if (s->holders)
		return 0;	/* nothing taken before it is alone */
	if ((s->state == SW_UPGRADING || s->state == SW_HELLO_SENT) &&
	    s->is_client && !s->ss.ep) {
		for (i = 0; i < sw_nproviders && n < max; i++) {
			if (!s->plisten[i])
				continue;
			fd = sw_providers[i].mod.ops.listener_fd(
				s->plisten[i]);
			if (fd >= 0)
				fds[n++] = fd;
		}
	} else if (s->ss.ep && !s->ss.switch_rcvd && max > 0) {
		fd = sw_cq_sleep_fd(s);
		if (fd >= 0) {
			fds[n++] = fd;
			*cq_fd = fd;
		}
	}
	return n;
}

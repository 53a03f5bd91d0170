/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tcp_inband.c - every byte the switch itself puts on the program's TCP
 * stream or takes from it: the hellos (sent, read, skipped after a
 * fallback), the doorbells, and the downgrade marker's skip.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fallback.h"
#include "hello_token.h"
#include "log.h"
#include "providers.h"
#include "sock.h"
#include "status.h"
#include "sys.h"
#include "reupgrade.h"
#include "tcp_inband.h"
#include "upgrade.h"
#include "util.h"
#include "wakeup.h"
#include "wire.h"

/*
 * Looks for the client's hello at the head of the TCP stream without
 * consuming anything that is not one. Returns 1 with the hello consumed
 * into s->hello_buf, 0 when the stream does not start with one (nothing
 * consumed; its end counts), -EAGAIN when not all of it is there yet.
 */
int sw_hello_server_read(struct sw_sock *s)
{
	uint8_t look[sizeof(struct sdp_hello)];
	ssize_t n = sdp_sys.recv(s->fd, look, sizeof(look),
				 MSG_PEEK | MSG_DONTWAIT);

	if (n > 0) {
		size_t cmp = n < SDP_MAGIC_LEN ? (size_t)n : SDP_MAGIC_LEN;

		if (memcmp(look, SDP_HELLO_MAGIC, cmp))
			return 0;
		if ((size_t)n < sizeof(struct sdp_hello))
			return -EAGAIN;
	} else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK &&
			      errno != EINTR)) {
		return 0;	/* its end, or an error: the program's */
	} else {
		return -EAGAIN;
	}
	/* consume exactly the hello */
	if (sdp_sys.recv(s->fd, s->hello_buf, sizeof(struct sdp_hello),
			 MSG_DONTWAIT) != sizeof(struct sdp_hello))
		return 0;
	return 1;
}

bool sw_hello_is_refusal(const uint8_t *head, size_t n)
{
	const struct sdp_hello *h = (const void *)head;

	return n == sizeof(*h) && !memcmp(h->magic, SDP_HELLO_MAGIC,
					  SDP_MAGIC_LEN) &&
	       h->type == SDP_HELLO_SERVER && h->version >= 1 &&
	       h->version < SDP_PROTO_VERSION && h->status;
}

/*
 * A hello on TCP, and with it (msg) the program's first bytes, in one send;
 * the rest of a partial send of the hello is written out at once (a new
 * connection has room for it). Returns the program's bytes sent, or -errno.
 */
static ssize_t hello_send(struct sw_sock *s, const struct sdp_hello *h,
			  const struct msghdr *msg, int flags)
{
	struct iovec iov[65];
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 1 };
	size_t i;
	ssize_t n;

	iov[0].iov_base = (void *)h;
	iov[0].iov_len = sizeof(*h);
	for (i = 0; msg && i < msg->msg_iovlen && i < 64; i++)
		iov[m.msg_iovlen++] = msg->msg_iov[i];
	n = sdp_sys.sendmsg(s->fd, &m, (flags & ~MSG_OOB) | MSG_DONTWAIT |
					       MSG_NOSIGNAL);
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	if (n < 0)
		n = 0;
	if ((size_t)n < sizeof(*h)) {
		if (sw_tcp_write_all(s->fd, (const uint8_t *)h + n,
				     sizeof(*h) - n))
			return -EPIPE;
		return 0;
	}
	n -= sizeof(*h);
	s->tcp_tx += n;
	if (s->st)
		s->st->tx_tcp += n;
	return n;
}

/* The client's hello, then (msg) the program's first bytes. Returns the
 * program's bytes sent, or -errno. */
static ssize_t client_hello_send(struct sw_sock *s, const struct msghdr *msg,
				 int flags)
{
	struct sdp_hello h;
	ssize_t r;
	int i, n = 0;

	/* the name of this connection first: a server on this host that is
	 * about to stop seeing it took it, or waits for this hello now */
	r = sw_hello_token_take(s);
	if (r == -EADDRINUSE) {
		sw_fallback(s, SDP_FB_PEER_FALLBACK,
			    "the server's switch no longer sees this connection (the name for its hello is taken)");
		return SW_NO_HELLO;
	}
	if (r) {
		sw_fallback(s, SDP_FB_LOCAL_SETUP, sdp_strerror((int)r));
		return SW_NO_HELLO;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SDP_HELLO_MAGIC, SDP_MAGIC_LEN);
	h.type = SDP_HELLO_CLIENT;
	h.version = SDP_PROTO_VERSION;
	h.msg_size = sw_cfg.msg_size;
	h.recv_credits = sw_cfg.recv_bufs;
	memcpy(h.key, s->key, sizeof(h.key));
	for (i = 0; i < sw_nproviders && n < SDP_MAX_HELLO_PROVIDERS; i++) {
		if (!(s->cand_provs & (1u << i)))
			continue;
		sw_name_copy(h.providers[n++], sw_providers[i].mod.name);
		if (sw_providers[i].mod.ext.rdma_read)
			h.flags |= SDP_HELLO_F_RDMA_READ;
	}
	h.nproviders = n;
	s->state = SW_HELLO_SENT;
	s->hello_got = 0;
	SW_DBG("fd %d: client hello goes", s->fd);
	r = hello_send(s, &h, msg, flags);
	if (r < 0)
		/* the connection is broken; the program will see it */
		sw_fallback(s, SDP_FB_LOCAL_SETUP, "cannot send hello");
	else
		sw_upgrade_client_hello_out(s);
	sw_hello_token_check(s);
	return r;
}

ssize_t sw_hello_send(struct sw_sock *s, const struct msghdr *msg,
		      int flags)
{
	if (s->state == SW_HELLO_PENDING)
		return client_hello_send(s, msg, flags);
	/* a server sends no hello: the program's bytes go as they are */
	if (s->state == SW_HELLO_WAIT)
		sw_upgrade_server_hello_in(s, true);
	return SW_NO_HELLO;
}

/*
 * The program reads while the peer's hello may lead the TCP stream (server:
 * SW_HELLO_WAIT; client: SW_HELLO_SENT, none of it taken yet, where only an
 * older server writes one, 2.2). The head is
 * looked at (block: waiting for it, the lock released, as the program's own
 * blocking read would, SO_RCVTIMEO included); when a whole hello is there,
 * one recvmsg takes it and the program's bytes behind it, which are the
 * program's since the peer cannot have switched before this side's answer.
 * Returns the program's bytes (0: only the hello came), SW_HELLO_OTHER when
 * the head is anything else (part of a hello, bytes that are no hello, the
 * end, or the state moved meanwhile: the caller goes its usual way), or
 * -errno (-EAGAIN: nothing there; with block, the program's timeout).
 */
/*
 * sw_hello_read's wait for the head of the stream, the lock released: until
 * bytes are there, or the state moves on without any (a client's hello
 * answered by the server's provider connection, not on TCP: the whole
 * stream may then come on the SAN, and no TCP byte would end a sleep in
 * the kernel's recv), looked at every SW_NAP_MS. The program's
 * SO_RCVTIMEO and its signal handlers count as in its own blocking read.
 * 0 when the head can be looked at, SW_HELLO_OTHER, or -errno.
 */
static int hello_wait(struct sw_sock *s, int flags)
{
	uint64_t end = sw_timeo_deadline(s, true, sw_now_ns());
	int r, e;

	for (;;) {
		struct pollfd pf = { .fd = s->fd, .events = POLLIN };
		int ms = SW_NAP_MS;

		if (end) {
			uint64_t now = sw_now_ns();

			if (now >= end)
				return -EAGAIN;
			if (end - now < (uint64_t)ms * 1000000)
				ms = (int)((end - now) / 1000000) + 1;
		}
		pthread_mutex_unlock(&s->lock);
		r = sdp_sys.poll(&pf, 1, ms);
		e = errno;
		pthread_mutex_lock(&s->lock);
		if (!sw_hello_read_merges(s, flags))
			return SW_HELLO_OTHER;
		if (r > 0)
			return 0;
		if (r < 0 && e == EINTR && !sw_intr_restarts(s, true))
			return -EINTR;
		if (r < 0 && e != EINTR)
			return -e;
	}
}

ssize_t sw_hello_read(struct sw_sock *s, struct msghdr *msg,
		      int flags, bool block)
{
	const size_t hl = sizeof(struct sdp_hello);
	struct iovec iov[65];
	struct msghdr m = *msg;
	size_t i, k = 1;
	/* the look goes to this thread's own buffer: with the lock released,
	 * another thread may take the hello into s->hello_buf and check it
	 * meanwhile, and the bytes behind it must not land there */
	uint8_t look[sizeof(struct sdp_hello)];
	ssize_t n;
	int e;

	if (!sw_hello_read_merges(s, flags))
		return SW_HELLO_OTHER;
	/* looked at first, waited for only when nothing is there: the
	 * peer's hello mostly came with its first bytes already */
	n = sdp_sys.recv(s->fd, look, hl, MSG_PEEK | MSG_DONTWAIT);
	e = errno;
	if (block && n < 0 && (e == EAGAIN || e == EWOULDBLOCK)) {
		int r = hello_wait(s, flags);

		if (r)
			return r;
		n = sdp_sys.recv(s->fd, look, hl, MSG_PEEK | MSG_DONTWAIT);
		e = errno;
	}
	if (n < 0)
		return e == EAGAIN || e == EWOULDBLOCK || e == EINTR ? -e :
								       SW_HELLO_OTHER;
	/* a client takes only an older server's whole refusal; anything
	 * else is its program's, where it is, and decided on this look as
	 * sw_upgrade_client_hello_sent's would (not looked at twice) */
	if (s->is_client && !sw_hello_is_refusal(look, (size_t)n)) {
		if (n > 0)
			sw_upgrade_client_spoke_first(s);
		return SW_HELLO_OTHER;
	}
	if ((size_t)n < hl || memcmp(look, SDP_HELLO_MAGIC, SDP_MAGIC_LEN))
		return SW_HELLO_OTHER;
	iov[0].iov_base = s->hello_buf;
	iov[0].iov_len = hl;
	for (i = 0; i < msg->msg_iovlen && k < 65; i++)
		iov[k++] = msg->msg_iov[i];
	m.msg_iov = iov;
	m.msg_iovlen = k;
	m.msg_control = NULL;
	m.msg_controllen = 0;
	n = sdp_sys.recvmsg(s->fd, &m, (flags & MSG_TRUNC) | MSG_DONTWAIT);
	if (n < (ssize_t)hl)
		/* the bytes seen a moment ago went: another reader */
		return n < 0 ? -errno : -EIO;
	n -= hl;
	s->tcp_rx += n;
	if (s->st)
		s->st->rx_tcp += n;
	if (s->is_client) {
		s->hello_got = hl;
		sw_upgrade_client_hello_sent(s);
	} else {
		sw_upgrade_server_hello_take(s);
	}
	return n;
}

/*
 * After a fallback before the peer's hello was read: the peer's stream may
 * still start with its hello (it saw ours, or our listener before it
 * closed): dropped here. Bytes that turn out to be the program's after all
 * are delivered first (prefix). Returns 0 when the program's bytes are
 * next, -EAGAIN when more must come to tell (!wait).
 */
int sw_hello_skip(struct sw_sock *s, bool wait)
{
	while (s->skip_hello && s->is_client) {
		/* a client drops only an older server's whole refusal, and
		 * decides on the first bytes that come (2.2) */
		ssize_t n = sdp_sys.recv(s->fd, s->hello_buf,
					 sizeof(struct sdp_hello),
					 MSG_PEEK | MSG_DONTWAIT);

		if (n > 0 && sw_hello_is_refusal(s->hello_buf, (size_t)n))
			sdp_sys.recv(s->fd, s->hello_buf, n, MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK &&
			       errno != EINTR)) {
			s->hello_got = 0;
			s->skip_hello = false;
			return 0;
		}
		if (!wait)
			return -EAGAIN;
		pthread_mutex_unlock(&s->lock);
		sw_wait_fd(s->fd, POLLIN, -1);
		pthread_mutex_lock(&s->lock);
	}
	while (s->skip_hello) {
		size_t want = sizeof(struct sdp_hello) - s->hello_got;
		ssize_t n = sdp_sys.recv(s->fd, s->hello_buf + s->hello_got,
					 want, MSG_PEEK | MSG_DONTWAIT);
		size_t end, cmp;

		if (n == 0 || (n < 0 && errno != EAGAIN &&
			       errno != EWOULDBLOCK && errno != EINTR)) {
			/* its end: what was taken is the program's */
			s->prefix_off = 0;
			s->prefix_len = s->hello_got;
			s->skip_hello = false;
			return 0;
		}
		if (n > 0) {
			end = s->hello_got + n;
			cmp = end < SDP_MAGIC_LEN ? end : SDP_MAGIC_LEN;
			if (memcmp(s->hello_buf, SDP_HELLO_MAGIC, cmp)) {
				s->prefix_off = 0;
				s->prefix_len = s->hello_got;
				s->skip_hello = false;
				return 0;
			}
			if (end >= SDP_MAGIC_LEN) {
				/* a hello: its bytes are ours to drop */
				sdp_sys.recv(s->fd, s->hello_buf + s->hello_got,
					     n, MSG_DONTWAIT);
				s->hello_got = end;
				if (end == sizeof(struct sdp_hello)) {
					s->hello_got = 0;
					s->skip_hello = false;
				}
				continue;
			}
		}
		if (!wait)
			return -EAGAIN;
		pthread_mutex_unlock(&s->lock);
		sw_wait_fd(s->fd, POLLIN, -1);
		pthread_mutex_lock(&s->lock);
	}
	return 0;
}

void sw_doorbell_ring(struct sw_sock *s)
{
	uint8_t b = SDP_DOORBELL;

	/* Before our SWITCH, and after our DOWNGRADE marker, TCP carries the
	 * program's bytes: a doorbell there would reach the peer's program
	 * as data (the marker itself wakes the peer). Across a wire the peer
	 * may see a doorbell before our SWITCH that says where our bytes on
	 * TCP end: none until it took the SWITCH (it sleeps on its CQ too). */
	if (!s->tx_san || s->ss.dg_sent ||
	    (!s->ss.peer_knows_switch &&
	     !(s->ss.prov->mod.info.caps & SDP_CAP_LOCAL_ONLY)))
		return;
	s->ss.peer_wants_wake = false;
	if (sdp_sys.send(s->fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 &&
	    s->st)
		s->st->doorbells++;
}

static void tcp_ended(struct sw_sock *s)
{
	if (!s->tcp_eof)
		s->tcp_eof_ns = sw_now_ns();
	s->tcp_eof = true;
}

/*
 * The peer sends its FIN message, sees it complete, then closes TCP; yet
 * TCP's end can be seen here before the provider has handed over the
 * messages before that FIN (they wait in its queue until polled, or until
 * receive buffers are posted again). So TCP's end alone ends the stream
 * only when the provider has had a grace period without handing anything
 * over; a provider that sees the peer gone says so sooner (peer_dead).
 */
#define SW_EOF_GRACE_NS 1000000000ull

bool sw_peer_ended(struct sw_sock *s)
{
	uint64_t since;

	if (s->ss.peer_dead)
		return true;
	if (!s->tcp_eof)
		return false;
	since = s->tcp_eof_ns > s->ss.last_rx_ns ? s->tcp_eof_ns :
						   s->ss.last_rx_ns;
	return sw_now_ns() - since > SW_EOF_GRACE_NS;
}

/*
 * Looks at what TCP holds (up to len bytes into buf, never waiting) and
 * drops the doorbells at its front: *bells says how many. Returns the
 * bytes looked at (doorbells included), 0 at EOF, or -errno.
 */
static ssize_t peek_past_doorbells(struct sw_sock *s, uint8_t *buf,
				   size_t len, ssize_t *bells)
{
	ssize_t n = sdp_sys.recv(s->fd, buf, len, MSG_PEEK | MSG_DONTWAIT);
	ssize_t i = 0;

	if (n < 0)
		n = -errno;
	while (i < n && buf[i] == SDP_DOORBELL)
		i++;
	if (i)
		sdp_sys.recv(s->fd, buf, i, MSG_DONTWAIT);
	*bells = i;
	return n;
}

void sw_doorbell_drain_shared(struct sw_sock *s)
{
	if (atomic_load(&s->sleepers) > 0)
		return;
	sw_doorbell_drain(s);
}

void sw_doorbell_drain(struct sw_sock *s)
{
	uint8_t buf[256];

	/* the peer's program bytes are still on TCP before its doorbells;
	 * or the connection is back on TCP (a fork's downgrade, made by
	 * another thread while this one waited): what follows the peer's
	 * marker there is the program's */
	if (!s->rx_san || s->state == SW_TCP)
		return;

	for (;;) {
		ssize_t i, n = peek_past_doorbells(s, buf, sizeof(buf), &i);

		if (n > 0) {
			if (i) {
				/* not the answer to our WAKE_ME: the peer
				 * asks for the buffers we owe it (or returned
				 * some to us while we had none) */
				if (!s->ss.wake_armed)
					s->ss.bell_unasked = true;
				s->ss.wake_armed = false;
				if (s->st)
					s->st->wakeups += i;
			}
			if (i == n && (size_t)n == sizeof(buf))
				continue;
			if (i < n && buf[i] != (uint8_t)SDP_HELLO_MAGIC[0]) {
				/* only doorbells and markers travel here */
				SW_WARN("fd %d: byte 0x%02x on TCP while carried by the provider: closing",
					s->fd, buf[i]);
				s->ss.error = EPROTO;
				tcp_ended(s);
				sw_event(s);
			}
			/* a marker stays for the downgrade to read */
			return;
		}
		if (n == 0) {
			tcp_ended(s);
			sw_event(s);
			return;
		}
		if (n == -EINTR)
			continue;
		if (n != -EAGAIN && n != -EWOULDBLOCK) {
			tcp_ended(s);
			sw_event(s);
		}
		return;
	}
}

int sw_dg_marker_skip(struct sw_sock *s, bool wait)
{
	struct sdp_marker want;
	uint8_t buf[64];

	memcpy(want.magic, SDP_DOWNGRADE_MAGIC, SDP_MAGIC_LEN);
	memcpy(want.key, s->key, sizeof(want.key));
	while (s->dg_marker) {
		ssize_t i, n = peek_past_doorbells(s, buf, sizeof(buf), &i);

		if (n > 0) {
			if (i)
				continue;
			if (memcmp(buf, &want, n < (ssize_t)sizeof(want) ?
						       n : (ssize_t)sizeof(want))) {
				SW_WARN("fd %d: TCP data without the downgrade marker",
					s->fd);
				s->dg_marker = false;
				sw_reup_rx_base(s, false);
				return 0;
			}
			if (n >= (ssize_t)sizeof(want)) {
				sdp_sys.recv(s->fd, buf, sizeof(want),
					     MSG_WAITALL);
				s->dg_marker = false;
				sw_reup_rx_base(s, true);
				return 0;
			}
		} else if (n == 0) {
			s->dg_marker = false;
			return 0;
		} else if (n != -EAGAIN && n != -EWOULDBLOCK && n != -EINTR) {
			s->dg_marker = false;
			return 0;
		}
		if (!wait)
			return -EAGAIN;
		sw_wait_fd(s->fd, POLLIN, -1);
	}
	return 0;
}

/*
 * A server that fell back before the client's hello came: that hello (sent
 * before the client learnt of our fallback) may still come. If the program
 * stops reading first (close, or shutdown of the read side), the kernel
 * answers it with a reset, and the reset makes the peer's kernel drop what
 * its program had not read yet. So it is taken first, waiting a little for
 * it. A client only takes one that is here (an older server's refusal,
 * 2.2): a server of this version writes none, and a wait would only delay
 * the close. Only a whole hello is taken, in one read, and nothing else:
 * after a fork another process may hold the socket and read the program's
 * bytes. Called with s->lock held; drops it while it waits.
 */
void sw_hello_drain(struct sw_sock *s)
{
	uint64_t end = sw_now_ns() + (s->is_client ? 0 : 200000000ull);
	uint8_t buf[sizeof(struct sdp_hello)];
	int saved = errno;
	ssize_t n;

	while (s->state == SW_TCP && s->skip_hello && !s->hello_got) {
		n = sdp_sys.recv(s->fd, buf, sizeof(buf),
				 MSG_PEEK | MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN &&
			       errno != EWOULDBLOCK && errno != EINTR))
			break;	/* its end: nothing more will come */
		if (n > 0 && memcmp(buf, SDP_HELLO_MAGIC,
				    n < SDP_MAGIC_LEN ? n : SDP_MAGIC_LEN))
			break;	/* the program's bytes: not ours */
		if (n > 0 && s->is_client &&
		    !sw_hello_is_refusal(buf, (size_t)n))
			break;	/* only an older server's refusal is */
		if (n == (ssize_t)sizeof(buf)) {
			if (sdp_sys.recv(s->fd, buf, sizeof(buf),
					 MSG_DONTWAIT) == n)
				s->skip_hello = false;
			break;
		}
		if (sw_now_ns() >= end)
			break;
		pthread_mutex_unlock(&s->lock);
		if (n > 0)	/* part of it: the rest is on its way */
			usleep(1000);
		else
			sw_wait_fd(s->fd, POLLIN, 10);
		pthread_mutex_lock(&s->lock);
	}
	errno = saved;
}

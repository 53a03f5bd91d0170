/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tcp_head.c - the program's bytes that travel on TCP while the connection
 * is upgraded (docs/protocol.md 2.5): each side's bytes before its switch
 * point. Sending counts them; receiving reads the peer's and never past the
 * point its SWITCH names, so that the doorbells which follow on TCP are never
 * taken for data; readiness tells the program's bytes from a doorbell.
 * Called with the socket's lock held; nothing here waits.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "providers.h"
#include "session_msg.h"
#include "sock.h"
#include "status.h"
#include "sys.h"
#include "tcp_head.h"
#include "tcp_inband.h"
#include "util.h"

#define HEAD_IOV_MAX 64

/* msg's buffers cut to at most max bytes, into out. */
static size_t iov_cut(const struct msghdr *msg, size_t max,
		      struct iovec *out)
{
	size_t i, n = 0;

	for (i = 0; i < msg->msg_iovlen && i < HEAD_IOV_MAX && max; i++) {
		out[n] = msg->msg_iov[i];
		if (out[n].iov_len > max)
			out[n].iov_len = max;
		max -= out[n].iov_len;
		n++;
	}
	return n;
}

/*
 * TCP ended before the peer's SWITCH was seen. On a provider whose messages
 * are in place before anything later the peer does (shm), the peer never
 * switched: this is the end of its stream. Across a wire its SWITCH (and
 * the rest of its stream) may still be on the way: the grace the SAN gives
 * its own end (sw_peer_ended) applies.
 */
static bool switch_may_follow(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (!ss->ep || ss->peer_dead ||
	    (ss->prov->mod.info.caps & SDP_CAP_LOCAL_ONLY))
		return false;
	if (!s->tcp_eof) {
		s->tcp_eof = true;
		s->tcp_eof_ns = sw_now_ns();
	}
	return !sw_peer_ended(s);
}

/* A call of the program moved bytes on TCP: dir 1 sent, -1 read. */
static void head_call(struct sw_sock *s, int dir)
{
	if (s->head_calls < UINT32_MAX)
		s->head_calls++;
	if (s->head_dir && s->head_dir != dir && s->head_turns < UINT32_MAX)
		s->head_turns++;
	s->head_dir = (int8_t)dir;
}

static void head_took(struct sw_sock *s, size_t n)
{
	if (n)
		head_call(s, -1);
	s->tcp_rx += n;
	if (s->st)
		s->st->rx_tcp += n;
	if (s->tcp_rx == s->tcp_rx_limit) {
		s->rx_san = true;
		sw_event(s);
	}
}

ssize_t sw_head_recv(struct sw_sock *s, struct msghdr *msg, int flags)
{
	struct iovec iov[HEAD_IOV_MAX];
	struct msghdr m = *msg;
	ssize_t n;

	if (s->rx_san)
		return SW_HEAD_SWITCHED;
	if (sw_hello_ahead(s))
		return -EAGAIN;	/* the peer's hello comes first */
	flags = (flags & ~MSG_WAITALL) | MSG_DONTWAIT;
	m.msg_iov = iov;
	if (!s->ss.ep) {
		/* no provider connection yet: the peer cannot have switched
		 * (it needs our SETUP first), every byte is the program's */
		n = sdp_sys.recvmsg(s->fd, msg, flags);
		if (n < 0)
			return -errno;
		if (n > 0 && !(flags & MSG_PEEK))
			head_took(s, n);
		return n;
	}
	if (s->tcp_rx_limit != SW_NO_LIMIT) {
		if (s->tcp_rx == s->tcp_rx_limit) {
			s->rx_san = true;
			return SW_HEAD_SWITCHED;
		}
		m.msg_iovlen = iov_cut(msg, s->tcp_rx_limit - s->tcp_rx, iov);
		n = sdp_sys.recvmsg(s->fd, &m, flags);
		if (n < 0)
			return -errno;
		if (n > 0 && !(flags & MSG_PEEK))
			head_took(s, n);
		/* 0: TCP ended short of the peer's switch point, which only
		 * a broken connection does; the program sees the end */
		return n;
	}
	/* Where the peer's TCP bytes end is not known yet: look, then ask
	 * the provider (the peer's SWITCH is in place there before any
	 * doorbell it rings after it), then take only the program's bytes. */
	m.msg_iovlen = iov_cut(msg, SIZE_MAX, iov);
	n = sdp_sys.recvmsg(s->fd, &m, flags | MSG_PEEK);
	if (n < 0)
		n = -errno;
	/* also when TCP holds nothing: across a wire the peer's SWITCH
	 * rings no doorbell (it may be followed only by its bytes on the
	 * SAN), and a blocking read that never looked would wait for ever
	 * (a local provider's peer rings one) */
	if (s->ss.cq && (n >= 0 || (n == -EAGAIN &&
			 !(s->ss.prov->mod.info.caps & SDP_CAP_LOCAL_ONLY))))
		sw_progress(s);
	if (n < 0) {
		if (n == -EAGAIN && s->tcp_rx == s->tcp_rx_limit) {
			s->rx_san = true;
			return SW_HEAD_SWITCHED;
		}
		return n;
	}
	if (s->tcp_rx_limit != SW_NO_LIMIT) {
		if ((uint64_t)n > s->tcp_rx_limit - s->tcp_rx)
			n = (ssize_t)(s->tcp_rx_limit - s->tcp_rx);
		if (!n) {
			s->rx_san = true;
			return SW_HEAD_SWITCHED;
		}
	} else if (!n) {
		return switch_may_follow(s) ? -EAGAIN : 0;
	}
	if (flags & MSG_PEEK)
		return n;
	/* the bytes are in the program's buffers already: drop them from
	 * the socket without copying them again */
	m.msg_iovlen = iov_cut(msg, n, iov);
	if (sdp_sys.recvmsg(s->fd, &m, flags | MSG_TRUNC) != n)
		return -EIO;
	head_took(s, n);
	return n;
}

ssize_t sw_head_send(struct sw_sock *s, const struct msghdr *msg, int flags)
{
	ssize_t n = sdp_sys.sendmsg(s->fd, msg, flags | MSG_DONTWAIT);

	if (n < 0)
		return -errno;
	if (n)
		head_call(s, 1);
	s->tcp_tx += n;
	if (s->st)
		s->st->tx_tcp += n;
	return n;
}

int sw_head_readable(struct sw_sock *s, short kernel_revents)
{
	uint8_t b;
	ssize_t n;

	if (s->rx_san)
		return SW_HEAD_SWITCHED;
	if (sw_hello_ahead(s))
		return 0;
	if (s->tcp_rx_limit != SW_NO_LIMIT && s->tcp_rx == s->tcp_rx_limit) {
		s->rx_san = true;
		return SW_HEAD_SWITCHED;
	}
	/* Bytes on TCP are the kernel's to report (once per arrival for an
	 * edge-triggered waiter, as for any TCP socket): without its word,
	 * nothing new; with it, while the peer cannot have switched, they
	 * are the program's */
	if (!(kernel_revents & (POLLIN | POLLHUP | POLLERR)))
		return 0;
	if (!s->ss.ep)
		return POLLIN;
	/* one byte tells: a doorbell only ever follows the peer's SWITCH,
	 * which the provider hands over first (see sw_head_recv) */
	n = sdp_sys.recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : POLLIN;
	if (s->tcp_rx_limit == SW_NO_LIMIT && s->ss.cq)
		sw_progress(s);
	if (s->tcp_rx_limit != SW_NO_LIMIT) {
		if (s->tcp_rx == s->tcp_rx_limit) {
			s->rx_san = true;
			return SW_HEAD_SWITCHED;
		}
		return POLLIN | (n ? 0 : POLLRDHUP);
	}
	if (!n)
		return switch_may_follow(s) ? 0 : POLLIN | POLLRDHUP;
	return POLLIN;
}

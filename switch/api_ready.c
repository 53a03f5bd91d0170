/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * api_ready.c - per-socket readiness for the shim's poll, select and epoll:
 * what the switch adds to the kernel's view of a socket's TCP fd, arming
 * wake-ups before a sleep, and the fds that move a pending upgrade on.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "credits.h"
#include "downgrade.h"
#include "fork_exec.h"
#include "providers.h"
#include "session_msg.h"
#include "session_tx.h"
#include "sock.h"
#include "status.h"
#include "sys.h"
#include "tcp_head.h"
#include "tcp_inband.h"
#include "upgrade.h"
#include "upgrade_turns.h"
#include "wakeup.h"

/* After our DOWNGRADE our bytes go on TCP (api_data.c), whatever the
 * credits say: the kernel tells whether they fit. A program that waits to
 * write while the rest of the peer's SAN bytes waits for its read would
 * otherwise never write what the peer waits for. */
static bool tcp_writable(struct sw_sock *s)
{
	struct pollfd pf = { .fd = s->fd, .events = POLLOUT };

	return s->ss.dg_sent && sdp_sys.poll(&pf, 1, 0) == 1 &&
	       (pf.revents & (POLLOUT | POLLERR | POLLHUP));
}

/* SAN readiness; rx: the peer's bytes come from the SAN (all its TCP bytes
 * were read), else only the sending side and errors count here. */
static short san_revents(struct sw_sock *s, short events, bool rx)
{
	struct sw_session *ss = &s->ss;
	short r = 0;
	/* the peer's DOWNGRADE alone is no byte for the program: what
	 * follows it comes on TCP, where the kernel reports it */
	int lowat = atomic_load(&s->rcvlowat);
	/* readable from SO_RCVLOWAT bytes on, as TCP's poll says */
	bool data = ss->rxq && ss->rxq->kind != RX_DOWNGRADE &&
		    (lowat <= 1 || ss->rx_queued >= (uint64_t)lowat);

	if (rx && (events & (POLLIN | POLLRDNORM)) &&
	    (data || ss->fin_rcvd || ss->abort_rcvd || ss->error ||
	     sw_peer_ended(s)))
		r |= events & (POLLIN | POLLRDNORM);
	if (rx && (events & POLLRDHUP) && (ss->fin_rcvd || sw_peer_ended(s)))
		r |= POLLRDHUP;
	if ((events & POLLPRI) && ss->oob_valid)
		r |= POLLPRI;
	/* after this side's SHUT_WR a send fails at once: writable, as
	 * TCP's poll says */
	if ((events & (POLLOUT | POLLWRNORM)) &&
	    (sw_credit_writable(ss) || ss->peer_dead || ss->fin_sent ||
	     ss->fin_pending || ss->error || s->tcp_eof || ss->abort_rcvd ||
	     tcp_writable(s)))
		r |= events & (POLLOUT | POLLWRNORM);
	if (ss->abort_rcvd || ss->error)
		r |= POLLERR;
	if ((ss->peer_dead || s->tcp_eof) && ss->fin_sent)
		r |= POLLHUP;
	/* both directions shut (the peer's FIN or this side's SHUT_RD, and
	 * this side's SHUT_WR) */
	if (ss->fin_rcvd && (ss->fin_sent || ss->fin_pending))
		r |= POLLHUP;
	return r;
}

/* Before the peer's switch point: POLLIN from its TCP bytes; our side
 * sends on TCP until ours (the kernel tells), on the SAN after it. Returns
 * the revents, or SW_HEAD_SWITCHED once all its TCP bytes are read. */
static short head_revents(struct sw_sock *s, short events,
			  short kernel_revents)
{
	short r = 0;
	int h = sw_head_readable(s, kernel_revents);

	if (h == SW_HEAD_SWITCHED)
		return SW_HEAD_SWITCHED;
	/* a kernel report here is the program's bytes arriving on TCP: an
	 * edge, as on a plain TCP socket */
	if (kernel_revents)
		sw_event(s);
	if (h & POLLIN)
		r |= events & (POLLIN | POLLRDNORM);
	if (h & POLLRDHUP)
		r |= events & POLLRDHUP;
	if (s->state == SW_SAN)
		r |= san_revents(s, events, false);
	else
		r |= kernel_revents & (POLLOUT | POLLWRNORM);
	r |= kernel_revents & (POLLERR | POLLHUP);
	return r;
}

/* The program's events for a TCP-state socket. */
static short tcp_revents(struct sw_sock *s, short events,
			 short kernel_revents)
{
	/* on TCP the kernel's reports are the events; but bytes of ours (a
	 * downgrade marker) must not make the socket look readable */
	short r = kernel_revents;

	/* a wait armed while the socket was carried asked the kernel for
	 * its doorbells only; the return to TCP (in this call or another
	 * thread's) makes the kernel's word on writing count again */
	if ((events & (POLLOUT | POLLWRNORM)) &&
	    !(r & (POLLOUT | POLLWRNORM)) && s->fb_reason == SDP_FB_NONE) {
		struct pollfd pf = { .fd = s->fd, .events = events };

		if (sdp_sys.poll(&pf, 1, 0) == 1)
			r |= pf.revents;
	}
	if ((r & (POLLIN | POLLRDNORM)) && (s->dg_marker || s->skip_hello)) {
		if (s->dg_marker)
			sw_dg_marker_skip(s, false);
		if (s->skip_hello)
			sw_hello_skip(s, false);
		if (s->dg_marker || s->skip_hello) {
			r &= ~(POLLIN | POLLRDNORM);
		} else {
			/* the kernel's POLLIN may have been only the bytes
			 * just taken (the marker, the doorbells before it,
			 * the hello): a program told "readable" whose read
			 * then answers EAGAIN may give the connection up
			 * (ssh does), so ask the kernel again */
			struct pollfd pf = { .fd = s->fd,
					     .events = POLLIN | POLLRDNORM };

			r &= ~(POLLIN | POLLRDNORM);
			if (sdp_sys.poll(&pf, 1, 0) == 1)
				r |= pf.revents & events &
				     (POLLIN | POLLRDNORM);
		}
	}
	if (kernel_revents)
		sw_event(s);
	if (s->prefix_len || sw_fork_buf_unread(s))
		r |= events & (POLLIN | POLLRDNORM);
	return r;
}

short sw_poll_revents(struct sw_sock *s, short events, short kernel_revents)
{
	bool hello;
	short r;

	pthread_mutex_lock(&s->lock);
	hello = sw_hello_ahead(s);
	sw_upgrade_advance(s);
	if (hello && !sw_hello_ahead(s) && (kernel_revents & POLLIN)) {
		/* the kernel's POLLIN may have been the peer's hello, which
		 * was just taken: ask it again */
		struct pollfd pf = { .fd = s->fd, .events = events | POLLIN };

		kernel_revents = sdp_sys.poll(&pf, 1, 0) == 1 ? pf.revents : 0;
	}
	if (s->state == SW_HELLO_PENDING && (events & POLLIN))
		sw_hello_send(s, NULL, 0);
	if (s->state == SW_SAN && s->rx_san) {
		if (kernel_revents & (POLLIN | POLLHUP | POLLERR))
			sw_doorbell_drain_shared(s);
		sw_progress(s);
		if (s->ss.rxq && s->ss.rxq->kind == RX_DOWNGRADE)
			sw_downgrade_rx_point(s);
	} else if (s->state == SW_SAN && s->ss.cq && !s->ss.switch_rcvd &&
		   !(s->ss.prov->mod.info.caps & SDP_CAP_LOCAL_ONLY)) {
		/* across a wire the peer's SWITCH rings no doorbell (a local
		 * provider's does): without a look here a set with another
		 * fd ready (iperf3's data socket, writable) never sleeps,
		 * hence never arms, and this socket never sees the bytes
		 * that follow the SWITCH */
		sw_progress(s);
	}
	if (sw_hello_ahead(s)) {
		/* the peer's hello comes before any byte of the program's;
		 * writes go on TCP */
		r = kernel_revents & (POLLOUT | POLLWRNORM | POLLERR | POLLHUP);
		if (kernel_revents)
			sw_event(s);
	} else if ((s->state == SW_UPGRADING || s->state == SW_SAN) &&
		   !s->rx_san &&
		   (r = head_revents(s, events, kernel_revents)) >= 0) {
		/* r set */
	} else if (s->state == SW_SAN) {
		if (kernel_revents & (POLLIN | POLLHUP | POLLERR))
			sw_doorbell_drain_shared(s);
		sw_progress(s);
		r = san_revents(s, events, true);
		/* bytes a fork's downgrade set aside when the peer did not
		 * answer it in time (fork_exec.c) */
		if (sw_fork_buf_unread(s))
			r |= events & (POLLIN | POLLRDNORM);
	} else {
		r = tcp_revents(s, events, kernel_revents);
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* The program is about to wait (poll the set, then sleep): bytes kept
 * back to coalesce go now, and owed buffers return, so that the peer does
 * not keep its own bytes back for a reader that has caught up (as in
 * sw_session_wait). Called with s->lock held, in state SAN. */
static void poll_idle(struct sw_sock *s)
{
	if (s->ptx_len)
		sw_ptx_flush(s);
	sw_credit_return_owed(s);
}

void sw_poll_progress(struct sw_sock *s)
{
	pthread_mutex_lock(&s->lock);
	if (s->state == SW_SAN && s->rx_san)
		sw_progress(s);
	pthread_mutex_unlock(&s->lock);
}

void sw_poll_idle(struct sw_sock *s)
{
	pthread_mutex_lock(&s->lock);
	sw_upgrade_advance(s);
	if (s->state == SW_SAN) {
		sw_progress(s);
		poll_idle(s);
	}
	pthread_mutex_unlock(&s->lock);
}

static short poll_arm(struct sw_sock *s, short events, bool quiet);

short sw_poll_arm(struct sw_sock *s, short events)
{
	return poll_arm(s, events, false);
}

short sw_poll_arm_quiet(struct sw_sock *s, short events)
{
	return poll_arm(s, events, true);
}

/*
 * quiet: the caller reported s writable and must not see that change by
 * the switch's own doing: the wake-up is asked for only with a credit to
 * spare beyond the two a write needs (and without the idle pool's look,
 * which may take credits back). -1: nothing ready and no wake-up asked.
 */
static short poll_arm(struct sw_sock *s, short events, bool quiet)
{
	short r = 0;

	pthread_mutex_lock(&s->lock);
	sw_upgrade_advance(s);
	if (s->state == SW_HELLO_PENDING && (events & POLLIN))
		sw_hello_send(s, NULL, 0);
	if (s->state == SW_SAN) {
		sw_progress(s);
		poll_idle(s);
		if (!s->rx_san) {
			/* the peer's TCP bytes (or its SWITCH's doorbell) wake
			 * the kernel's sleep: nothing to ask for */
			r = head_revents(s, events, 0);
			if (r >= 0)
				goto out;
		}
		r = san_revents(s, events, true);
		if (!r && s->ss.switch_rcvd) {
			if (!quiet)
				sw_credit_adapt(s);
			if (!s->ss.wake_armed &&
			    sw_credit_can_send(&s->ss, SDP_MSG_WAKE_ME) &&
			    (!quiet || s->ss.credits > 2) &&
			    !sw_session_arm(s))
				s->ss.wake_armed = true;
			sw_progress(s);
			r = san_revents(s, events, true);
			/* as a blocking call's sleep does: what the sleep
			 * waits for may need the peer woken (an XFER_DONE
			 * held for want of a credit while the peer's sender
			 * sleeps until it comes). Not for POLLOUT: a poll
			 * short of credits naps and looks again
			 * (sw_poll_nap_ms), and an event loop that keeps
			 * POLLOUT in its set would ring an idle peer */
			if (!r)
				sw_sleep_asks(s, events & ~(POLLOUT |
							    POLLWRNORM));
			if (!r && quiet && !s->ss.wake_armed)
				r = -1;
		} else if (!r && quiet) {
			r = -1;
		}
	} else if (s->state == SW_UPGRADING) {
		r = head_revents(s, events, 0);
		/* writes go on TCP: the kernel's sleep tells */
		r &= ~(POLLOUT | POLLWRNORM);
		if (r < 0)
			r = 0;
	} else if (s->state == SW_TCP && s->prefix_len) {
		r = events & (POLLIN | POLLRDNORM);
	}
out:
	pthread_mutex_unlock(&s->lock);
	return r;
}

int sw_poll_nap_ms(struct sw_sock *s, short events)
{
	struct sw_session *ss = &s->ss;
	int ms = 0;

	if (!(events & (POLLOUT | POLLWRNORM)))
		return 0;
	pthread_mutex_lock(&s->lock);
	if (s->state == SW_SAN && ss->cq && !ss->error && !ss->peer_dead &&
	    !ss->dg_sent && !ss->fin_sent && !s->tcp_eof &&
	    !sw_credit_writable(ss))
		ms = SW_NAP_MS;
	pthread_mutex_unlock(&s->lock);
	return ms;
}

int sw_poll_sleep(struct sw_sock *s, bool begin)
{
	int fd = -1;

	pthread_mutex_lock(&s->lock);
	if (begin)
		fd = sw_sleep_begin(s);
	else
		sw_sleep_end(s);
	pthread_mutex_unlock(&s->lock);
	return fd;
}

void sw_poll_woken(int fd, short revents)
{
	sw_sleep_woken(fd, revents);
}

bool sw_poll_carried(struct sw_sock *s)
{
	bool r;

	pthread_mutex_lock(&s->lock);
	r = s->state == SW_SAN && s->rx_san && s->tx_san && !s->ss.dg_sent;
	pthread_mutex_unlock(&s->lock);
	return r;
}

bool sw_poll_plain(struct sw_sock *s)
{
	bool r;

	pthread_mutex_lock(&s->lock);
	r = s->state == SW_TCP && !s->dg_marker && !s->skip_hello &&
	    !s->prefix_len &&
	    !sw_fork_buf_unread(s);
	pthread_mutex_unlock(&s->lock);
	return r;
}

/*
 * For the shim's poll and epoll (shim/rd_wait.c), while the upgrade of s
 * is pending: the fds besides the TCP fd whose events move it on
 * (sw_upgrade_fds), so that a sleep watches
 * them too. *tcp_in: the TCP fd must be
 * watched for POLLIN whatever the program asked (the server's hello). With
 * max 0, only asks. Returns -1 when nothing of s is pending, -2 when the
 * upgrade moved on here (do not sleep), else the number of fds.
 */
int sw_poll_upgrade_fds(struct sw_sock *s, int *fds, int max, bool *tcp_in,
			int *nap_ms)
{
	enum sw_state was;
	int n = -1, fd;

	*tcp_in = false;
	*nap_ms = 0;
	pthread_mutex_lock(&s->lock);
	was = s->state;
	if (!sw_pending(s) && !(s->state == SW_SAN && !s->ss.switch_rcvd))
		goto unlock;
	n = 0;
	*tcp_in = s->state == SW_CONNECTING || s->state == SW_HELLO_SENT ||
		  s->state == SW_HELLO_WAIT;
	if (!max)
		goto unlock;
	/* the upgrade thread moves it on (or gives it its turn): the
	 * program's sleep needs no fds for it, and no bound */
	if (!sw_turn_driven(s)) {
		*nap_ms = sw_upgrade_nap_ms(s);
		n = sw_upgrade_fds(s, fds, max, &fd);
	} else {
		/* except across a wire, where the thread's switch point
		 * leaves the rest to the program (sw_upgrade_turn_nap_ms) */
		*nap_ms = sw_upgrade_turn_nap_ms(s);
	}
	/* look once more before the caller sleeps */
	sw_upgrade_advance(s);
	if (s->state != was)
		n = -2;
unlock:
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* After a sleep that watched the fds of sw_poll_upgrade_fds: moves the
 * upgrade on. */
void sw_poll_upgrade_woken(struct sw_sock *s)
{
	pthread_mutex_lock(&s->lock);
	if (s->ss.cq && s->ss.ep && !s->ss.switch_rcvd &&
	    !(s->ss.prov->mod.info.caps & SDP_CAP_LOCAL_ONLY))
		s->ss.prov->mod.ops.cq_ack(s->ss.cq);
	sw_upgrade_advance(s);
	if (s->state == SW_SAN && s->ss.cq)
		sw_progress(s);
	pthread_mutex_unlock(&s->lock);
}

uint64_t sw_event_seq(struct sw_sock *s)
{
	return atomic_load_explicit(&s->event_seq, memory_order_relaxed);
}

uint64_t sw_nospace_seq(struct sw_sock *s)
{
	return atomic_load_explicit(&s->nospace_seq, memory_order_relaxed);
}

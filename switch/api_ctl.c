/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * api_ctl.c - the control entry points for the shim: shutdown, close,
 * ioctl (FIONREAD, SIOCATMARK), getsockopt/setsockopt and O_NONBLOCK.
 * POSIX here: -1 and errno.
 */
#include <errno.h>
#include <linux/sockios.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "blind.h"
#include "buffers.h"
#include "credits.h"
#include "flusher.h"
#include "fork_exec.h"
#include "downgrade.h"
#include "fallback.h"
#include "holders.h"
#include "log.h"
#include "orphan.h"
#include "session.h"
#include "session_msg.h"
#include "session_tx.h"
#include "sock.h"
#include "sys.h"
#include "tcp_inband.h"
#include "upgrade.h"
#include "util.h"
#include "wakeup.h"
#include "xslot.h"

/*
 * The FIN never goes while a sendfile's lend is out (the rest of a lend
 * taken back must go before it): shutdown and close first wait while the
 * peer takes it, as close waits for kept bytes (SW_CLOSE_WAIT_NS in all,
 * SW_CLOSE_STALL_NS without progress), looking after naps (the peer's
 * reads ring nothing here); then what it has not taken goes as other
 * sends do: into its staging ring as far as there is room (the peer's
 * memory, which outlives this process), the rest kept.
 */
/* close of a carried connection with bytes kept or lent waits while the
 * peer takes them: at most this long in all, and no longer than this
 * without progress */
#define SW_CLOSE_WAIT_NS 2000000000ull
#define SW_CLOSE_STALL_NS 20000000ull
#define SW_LEND_NAP_US 100

static void lend_finish(struct sw_sock *s)
{
	uint64_t now = sw_now_ns(), until = now + SW_CLOSE_WAIT_NS;
	uint64_t moved = now, left = sw_xslot_lend_left(s), l;

	while (sw_lend_poll(s) && (now = sw_now_ns()) < until &&
	       now - moved < SW_CLOSE_STALL_NS) {
		pthread_mutex_unlock(&s->lock);
		usleep(SW_LEND_NAP_US);
		pthread_mutex_lock(&s->lock);
		l = sw_xslot_lend_left(s);
		if (l < left) {
			left = l;
			moved = sw_now_ns();
		}
	}
	if (s->ss.lend.len)
		sw_lend_settle(s);
}

int sw_shutdown(struct sw_sock *s, int how)
{
	int r = 0;

	pthread_mutex_lock(&s->lock);
	if (sw_pending(s))
		sw_upgrade_settle(s);
	if (how != SHUT_WR)
		sw_hello_drain(s);
	if (s->state != SW_SAN) {
		pthread_mutex_unlock(&s->lock);
		return sdp_sys.shutdown(s->fd, how);
	}
	if ((how == SHUT_WR || how == SHUT_RDWR) && s->ss.dg_sent) {
		/* our stream is on TCP after our marker: TCP's FIN ends it
		 * (sw_credit_maybe_update) */
		if (!s->ss.fin_sent) {
			r = sdp_sys.shutdown(s->fd, SHUT_WR);
			if (!r) {
				s->ss.fin_pending = false;
				s->ss.fin_sent = true;
			}
		}
	} else if (how == SHUT_WR || how == SHUT_RDWR) {
		lend_finish(s);
		if (!s->ss.fin_sent && !s->ss.fin_pending)
			s->ss.fin_pending = true;
		sw_credit_maybe_update(s);
		if (s->ss.fin_pending) {
			/* no credit for it now: the flusher sends it when
			 * one comes, whatever the program does meanwhile */
			if (!atomic_load(&s->ptx_since_ns))
				atomic_store(&s->ptx_since_ns, sw_now_ns());
			sw_flusher_watch(s);
		}
	}
	if (how == SHUT_RD || how == SHUT_RDWR) {
		/* later reads see EOF, as TCP's do */
		s->ss.fin_rcvd = true;
		sw_event(s);
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

void sw_close_end(struct sw_sock *s)
{
	if (s->state == SW_SAN && s->ss.cq && !s->ss.peer_dead &&
	    !s->ss.error && s->ss.peer_wants_wake)
		sw_doorbell_ring(s);
	sw_hello_drain(s);
	/* a doorbell left unread would turn TCP's FIN into a reset, which
	 * the peer's program would see if it still reads its end there */
	if (s->ss.cq && s->state != SW_TCP) {
		sw_progress(s);
		if (!s->rx_san && s->tcp_rx_limit == s->tcp_rx)
			s->rx_san = true;
		sw_doorbell_drain(s);
	}
	sw_session_free(s);
}

/*
 * close waits while the peer takes the kept bytes and the FIN: until the
 * time until, or stall_ns without progress; a signal ends the wait, as in
 * TCP's close. True when everything went (or the peer is gone).
 */
static bool close_wait(struct sw_sock *s, uint64_t until, uint64_t stall_ns)
{
	uint64_t now;

	while ((now = sw_now_ns()) < until &&
	       now - s->orphan_moved_ns < stall_ns) {
		uint64_t wake = until - now > stall_ns ? now + stall_ns : until;

		if (sw_session_wait(s, POLLOUT, wake) == -EINTR)
			break;
		if (sw_orphan_step(s, sw_now_ns()))
			return true;
	}
	return sw_orphan_step(s, sw_now_ns());
}

/*
 * close of a carried connection: the kept bytes and the FIN go as far as
 * the credits let them now, and on while the peer takes them (a program
 * that calls _exit right after close, a forked child or a worker, runs no
 * exit handler, and what the switch keeps would die with it, where TCP's
 * kernel sends it); what is left when the peer takes nothing for
 * SW_CLOSE_STALL_NS goes later, from the flusher thread (orphan.c), as a
 * TCP socket's buffer goes after close. SO_LINGER waits up to its time,
 * as TCP's. The program's fd number is free when it returns: the switch
 * keeps its own copy of the TCP fd, which also keeps TCP's FIN back until
 * the SAN's end of stream is delivered.
 */
bool sw_close_may_keep(struct sw_sock *s)
{
	bool r;

	/* sw_close adopts only such a connection (sw_orphan_adopt): one
	 * shared across fork went back to TCP, and is another process's too */
	pthread_mutex_lock(&s->lock);
	r = s->state == SW_SAN && !s->holders && !s->closed;
	pthread_mutex_unlock(&s->lock);
	return r;
}

int sw_close(struct sw_sock *s, int fd)
{
	bool shared;
	int r;

	pthread_mutex_lock(&s->lock);
	s->closed = true;
	s->orphan_prog_fd = fd;
	/* a connection kept across fork: others hold it still (and read
	 * the peer's marker from the queue all share) */
	shared = sw_holders_others(s);
	sw_holders_leave(s);
	if (sw_pending(s)) {
		/* our hello is out: an older server's refusal may be here
		 * (a server of this version writes none, 2.2) */
		bool answer_due = s->is_client && s->state == SW_HELLO_SENT;

		/* One that is here is taken before TCP closes, or the
		 * kernel would answer it with a reset that drops what the
		 * peer's program has not read yet (a client that writes a
		 * file and closes at once). */
		sw_fallback(s, SDP_FB_ENDED, NULL);
		if (answer_due)
			sw_hello_drain(s);
		r = sdp_sys.close(fd);
		pthread_mutex_unlock(&s->lock);
		return r;
	}
	if (s->state != SW_SAN || s->ss.peer_dead || s->ss.error)
		goto end;
	if (s->linger0) {
		if (sw_credit_can_send(&s->ss, SDP_MSG_ABORT))
			sw_send_ctrl(s, SDP_MSG_ABORT, NULL, 0, NULL, 0, 0);
		goto end;
	}
	/* FIN carries EOF, after the bytes lent and kept (sw_orphan_step) */
	lend_finish(s);
	if (!s->ss.fin_sent)
		s->ss.fin_pending = true;
	sw_orphan_begin(s);
	if (sw_orphan_step(s, sw_now_ns()))
		goto end;
	/* SO_LINGER: until all went, or its time, progress or not */
	if (s->linger_ns ?
	    close_wait(s, sw_now_ns() + s->linger_ns, UINT64_MAX) :
	    close_wait(s, sw_now_ns() + SW_CLOSE_WAIT_NS, SW_CLOSE_STALL_NS))
		goto end;
	r = sw_orphan_adopt(s, fd);
	if (!r) {
		r = sdp_sys.close(fd);
		pthread_mutex_unlock(&s->lock);
		return r;
	}
	/* no copy of the fd or no flusher thread to finish it: close
	 * finishes it itself, within the same bounds */
	SW_INFO("fd %d: closed with bytes still to go and the switch cannot keep the connection (%s): close waits until the peer took them",
		fd, strerror(-r));
	while (!sw_orphan_step(s, sw_now_ns()))
		sw_session_wait(s, POLLOUT, sw_now_ns() + 10000000ull);
end:
	sw_orphan_end(s);
	/* back on TCP (a fork, an exec, stdio, MSG_ZEROCOPY; the peer's
	 * return taken just now by the step above): the peer's marker is
	 * the switch's, and must not turn TCP's FIN into a reset
	 * (fork_sender_close.c) */
	if (!shared)
		sw_marker_take(s);
	pthread_mutex_unlock(&s->lock);
	return sdp_sys.close(fd);
}

void sw_close_gone(struct sw_sock *s)
{
	pthread_mutex_lock(&s->lock);
	s->closed = true;
	sw_holders_leave(s);
	if (s->state != SW_TCP)
		SW_WARN("fd %d: closed by the C library while the provider still carried it: the peer sees its end when the provider's connection ends",
			s->fd);
	/* the number is not the socket's any more: no call may use it */
	__atomic_store_n(&s->fd, -1, __ATOMIC_RELEASE);
	if (s->st)
		s->st->fd = -1;
	sw_session_free(s);
	pthread_mutex_unlock(&s->lock);
}

/* Plain TCP with nothing of the switch's ahead of the kernel's bytes: no
 * doorbell marker or hello to drop, no prefix or fork buffer unread (s
 * locked). The kernel answers for such a socket alone. */
static bool tcp_holds_nothing(const struct sw_sock *s)
{
	return s->state == SW_TCP && !s->dg_marker && !s->skip_hello &&
	       s->prefix_off >= s->prefix_len && !sw_fork_buf_left(s);
}

/* What FIONREAD answers on a TCP fd that the switch reads first: the
 * bytes a read would return before the kernel's, then the kernel's once
 * nothing of the switch's (doorbells, the peer's marker or its hello)
 * can come before them. */
static uint64_t tcp_readable(struct sw_sock *s)
{
	uint64_t n = sw_fork_buf_left(s);
	int k = 0;

	if ((s->dg_marker && sw_dg_marker_skip(s, false) == -EAGAIN) ||
	    (s->skip_hello && sw_hello_skip(s, false) == -EAGAIN))
		return n;
	if (s->prefix_len > s->prefix_off)
		n += s->prefix_len - s->prefix_off;
	if (!sdp_sys.ioctl(s->fd, FIONREAD, &k) && k > 0)
		n += (uint64_t)k;
	return n;
}

/*
 * FIONREAD: the bytes the program's next reads find, none of the
 * switch's. Carried: what the SAN delivered (and a fork buffer's);
 * before the switch point: the peer's TCP bytes up to it, and what
 * follows it on the SAN once they are all there. False where the kernel
 * answers alone (plain TCP with nothing held here).
 */
static bool readable(struct sw_sock *s, uint64_t *out)
{
	uint64_t n;
	int k = 0;

	if (s->state == SW_TCP) {
		if (tcp_holds_nothing(s))
			return false;
		*out = tcp_readable(s);
		return true;
	}
	if (s->rx_san) {
		sw_progress(s);
		n = s->ss.rx_queued + sw_fork_buf_left(s);
		if (!n) {
			/* the peer's DOWNGRADE next: what follows is on
			 * TCP, and the read would go there now */
			sw_downgrade_rx_point(s);
			if (s->state == SW_TCP)
				n = tcp_readable(s);
		}
		*out = n;
		return true;
	}
	if (s->state == SW_HELLO_PENDING)
		sw_hello_send(s, NULL, 0);
	if (s->ss.cq)
		sw_progress(s);
	if (sw_hello_ahead(s) || sdp_sys.ioctl(s->fd, FIONREAD, &k))
		k = 0;
	n = (uint64_t)k;
	if (s->tcp_rx_limit != SW_NO_LIMIT &&
	    n >= s->tcp_rx_limit - s->tcp_rx)
		n = s->tcp_rx_limit - s->tcp_rx + s->ss.rx_queued;
	*out = n;
	return true;
}

int sw_ioctl(struct sw_sock *s, unsigned long req, void *arg, int *ret)
{
	int handled = 0;
	uint64_t n;

	pthread_mutex_lock(&s->lock);
	sw_upgrade_advance(s);
	if (req == FIONREAD && s->state != SW_LISTENER) {
		if (readable(s, &n)) {
			*(int *)arg = n > 0x7fffffff ? 0x7fffffff : (int)n;
			*ret = 0;
			handled = 1;
		}
	} else if (s->state == SW_SAN) {
		if (req == SIOCATMARK) {
			*(int *)arg = s->ss.oob_valid && !s->ss.rx_queued;
			*ret = 0;
			handled = 1;
		} else if (req == SIOCOUTQ || req == SIOCOUTQNSD) {
			/* the bytes not yet with the peer: those kept back
			 * here (the TCP fd's queue holds only doorbells) */
			sw_progress(s);
			*(int *)arg = s->ptx_len > 0x7fffffff ? 0x7fffffff :
							       (int)s->ptx_len;
			*ret = 0;
			handled = 1;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return handled;
}

/*
 * TCP_INFO of a carried connection: the TCP connection under it stays
 * established while the ends exchange FIN over the provider, so the
 * state is the one TCP would show after those FINs (the rest stays the
 * TCP connection's: docs/semantics.md).
 */
static uint8_t carried_tcp_state(const struct sw_session *ss)
{
	bool own = ss->fin_sent || ss->fin_pending;

	if (own && ss->peer_fin)
		return ss->fin_sent ? TCP_CLOSE : TCP_LAST_ACK;
	if (own)
		return ss->fin_sent ? TCP_FIN_WAIT2 : TCP_FIN_WAIT1;
	if (ss->peer_fin)
		return TCP_CLOSE_WAIT;
	return TCP_ESTABLISHED;
}

int sw_getsockopt(struct sw_sock *s, int level, int name, void *val,
		  socklen_t *len, int *ret)
{
	struct tcp_info *ti = val;

	if (level == IPPROTO_TCP && name == TCP_ZEROCOPY_RECEIVE)
		return sw_zc_receive(s, val, len, ret);
	if (level != IPPROTO_TCP || name != TCP_INFO)
		return 0;
	*ret = sdp_sys.getsockopt(s->fd, level, name, val, len);
	if (*ret || !len || *len < sizeof(ti->tcpi_state))
		return 1;
	pthread_mutex_lock(&s->lock);
	if (s->state == SW_SAN && ti->tcpi_state == TCP_ESTABLISHED) {
		sw_progress(s);
		ti->tcpi_state = carried_tcp_state(&s->ss);
	}
	pthread_mutex_unlock(&s->lock);
	return 1;
}

/*
 * Whether TCP_INQ is on is asked of the kernel at the first read that
 * gives room for control messages (accepted sockets inherit it from their
 * listener), again after the program sets it. Once it is known to be on,
 * a read without room gets MSG_CTRUNC, as from the kernel.
 */
void sw_inq_cmsg(struct sw_sock *s, struct msghdr *msg)
{
	bool fits = msg->msg_control &&
		    msg->msg_controllen >= CMSG_SPACE(sizeof(int));
	bool ask = msg->msg_controllen > 0, on;
	socklen_t len = sizeof(int);
	struct cmsghdr *c;
	uint64_t n = 0;
	int v = 0;

	msg->msg_controllen = 0;
	/* known off, as for most programs that pass a control buffer: no
	 * lock to take */
	if (__atomic_load_n(&s->inq_known, __ATOMIC_ACQUIRE) &&
	    !__atomic_load_n(&s->inq_on, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&s->lock);
	if (!s->inq_known && ask) {	/* a read with room for it asks */
		on = !sdp_sys.getsockopt(s->fd, IPPROTO_TCP, TCP_INQ, &v,
					 &len) && v;
		__atomic_store_n(&s->inq_on, on, __ATOMIC_RELAXED);
		__atomic_store_n(&s->inq_known, true, __ATOMIC_RELEASE);
	}
	on = s->inq_known && s->inq_on;
	if (on && fits && !readable(s, &n) &&
	    sdp_sys.ioctl(s->fd, FIONREAD, &v) == 0)
		n = v > 0 ? (uint64_t)v : 0;
	pthread_mutex_unlock(&s->lock);
	if (!on)
		return;
	if (!fits) {
		msg->msg_flags |= MSG_CTRUNC;	/* as the kernel: no room */
		return;
	}
	v = n > 0x7fffffff ? 0x7fffffff : (int)n;
	c = (struct cmsghdr *)msg->msg_control;
	c->cmsg_level = SOL_TCP;
	c->cmsg_type = TCP_CM_INQ;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &v, sizeof(v));
	msg->msg_controllen = CMSG_SPACE(sizeof(int));
}

/*
 * Options whose effect is on the bytes in the TCP socket itself:
 * TCP_ULP ("tls": the kernel encrypts what the program writes and decrypts
 * what it reads) and SO_PEEK_OFF (MSG_PEEK reads on from an offset the
 * kernel keeps). Where the switch carries the connection, or may still
 * (an upgrade under way, bytes of the switch's still to come in the
 * kernel's queue or held here), the program's bytes pass the kernel by,
 * and the kernel would take the switch's own for the program's: the
 * option is refused as by a kernel without it (TCP_ULP: ENOENT, no
 * module; SO_PEEK_OFF: EOPNOTSUPP, before Linux 6.10), and the program
 * does without (OpenSSL keeps TLS in user space). On a connection that
 * is plain TCP for good it goes to the kernel, and the connection is
 * never upgraded again. inherited: the accepted connections of a listener
 * take the option from it (SO_PEEK_OFF), so a listener the switch serves
 * refuses it too; TCP_ULP the kernel refuses on a listener itself. True
 * when refused.
 */
static bool kernel_only_refused(struct sw_sock *s, const char *what,
				bool inherited)
{
	bool plain;

	pthread_mutex_lock(&s->lock);
	plain = (s->state == SW_LISTENER && !inherited) ||
		tcp_holds_nothing(s);
	if (plain) {
		s->reup_never = true;
		s->reup = false;
	}
	pthread_mutex_unlock(&s->lock);
	if (!plain)
		SW_INFO("fd %d: %s refused: the switch carries the connection, and the kernel would not see its bytes",
			s->fd, what);
	return !plain;
}

int sw_setsockopt(struct sw_sock *s, int level, int name, const void *val,
		  socklen_t len, int *ret)
{
	if (sw_ts_tx_option(level, name, val, len)) {
		/* off the SAN first, so that the kernel numbers from the
		 * program's next byte, the switch's marker before it */
		sw_ts_tx_sock(s);
		*ret = sdp_sys.setsockopt(s->fd, level, name, val, len);
		return 1;
	}
	if (level == IPPROTO_TCP && name == TCP_ULP &&
	    kernel_only_refused(s, "TCP_ULP (kernel TLS)", false)) {
		errno = ENOENT;
		*ret = -1;
		return 1;
	}
	if (level == SOL_SOCKET && name == SO_PEEK_OFF && len >= sizeof(int) &&
	    *(const int *)val >= 0 &&
	    kernel_only_refused(s, "SO_PEEK_OFF", true)) {
		errno = EOPNOTSUPP;
		*ret = -1;
		return 1;
	}
	if (level == SOL_SOCKET && name == SO_ZEROCOPY) {
		/* looked at again at the next MSG_ZEROCOPY send */
		pthread_mutex_lock(&s->lock);
		s->zc_off = false;
		pthread_mutex_unlock(&s->lock);
	}
	if (level == IPPROTO_TCP && name == TCP_INQ) {
		pthread_mutex_lock(&s->lock);
		__atomic_store_n(&s->inq_known, false, __ATOMIC_RELEASE);
		__atomic_store_n(&s->inq_on, false, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&s->lock);
	}
	if (level == SOL_SOCKET && name == SO_RCVLOWAT &&
	    len >= sizeof(int)) {
		/* as the kernel takes it: negative is INT_MAX, 0 is 1 */
		int v = *(const int *)val;

		atomic_store(&s->rcvlowat, v < 0 ? 0x7fffffff : v);
	}
	if (level == SOL_SOCKET && name == SO_LINGER &&
	    len >= sizeof(struct linger)) {
		const struct linger *l = val;

		s->linger0 = l->l_onoff && l->l_linger == 0;
		s->linger_ns = l->l_onoff && l->l_linger > 0 ?
				       (uint64_t)l->l_linger * 1000000000ull :
				       0;
	}
	if (level == IPPROTO_TCP && name == TCP_CORK && len >= sizeof(int) &&
	    *(const int *)val) {
		bool san;

		pthread_mutex_lock(&s->lock);
		san = s->state != SW_TCP && s->state != SW_LISTENER;
		pthread_mutex_unlock(&s->lock);
		/* Carried (or about to be) by the provider, the TCP stream
		 * holds only the switch's own bytes: a cork would hold a
		 * one-byte doorbell for up to 200 ms while the peer sleeps
		 * (nginx's tcp_nopush). The hint has nothing to coalesce
		 * there; taking it off (0) still goes to the kernel. */
		if (san) {
			*ret = 0;
			return 1;
		}
	}
	return 0;
}

void sw_set_nonblock(struct sw_sock *s, bool on)
{
	s->nonblock = on;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * api.c - the switch's entry points for the shim (sdp_switch.h): each takes
 * the socket's lock, moves a pending upgrade on, and hands the call to the
 * session (SAN), to the kernel (TCP), or answers it itself (readiness,
 * FIONREAD, SO_LINGER). POSIX at this boundary: -1 and errno.
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

#include "sw_internal.h"

static bool pending(const struct sw_sock *s)
{
	return s->state == SW_CONNECTING || s->state == SW_HELLO_SENT ||
	       s->state == SW_UPGRADING;
}

/* Moves a pending upgrade on; returns -EAGAIN if it must not wait. */
static int settle(struct sw_sock *s, bool wait)
{
	if (pending(s))
		return sw_upgrade_progress(s, wait);
	return 0;
}

/* TCP state: the bytes taken while looking for a hello come first. */
static ssize_t tcp_prefix(struct sw_sock *s, struct msghdr *msg, int flags)
{
	size_t got = 0, avail = s->prefix_len - s->prefix_off;
	size_t i;

	for (i = 0; i < msg->msg_iovlen && got < avail; i++) {
		size_t n = msg->msg_iov[i].iov_len;

		if (n > avail - got)
			n = avail - got;
		memcpy(msg->msg_iov[i].iov_base,
		       s->hello_buf + s->prefix_off + got, n);
		got += n;
	}
	if (!(flags & MSG_PEEK))
		s->prefix_off += got;
	if (s->prefix_off == s->prefix_len)
		s->prefix_off = s->prefix_len = 0;
	return got;
}

static ssize_t recvmsg_do(struct sw_sock *s, struct msghdr *msg,
			      int flags);

ssize_t sw_recvmsg(struct sw_sock *s, struct msghdr *msg, int flags)
{
	ssize_t r;
	int e;

	atomic_fetch_add(&s->users, 1);
	r = recvmsg_do(s, msg, flags);
	e = errno;
	atomic_fetch_sub(&s->users, 1);
	errno = e;
	return r;
}

static ssize_t recvmsg_do(struct sw_sock *s, struct msghdr *msg,
			      int flags)
{
	bool nb;
	ssize_t r;

	pthread_mutex_lock(&s->lock);
	nb = sw_nonblocking(s, flags);
	/* a blocking read would wait for the peer's data anyway: it waits
	 * for the upgrade without a deadline (the peer's program may just
	 * not have run yet); the peer can still give the upgrade up */
	s->wait_forever = true;
	r = settle(s, !nb);
	s->wait_forever = false;
	if (r == -EAGAIN && pending(s)) {
		pthread_mutex_unlock(&s->lock);
		errno = EAGAIN;
		return -1;
	}
	if (s->state == SW_SAN) {
		r = sw_session_recv(s, msg->msg_iov, msg->msg_iovlen, flags);
		if (r != -2) {
			pthread_mutex_unlock(&s->lock);
			return r;
		}
		/* the peer's data continues on TCP from here */
		sw_downgrade_rx_point(s);
		if (s->state == SW_SAN) {
			pthread_mutex_unlock(&s->lock);
			errno = EAGAIN;
			return -1;
		}
	}
	/* plain TCP */
	if (s->fork_buf) {
		r = sw_fork_buf_read(s, msg, flags);
		if (r > 0) {
			pthread_mutex_unlock(&s->lock);
			return r;
		}
	}
	if (s->dg_marker && sw_dg_marker_skip(s, !nb) == -EAGAIN) {
		pthread_mutex_unlock(&s->lock);
		errno = EAGAIN;
		return -1;
	}
	if (s->prefix_len) {
		r = tcp_prefix(s, msg, flags);
		pthread_mutex_unlock(&s->lock);
		return r;
	}
	if ((s->marker_check || s->expect_server_hello) &&
	    sw_tcp_marker_skip(s, !nb) == -EAGAIN) {
		pthread_mutex_unlock(&s->lock);
		errno = EAGAIN;
		return -1;
	}
	if (s->prefix_len) {
		r = tcp_prefix(s, msg, flags);
		pthread_mutex_unlock(&s->lock);
		return r;
	}
	pthread_mutex_unlock(&s->lock);
	r = sdp_sys.recvmsg(s->fd, msg, flags);
	if (r > 0 && s->st)
		s->st->rx_tcp += r;
	return r;
}

/* Keeps what fits of msg while the upgrade is pending. Returns bytes kept,
 * -1 with errno (EAGAIN), or -2 when a blocking caller must wait. */
static ssize_t ptx_append(struct sw_sock *s, const struct msghdr *msg,
			  int flags)
{
	size_t total = 0, room = SW_PTX_MAX - s->ptx_len, n, done = 0;
	size_t i;

	for (i = 0; i < msg->msg_iovlen; i++)
		total += msg->msg_iov[i].iov_len;
	if (!total)
		return 0;
	if (!room || (total > room && !sw_nonblocking(s, flags))) {
		if (sw_nonblocking(s, flags)) {
			errno = EAGAIN;
			return -1;
		}
		return -2;
	}
	n = total < room ? total : room;
	if (s->ptx_len + n > s->ptx_cap) {
		size_t cap = s->ptx_cap ? s->ptx_cap : 65536;
		uint8_t *p;

		while (cap < s->ptx_len + n)
			cap *= 2;
		if (cap > SW_PTX_MAX)
			cap = SW_PTX_MAX;
		p = realloc(s->ptx, cap);
		if (!p)
			return -2;
		s->ptx = p;
		s->ptx_cap = cap;
	}
	for (i = 0; i < msg->msg_iovlen && done < n; i++) {
		size_t l = msg->msg_iov[i].iov_len;

		if (l > n - done)
			l = n - done;
		memcpy(s->ptx + s->ptx_len + done, msg->msg_iov[i].iov_base, l);
		done += l;
	}
	s->ptx_len += n;
	return n;
}

static ssize_t sendmsg_do(struct sw_sock *s, const struct msghdr *msg,
			      int flags);
int sw_ptx_flush(struct sw_sock *s);

ssize_t sw_sendmsg(struct sw_sock *s, const struct msghdr *msg, int flags)
{
	ssize_t r;
	int e;

	atomic_fetch_add(&s->users, 1);
	r = sendmsg_do(s, msg, flags);
	e = errno;
	atomic_fetch_sub(&s->users, 1);
	errno = e;
	return r;
}

static ssize_t sendmsg_do(struct sw_sock *s, const struct msghdr *msg,
			      int flags)
{
	ssize_t r;
	int e;

	pthread_mutex_lock(&s->lock);
	settle(s, false);
	if (pending(s)) {
		/* the upgrade needs the peer's program to run (it may even
		 * be this thread's next call): keep the bytes, as a TCP
		 * send buffer would, and send them first once settled */
		r = ptx_append(s, msg, flags);
		if (r != -2) {
			pthread_mutex_unlock(&s->lock);
			return r;
		}
		settle(s, true);
	}
	if (s->state == SW_SAN && !s->ss.dg_sent) {
		if (flags & MSG_OOB) {
			struct iovec one;
			uint8_t b;

			if (!msg->msg_iovlen || !msg->msg_iov[0].iov_len) {
				pthread_mutex_unlock(&s->lock);
				errno = EINVAL;
				return -1;
			}
			b = *((uint8_t *)msg->msg_iov[0].iov_base);
			one.iov_base = &b;
			one.iov_len = 1;
			/* the urgent byte follows the bytes sent before it,
			 * those still waiting for credits too */
			while (s->ptx_len && !s->ss.peer_dead &&
			       !s->ss.error && !s->tcp_eof) {
				if (sw_ptx_flush(s) < 0)
					break;
				if (s->ptx_len)
					sw_session_wait(s, POLLOUT, 0);
			}
			while (!sw_credit_can_send(&s->ss, SDP_MSG_OOB) &&
			       !s->ss.peer_dead && !s->ss.error)
				sw_session_wait(s, POLLOUT, 0);
			e = sw_send_ctrl(s, SDP_MSG_OOB, NULL, 0, &one, 1, 1);
			pthread_mutex_unlock(&s->lock);
			if (e) {
				errno = EPIPE;
				return -1;
			}
			return 1;
		}
		r = sw_session_send(s, msg->msg_iov, msg->msg_iovlen, flags);
		e = errno;
		pthread_mutex_unlock(&s->lock);
		if (r < 0 && e == EPIPE && !(flags & MSG_NOSIGNAL))
			raise(SIGPIPE);
		errno = e;
		return r;
	}
	pthread_mutex_unlock(&s->lock);
	r = sdp_sys.sendmsg(s->fd, msg, flags);
	if (r > 0 && s->st)
		s->st->tx_tcp += r;
	return r;
}

ssize_t sw_sendfile(struct sw_sock *s, int in_fd, off_t *offset, size_t count)
{
	static __thread uint8_t *buf;
	const size_t bufsz = 1 << 20;
	off_t pos;
	size_t done = 0;

	pthread_mutex_lock(&s->lock);
	settle(s, true);
	if (s->state != SW_SAN) {
		pthread_mutex_unlock(&s->lock);
		return sendfile(s->fd, in_fd, offset, count);
	}
	pthread_mutex_unlock(&s->lock);
	if (!buf)
		buf = malloc(bufsz);
	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	pos = offset ? *offset : lseek(in_fd, 0, SEEK_CUR);
	while (done < count) {
		size_t want = count - done < bufsz ? count - done : bufsz;
		ssize_t n = pread(in_fd, buf, want, pos);
		struct iovec iov;
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t w;

		if (n < 0) {
			if (done)
				break;
			return -1;
		}
		if (n == 0)
			break;
		iov.iov_base = buf;
		iov.iov_len = n;
		w = sw_sendmsg(s, &m, MSG_NOSIGNAL);
		if (w < 0) {
			if (done)
				break;
			return -1;
		}
		done += w;
		pos += w;
		if (w < n)
			break;
	}
	if (offset)
		*offset = pos;
	else
		lseek(in_fd, pos, SEEK_SET);
	return done;
}

int sw_shutdown(struct sw_sock *s, int how)
{
	int r = 0;

	pthread_mutex_lock(&s->lock);
	settle(s, true);
	if (s->state != SW_SAN) {
		pthread_mutex_unlock(&s->lock);
		return sdp_sys.shutdown(s->fd, how);
	}
	if (how == SHUT_WR || how == SHUT_RDWR) {
		if (!s->ss.fin_sent && !s->ss.fin_pending)
			s->ss.fin_pending = true;
		sw_credit_maybe_update(s);
	}
	if (how == SHUT_RD || how == SHUT_RDWR) {
		/* later reads see EOF, as TCP's do */
		s->ss.fin_rcvd = true;
		sw_event(s);
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

int sw_close(struct sw_sock *s, int fd)
{
	uint64_t deadline;

	pthread_mutex_lock(&s->lock);
	s->closed = true;
	if (s->state == SW_SAN && !s->ss.peer_dead && !s->ss.error) {
		if (s->linger0) {
			if (sw_credit_can_send(&s->ss, SDP_MSG_WAKE_ME))
				sw_send_ctrl(s, SDP_MSG_ABORT, NULL, 0, NULL, 0,
					     0);
		} else if (!s->ss.fin_sent) {
			/* FIN carries EOF; TCP's FIN follows anyway, so
			 * the wait for a credit is short and bounded (longer
			 * while bytes written during the upgrade must go
			 * first, as a TCP socket sends its buffer) */
			s->ss.fin_pending = true;
			deadline = sw_now_ns() + (s->ptx_len ? 2000000000ull :
						  200000000ull);
			sw_credit_maybe_update(s);
			while (s->ss.fin_pending && !s->ss.peer_dead &&
			       !s->tcp_eof && sw_now_ns() < deadline)
				sw_session_wait(s, POLLOUT, deadline);
		}
		if (s->ss.peer_wants_wake)
			sw_doorbell_ring(s);
		/* messages the provider still holds (its ring was full) are
		 * dropped with the endpoint: let them go first, as a TCP
		 * socket sends its buffer after close (bounded) */
		deadline = sw_now_ns() + 2000000000ull;
		while (sw_sends_pending(&s->ss) && !s->ss.peer_dead &&
		       !s->tcp_eof && sw_now_ns() < deadline)
			sw_session_wait(s, POLLOUT, deadline);
	}
	sw_session_free(s);
	pthread_mutex_unlock(&s->lock);
	return sdp_sys.close(fd);
}

int sw_ioctl(struct sw_sock *s, unsigned long req, void *arg, int *ret)
{
	int handled = 0;

	pthread_mutex_lock(&s->lock);
	settle(s, false);
	if (s->state == SW_SAN) {
		if (req == FIONREAD) {
			sw_progress(s);
			*(int *)arg = s->ss.rx_queued > 0x7fffffff ?
					      0x7fffffff :
					      (int)s->ss.rx_queued;
			*ret = 0;
			handled = 1;
		} else if (req == SIOCATMARK) {
			*(int *)arg = s->ss.oob_valid && !s->ss.rx_queued;
			*ret = 0;
			handled = 1;
		}
	} else if (req == FIONREAD && s->prefix_len) {
		int k = 0;

		sdp_sys.ioctl(s->fd, FIONREAD, &k);
		*(int *)arg = k + (int)(s->prefix_len - s->prefix_off);
		*ret = 0;
		handled = 1;
	}
	pthread_mutex_unlock(&s->lock);
	return handled;
}

int sw_getsockopt(struct sw_sock *s, int level, int name, void *val,
		  socklen_t *len, int *ret)
{
	(void)s;
	(void)level;
	(void)name;
	(void)val;
	(void)len;
	(void)ret;
	return 0;
}

int sw_setsockopt(struct sw_sock *s, int level, int name, const void *val,
		  socklen_t len, int *ret)
{
	if (level == SOL_SOCKET && name == SO_LINGER &&
	    len >= sizeof(struct linger)) {
		const struct linger *l = val;

		s->linger0 = l->l_onoff && l->l_linger == 0;
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

/* ---- readiness ------------------------------------------------------------ */

static short san_revents(struct sw_sock *s, short events)
{
	struct sw_session *ss = &s->ss;
	short r = 0;
	/* the peer's DOWNGRADE alone is no byte for the program: what
	 * follows it comes on TCP, where the kernel reports it */
	bool data = ss->rxq && ss->rxq->kind != RX_DOWNGRADE;

	if ((events & (POLLIN | POLLRDNORM)) &&
	    (data || ss->fin_rcvd || ss->abort_rcvd || ss->error ||
	     sw_peer_ended(s)))
		r |= events & (POLLIN | POLLRDNORM);
	if ((events & POLLRDHUP) && (ss->fin_rcvd || sw_peer_ended(s)))
		r |= POLLRDHUP;
	if ((events & POLLPRI) && ss->oob_valid)
		r |= POLLPRI;
	if ((events & (POLLOUT | POLLWRNORM)) &&
	    (sw_credit_can_send(ss, SDP_MSG_DATA) || ss->peer_dead ||
	     ss->error || s->tcp_eof || ss->abort_rcvd))
		r |= events & (POLLOUT | POLLWRNORM);
	if (ss->abort_rcvd || ss->error)
		r |= POLLERR;
	if ((ss->peer_dead || s->tcp_eof) && ss->fin_sent)
		r |= POLLHUP;
	return r;
}

short sw_poll_revents(struct sw_sock *s, short events, short kernel_revents)
{
	short r;

	pthread_mutex_lock(&s->lock);
	settle(s, false);
	if (s->state == SW_SAN) {
		if (kernel_revents & (POLLIN | POLLHUP | POLLERR))
			sw_doorbell_drain(s);
		sw_progress(s);
		if (s->ss.rxq && s->ss.rxq->kind == RX_DOWNGRADE)
			sw_downgrade_rx_point(s);
	}
	if (s->state == SW_SAN) {
		r = san_revents(s, events);
	} else if (pending(s)) {
		/* handshake bytes are not the program's; writes may go
		 * while the pending buffer has room (they wait there for
		 * the upgrade to settle): only then is the socket usable */
		r = kernel_revents & (POLLOUT | POLLWRNORM | POLLERR | POLLHUP);
		if (s->ptx_len >= SW_PTX_MAX)
			r &= ~(POLLOUT | POLLWRNORM);
	} else {
		/* on TCP the kernel's reports are the events; but bytes of
		 * ours (a marker after an upgrade or downgrade) must not make
		 * the socket look readable to the program */
		r = kernel_revents;
		if ((r & (POLLIN | POLLRDNORM)) &&
		    (s->dg_marker || s->marker_check || s->expect_server_hello)) {
			uint8_t b;

			if (s->dg_marker)
				sw_dg_marker_skip(s, false);
			if (s->marker_check || s->expect_server_hello)
				sw_tcp_marker_skip(s, false);
			if (!s->prefix_len && (s->dg_marker || s->marker_check ||
					       s->expect_server_hello ||
					       sdp_sys.recv(s->fd, &b, 1,
							    MSG_PEEK |
							    MSG_DONTWAIT) < 0))
				r &= ~(POLLIN | POLLRDNORM);
		}
		if (kernel_revents)
			sw_event(s);
		if (s->prefix_len ||
		    (s->fork_buf && s->fork_buf->off < s->fork_buf->len))
			r |= events & (POLLIN | POLLRDNORM);
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

void sw_poll_idle(struct sw_sock *s)
{
	pthread_mutex_lock(&s->lock);
	if (s->state == SW_SAN) {
		sw_progress(s);
		poll_idle(s);
	}
	pthread_mutex_unlock(&s->lock);
}

short sw_poll_arm(struct sw_sock *s, short events)
{
	short r = 0;

	pthread_mutex_lock(&s->lock);
	settle(s, false);
	if (s->state == SW_SAN) {
		sw_progress(s);
		poll_idle(s);
		r = san_revents(s, events);
		if (!r) {
			sw_credit_adapt(s);
			if (!s->ss.wake_armed &&
			    sw_credit_can_send(&s->ss, SDP_MSG_WAKE_ME) &&
			    !sw_session_arm(s))
				s->ss.wake_armed = true;
			sw_progress(s);
			r = san_revents(s, events);
		}
	} else if (!pending(s) && s->prefix_len) {
		r = events & (POLLIN | POLLRDNORM);
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

/*
 * For readiness.c, while the upgrade of s is pending: the fds besides the
 * TCP fd whose events move it on (the provider listener a client waits on
 * for the server's connection). The CQ notify fd is not among them: a
 * provider may make it on first use and keep it for the connection's life
 * (docs/provider-shm.md); a client that takes the connection rings on TCP
 * instead, and readiness bounds the sleep of a socket with no fd here.
 * With max 0, only asks. Returns -1 when s is not pending, -2 when the
 * upgrade moved on here (do not sleep), else the number of fds.
 */
int sw_poll_upgrade_fds(struct sw_sock *s, int *fds, int max)
{
	int n = -1, i, fd;

	pthread_mutex_lock(&s->lock);
	if (!pending(s) || !max)
		goto unlock;
	n = 0;
	for (i = 0; s->state == SW_HELLO_SENT && i < sw_nproviders &&
		    n < max; i++) {
		if (!s->plisten[i])
			continue;
		fd = sw_providers[i].mod.ops.listener_fd(s->plisten[i]);
		if (fd >= 0)
			fds[n++] = fd;
	}
	/* look once more before the caller sleeps */
	settle(s, false);
	if (!pending(s))
		n = -2;
unlock:
	if (n == -1 && pending(s))
		n = 0;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* After a sleep that watched the fds of sw_poll_upgrade_fds: moves the
 * upgrade on. */
void sw_poll_upgrade_woken(struct sw_sock *s)
{
	pthread_mutex_lock(&s->lock);
	settle(s, false);
	pthread_mutex_unlock(&s->lock);
}

uint64_t sw_event_seq(struct sw_sock *s)
{
	return atomic_load_explicit(&s->event_seq, memory_order_relaxed);
}

/* ---- fork and exec ------------------------------------------------------------ */

void sw_stats_after_fork_child(void);
void sw_downgrade_all(bool capture);

/* Both processes will hold the connections: return them to TCP first, so
 * the kernel shares them as it shares any socket. */
void sw_atfork_prepare(void)
{
	sw_downgrade_all(true);
}

void sw_atfork_parent(void)
{
}

void sw_atfork_child(void)
{
	sw_stats_after_fork_child();
}

void sw_before_exec(void)
{
	sw_downgrade_all(false);
}

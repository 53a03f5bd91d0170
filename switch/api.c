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

/* Takes the upgrade's next steps, never waiting (the program's bytes go on
 * TCP until the switch, so nothing needs it finished). */
static void settle(struct sw_sock *s)
{
	if (sw_pending(s))
		sw_upgrade_progress(s);
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

/* The part of msg after its first off bytes, in scratch (at most 64). */
static void msg_advance(const struct msghdr *msg, size_t off,
			struct msghdr *out, struct iovec *scratch)
{
	size_t i, n = 0;

	*out = *msg;
	for (i = 0; i < msg->msg_iovlen && n < 64; i++) {
		if (off >= msg->msg_iov[i].iov_len) {
			off -= msg->msg_iov[i].iov_len;
			continue;
		}
		scratch[n].iov_base = (uint8_t *)msg->msg_iov[i].iov_base + off;
		scratch[n++].iov_len = msg->msg_iov[i].iov_len - off;
		off = 0;
	}
	out->msg_iov = scratch;
	out->msg_iovlen = n;
}

static size_t msg_total(const struct msghdr *msg)
{
	size_t i, t = 0;

	for (i = 0; i < msg->msg_iovlen; i++)
		t += msg->msg_iov[i].iov_len;
	return t;
}

/*
 * A blocking read of the peer's TCP bytes sleeps (lock released) until
 * TCP has bytes, or something moves the upgrade on that the read may
 * need: the server's connection request (client), or, across a wire, the
 * peer's SWITCH on the CQ. Returns 0 or -EINTR.
 */
static int head_wait(struct sw_sock *s)
{
	struct pollfd pf[3] = { { .fd = s->fd, .events = POLLIN } };
	int n = 1, i, cfd = -1, r;

	/* a non-blocking connect the program now waits on finishes first */
	if (s->state == SW_CONNECTING)
		pf[0].events |= POLLOUT;

	if (s->state == SW_UPGRADING && !s->ss.ep && s->is_client) {
		for (i = 0; i < sw_nproviders && n < 3; i++) {
			if (!s->plisten[i])
				continue;
			pf[n].fd = sw_providers[i].mod.ops.listener_fd(
				s->plisten[i]);
			pf[n].events = POLLIN;
			n += pf[n].fd >= 0;
		}
	} else if (s->ss.ep && !s->ss.switch_rcvd) {
		cfd = sw_cq_sleep_fd(s);
		if (cfd >= 0) {
			pf[n].fd = cfd;
			pf[n++].events = POLLIN;
		}
	}
	i = sw_upgrade_nap_ms(s);
	/* Another thread of the program may take the doorbell that says
	 * the peer's bytes now come by the provider (its wait drains the
	 * TCP fd), also one that started its call after this check; with a
	 * provider connection up that news is at most a few ms away, so
	 * the sleep looks again every 2 ms until then. */
	if ((atomic_load(&s->users) > 1 || s->ss.ep) && (!i || i > 2))
		i = 2;
	pthread_mutex_unlock(&s->lock);
	r = sdp_sys.poll(pf, n, i ? i : -1);
	r = r < 0 ? -errno : 0;
	pthread_mutex_lock(&s->lock);
	if (cfd >= 0 && s->ss.cq)
		s->ss.prov->mod.ops.cq_ack(s->ss.cq);
	return r == -EINTR ? -EINTR : 0;
}

#define HEAD_FELL_BACK (-1002)

/*
 * Before the peer's switch point: its program's bytes from TCP, then
 * (MSG_WAITALL) the rest from the SAN. Returns bytes, -1 with errno, or
 * HEAD_FELL_BACK when the connection fell back before a byte was read.
 */
static ssize_t head_recvmsg(struct sw_sock *s, struct msghdr *msg, int flags)
{
	bool nb = sw_nonblocking(s, flags);
	bool waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK) && !nb;
	size_t want = msg_total(msg), got = 0;
	struct iovec scratch[64];
	struct msghdr m;
	ssize_t r;

	/* the caller has just moved the upgrade on: again after each wait */
	for (;; settle(s)) {
		if (s->state == SW_HELLO_PENDING)
			sw_upgrade_hello(s, NULL, 0);
		if (sw_hello_read_merges(s, flags)) {
			/* the peer's hello and the bytes behind it at once;
			 * a blocking read waits for them there */
			msg_advance(msg, got, &m, scratch);
			r = sw_upgrade_read_hello(s, &m, flags, !nb && !got);
			if (r == -EAGAIN && !nb && !got) {
				errno = EAGAIN;	/* the program's timeout */
				return -1;
			}
			if (r > 0) {
				got += r;
				if (got == want || !waitall)
					return got;
				continue;
			}
			if (r < 0 && r != -EAGAIN && r != SW_HELLO_OTHER) {
				if (got)
					return got;
				errno = -r;
				return -1;
			}
			if (r == SW_HELLO_OTHER)
				settle(s);
		}
		if (s->state == SW_TCP)
			/* fell back: the rest of the stream is plain TCP,
			 * after what the switch took from it (tcp_recvmsg) */
			return got ? (ssize_t)got : HEAD_FELL_BACK;
		if (s->rx_san) {
			msg_advance(msg, got, &m, scratch);
			r = got == want ? 0 :
				sw_session_recv(s, m.msg_iov, m.msg_iovlen,
						flags);
			if (r < 0 && got)
				r = 0;
			return r < 0 ? r : (ssize_t)got + r;
		}
		msg_advance(msg, got, &m, scratch);
		r = sw_head_recv(s, &m, flags);
		if (r == SW_HEAD_SWITCHED)
			continue;
		if (r > 0) {
			got += r;
			if (got == want || !waitall)
				return got;
			continue;
		}
		if (r == 0)
			return got;
		if (r != -EAGAIN) {
			if (got)
				return got;
			errno = -r;
			return -1;
		}
		if (nb || (got && !waitall)) {
			if (got)
				return got;
			errno = EAGAIN;
			return -1;
		}
		if (head_wait(s) == -EINTR) {
			if (got)
				return got;
			errno = EINTR;
			return -1;
		}
	}
}

static ssize_t recvmsg_do(struct sw_sock *s, struct msghdr *msg,
			      int flags)
{
	ssize_t r;

	pthread_mutex_lock(&s->lock);
	/* a hello ahead is taken with the program's bytes (head_recvmsg) */
	if (!sw_hello_read_merges(s, flags))
		settle(s);
	if (s->state != SW_TCP && s->state != SW_LISTENER && !s->rx_san &&
	    !(flags & MSG_OOB)) {
		/* the peer may wait for our hello before it answers */
		if (s->state == SW_HELLO_PENDING)
			sw_upgrade_hello(s, NULL, 0);
		r = head_recvmsg(s, msg, flags);
		if (r != HEAD_FELL_BACK) {
			pthread_mutex_unlock(&s->lock);
			return r;
		}
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
	/* plain TCP (and urgent data before the switch point) */
	if (s->fork_buf) {
		r = sw_fork_buf_read(s, msg, flags);
		if (r > 0) {
			pthread_mutex_unlock(&s->lock);
			return r;
		}
	}
	if ((s->dg_marker &&
	     sw_dg_marker_skip(s, !sw_nonblocking(s, flags)) == -EAGAIN) ||
	    (s->skip_hello &&
	     sw_hello_skip(s, !sw_nonblocking(s, flags)) == -EAGAIN)) {
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

static ssize_t sendmsg_do(struct sw_sock *s, const struct msghdr *msg,
			      int flags);
int sw_ptx_flush(struct sw_sock *s);

/* Our bytes go on TCP, before our switch point (counted). */
static bool head_tx(const struct sw_sock *s)
{
	return s->state == SW_HELLO_PENDING || s->state == SW_HELLO_SENT ||
	       s->state == SW_UPGRADING || s->state == SW_HELLO_WAIT;
}

/*
 * Before our switch point: the program's bytes go on TCP, counted. A
 * blocking send waits for room as TCP's would (lock released), and what is
 * left when the switch happens meanwhile goes on the SAN.
 */
static ssize_t head_sendmsg(struct sw_sock *s, const struct msghdr *msg,
			    int flags)
{
	bool nb = sw_nonblocking(s, flags);
	size_t want = msg_total(msg), done = 0;
	struct iovec scratch[64];
	struct msghdr m;
	ssize_t r;
	int e;

	for (;;) {
		msg_advance(msg, done, &m, scratch);
		if (s->state == SW_SAN && !s->ss.dg_sent) {
			r = sw_session_send(s, m.msg_iov, m.msg_iovlen, flags);
			e = errno;
			if (r < 0 && done)
				return done;
			if (r < 0 && e == EPIPE && !(flags & MSG_NOSIGNAL))
				raise(SIGPIPE);
			errno = e;
			return r < 0 ? r : (ssize_t)done + r;
		}
		if (!head_tx(s)) {
			/* fell back meanwhile: plain TCP */
			r = sdp_sys.sendmsg(s->fd, &m, flags);
			if (r > 0 && s->st)
				s->st->tx_tcp += r;
			if (r < 0 && done)
				return done;
			return r < 0 ? r : (ssize_t)done + r;
		}
		r = sw_upgrade_hello(s, &m, flags);
		if (r == SW_NO_HELLO && !head_tx(s))
			continue;	/* fell back: plain TCP */
		if (r == SW_NO_HELLO)
			r = want ? sw_head_send(s, &m, flags) : 0;
		if (r >= 0) {
			done += r;
			if (done == want || nb)
				return done;
			continue;
		}
		if (r != -EAGAIN || nb) {
			if (done)
				return done;
			errno = -r;
			return -1;
		}
		pthread_mutex_unlock(&s->lock);
		{
			struct pollfd pf = { .fd = s->fd, .events = POLLOUT };

			r = sdp_sys.poll(&pf, 1, -1);
		}
		pthread_mutex_lock(&s->lock);
		if (r < 0 && errno == EINTR) {
			if (done)
				return done;
			errno = EINTR;
			return -1;
		}
		settle(s);
	}
}

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
	settle(s);
	if ((flags & MSG_OOB) && head_tx(s))
		/* urgent data takes the path the rest of the stream takes,
		 * which must be settled first */
		sw_upgrade_settle(s);
	if (head_tx(s)) {
		r = head_sendmsg(s, msg, flags);
		pthread_mutex_unlock(&s->lock);
		return r;
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
	settle(s);
	if (s->state == SW_TCP || s->state == SW_CONNECTING) {
		pthread_mutex_unlock(&s->lock);
		return sendfile(s->fd, in_fd, offset, count);
	}
	/* the SAN, or TCP bytes the switch counts: copied through sendmsg */
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

/*
 * A connection that fell back after our hello went out: the peer's hello
 * (its answer, sent before it learnt of our fallback) may still come. If
 * the program stops reading first (close, or shutdown of the read side),
 * the kernel answers that hello with a reset, and the reset makes the
 * peer's kernel drop what its program had not read yet. So it is taken
 * first, waiting a little for it (the peer answers as soon as it sees ours).
 * Only a whole hello is taken, in one read, and nothing else: after a fork
 * another process may hold the socket and read the program's bytes.
 */
static void hello_drain(struct sw_sock *s)
{
	uint64_t end = sw_now_ns() + 200000000ull;
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

int sw_shutdown(struct sw_sock *s, int how)
{
	int r = 0;

	pthread_mutex_lock(&s->lock);
	if (sw_pending(s))
		sw_upgrade_settle(s);
	if (how != SHUT_WR)
		hello_drain(s);
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
	if (sw_pending(s)) {
		/* TCP's end goes first: a server that finds our provider
		 * listener gone then sees why (server_connect) */
		int r = sdp_sys.close(fd);

		sw_fallback(s, SDP_FB_ENDED, NULL);
		pthread_mutex_unlock(&s->lock);
		return r;
	}
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
	hello_drain(s);
	/* a doorbell left unread would turn TCP's FIN into a reset, which
	 * the peer's program would see if it still reads its end there */
	if (s->ss.cq && s->state != SW_TCP) {
		sw_progress(s);
		if (!s->rx_san && s->tcp_rx_limit == s->tcp_rx)
			s->rx_san = true;
		sw_doorbell_drain(s);
	}
	sw_session_free(s);
	pthread_mutex_unlock(&s->lock);
	return sdp_sys.close(fd);
}

int sw_ioctl(struct sw_sock *s, unsigned long req, void *arg, int *ret)
{
	int handled = 0;

	pthread_mutex_lock(&s->lock);
	settle(s);
	if (req == FIONREAD && !s->rx_san && s->state != SW_TCP &&
	    s->state != SW_LISTENER) {
		/* the peer's TCP bytes up to its switch point, and what
		 * follows it on the SAN once they are all there */
		int k = 0;
		uint64_t n;

		if (s->state == SW_HELLO_PENDING)
			sw_upgrade_hello(s, NULL, 0);
		if (s->ss.cq)
			sw_progress(s);
		if (sw_hello_ahead(s) ||
		    sdp_sys.ioctl(s->fd, FIONREAD, &k))
			k = 0;
		n = (uint64_t)k;
		if (s->tcp_rx_limit != SW_NO_LIMIT &&
		    n >= s->tcp_rx_limit - s->tcp_rx)
			n = s->tcp_rx_limit - s->tcp_rx + s->ss.rx_queued;
		*(int *)arg = n > 0x7fffffff ? 0x7fffffff : (int)n;
		*ret = 0;
		handled = 1;
	} else if (s->state == SW_SAN) {
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

/* SAN readiness; rx: the peer's bytes come from the SAN (all its TCP bytes
 * were read), else only the sending side and errors count here. */
static short san_revents(struct sw_sock *s, short events, bool rx)
{
	struct sw_session *ss = &s->ss;
	short r = 0;
	/* the peer's DOWNGRADE alone is no byte for the program: what
	 * follows it comes on TCP, where the kernel reports it */
	bool data = ss->rxq && ss->rxq->kind != RX_DOWNGRADE;

	if (rx && (events & (POLLIN | POLLRDNORM)) &&
	    (data || ss->fin_rcvd || ss->abort_rcvd || ss->error ||
	     sw_peer_ended(s)))
		r |= events & (POLLIN | POLLRDNORM);
	if (rx && (events & POLLRDHUP) && (ss->fin_rcvd || sw_peer_ended(s)))
		r |= POLLRDHUP;
	if ((events & POLLPRI) && ss->oob_valid)
		r |= POLLPRI;
	if ((events & (POLLOUT | POLLWRNORM)) &&
	    (sw_credit_writable(ss) || ss->peer_dead ||
	     ss->error || s->tcp_eof || ss->abort_rcvd))
		r |= events & (POLLOUT | POLLWRNORM);
	if (ss->abort_rcvd || ss->error)
		r |= POLLERR;
	if ((ss->peer_dead || s->tcp_eof) && ss->fin_sent)
		r |= POLLHUP;
	return r;
}

/* Before the peer's switch point: POLLIN from its TCP bytes; our side
 * sends on TCP until ours (the kernel tells), on the SAN after it. */
static short head_revents(struct sw_sock *s, short events,
			  short kernel_revents)
{
	short r = 0;
	int h = sw_head_readable(s, kernel_revents);

	if (h == SW_HEAD_SWITCHED)
		return -1;
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

	if ((r & (POLLIN | POLLRDNORM)) && (s->dg_marker || s->skip_hello)) {
		if (s->dg_marker)
			sw_dg_marker_skip(s, false);
		if (s->skip_hello)
			sw_hello_skip(s, false);
		if (!s->prefix_len && (s->dg_marker || s->skip_hello))
			r &= ~(POLLIN | POLLRDNORM);
	}
	if (kernel_revents)
		sw_event(s);
	if (s->prefix_len ||
	    (s->fork_buf && s->fork_buf->off < s->fork_buf->len))
		r |= events & (POLLIN | POLLRDNORM);
	return r;
}

short sw_poll_revents(struct sw_sock *s, short events, short kernel_revents)
{
	bool hello;
	short r;

	pthread_mutex_lock(&s->lock);
	hello = sw_hello_ahead(s);
	settle(s);
	if (hello && !sw_hello_ahead(s) && (kernel_revents & POLLIN)) {
		/* the kernel's POLLIN may have been the peer's hello, which
		 * was just taken: ask it again */
		struct pollfd pf = { .fd = s->fd, .events = events | POLLIN };

		kernel_revents = sdp_sys.poll(&pf, 1, 0) == 1 ? pf.revents : 0;
	}
	if (s->state == SW_HELLO_PENDING && (events & POLLIN))
		sw_upgrade_hello(s, NULL, 0);
	if (s->state == SW_SAN && s->rx_san) {
		if (kernel_revents & (POLLIN | POLLHUP | POLLERR))
			sw_doorbell_drain(s);
		sw_progress(s);
		if (s->ss.rxq && s->ss.rxq->kind == RX_DOWNGRADE)
			sw_downgrade_rx_point(s);
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
			sw_doorbell_drain(s);
		sw_progress(s);
		r = san_revents(s, events, true);
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
	settle(s);
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
	settle(s);
	if (s->state == SW_HELLO_PENDING && (events & POLLIN))
		sw_upgrade_hello(s, NULL, 0);
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
			sw_credit_adapt(s);
			if (!s->ss.wake_armed &&
			    sw_credit_can_send(&s->ss, SDP_MSG_WAKE_ME) &&
			    !sw_session_arm(s))
				s->ss.wake_armed = true;
			sw_progress(s);
			r = san_revents(s, events, true);
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
	    !(s->fork_buf && s->fork_buf->off < s->fork_buf->len);
	pthread_mutex_unlock(&s->lock);
	return r;
}

/*
 * For readiness.c, while the upgrade of s is pending: the fds besides the
 * TCP fd whose events move it on, so that a sleep watches them too: the
 * provider listener of a client waiting for the server's connection, and,
 * across a wire, the CQ that brings the peer's SWITCH (a local provider's
 * peer rings a doorbell on TCP instead). *tcp_in: the TCP fd must be
 * watched for POLLIN whatever the program asked (the server's hello). With
 * max 0, only asks. Returns -1 when nothing of s is pending, -2 when the
 * upgrade moved on here (do not sleep), else the number of fds.
 */
int sw_poll_upgrade_fds(struct sw_sock *s, int *fds, int max, bool *tcp_in,
			int *nap_ms)
{
	enum sw_state was;
	int n = -1, i, fd;

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
	*nap_ms = sw_upgrade_nap_ms(s);
	if (s->state == SW_UPGRADING && s->is_client && !s->ss.ep) {
		for (i = 0; i < sw_nproviders && n < max; i++) {
			if (!s->plisten[i])
				continue;
			fd = sw_providers[i].mod.ops.listener_fd(
				s->plisten[i]);
			if (fd >= 0)
				fds[n++] = fd;
		}
	} else if (s->ss.ep && !s->ss.switch_rcvd) {
		fd = sw_cq_sleep_fd(s);
		if (fd >= 0)
			fds[n++] = fd;
	}
	/* look once more before the caller sleeps */
	settle(s);
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
	settle(s);
	if (s->state == SW_SAN && s->ss.cq)
		sw_progress(s);
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

char *sw_exec_hello_skips(void);

char *sw_before_exec(void)
{
	sw_downgrade_all(false);
	return sw_exec_hello_skips();
}

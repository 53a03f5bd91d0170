/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * api_data.c - the data entry points for the shim (recvmsg, sendmsg,
 * sendfile): each takes the socket's lock, moves a pending upgrade on and
 * hands the call to the session (SAN) or to TCP. POSIX here: -1 and errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blind.h"
#include "config.h"
#include "credits.h"
#include "downgrade.h"
#include "flusher.h"
#include "fork_exec.h"
#include "holders.h"
#include "providers.h"
#include "session_msg.h"
#include "session_rx.h"
#include "session_tx.h"
#include "reupgrade.h"
#include "sock.h"
#include "status.h"
#include "sys.h"
#include "tcp_head.h"
#include "tcp_inband.h"
#include "upgrade.h"
#include "util.h"
#include "wakeup.h"
#include "xslot.h"

/* The result r of a call on the socket's TCP connection: -errno, or the
 * bytes it moved, counted on TCP (sent when tx). */
static ssize_t on_tcp(struct sw_sock *s, ssize_t r, bool tx)
{
	if (r < 0)
		return -errno;
	if (r > 0 && s->st) {
		if (tx)
			s->st->tx_tcp += r;
		else
			s->st->rx_tcp += r;
	}
	return r;
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
			      int flags, bool *by_kernel);

ssize_t sw_recvmsg(struct sw_sock *s, struct msghdr *msg, int flags)
{
	bool by_kernel = false;
	ssize_t r;

	if (flags & MSG_ERRQUEUE)
		/* the kernel's error queue (zerocopy completions, transmit
		 * timestamps, ICMP errors): none of the stream's bytes,
		 * wherever they come from, may be read in its place */
		return sdp_sys.recvmsg(s->fd, msg, flags);
	atomic_fetch_add(&s->users, 1);
	r = recvmsg_do(s, msg, flags, &by_kernel);
	atomic_fetch_sub(&s->users, 1);
	if (r >= 0 && !by_kernel) {
		/* what the kernel answers for a connected TCP socket: no
		 * address; of ancillary data only TCP_INQ's (the others
		 * the switch cannot give: docs/semantics.md); in msg_flags
		 * MSG_CMSG_CLOEXEC as asked and MSG_OOB for an urgent byte;
		 * the program's buffer behind msg_control is left as it
		 * was past what is written */
		msg->msg_namelen = 0;
		msg->msg_flags = flags & (MSG_CMSG_CLOEXEC | MSG_OOB);
		if (!(flags & MSG_OOB) &&
		    (msg->msg_controllen ||
		     __atomic_load_n(&s->inq_on, __ATOMIC_RELAXED)))
			sw_inq_cmsg(s, msg);
		else
			msg->msg_controllen = 0;
	}
	return sw_posix(r);
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
	int fds[2];
	int n, i, cfd, r, w;

	/* a non-blocking connect the program now waits on finishes first */
	if (s->state == SW_CONNECTING)
		pf[0].events |= POLLOUT;

	n = sw_upgrade_fds(s, fds, 2, &cfd);
	for (i = 0; i < n; i++) {
		pf[1 + i].fd = fds[i];
		pf[1 + i].events = POLLIN;
	}
	n++;
	i = sw_upgrade_nap_ms(s);
	/* Another thread of the program may take the doorbell that says
	 * the peer's bytes now come by the provider (its wait drains the
	 * TCP fd), also one that started its call after this check; with a
	 * provider connection up that news is at most a few ms away, so
	 * the sleep looks again every 2 ms until then. */
	if ((atomic_load(&s->users) > 1 || s->ss.ep) && (!i || i > 2))
		i = 2;
	pthread_mutex_unlock(&s->lock);
	w = sdp_wait_begin();
	r = sdp_sys.poll(pf, n, i ? i : -1);
	r = r < 0 ? -errno : 0;
	sdp_wait_end(w);
	pthread_mutex_lock(&s->lock);
	if (cfd >= 0 && s->ss.cq)
		s->ss.prov->mod.ops.cq_ack(s->ss.cq);
	return r == -EINTR ? -EINTR : 0;
}

/*
 * Before the peer's switch point: its program's bytes from TCP, then
 * (MSG_WAITALL) the rest from the SAN. Returns bytes, -errno,
 * SW_HEAD_FELL_BACK when the connection fell back before a byte was read,
 * or SW_RX_DOWNGRADE when the peer's first message after its switch point
 * returns its stream to TCP (its marker is next there, not the program's
 * bytes: the caller's downgrade path takes it).
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
	for (;; sw_upgrade_advance(s)) {
		if (s->state == SW_HELLO_PENDING)
			sw_hello_send(s, NULL, 0);
		if (sw_hello_read_merges(s, flags)) {
			/* the peer's hello and the bytes behind it at once;
			 * a blocking read waits for them there */
			msg_advance(msg, got, &m, scratch);
			r = sw_hello_read(s, &m, flags, !nb && !got);
			if (r == -EAGAIN && !nb && !got) {
				return -EAGAIN;	/* the program's timeout */
			}
			if (r > 0) {
				got += r;
				if (got == want || !waitall)
					return got;
				continue;
			}
			if (r < 0 && r != -EAGAIN && r != SW_HELLO_OTHER) {
				return got ? (ssize_t)got : r;
			}
			if (r == SW_HELLO_OTHER)
				sw_upgrade_advance(s);
		}
		if (s->state == SW_TCP)
			/* fell back: the rest of the stream is plain TCP,
			 * after what the switch took from it (tcp_recvmsg) */
			return got ? (ssize_t)got : SW_HEAD_FELL_BACK;
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
			return got ? (ssize_t)got : r;
		}
		if (nb || (got && !waitall)) {
			return got ? (ssize_t)got : -EAGAIN;
		}
		if (head_wait(s) == -EINTR &&
		    (got || !sw_intr_restarts(s, true))) {
			return got ? (ssize_t)got : -EINTR;
		}
	}
}

#define SW_DISCARD_CHUNK 16384
#define SW_DISCARD_IOV 64

/* MSG_TRUNC on the SAN: up to want bytes go through a scratch buffer the
 * program never sees (at most 1 MiB per call, as TCP may return less). */
static ssize_t recv_discard(struct sw_sock *s, size_t want, int flags)
{
	static __thread uint8_t scratch[SW_DISCARD_CHUNK];
	struct iovec iov[SW_DISCARD_IOV];
	int n = 0;

	while (want && n < SW_DISCARD_IOV) {
		size_t k = want < SW_DISCARD_CHUNK ? want : SW_DISCARD_CHUNK;

		iov[n].iov_base = scratch;
		iov[n++].iov_len = k;
		want -= k;
	}
	if (!n)
		return 0;
	return sw_session_recv(s, iov, n, flags & ~MSG_TRUNC);
}

static ssize_t recvmsg_do(struct sw_sock *s, struct msghdr *msg,
			      int flags, bool *by_kernel)
{
	ssize_t r = 0;

	pthread_mutex_lock(&s->lock);
	sw_holders_settle(s);
	sw_reup_maybe(s);
	/* a hello ahead is taken with the program's bytes (head_recvmsg) */
	if (!sw_hello_read_merges(s, flags))
		sw_upgrade_advance(s);
	if (s->state != SW_TCP && s->state != SW_LISTENER && !s->rx_san &&
	    !(flags & MSG_OOB)) {
		/* the peer may wait for our hello before it answers */
		if (s->state == SW_HELLO_PENDING)
			sw_hello_send(s, NULL, 0);
		r = head_recvmsg(s, msg, flags);
		if (r != SW_HEAD_FELL_BACK && r != SW_RX_DOWNGRADE) {
			pthread_mutex_unlock(&s->lock);
			return r;
		}
	}
	if (s->state == SW_SAN || r == SW_RX_DOWNGRADE) {
		/* TCP's MSG_TRUNC: the bytes are taken (or, with MSG_PEEK,
		 * counted) but never written to the program's buffer */
		if ((flags & MSG_TRUNC) && !(flags & MSG_OOB))
			r = recv_discard(s, msg_total(msg), flags);
		else
			r = sw_session_recv(s, msg->msg_iov, msg->msg_iovlen,
					    flags);
		if (r != SW_RX_DOWNGRADE) {
			pthread_mutex_unlock(&s->lock);
			return r;
		}
		/* the peer's data continues on TCP from here */
		sw_downgrade_rx_point(s);
		/* our DOWNGRADE must go first, and waits for a credit (or
		 * for a message another thread of ours is making): a
		 * blocking read waits for it, as for data */
		while (s->state == SW_SAN && !sw_nonblocking(s, flags) &&
		       !s->ss.error && !s->ss.peer_dead && !s->tcp_eof &&
		       !s->closed) {
			int w = sw_session_wait(s, POLLOUT, 0);

			if (w == -EINTR && !sw_intr_restarts(s, true)) {
				pthread_mutex_unlock(&s->lock);
				return -EINTR;
			}
			if (w < 0 && w != -ETIMEDOUT && w != -EINTR)
				break;
			sw_downgrade_rx_point(s);
		}
		if (s->state != SW_TCP) {
			pthread_mutex_unlock(&s->lock);
			return -EAGAIN;
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
		return -EAGAIN;
	}
	if (s->prefix_len) {
		r = tcp_prefix(s, msg, flags);
		pthread_mutex_unlock(&s->lock);
		return r;
	}
	pthread_mutex_unlock(&s->lock);
	*by_kernel = true;
	return on_tcp(s, sdp_sys.recvmsg(s->fd, msg, flags), false);
}

static ssize_t sendmsg_do(struct sw_sock *s, const struct msghdr *msg,
			      int flags);

/* Our bytes go on TCP, before our switch point (counted). */
static bool head_tx(const struct sw_sock *s)
{
	return s->state == SW_HELLO_PENDING || s->state == SW_HELLO_SENT ||
	       s->state == SW_UPGRADING || s->state == SW_HELLO_WAIT;
}

/*
 * A send on the SAN (s locked). When our DOWNGRADE goes while the call
 * waits for credits (another thread read the peer's, or the connection
 * is being passed to another process), the bytes not sent on the SAN
 * follow our marker on TCP: a blocking call sends them all there, as it
 * would have on the SAN; a non-blocking one what TCP takes now. The lock
 * is let go for the TCP send, as for any TCP send: a reader of this
 * socket must not wait for a peer that waits for that reader.
 */
static ssize_t san_send(struct sw_sock *s, const struct msghdr *msg,
			int flags)
{
	size_t want = msg_total(msg), done;
	struct iovec scratch[64];
	struct msghdr m;
	ssize_t r;

	r = sw_session_send(s, msg->msg_iov, msg->msg_iovlen, flags);
	if (r == SW_TX_DOWNGRADE)
		r = 0;
	else if (r < 0 || (size_t)r == want || !s->ss.dg_sent ||
		 sw_nonblocking(s, flags))
		return r;
	done = r;
	while (done < want) {
		msg_advance(msg, done, &m, scratch);
		pthread_mutex_unlock(&s->lock);
		r = sdp_sys.sendmsg(s->fd, &m, flags);
		pthread_mutex_lock(&s->lock);
		if (r < 0 && errno == EINTR && !done &&
		    sw_intr_restarts(s, false))
			continue;
		if (r < 0)
			return done ? (ssize_t)done : -errno;
		if (s->st)
			s->st->tx_tcp += r;
		done += r;
		if (sw_nonblocking(s, flags))
			break;
	}
	return done;
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

	for (;;) {
		msg_advance(msg, done, &m, scratch);
		if (s->state == SW_SAN && !s->ss.dg_sent) {
			r = san_send(s, &m, flags);
			if (r < 0 && done)
				return done;
			if (r == -EPIPE && !(flags & MSG_NOSIGNAL))
				raise(SIGPIPE);
			return r < 0 ? r : (ssize_t)done + r;
		}
		if (!head_tx(s)) {
			/* fell back meanwhile: plain TCP */
			r = sdp_sys.sendmsg(s->fd, &m, flags);
			if (r < 0)
				r = -errno;
			if (r > 0 && s->st)
				s->st->tx_tcp += r;
			if (r < 0 && done)
				return done;
			return r < 0 ? r : (ssize_t)done + r;
		}
		r = sw_hello_send(s, &m, flags);
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
		if (r != -EAGAIN || nb)
			return done ? (ssize_t)done : r;
		pthread_mutex_unlock(&s->lock);
		r = sw_wait_fd_call(s->fd, POLLOUT);
		pthread_mutex_lock(&s->lock);
		if (r < 0 && errno == EINTR &&
		    (done || !sw_intr_restarts(s, false)))
			return done ? (ssize_t)done : -EINTR;
		sw_upgrade_advance(s);
	}
}

ssize_t sw_sendmsg(struct sw_sock *s, const struct msghdr *msg, int flags)
{
	ssize_t r;

	if (flags & MSG_ZEROCOPY)
		sw_zerocopy_send(s);
	if (msg->msg_controllen)
		sw_ts_tx_send(s, msg);
	atomic_fetch_add(&s->users, 1);
	r = sendmsg_do(s, msg, flags);
	atomic_fetch_sub(&s->users, 1);
	if (r == -EAGAIN)
		sw_note_nospace(s);
	return sw_posix(r);
}

void sw_note_nospace(struct sw_sock *s)
{
	atomic_fetch_add_explicit(&s->nospace_seq, 1, memory_order_relaxed);
}

static ssize_t sendmsg_do(struct sw_sock *s, const struct msghdr *msg,
			      int flags)
{
	ssize_t r;
	int e;

	pthread_mutex_lock(&s->lock);
	sw_holders_settle(s);
	sw_reup_maybe(s);
	sw_upgrade_advance(s);
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
				return -EINVAL;
			}
			b = *((uint8_t *)msg->msg_iov[0].iov_base);
			one.iov_base = &b;
			one.iov_len = 1;
			/* the urgent byte follows the bytes sent before it,
			 * those still waiting for credits too */
			sw_lend_settle(s);
			while (s->ptx_len && !s->ss.peer_dead &&
			       !s->ss.error && !s->tcp_eof) {
				if (sw_ptx_flush(s) < 0)
					break;
				if (s->ptx_len)
					sw_session_wait(s, POLLOUT, 0);
			}
			while (!sw_credit_can_send(&s->ss, SDP_MSG_OOB) &&
			       !s->ss.peer_dead && !s->ss.error &&
			       !s->ss.dg_sent && s->state == SW_SAN)
				sw_session_wait(s, POLLOUT, 0);
			if (s->ss.dg_sent || s->state != SW_SAN) {
				/* our DOWNGRADE went meanwhile: the urgent
				 * byte follows the marker on TCP, as TCP's */
				pthread_mutex_unlock(&s->lock);
				return on_tcp(s, sdp_sys.sendmsg(s->fd, msg,
								 flags), true);
			}
			e = sw_send_ctrl(s, SDP_MSG_OOB, NULL, 0, &one, 1, 1);
			pthread_mutex_unlock(&s->lock);
			return e ? -EPIPE : 1;
		}
		r = san_send(s, msg, flags);
		pthread_mutex_unlock(&s->lock);
		if (r == -EPIPE && !(flags & MSG_NOSIGNAL))
			raise(SIGPIPE);
		return r;
	}
	pthread_mutex_unlock(&s->lock);
	return on_tcp(s, sdp_sys.sendmsg(s->fd, msg, flags), true);
}

/*
 * sendfile from a regular file on the SAN, where the peer reads us through
 * the transfer slot: the file's pages are mapped and lent (xslot.h), and
 * the call returns as TCP's does once its buffer holds the pages; the
 * receiver copies them once, when its program reads, as the kernel's
 * sendfile leaves one copy to the receiver. Up to SDP_SENDFILE_LEND bytes
 * from pos. Returns the bytes lent, or 0 (not lent: the caller copies).
 */
static size_t sendfile_lend(struct sw_sock *s, int in_fd, off_t pos,
			    size_t count)
{
	static long page;
	struct stat st;
	size_t len, delta;
	uint8_t *map;
	int r;

	if (!sw_cfg.sendfile_lend || count < sw_cfg.rdma_min)
		return 0;
	if (!page)
		page = sysconf(_SC_PAGESIZE);
	if (fstat(in_fd, &st) || !S_ISREG(st.st_mode) || pos < 0 ||
	    pos >= st.st_size)
		return 0;
	len = count;
	if ((uint64_t)(st.st_size - pos) < len)
		len = st.st_size - pos;
	if (len > sw_cfg.sendfile_lend)
		len = sw_cfg.sendfile_lend;
	if (len < sw_cfg.rdma_min)
		return 0;
	/* counted as a data call: a reader waiting for the lock makes the
	 * wait for the previous lend short */
	atomic_fetch_add(&s->users, 1);
	pthread_mutex_lock(&s->lock);
	/* the previous lend ends first (taken whole, or its rest goes
	 * before these bytes) */
	if (s->state == SW_SAN && s->ss.lend.len && sw_lend_settle(s) < 0)
		goto unlock;
	if (!sw_xslot_can_lend(s))
		goto unlock;
	if (s->ss.lend_backoff) {
		s->ss.lend_backoff--;
		goto unlock;
	}
	/* the flusher looks at the lend while the program may make no call
	 * (without one, no lend) */
	if (sw_flusher_watch_lend(s))
		goto unlock;
	delta = (size_t)(pos % page);
	map = mmap(NULL, len + delta, PROT_READ, MAP_SHARED, in_fd,
		   pos - (off_t)delta);
	if (map == MAP_FAILED)
		goto unlock;
	r = sw_xslot_lend(s, map + delta, len, map, len + delta);
	pthread_mutex_unlock(&s->lock);
	atomic_fetch_sub(&s->users, 1);
	if (r) {
		munmap(map, len + delta);
		return 0;
	}
	return len;
unlock:
	pthread_mutex_unlock(&s->lock);
	atomic_fetch_sub(&s->users, 1);
	return 0;
}

ssize_t sw_sendfile(struct sw_sock *s, int in_fd, off_t *offset, size_t count)
{
	const size_t bufsz = SW_BOUNCE_SIZE;
	uint8_t *buf;
	off_t pos;
	size_t done = 0;

	pthread_mutex_lock(&s->lock);
	sw_upgrade_advance(s);
	if (sw_tx_by_kernel(s)) {
		ssize_t n;

		pthread_mutex_unlock(&s->lock);
		n = sdp_sys.sendfile(s->fd, in_fd, offset, count);
		if (n < 0 && errno == EAGAIN)
			sw_note_nospace(s);
		return n;
	}
	/* the SAN, or TCP bytes the switch counts: copied through sendmsg */
	pthread_mutex_unlock(&s->lock);
	buf = sw_bounce_buf();
	if (!buf)
		return -1;
	pos = offset ? *offset : lseek(in_fd, 0, SEEK_CUR);
	while (done < count) {
		size_t want = count - done < bufsz ? count - done : bufsz;
		size_t lent = sendfile_lend(s, in_fd, pos, count - done);
		struct iovec iov;
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n, w;

		if (lent) {
			done += lent;
			pos += lent;
			continue;
		}
		n = pread(in_fd, buf, want, pos);

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


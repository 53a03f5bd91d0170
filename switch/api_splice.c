/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * api_splice.c - splice(2) with a switch socket on one side and a pipe on
 * the other. The kernel's splice moves the TCP connection's bytes, which
 * are the program's only while the connection is plain TCP: once carried
 * (or while its head holds a hello, a marker or bytes taken while looking
 * for one) TCP holds doorbells and handshake bytes. There the bytes go
 * through the switch's own recvmsg and sendmsg by a bounce buffer: no
 * more leaves the socket than the program's pipe surely takes, and a byte
 * leaves the program's pipe only once the socket took it (a copy made with
 * tee into a pipe of the switch's goes first).
 * POSIX here: -1 and errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fd_budget.h"
#include "log.h"
#include "ownfd.h"
#include "sock.h"
#include "status.h"
#include "sys.h"
#include "upgrade.h"
#include "util.h"
#include "wakeup.h"

/* May the kernel move s's bytes itself? Receiving: plain TCP with nothing
 * of the switch's still to take or deliver first. */
static bool rx_raw(const struct sw_sock *s)
{
	return s->state == SW_TCP && !s->fork_buf && !s->dg_marker &&
	       !s->skip_hello && !s->prefix_len;
}

static bool raw_or_advance(struct sw_sock *s,
			   bool (*raw)(const struct sw_sock *))
{
	bool r;

	pthread_mutex_lock(&s->lock);
	sw_upgrade_advance(s);
	r = raw(s);
	pthread_mutex_unlock(&s->lock);
	return r;
}

/*
 * The switch's own pipes, into which sw_splice_write copies the program's
 * pipe with tee: kept empty between calls, in a few slots any thread takes
 * and gives back with one atomic exchange. A fork's child closes its
 * copies: the same pipe in two processes would mix their bytes. A pipe
 * taken when the fork came stays with that thread, so the parent's own
 * taken pipe goes back to its slot after the fork. Their descriptors are the
 * switch's (ownfd.c): above the program's numbers, close-on-exec, out of
 * reach of its close and dup2. Making one per call cost six system calls
 * and the freeing of a pipe, a sixth of a splicing proxy's time.
 */
struct priv_pipe {
	int fd[2];		/* read, write end; moved by a program's dup2 */
	size_t cap;
};

#define PRIV_KEEP 4
static struct priv_pipe *_Atomic priv_kept[PRIV_KEEP];

/* /dev/null, the switch's: what a splice into it drops off a pipe is not
 * copied. -1 when it cannot be opened (then the bytes are read). */
static int null_fd = -1;
static pthread_once_t null_once = PTHREAD_ONCE_INIT;

static void null_open(void)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (fd >= 0)
		sw_fd_own_at(fd, &null_fd);
}

static void priv_free(struct priv_pipe *p)
{
	int i;

	for (i = 0; i < 2; i++) {
		int fd = __atomic_load_n(&p->fd[i], __ATOMIC_ACQUIRE);

		sw_fd_forget(fd);
		sdp_sys.close(fd);
	}
	free(p);
}

/* The descriptor of an end, as the program's dup2 may have moved it. */
static int priv_fd(struct priv_pipe *p, int end)
{
	return __atomic_load_n(&p->fd[end], __ATOMIC_ACQUIRE);
}

/* An empty pipe of the switch's holding at least want bytes when the
 * system allows (its capacity in ->cap), or NULL with errno. */
static struct priv_pipe *priv_take(size_t want)
{
	struct priv_pipe *p = NULL;
	int fds[2], i, c;

	for (i = 0; i < PRIV_KEEP && !p; i++)
		p = atomic_exchange(&priv_kept[i], NULL);
	if (!p) {
		/* its two descriptors, outside the program's reserve */
		if (!sw_fd_may_open(2)) {
			errno = ENOMEM;
			return NULL;
		}
		p = calloc(1, sizeof(*p));
		if (!p)
			return NULL;
		if (pipe2(fds, O_CLOEXEC | O_NONBLOCK)) {
			free(p);
			return NULL;
		}
		for (i = 0; i < 2; i++)
			sw_fd_own_at(fds[i], &p->fd[i]);
		c = sdp_sys.fcntl(priv_fd(p, 1), F_GETPIPE_SZ);
		p->cap = c > 0 ? (size_t)c : 4096;
	}
	/* as large as the program's pipe (a tee takes no more than it
	 * holds), within the bounce buffer; no larger, for a pipe's pages
	 * count against the user's share (pipe-user-pages-soft) */
	if (want > SW_BOUNCE_SIZE)
		want = SW_BOUNCE_SIZE;
	if (p->cap < want) {
		c = sdp_sys.fcntl(priv_fd(p, 1), F_SETPIPE_SZ, want);
		if (c > 0)
			p->cap = (size_t)c;
	}
	return p;
}

void sw_splice_atfork_child(void)
{
	int i;

	for (i = 0; i < PRIV_KEEP; i++) {
		struct priv_pipe *p = atomic_exchange(&priv_kept[i], NULL);

		if (p)
			priv_free(p);
	}
}

/* Gives back p, empty: kept for the next call, or closed (errno kept). */
static void priv_give(struct priv_pipe *p)
{
	struct priv_pipe *none;
	int e = errno, i;

	for (i = 0; i < PRIV_KEEP; i++) {
		none = NULL;
		if (atomic_compare_exchange_strong(&priv_kept[i], &none, p)) {
			errno = e;
			return;
		}
	}
	priv_free(p);
	errno = e;
}

/* Takes n bytes off the front of pipe fd and drops them: spliced into
 * /dev/null (no copy) or, without it, read into buf (n at most
 * SW_BOUNCE_SIZE). The bytes taken. */
static size_t pipe_drop(int fd, size_t n, uint8_t *buf)
{
	size_t got = 0;
	int nfd;

	pthread_once(&null_once, null_open);
	nfd = __atomic_load_n(&null_fd, __ATOMIC_ACQUIRE);
	while (nfd >= 0 && got < n) {
		ssize_t r = sdp_sys.splice(fd, NULL, nfd, NULL, n - got,
					   SPLICE_F_NONBLOCK);

		if (r <= 0)
			break;
		got += r;
	}
	while (got < n) {
		ssize_t r = sdp_sys.read(fd, buf, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += r;
	}
	return got;
}

/*
 * How many bytes pipe fd surely takes now, or -1 (EINVAL: not a pipe). A
 * pipe is a ring of page-sized slots; each slot in use holds at least a
 * byte, so at least (slots - bytes in it) slots are free, and a write
 * fills each new slot with a full page; a pipe the kernel calls writable
 * has at least one free slot. An empty pipe takes its capacity.
 */
static long pipe_sure_room(int fd)
{
	long page = sysconf(_SC_PAGESIZE);
	int cap = sdp_sys.fcntl(fd, F_GETPIPE_SZ), used = 0;
	struct pollfd pf = { .fd = fd, .events = POLLOUT };
	long slots;

	if (cap < 0 || ioctl(fd, FIONREAD, &used) < 0) {
		errno = EINVAL;
		return -1;
	}
	slots = cap / page;
	if (used < slots)
		return (slots - used) * page;
	return sdp_sys.poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT) ?
	       page : 0;
}

/* Writes all of buf to pipe fd, waiting for room if another writer took
 * it meanwhile. 0 or -1. */
static int pipe_write_all(int fd, const uint8_t *buf, size_t n)
{
	while (n) {
		ssize_t w = sdp_sys.write(fd, buf, n);

		if (w < 0 && errno == EAGAIN) {
			if (sw_wait_fd_call(fd, POLLOUT) && errno != EINTR)
				return -1;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		buf += w;
		n -= w;
	}
	return 0;
}

/*
 * socket -> pipe. No more is taken from the stream than the program's
 * pipe surely has room for (pipe_sure_room): a write of that many bytes
 * fills whole free slots and never waits, so the pipe takes every byte
 * taken. A pipe without a reader is refused before a byte is taken (EPIPE,
 * SIGPIPE, as splice); one whose reader goes away in between loses what
 * was taken, and the log says so.
 */
ssize_t sw_splice_read(struct sw_sock *s, int pipe_fd, size_t len,
		       unsigned int flags)
{
	struct iovec iov;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct pollfd pf = { .fd = pipe_fd, .events = POLLOUT };
	uint8_t *buf;
	long room;
	ssize_t n;

	if (raw_or_advance(s, rx_raw))
		return sdp_sys.splice(s->fd, NULL, pipe_fd, NULL, len, flags);
	if (!len)
		return 0;
	buf = sw_bounce_buf();
	if (!buf)
		return -1;
	while ((room = pipe_sure_room(pipe_fd)) == 0) {
		if (flags & SPLICE_F_NONBLOCK) {
			errno = EAGAIN;
			return -1;
		}
		/* a handler interrupted the wait for room: the kernel's
		 * splice restarts under SA_RESTART, else fails */
		if (sw_wait_fd_call(pipe_fd, POLLOUT) &&
		    (errno != EINTR || !sw_intr_restarts(s, true)))
			return -1;
	}
	if (room < 0)
		return -1;
	if (sdp_sys.poll(&pf, 1, 0) == 1 && (pf.revents & POLLERR)) {
		raise(SIGPIPE);
		errno = EPIPE;
		return -1;
	}
	iov.iov_base = buf;
	iov.iov_len = len < (size_t)room ? len : (size_t)room;
	if (iov.iov_len > SW_BOUNCE_SIZE)
		iov.iov_len = SW_BOUNCE_SIZE;
	n = sw_recvmsg(s, &m, 0);
	if (n > 0 && pipe_write_all(pipe_fd, buf, n)) {
		SW_ERR("fd %d: splice: %zd bytes of the stream taken for a pipe that failed: %s",
		       s->fd, n, strerror(errno));
		return -1;
	}
	return n;
}

/*
 * pipe -> socket. The program's pipe is copied with tee into a pipe of the
 * switch's (nothing taken), read, and sent; then as many bytes as the
 * socket took are read off the program's pipe: a non-blocking socket that
 * takes part of them leaves the rest in the pipe, as splice does.
 */
ssize_t sw_splice_write(struct sw_sock *s, int pipe_fd, size_t len,
			unsigned int flags)
{
	struct iovec iov;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	int mflags = (flags & SPLICE_F_MORE) ? MSG_MORE : 0, pcap;
	struct priv_pipe *priv;
	size_t got = 0;
	uint8_t *buf;
	ssize_t n, w;

	if (raw_or_advance(s, sw_tx_by_kernel)) {
		n = sdp_sys.splice(pipe_fd, NULL, s->fd, NULL, len, flags);
		if (n < 0 && errno == EAGAIN)
			sw_note_nospace(s);
		return n;
	}
	if (!len)
		return 0;
	buf = sw_bounce_buf();
	if (!buf)
		return -1;
	pcap = sdp_sys.fcntl(pipe_fd, F_GETPIPE_SZ);
	if (pcap < 0) {
		/* an open file that is not a pipe: splice says EINVAL */
		if (errno == EBADF && sdp_sys.fcntl(pipe_fd, F_GETFD) >= 0)
			errno = EINVAL;
		return -1;
	}
	priv = priv_take(len < (size_t)pcap ? len : (size_t)pcap);
	if (!priv) {
		if (errno == ENOMEM)
			SW_WARN("fd %d: splice: no descriptor to spare below RLIMIT_NOFILE, or no memory: ENOMEM",
				s->fd);
		return -1;
	}
	/* the private pipe is non-blocking: a blocking call waits for the
	 * program's pipe to have bytes (or no writer) itself */
	for (;;) {
		n = tee(pipe_fd, priv_fd(priv, 1),
			len < priv->cap ? len : priv->cap, SPLICE_F_NONBLOCK);
		if (n >= 0 || (errno == EAGAIN && (flags & SPLICE_F_NONBLOCK)))
			break;
		if (errno == EAGAIN && !sw_wait_fd_call(pipe_fd, POLLIN))
			continue;
		/* a handler interrupted the wait for bytes: as above */
		if (errno != EINTR || !sw_intr_restarts(s, false))
			break;
	}
	while (n > 0 && got < (size_t)n) {
		ssize_t r = sdp_sys.read(priv_fd(priv, 0), buf + got, n - got);

		if (r <= 0) {
			/* bytes may be left in it: not kept */
			priv_free(priv);
			priv = NULL;
			n = -1;
			break;
		}
		got += r;
	}
	if (priv)
		priv_give(priv);
	if (n <= 0)
		return n;
	iov.iov_base = buf;
	iov.iov_len = n;
	w = sw_sendmsg(s, &m, mflags);
	if (w <= 0)
		return w;
	/* off the program's pipe: the bytes the socket took */
	got = pipe_drop(pipe_fd, w, buf);
	if (got < (size_t)w)
		SW_ERR("fd %d: splice: %zu sent bytes could not be taken off the pipe",
		       s->fd, (size_t)w - got);
	return w;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_exec.c - fork and exec: every SAN connection returns to TCP first
 * (downgrade.c), with bytes that had arrived on the SAN kept in a buffer
 * parent and child share; after exec, the peer's hello still to drop.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "credits.h"
#include "downgrade.h"
#include "exec_reup.h"
#include "fallback.h"
#include "flusher.h"
#include "fork_exec.h"
#include "hello_token.h"
#include "holders.h"
#include "log.h"
#include "ownfd.h"
#include "sdp_switch.h"
#include "session_msg.h"
#include "session_rx.h"
#include "sock.h"
#include "sys.h"
#include "tcp_inband.h"
#include "upgrade.h"
#include "util.h"
#include "wakeup.h"
#include "wire.h"

/* How downgrade_list keeps the unread bytes: not at all (given to the
 * program's next read first), in a buffer a forked child shares, or in one
 * the program exec'd maps. */
enum dg_capture { DG_KEEP, DG_FORK, DG_EXEC };

static void downgrade_every(enum dg_capture capture);

/* The connections kept for the child across this fork (holders.c), a
 * reference each; the fork's handlers run in one thread. */
static struct sw_sock **parked;
static int nparked;

/* Pending upgrades are kept for the process that will hold the connection
 * alone (holders.c); the others, and carried connections, return to TCP
 * first, so the kernel shares them as it shares any socket. */
void sw_atfork_prepare(void)
{
	struct sw_sock **v;
	int n = sw_sock_list(&v), i;

	nparked = 0;
	parked = n ? calloc(n, sizeof(*parked)) : NULL;
	for (i = 0; i < n; i++) {
		struct sw_sock *s = v[i];

		bool kept;

		pthread_mutex_lock(&s->lock);
		/* an upgrade a few steps from done is finished first, to be
		 * downgraded and kept as a carried connection, rather than
		 * given up for good */
		if (sw_pending(s) && s->ss.ep)
			sw_upgrade_finish_near(s, true);
		kept = parked && !s->closed && sw_holders_park(s);
		pthread_mutex_unlock(&s->lock);
		if (kept)
			parked[nparked++] = s;
		else
			sw_sock_unref(s);
	}
	free(v);
	sw_downgrade_all(true);
}

static void parked_done(bool child)
{
	int i;

	for (i = 0; i < nparked; i++) {
		if (child)
			sw_holders_child(parked[i]);
		sw_sock_unref(parked[i]);
	}
	free(parked);
	parked = NULL;
	nparked = 0;
}

void sw_atfork_parent(void)
{
	parked_done(false);
}

void sw_atfork_child(void)
{
	sw_wake_atfork_child();
	sw_splice_atfork_child();
	sw_stats_after_fork_child();
	sw_sock_child_stats();
	parked_done(true);
}

char *sw_before_exec(void)
{
	struct sw_sock **v;
	int n, i;

	/* connections the program closed with bytes still to go: they end
	 * with this program's address space (bounded wait) */
	sw_flusher_before_exec();
	n = sw_sock_list(&v);
	/* an upgrade under way that the new program may take on; a kept
	 * connection: the new program's (cut, below) or the old's */
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&v[i]->lock);
		sw_exec_keep_pending(v[i]);
		sw_holders_exec(v[i]);
		pthread_mutex_unlock(&v[i]->lock);
		sw_sock_unref(v[i]);
	}
	free(v);
	/* the bytes that came on the SAN and were not read yet go to the
	 * new program in a memory file it maps (sw_sock_inherit_bytes) */
	downgrade_every(DG_EXEC);
	sw_hello_fence_exec();
	return sw_exec_hello_skips();
}

/*
 * A signal handler that calls _exit (async-signal-safe, where exit is
 * not) may have interrupted this thread anywhere, inside malloc too, and
 * the settle allocates and frees: it is not run there. The program's
 * handlers of asynchronous signals are counted by the shim's trampoline;
 * a fault's handler (SIGSEGV, ...) runs with its signal blocked.
 */
static bool in_handler(void)
{
	static const int faults[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE,
				      SIGABRT, SIGTRAP, SIGSYS };
	sigset_t cur;
	size_t i;

	if (sdp_in_handler)
		return true;
	if (pthread_sigmask(SIG_BLOCK, NULL, &cur))
		return true;
	for (i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		if (sigismember(&cur, faults[i]) == 1)
			return true;
	return false;
}

void sw_before_exit(void)
{
	/* (no log line there either: stdio is no safer in a handler) */
	if (in_handler())
		return;
	sw_flusher_before_exit();
	sw_markers_settle();
}

void sw_fork_buf_init(struct sw_fork_buf *fb, size_t map_len, size_t len)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&fb->lock, &a);
	pthread_mutexattr_destroy(&a);
	fb->map_len = map_len;
	fb->off = 0;
	fb->len = len;
}

void sw_fork_buf_move(struct sw_sock *s, struct sw_fork_buf *nb)
{
	struct sw_fork_buf *old = s->fork_buf;

	if (old) {
		memcpy(nb->data, old->data + old->off, nb->len);
		old->off = old->len;
		pthread_mutex_unlock(&old->lock);
		munmap(old, old->map_len);
	}
	s->fork_buf = nb;
}

ssize_t sw_fork_buf_read(struct sw_sock *s, struct msghdr *msg, int flags)
{
	struct sw_fork_buf *fb = s->fork_buf;
	size_t got = 0, i, avail;

	pthread_mutex_lock(&fb->lock);
	avail = fb->len - fb->off;
	for (i = 0; i < msg->msg_iovlen && got < avail; i++) {
		size_t n = msg->msg_iov[i].iov_len;

		if (n > avail - got)
			n = avail - got;
		memcpy(msg->msg_iov[i].iov_base, fb->data + fb->off + got, n);
		got += n;
	}
	if (!(flags & MSG_PEEK))
		fb->off += got;
	pthread_mutex_unlock(&fb->lock);
	return got;
}

/*
 * Reads the len bytes the peer sent on TCP before its switch point into
 * buf. They were all sent before its SWITCH, but not all need be here yet:
 * TCP's window holds the rest back until the first are read. The program's
 * socket may be non-blocking, so each read takes what is here and a poll
 * waits for more, up to DG_TIMEOUT_NS. Returns the bytes read (len unless
 * the connection ended or the peer stopped sending).
 */
static size_t head_read_all(struct sw_sock *s, uint8_t *buf, size_t len)
{
	uint64_t end = sw_now_ns() + DG_TIMEOUT_NS;
	size_t got = 0;

	while (got < len) {
		ssize_t n = sdp_sys.recv(s->fd, buf + got, len - got,
					 MSG_DONTWAIT);

		if (n > 0) {
			got += n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
		    sw_now_ns() < end) {
			sw_wait_fd(s->fd, POLLIN, 10);
			continue;
		}
		break;
	}
	return got;
}

/* The peer's bytes taken off the SAN while its DOWNGRADE is awaited
 * (downgrade_list), in arrival order. */
struct dg_held {
	uint8_t *buf;
	size_t len, cap;
};

/*
 * Takes what has come on the SAN and was not read (up to the peer's
 * DOWNGRADE) into h, so that the receive buffers holding it are posted
 * again and returned to the peer: a peer held by its credits can send
 * the rest of its data and its DOWNGRADE only once its bytes here are
 * taken, and the program that stopped reading will not take them.
 */
static void hold_rx(struct sw_sock *s, struct dg_held *h)
{
	struct sw_session *ss = &s->ss;
	struct iovec iov;
	ssize_t n;

	while (s->state == SW_SAN && ss->rx_queued) {
		if (h->len + ss->rx_queued > h->cap) {
			size_t cap = h->cap ? h->cap : 65536;
			uint8_t *p;

			while (cap < h->len + ss->rx_queued)
				cap *= 2;
			p = realloc(h->buf, cap);
			if (!p)
				return;	/* taken at the end, if at all */
			h->buf = p;
			h->cap = cap;
		}
		iov.iov_base = h->buf + h->len;
		iov.iov_len = ss->rx_queued;
		n = sw_session_recv(s, &iov, 1, MSG_DONTWAIT);
		if (n <= 0)
			return;
		h->len += n;
	}
}

/* Before an exec: a memfd of map_len bytes for the buffer, which the new
 * program maps (sw_sock_inherit_bytes), or -1 (the bytes then stay with
 * this program only: logged). */
static int exec_buf_fd(struct sw_sock *s, size_t map_len)
{
	int fd, own;

	if (!sw_fsize_room(map_len)) {
		SW_WARN("fd %d: RLIMIT_FSIZE leaves no room for the %zu bytes read on the SAN and not yet by the program: the program exec'd will not see them",
			s->fd, map_len);
		return -1;
	}
	fd = memfd_create("sdp-exec-bytes", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)map_len)) {
		SW_WARN("fd %d: no memory file for the %zu bytes read on the SAN and not yet by the program (%s): the program exec'd will not see them",
			s->fd, map_len, strerror(errno));
		if (fd >= 0)
			sdp_sys.close(fd);
		return -1;
	}
	own = sw_fd_own(fd, NULL);
	return own >= 0 ? own : fd;
}

/* Moves the unread bytes of s into a buffer parent and child share (or,
 * before an exec, the new program): those an earlier fork set aside and
 * the program has not read (the peer did not answer that one in time),
 * the peer's bytes still on TCP before its switch point, then those that
 * came on the SAN (taken before, in h, then what is left). */
static int capture_rx(struct sw_sock *s, struct dg_held *h, bool exec)
{
	struct sw_session *ss = &s->ss;
	struct sw_fork_buf *old = s->fork_buf;
	size_t head = s->rx_san ? 0 : s->tcp_rx_limit - s->tcp_rx;
	size_t prev, len, map_len;
	struct sw_fork_buf *fb;
	struct iovec iov;
	ssize_t n;
	int mfd = -1;

	if (old)
		pthread_mutex_lock(&old->lock);
	prev = old ? old->len - old->off : 0;
	len = prev + head + h->len + ss->rx_queued;
	if (!len) {
		if (old)
			pthread_mutex_unlock(&old->lock);
		return 0;
	}
	map_len = sizeof(*fb) + len;
	if (exec)
		mfd = exec_buf_fd(s, map_len);
	fb = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
		  MAP_SHARED | (mfd < 0 ? MAP_ANONYMOUS : 0), mfd, 0);
	if (fb == MAP_FAILED) {
		if (mfd >= 0) {
			sw_fd_forget(mfd);
			sdp_sys.close(mfd);
		}
		if (old)
			pthread_mutex_unlock(&old->lock);
		return -ENOMEM;
	}
	sw_fork_buf_init(fb, map_len, prev);
	if (old) {
		/* the earlier buffer's bytes first; it goes (and the
		 * memory file behind it, if any). The new one is the
		 * socket's only once filled: the reads below must not
		 * take from it */
		sw_fork_buf_move(s, fb);	/* unlocks, unmaps old */
		s->fork_buf = NULL;
		if (s->exec_buf_fd >= 0) {
			sw_fd_forget(s->exec_buf_fd);
			sdp_sys.close(s->exec_buf_fd);
		}
	}
	s->exec_buf_fd = mfd;
	if (head) {
		size_t got = head_read_all(s, fb->data + fb->len, head);

		/* what was read is kept, whatever came of the rest */
		fb->len += got;
		s->tcp_rx += got;
		if (s->st)
			s->st->rx_tcp += got;
		if (got < head)
			SW_ERR("fd %d: %zu of the peer's %zu bytes before its switch point did not come on TCP within %llu ms (the connection ended, or the peer stopped): they are lost",
			       s->fd, head - got, head,
			       DG_TIMEOUT_NS / 1000000ull);
	}
	s->rx_san = true;
	if (h->len)
		memcpy(fb->data + fb->len, h->buf, h->len);
	fb->len += h->len;
	while (ss->rx_queued && fb->len < len) {
		iov.iov_base = fb->data + fb->len;
		iov.iov_len = len - fb->len;
		n = sw_session_recv(s, &iov, 1, MSG_DONTWAIT);
		if (n <= 0)
			break;
		fb->len += n;
	}
	fb->off = 0;
	s->fork_buf = fb;
	return 0;
}

/* Returns the n connections of v to TCP, a reference each, dropped. */
static void downgrade_list(struct sw_sock **v, int n, enum dg_capture capture)
{
	uint64_t deadline = sw_now_ns() + DG_TIMEOUT_NS;
	struct dg_held *held = calloc(n, sizeof(*held));
	int i, busy;

	/* pending upgrades: given up where nothing is lost by it, else
	 * (a committed server) finished; both ends may be in this process,
	 * so every socket moves on in each round */
	do {
		busy = 0;
		for (i = 0; i < n; i++) {
			struct sw_sock *s = v[i];

			pthread_mutex_lock(&s->lock);
			if (s->holders) {
				/* kept for the child (sw_atfork_prepare) */
			} else if (sw_pending(s) && sw_upgrade_cut(s)) {
				sw_upgrade_progress(s);
				if (sw_pending(s) && sw_now_ns() > deadline) {
					SW_WARN("fd %d: the client did not answer the upgrade before fork or exec; staying on TCP (what it sends to the provider later is lost)",
						s->fd);
					sw_fallback(s, SDP_FB_TIMEOUT,
						    "no SWITCH from the client");
				} else if (sw_pending(s)) {
					busy++;
				}
			}
			pthread_mutex_unlock(&s->lock);
		}
	} while (busy);

	/* our data to TCP; then wait for the peers' */
	deadline = sw_now_ns() + DG_TIMEOUT_NS;
	do {
		busy = 0;
		for (i = 0; i < n; i++) {
			struct sw_sock *s = v[i];

			pthread_mutex_lock(&s->lock);
			if (s->state == SW_SAN && !s->closed) {
				sw_progress(s);
				if (!s->ss.dg_sent)
					sw_downgrade_start(s);
				sw_doorbell_drain(s);
				sw_progress(s);
				/* the peer's bytes before its DOWNGRADE hold
				 * our buffers: taken, the credits go back */
				if (capture && held) {
					s->rx_held = true;
					s->rx_held_by = pthread_self();
					hold_rx(s, &held[i]);
				}
				if (s->state == SW_SAN && !s->ss.dg_rcvd &&
				    !s->ss.peer_dead && !s->tcp_eof &&
				    !s->ss.error)
					busy++;
			}
			pthread_mutex_unlock(&s->lock);
		}
		if (busy && sw_now_ns() > deadline) {
			SW_WARN("%d connection(s) did not return to TCP before fork/exec: their peers did not answer",
				busy);
			break;
		}
		/* the peers answer on their CPU: on a loaded machine a
		 * spin here can hold one of them off (a sleep of the
		 * kernel's slack, not a wait for an event) */
		if (busy)
			usleep(100);
	} while (busy);

	/* unread SAN bytes into shared buffers, then TCP for good */
	for (i = 0; i < n; i++) {
		struct dg_held none = { NULL, 0, 0 };
		struct sw_sock *s = v[i];

		pthread_mutex_lock(&s->lock);
		if (s->state == SW_SAN && s->ss.dg_rcvd) {
			if (capture != DG_KEEP)
				capture_rx(s, held ? &held[i] : &none,
					   capture == DG_EXEC);
			sw_credit_maybe_update(s);
			sw_downgrade_rx_point(s);
			if (s->state == SW_TCP)
				sw_dg_marker_skip(s, true);
		} else if (held && held[i].len) {
			/* the peer never answered: what was taken comes
			 * first all the same, on the SAN as on TCP
			 * (sw_session_recv reads the buffer first) */
			capture_rx(s, &held[i], capture == DG_EXEC);
		}
		/* another thread's read may wait for this, on the SAN */
		s->rx_held = false;
		sw_event(s);
		pthread_mutex_unlock(&s->lock);
		if (held)
			free(held[i].buf);
		sw_sock_unref(s);
	}
	free(held);
}

/* Returns every managed connection to TCP (before fork or exec). */
static void downgrade_every(enum dg_capture capture)
{
	struct sw_sock **v;
	int n = sw_sock_list(&v);

	downgrade_list(v, n, capture);
	free(v);
}

void sw_downgrade_all(bool capture)
{
	downgrade_every(capture ? DG_FORK : DG_KEEP);
}

void sw_downgrade_one(struct sw_sock *s)
{
	sw_sock_ref(s);
	downgrade_list(&s, 1, DG_FORK);
}

/*
 * Before exec: a connection that fell back before the peer's hello came
 * (a server that forked right after accept, as sshd does, before its
 * client wrote) still has that hello to drop (sw_hello_skip). The new
 * program must not read it: what is here is dropped now; for the rest, the
 * new program's switch is told through its environment, as
 * SW_EXEC_ENV=FD:INO:GOT,... (GOT: bytes of the hello already dropped), and
 * drops it there (sw_sock_inherit). The socket is the inode: FD is only
 * one of its numbers here, and the new program manages every fd that
 * names that inode (shim_inherit). Returns that entry (malloc'd) or NULL.
 */
static bool env_add(char **env, size_t *len, size_t *cap, const char *item,
		    int k)
{
	if (*len + k + 1 > *cap) {
		char *ne = realloc(*env, *cap + 4096);

		if (!ne)
			return false;
		*env = ne;
		*cap += 4096;
	}
	memcpy(*env + *len, item, k + 1);
	*len += k;
	return true;
}

char *sw_exec_hello_skips(void)
{
	struct sw_sock **v;
	int n = sw_sock_list(&v), i;
	size_t len = 0, cap = 0;
	char *env = NULL;

	for (i = 0; i < n; i++) {
		struct sw_sock *s = v[i];
		struct stat sb, mb;
		bool made = false;
		char item[192];
		int k;

		pthread_mutex_lock(&s->lock);
		if (s->state == SW_TCP && !s->closed && s->skip_hello)
			sw_hello_skip(s, false);
		if (s->state == SW_TCP && !s->closed && s->skip_hello &&
		    !fstat(s->fd, &sb)) {
			k = snprintf(item, sizeof(item), "%s%d:%llu:%zu",
				     len ? "," : SW_EXEC_ENV "=", s->fd,
				     (unsigned long long)sb.st_ino,
				     s->hello_got);
			env_add(&env, &len, &cap, item, k);
		}
		/* back on TCP, to be upgraded again, or its upgrade under
		 * way: the new program's switch is given what that needs
		 * (exec_reup.c) */
		if (s->exec_item[0])
			k = snprintf(item, sizeof(item), "%s%s",
				     len ? "," : SW_EXEC_ENV "=", s->exec_item);
		else
			k = sw_exec_reup_item(s, item, sizeof(item),
					      len ? "," : SW_EXEC_ENV "=");
		if (k > 0) {
			made = true;
			if (!env_add(&env, &len, &cap, item, k))
				k = -ENOMEM;
		}
		if (k < 0) {
			SW_WARN("fd %d: the program exec'd cannot be given what it needs to upgrade the connection again (%s): it stays on TCP",
				s->fd, strerror(-k));
			/* nor may another holder: the new program uses it */
			sw_holders_cut(s);
			s->reup_never = true;
		}
		if (!made && s->state == SW_TCP && !s->closed &&
		    s->exec_buf_fd >= 0 && sw_fork_buf_unread(s) &&
		    !fstat(s->fd, &sb) && !fstat(s->exec_buf_fd, &mb)) {
			/* FD:INO:bMEMFD:MINO: bytes to read first */
			k = snprintf(item, sizeof(item), "%s%d:%llu:b%d:%llu",
				     len ? "," : SW_EXEC_ENV "=", s->fd,
				     (unsigned long long)sb.st_ino,
				     s->exec_buf_fd,
				     (unsigned long long)mb.st_ino);
			if (env_add(&env, &len, &cap, item, k) &&
			    !sdp_sys.fcntl(s->exec_buf_fd, F_SETFD, 0))
				SW_DBG("fd %d: %zu byte(s) read on the SAN go to the program exec'd",
				       s->fd, sw_fork_buf_left(s));
		}
		if (s->prefix_len > s->prefix_off)
			SW_WARN("fd %d: %zu byte(s) taken while looking for a hello are lost to the program exec'd",
				s->fd, s->prefix_len - s->prefix_off);
		pthread_mutex_unlock(&s->lock);
		sw_sock_unref(s);
	}
	free(v);
	return env;
}

struct sw_sock *sw_sock_inherit(int fd, unsigned long long ino, size_t got)
{
	struct sw_sock *s;
	struct stat sb;

	if (fstat(fd, &sb) || !S_ISSOCK(sb.st_mode) || sb.st_ino != ino ||
	    got >= sizeof(struct sdp_hello) || (got && got < SDP_MAGIC_LEN))
		return NULL;
	s = sw_sock_new(fd, SW_TCP);
	if (!s)
		return NULL;
	s->skip_hello = true;
	s->exec_skip = true;
	/* the bytes dropped before exec: the magic, then the rest */
	memcpy(s->hello_buf, SDP_HELLO_MAGIC, SDP_MAGIC_LEN);
	s->hello_got = got;
	sw_fallback_inherited(s, SDP_FB_CUT);
	SW_DBG("fd %d: inherited across exec with %zu byte(s) of the peer's hello still to drop",
	       fd, sizeof(struct sdp_hello) - got);
	return s;
}

struct sw_sock *sw_sock_inherit_bytes(int fd, unsigned long long ino,
				      int mfd, unsigned long long mino)
{
	struct sw_fork_buf *fb;
	struct sw_sock *s;
	struct stat sb, mb;

	if (fstat(fd, &sb) || !S_ISSOCK(sb.st_mode) || sb.st_ino != ino ||
	    fstat(mfd, &mb) || !S_ISREG(mb.st_mode) || mb.st_ino != mino ||
	    mb.st_size < (off_t)sizeof(*fb))
		return NULL;
	fb = mmap(NULL, (size_t)mb.st_size, PROT_READ | PROT_WRITE,
		  MAP_SHARED, mfd, 0);
	if (fb == MAP_FAILED)
		return NULL;
	/* written by the previous program's switch in this process */
	if (fb->map_len != (size_t)mb.st_size ||
	    fb->len > fb->map_len - sizeof(*fb) || fb->off > fb->len) {
		munmap(fb, (size_t)mb.st_size);
		return NULL;
	}
	s = sw_sock_new(fd, SW_TCP);
	if (!s) {
		munmap(fb, (size_t)mb.st_size);
		return NULL;
	}
	s->fork_buf = fb;
	s->exec_skip = true;	/* let go once the bytes are read */
	sw_fallback_inherited(s, SDP_FB_CUT);
	SW_DBG("fd %d: inherited across exec with %zu byte(s) read on the SAN before it",
	       fd, fb->len - fb->off);
	return s;
}

/* Set before the process enters a seccomp sandbox (sw_before_sandbox). */
static atomic_bool stepped_aside;

bool sw_stepped_aside(void)
{
	return atomic_load(&stepped_aside);
}

void sw_before_sandbox(void)
{
	struct sw_sock **v;
	char *skips;
	int n = sw_sock_list(&v), i;

	atomic_store(&stepped_aside, true);
	/* nothing is logged from here on: a program about to enter a
	 * sandbox may have made its files unwritable already (sshd sets
	 * RLIMIT_FSIZE to 0, and a write to the log file would kill it with
	 * SIGXFSZ), and the filter may forbid what the log does */
	sw_cfg.log_level = -1;
	/* nor is /proc read to see if the CPU is crowded (spin.h): the
	 * filter may kill for an open */
	sw_cfg.crowd_pct = 0;
	/* a kept upgrade is another holder's, once this process is gone:
	 * it does its I/O on TCP meanwhile, past the switch */
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&v[i]->lock);
		sw_holders_stand_by(v[i]);
		pthread_mutex_unlock(&v[i]->lock);
		sw_sock_unref(v[i]);
	}
	free(v);
	/* the same return to TCP as before a fork; the peers' hellos that
	 * are here dropped now */
	sw_downgrade_all(true);
	skips = sw_exec_hello_skips();
	free(skips);
}

bool sw_send_by_kernel(struct sw_sock *s)
{
	bool plain;

	if (!atomic_load(&stepped_aside))
		return false;
	pthread_mutex_lock(&s->lock);
	plain = s->state == SW_TCP && !s->closed;
	pthread_mutex_unlock(&s->lock);
	return plain;
}

bool sw_sock_inherit_done(struct sw_sock *s)
{
	bool done;

	if (!s->exec_skip && !atomic_load(&stepped_aside))
		return false;
	pthread_mutex_lock(&s->lock);
	done = s->state == SW_TCP && !s->skip_hello && !s->prefix_len &&
	       !s->dg_marker && !s->holders && !s->closed &&
	       !sw_fork_buf_unread(s);
	pthread_mutex_unlock(&s->lock);
	return done;
}

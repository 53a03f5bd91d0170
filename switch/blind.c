/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * blind.c - I/O the switch cannot see: once the process has an io_uring
 * instance no new connection is carried and carried ones return to TCP
 * (DESIGN.md section 4, "sight"; docs/semantics.md "I/O around libc").
 * One connection leaves the SAN the same way when its I/O may go through
 * stdio, or when its program asks for what only the kernel's socket gives
 * (MSG_ZEROCOPY's completions).
 */
#include <dirent.h>
#include <linux/net_tstamp.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blind.h"
#include "config.h"
#include "fallback.h"
#include "fork_exec.h"
#include "hello_token.h"
#include "upgrade.h"
#include "log.h"
#include "reupgrade.h"
#include "sock.h"
#include "upgrade_turns.h"
#include "util.h"
#include "wire.h"

static atomic_bool blind;
static atomic_bool blind_done;
static _Atomic uint64_t last_scan_ns;
static pthread_mutex_t blind_lock = PTHREAD_MUTEX_INITIALIZER;

bool sw_blind(void)
{
	return atomic_load_explicit(&blind, memory_order_acquire);
}

/* Every listener stops announcing itself to providers: a client that
 * probes now sees no switch here and sends no hello. */
static void listeners_quiet(void)
{
	struct sw_sock **v;
	int n = sw_sock_list(&v), i;

	for (i = 0; i < n; i++) {
		struct sw_sock *s = v[i];

		pthread_mutex_lock(&s->lock);
		if (s->state == SW_LISTENER) {
			int k;

			for (k = 0; k < SW_MAX_PROVIDERS; k++)
				if (s->plisten[k])
					s->quiet_ns = sw_now_ns();
			sw_listeners_close(s);
			s->rule_tcp = true;
		}
		pthread_mutex_unlock(&s->lock);
		sw_sock_unref(s);
	}
	free(v);
}

void sw_blind_set(const char *why)
{
	char *skips;

	if (sw_blind())
		return;
	pthread_mutex_lock(&blind_lock);
	if (atomic_load(&blind_done)) {
		pthread_mutex_unlock(&blind_lock);
		return;
	}
	/* first the flag: no upgrade begins from here on */
	atomic_store_explicit(&blind, true, memory_order_release);
	SW_INFO("%s: this process does I/O the switch cannot see (io_uring); its connections stay on or return to plain TCP: %s",
		why, sdp_fallback_name(SDP_FB_BLIND));
	listeners_quiet();
	/* the same return to TCP as before exec: both directions at the
	 * byte where the SAN stopped, bytes that came on the SAN kept for
	 * the program's next read, and the peers' hellos that are here
	 * dropped now */
	sw_downgrade_all(true);
	skips = sw_exec_hello_skips();
	free(skips);
	/* and the clients' hellos still to come: none after this, and those
	 * under way taken before the ring can read them */
	sw_hello_fence();
	atomic_store(&blind_done, true);
	pthread_mutex_unlock(&blind_lock);
}

/* fd, or another of the process's fds 0, 1 and 2, names the socket fd
 * names (true when it cannot be told). */
static bool on_std(int fd)
{
	struct stat sb, ob;
	int i;

	if (fstat(fd, &sb))
		return true;
	for (i = 0; i <= 2; i++)
		if (i != fd && !fstat(i, &ob) && ob.st_ino == sb.st_ino &&
		    ob.st_dev == sb.st_dev)
			return true;
	return fd <= 2;
}

/*
 * The bytes each program sent on TCP since the hellos, as the kernel
 * counts them: a client's count also holds its SYN and its hello, a
 * server's reads the client's hello. 0, -EAGAIN (not now), or why not.
 */
static int counts_from_kernel(struct sw_sock *s)
{
	uint64_t w, r;
	int e;

	/* a call of another thread in the kernel could move bytes the
	 * count does not see; bytes taken while looking for a hello and
	 * not delivered are counted read */
	if (sw_turn_in_thread() || atomic_load(&s->users) != 1 ||
	    s->prefix_off < s->prefix_len)
		return -EAGAIN;
	e = sw_tcp_counts(s->fd, &w, &r);
	if (e)
		return e;
	if (s->is_client) {
		if (w < 1 + sizeof(struct sdp_hello))
			return -EPROTO;
		w -= 1 + sizeof(struct sdp_hello);
	} else {
		/* past HELLO_WAIT, the client's hello was read whole */
		if (s->state == SW_HELLO_WAIT)
			return -EAGAIN;
		if (r < sizeof(struct sdp_hello))
			return -EPROTO;
		r -= sizeof(struct sdp_hello);
	}
	if (w != s->tcp_tx || r != s->tcp_rx)
		SW_DBG("fd %d: %llu and %llu bytes on TCP since the hellos, by the kernel's count (%llu and %llu seen by the switch)",
		       s->fd, (unsigned long long)w, (unsigned long long)r,
		       (unsigned long long)s->tcp_tx,
		       (unsigned long long)s->tcp_rx);
	/* the statistics count them as this connection's too: the other
	 * process that moved them no longer counts anything of it */
	if (s->st && w > s->tcp_tx)
		s->st->tx_tcp += w - s->tcp_tx;
	if (s->st && r > s->tcp_rx)
		s->st->rx_tcp += r - s->tcp_rx;
	s->tcp_tx = w;
	s->tcp_rx = r;
	return 0;
}

bool sw_upgrade_held(struct sw_sock *s)
{
	uint64_t now;
	int e;

	if (s->std_seen && !s->std_off) {
		now = sw_now_ns();
		if (now < s->std_look_ns)
			return true;
		if (on_std(s->fd)) {
			s->std_look_ns = now + 10000000ull;
			return true;
		}
		s->std_off = true;
		SW_DBG("fd %d: no standard stream names it any more", s->fd);
	}
	if (!s->io_unseen || !sw_pending(s))
		return false;
	e = counts_from_kernel(s);
	if (e == -EAGAIN)
		return true;
	if (e) {
		sw_fallback(s, SDP_FB_CUT, e == -ENOTCONN ?
			    "the connection is closing" :
			    "the bytes on TCP since the hellos cannot be counted");
		return true;
	}
	return false;
}

void sw_sock_to_std(struct sw_sock *s)
{
	bool keep = sw_cfg.reupgrade && !sw_blind() && !sw_stepped_aside();
	bool await;

	pthread_mutex_lock(&s->lock);
	if (s->state == SW_LISTENER || s->closed || s->sight_lost) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	await = keep && !s->is_client && s->state == SW_HELLO_WAIT &&
		!s->hello_got;
	pthread_mutex_unlock(&s->lock);
	/* a server's client hello is taken first, stdio must not read it:
	 * waited for while the client's switch has it under way */
	if (await)
		sw_hello_await(s);
	pthread_mutex_lock(&s->lock);
	/* one partly here, or one that may still come, would reach stdio's
	 * reads; a carried connection's bytes would not. A client holds on
	 * once its hello is out and the server's first bytes were looked at
	 * (UPGRADING): stdio's writes must not come before its hello, nor
	 * its reads take an older server's answer to it */
	if (s->closed || s->sight_lost || s->state == SW_SAN ||
	    s->state == SW_HELLO_WAIT ||
	    (s->is_client && sw_pending(s) && s->state != SW_UPGRADING) ||
	    (s->state == SW_TCP && (s->skip_hello || !s->reup)) ||
	    s->prefix_off < s->prefix_len)
		keep = false;
	if (keep && (!s->std_seen || s->std_off))
		SW_INFO("fd %d: on a standard stream: not carried while fd 0, 1 or 2 names it",
			s->fd);
	if (keep) {
		s->std_seen = true;
		s->io_unseen = true;
		s->std_off = false;
		s->std_look_ns = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (!keep)
		sw_blind_sock(s, "on a standard stream");
}

void sw_blind_sock(struct sw_sock *s, const char *why)
{
	sw_sight_off(s, why, SW_SIGHT_STDIO);
}

void sw_sight_off(struct sw_sock *s, const char *why, enum sw_sight how)
{
	bool carried;
	size_t unread;

	pthread_mutex_lock(&s->lock);
	if (s->state == SW_LISTENER || s->closed || s->sight_lost) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->sight_lost = true;
	s->reup_never = true;
	s->reup = false;
	if (sw_pending(s) && sw_upgrade_cut(s))
		sw_upgrade_settle(s);	/* committed: on the SAN, or TCP */
	carried = s->state == SW_SAN;
	pthread_mutex_unlock(&s->lock);
	if (carried)
		sw_downgrade_one(s);
	/* a hello still to come must not reach reads that pass the switch
	 * by (the program's recv drops it itself: sw_hello_skip) */
	if (how != SW_SIGHT_SEND)
		sw_hello_fence_sock(s);
	pthread_mutex_lock(&s->lock);
	unread = sw_fork_buf_left(s);
	if (how != SW_SIGHT_STDIO && s->state != SW_TCP)
		SW_WARN("fd %d: %s: the peer did not answer the return to TCP: the connection stays on the SAN, where the kernel gives its socket nothing",
			s->fd, why);
	else if (how != SW_SIGHT_STDIO)
		SW_INFO("fd %d: %s: plain TCP from here%s", s->fd, why,
			unread ? " (the bytes that came on the SAN first, by recv)" : "");
	else if (s->state != SW_TCP)
		SW_WARN("fd %d: %s: the peer did not answer the return to TCP: the program's stdio may see neither the bytes the SAN carries nor the end",
			s->fd, why);
	else if (unread)
		SW_WARN("fd %d: %s: %zu byte(s) that came on the SAN are read first by read and recv, not by stdio, which reads the kernel's socket directly",
			s->fd, why, unread);
	else
		SW_INFO("fd %d: %s: its I/O may go through stdio, which the switch cannot see: plain TCP from here",
			s->fd, why);
	pthread_mutex_unlock(&s->lock);
}

/*
 * MSG_ZEROCOPY on a socket with SO_ZEROCOPY: the send is completed by a
 * notification on the kernel's error queue (recvmsg MSG_ERRQUEUE,
 * POLLERR), which a send the SAN carried never gets: a program that waits
 * for its completions before it reuses its buffers would wait for ever.
 * Such a connection is left to TCP at its first such send, as the program
 * asked for the kernel's own path. The option alone changes nothing (gRPC
 * sets it on every socket it makes, and sends with the flag only when told
 * to); whether it is on is asked of the kernel once (accepted sockets
 * inherit it from their listener), again after the program sets it.
 */
void sw_zerocopy_send(struct sw_sock *s)
{
	socklen_t len = sizeof(int);
	int v = 0;

	pthread_mutex_lock(&s->lock);
	if (s->sight_lost || s->zc_off || s->state == SW_LISTENER) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	pthread_mutex_unlock(&s->lock);
	if (sdp_sys.getsockopt(s->fd, SOL_SOCKET, SO_ZEROCOPY, &v, &len) ||
	    !v) {
		pthread_mutex_lock(&s->lock);
		s->zc_off = true;
		pthread_mutex_unlock(&s->lock);
		return;
	}
	sw_sight_off(s, "MSG_ZEROCOPY (its completions come from the kernel's TCP)",
		     SW_SIGHT_SEND);
}

/*
 * TCP_ZEROCOPY_RECEIVE: the program maps, or has the kernel copy into its
 * copybuf, what the kernel's receive queue holds, past recv. On a carried
 * connection that queue holds the switch's doorbells, which it would take
 * for bytes of the stream. So the connection leaves the SAN first
 * (sw_sight_off: the return's marker and the peer's hello are taken off
 * TCP), and while the switch still holds bytes of the stream for recv
 * (they came on the SAN before), the call answers as the kernel does for
 * bytes it cannot map: nothing mapped or copied, recv_skip_hint and inq
 * the bytes to recv. The struct's fields by offset (linux/tcp.h): length
 * 8, recv_skip_hint 12, inq 16, err 20, copybuf_len 32, msg_flags 56;
 * only those within the program's length are written.
 */
int sw_zc_receive(struct sw_sock *s, void *val, socklen_t *len, int *ret)
{
	uint32_t zero = 0, hint;
	uint8_t *p = val;
	size_t held;
	bool tcp;

	if (!val || !len || *len < 16)
		return 0;	/* the kernel answers */
	sw_sight_off(s, "TCP_ZEROCOPY_RECEIVE (its reads take the kernel's queue past the switch)",
		     SW_SIGHT_ZC_RECV);
	pthread_mutex_lock(&s->lock);
	tcp = s->state == SW_TCP;
	held = sw_fork_buf_left(s);
	if (s->prefix_len > s->prefix_off)
		held += s->prefix_len - s->prefix_off;
	pthread_mutex_unlock(&s->lock);
	if (tcp && !held)
		return 0;
	/* still carried (the peer did not answer the return): all of it by
	 * recv, a hint's worth at a time */
	hint = !held ? 65536 : held > UINT32_MAX ? UINT32_MAX : (uint32_t)held;
	memcpy(p + 8, &zero, 4);
	memcpy(p + 12, &hint, 4);
	if (*len >= 20)
		memcpy(p + 16, &hint, 4);
	if (*len >= 24)
		memcpy(p + 20, &zero, 4);
	if (*len >= 36)
		memcpy(p + 32, &zero, 4);
	if (*len >= 60)
		memcpy(p + 56, &zero, 4);
	*ret = 0;
	return 1;
}

/*
 * Transmit timestamps (SO_TIMESTAMPING with a SOF_TIMESTAMPING_TX_* flag,
 * on the socket or per send in a control message) come on the kernel's
 * error queue for the bytes its TCP sends, numbered by their offset in
 * the stream: a carried connection's bytes get none (only the doorbells
 * do, at their own offsets), and a program that waits for the stamp of
 * its last byte waits for ever. Such a connection is left to TCP before
 * the option takes effect, as for MSG_ZEROCOPY. Accepted sockets inherit
 * the option from their listener, and one set before connect is on the
 * socket before the switch knows it: once the process asked for transmit
 * timestamps anywhere, each new connection asks the kernel (one call).
 */
static bool ts_tx_seen;

static bool ts_tx_flags(int flags)
{
	return flags & SOF_TIMESTAMPING_TX_RECORD_MASK;
}

bool sw_ts_tx_option(int level, int name, const void *val, socklen_t len)
{
	if (level != SOL_SOCKET ||
	    (name != SO_TIMESTAMPING_OLD && name != SO_TIMESTAMPING_NEW) ||
	    !val || len < sizeof(int) || !ts_tx_flags(*(const int *)val))
		return false;
	__atomic_store_n(&ts_tx_seen, true, __ATOMIC_RELAXED);
	return true;
}

static const char ts_why[] =
	"SO_TIMESTAMPING transmit timestamps (they come from the kernel's TCP)";

void sw_ts_tx_sock(struct sw_sock *s)
{
	sw_sight_off(s, ts_why, SW_SIGHT_SEND);
}

void sw_ts_tx_new(struct sw_sock *s)
{
	socklen_t len = sizeof(int);
	int fd, v = 0;

	if (!__atomic_load_n(&ts_tx_seen, __ATOMIC_RELAXED))
		return;
	fd = __atomic_load_n(&s->fd, __ATOMIC_ACQUIRE);
	if (fd >= 0 &&
	    !sdp_sys.getsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING_OLD, &v,
				&len) && ts_tx_flags(v))
		sw_sight_off(s, ts_why, SW_SIGHT_SEND);
}

void sw_ts_tx_send(struct sw_sock *s, const struct msghdr *msg)
{
	struct cmsghdr *c;

	if (!msg->msg_control || msg->msg_controllen < sizeof(*c))
		return;
	for (c = CMSG_FIRSTHDR((struct msghdr *)msg); c;
	     c = CMSG_NXTHDR((struct msghdr *)msg, c))
		if (c->cmsg_len >= CMSG_LEN(sizeof(int)) &&
		    sw_ts_tx_option(c->cmsg_level, c->cmsg_type,
				    CMSG_DATA(c), sizeof(int))) {
			sw_sight_off(s, ts_why, SW_SIGHT_SEND);
			return;
		}
}

static bool fd_is_ring(int dfd, const char *name)
{
	static const char ring[] = "anon_inode:[io_uring]";
	char target[sizeof(ring) + 1];
	ssize_t n;

	n = readlinkat(dfd, name, target, sizeof(target) - 1);
	if (n != (ssize_t)sizeof(ring) - 1)
		return false;
	return memcmp(target, ring, sizeof(ring) - 1) == 0;
}

bool sw_blind_check(bool force)
{
	uint64_t now = sw_now_ns(), last;
	struct dirent *d;
	char why[64];
	DIR *dir;
	int found = -1;

	if (sw_blind())
		return true;
	last = atomic_load(&last_scan_ns);
	if (!force && last && now - last < SW_BLIND_SCAN_NS)
		return false;
	if (!atomic_compare_exchange_strong(&last_scan_ns, &last, now))
		return sw_blind();	/* another thread looks right now */
	dir = opendir("/proc/self/fd");
	if (!dir)
		return false;
	while (found < 0 && (d = readdir(dir)) != NULL) {
		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		if (fd_is_ring(dirfd(dir), d->d_name))
			found = atoi(d->d_name);
	}
	closedir(dir);
	if (found >= 0) {
		snprintf(why, sizeof(why), "io_uring instance on fd %d", found);
		sw_blind_set(why);
	}
	return sw_blind();
}

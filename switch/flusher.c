/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * flusher.c - the per-process thread that sends bytes kept back to coalesce
 * (session_tx.c) when the program does not call into the switch again
 * within the bound (SDP_COALESCE_US), and finishes the connections the
 * program closed with bytes still to go (orphan.c): the registry of such
 * sockets, the thread's life (started lazily, again after fork), and the
 * exit and exec hooks that send what is still kept before the process
 * ends or becomes another program.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buffers.h"
#include "config.h"
#include "credits.h"
#include "flusher.h"
#include "log.h"
#include "orphan.h"
#include "ownfd.h"
#include "session_msg.h"
#include "session_tx.h"
#include "sock.h"
#include "util.h"
#include "wakeup.h"
#include "sys.h"

/*
 * Locks: a program thread adds a socket while it holds the socket's lock,
 * then reg_lock (order: socket, then registry). The flusher takes a socket
 * lock only with trylock: a socket whose lock is held is inside a call of
 * the program, which sends the kept bytes itself, so the flusher tries
 * again one bound later. work_lock is held while the flusher works (its
 * allocations included), so fork and exit can keep it away from the
 * sockets and from the allocator.
 */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cond;
static struct sw_sock **reg;	/* each holds a reference */
static int reg_n, reg_cap;
static bool running;		/* the thread exists in this process */
static bool hooks_done;		/* atfork and atexit registered */
static bool exit_settled;	/* exit or _exit has finished the sockets */
static bool start_failed;	/* no thread: coalescing stays off */

static uint64_t bound_ns(void)
{
	return (uint64_t)sw_cfg.coalesce_us * 1000;
}

static void cond_setup(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&reg_cond, &ca);
	pthread_condattr_destroy(&ca);
}

/* When s is due for a look: its oldest kept byte has waited the bound, or
 * a look that could not finish asked to be repeated. 0 means now. */
static uint64_t due_ns(struct sw_sock *s)
{
	uint64_t since = atomic_load_explicit(&s->ptx_since_ns,
					      memory_order_relaxed);
	uint64_t due = since ? since + bound_ns() : 0;

	uint64_t retry = atomic_load_explicit(&s->flush_retry_ns,
					      memory_order_relaxed);

	if (__atomic_load_n(&s->orphan, __ATOMIC_RELAXED))
		return retry;
	return due > retry ? due : retry;
}

#define SW_FLUSH_RETRY_MAX_NS 10000000ull
/* how often a sendfile's lend is looked at */
#define SW_LEND_LOOK_NS 2000000ull

static uint64_t retry_ns(struct sw_sock *s, uint64_t now)
{
	uint64_t since = atomic_load_explicit(&s->ptx_since_ns,
					      memory_order_relaxed);
	uint64_t d = since && now > since ? (now - since) / 4 : 0;

	if (d < bound_ns())
		d = bound_ns();
	return d > SW_FLUSH_RETRY_MAX_NS ? SW_FLUSH_RETRY_MAX_NS : d;
}

/* The next look at an orphan: soon while the peer takes its bytes, less
 * often the longer it takes none (a quarter of the time, at most 10 ms). */
static uint64_t orphan_retry_ns(struct sw_sock *s, uint64_t now)
{
	uint64_t d = now > s->orphan_moved_ns ?
			     (now - s->orphan_moved_ns) / 4 : 0;

	if (d < bound_ns())
		d = bound_ns();
	return d > SW_FLUSH_RETRY_MAX_NS ? SW_FLUSH_RETRY_MAX_NS : d;
}

/* One look at an orphan (s->lock held): true once it ended. */
static bool orphan_one(struct sw_sock *s, uint64_t now)
{
	if (!s->orphan_ended && sw_orphan_step(s, now))
		sw_orphan_close(s);
	if (s->orphan_ended)
		return true;
	atomic_store_explicit(&s->flush_retry_ns, now + orphan_retry_ns(s, now),
			      memory_order_relaxed);
	return false;
}

/*
 * Looks at one socket whose kept bytes are due. Sends them as far as the
 * credits allow (progress first: the credits the peer has returned since
 * the program's last call are in the completion queue). Returns true when
 * s leaves the registry: nothing is kept any more, or the socket closed or
 * left the SAN (DOWNGRADE sends kept bytes itself; close hands what is
 * left over as an orphan, which stays until it ended).
 */
static bool flush_one(struct sw_sock *s, uint64_t now)
{
	bool done;

	if (pthread_mutex_trylock(&s->lock)) {
		/* the program is inside a call on s: it sends them */
		atomic_store_explicit(&s->flush_retry_ns, now + bound_ns(),
				      memory_order_relaxed);
		return false;
	}
	if (s->orphan) {
		done = orphan_one(s, now);
		if (done)
			s->flush_listed = false;
		pthread_mutex_unlock(&s->lock);
		return done;
	}
	/* a sendfile's lend ends once the receiver took it; one it can no
	 * longer take goes by copy from here (sw_lend_poll) */
	if (s->ss.lend.len && !s->closed && s->state == SW_SAN && s->ss.cq)
		sw_lend_poll(s);
	if ((s->ptx_len || s->ss.fin_pending) && !s->closed &&
	    s->state == SW_SAN && s->ss.cq && now >= due_ns(s)) {
		SW_DBG("fd %d: flusher sends %zu kept bytes%s (credits %d)",
		       s->fd, s->ptx_len, s->ss.fin_pending ? " and FIN" : "",
		       s->ss.credits);
		sw_progress(s);
		if (s->ptx_len && s->state == SW_SAN && s->ss.cq &&
		    !s->ss.error && !s->ss.peer_dead)
			sw_ptx_flush(s);
		/* a FIN after them (shutdown), as TCP's goes on its own */
		if (s->ss.fin_pending && s->state == SW_SAN && s->ss.cq &&
		    !s->ss.error && !s->ss.peer_dead)
			sw_credit_maybe_update(s);
		if ((s->ptx_len || s->ss.fin_pending) && s->state == SW_SAN &&
		    !sw_credit_can_send(&s->ss, SDP_MSG_DATA))
			sw_credit_ask(s);
	}
	done = (!s->ptx_len && !s->ss.fin_pending && !s->ss.lend.len) ||
	       s->closed || s->state != SW_SAN || !s->ss.cq || s->ss.error ||
	       s->ss.peer_dead;
	if (done) {
		s->flush_listed = false;
		if (!s->ptx_len)
			atomic_store_explicit(&s->ptx_since_ns, 0,
					      memory_order_relaxed);
	} else if (!s->ptx_len && !s->ss.fin_pending) {
		/* a lend the receiver is still taking */
		atomic_store_explicit(&s->flush_retry_ns,
				      now + SW_LEND_LOOK_NS,
				      memory_order_relaxed);
	} else {
		/* credits short (the peer has not read): look again, less
		 * often the longer the peer's program stays away (a quarter
		 * of the time waited, at most 10 ms) */
		atomic_store_explicit(&s->flush_retry_ns, now + retry_ns(s, now),
				      memory_order_relaxed);
	}
	pthread_mutex_unlock(&s->lock);
	return done;
}

static void reg_remove(struct sw_sock *s)
{
	int i;

	for (i = 0; i < reg_n; i++) {
		if (reg[i] == s) {
			reg[i] = reg[--reg_n];
			return;
		}
	}
}

/* Handles every socket that is due; returns with reg_lock held, false
 * when memory was short (nothing was done). */
static bool flush_due(uint64_t now)
{
	struct sw_sock **v;
	int n, i, k = 0;

	/* all of it under work_lock, allocations too: a child forked while
	 * this thread allocated would inherit an allocator lock nobody lets
	 * go there (AddressSanitizer's has no fork handler) */
	pthread_mutex_unlock(&reg_lock);
	pthread_mutex_lock(&work_lock);
	pthread_mutex_lock(&reg_lock);
	n = reg_n;
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v) {
		pthread_mutex_unlock(&work_lock);
		return false;
	}
	for (i = 0; i < n; i++)
		if (due_ns(reg[i]) <= now)
			v[k++] = reg[i];
	pthread_mutex_unlock(&reg_lock);
	for (i = 0; i < k; i++)
		if (!flush_one(v[i], now))
			v[i] = NULL;
	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < k; i++)
		if (v[i])
			reg_remove(v[i]);
	/* references are dropped without reg_lock (the last one frees),
	 * but under work_lock: a registry snapshot taken under it
	 * (reg_snapshot) holds no references of its own */
	pthread_mutex_unlock(&reg_lock);
	for (i = 0; i < k; i++)
		if (v[i])
			sw_sock_unref(v[i]);
	free(v);
	pthread_mutex_unlock(&work_lock);
	pthread_mutex_lock(&reg_lock);
	return true;
}

static void *flusher_main(void *arg)
{
	(void)arg;
	/* provider code runs here: its calls go to libc, not the shim */
	sdp_guard_enter();
	pthread_mutex_lock(&reg_lock);
	for (;;) {
		uint64_t next = UINT64_MAX, now;
		struct timespec ts;
		int i;

		if (!reg_n) {
			/* a socket added to an empty registry signals */
			pthread_cond_wait(&reg_cond, &reg_lock);
			continue;
		}
		for (i = 0; i < reg_n; i++) {
			uint64_t d = due_ns(reg[i]);

			if (d < next)
				next = d;
		}
		now = sw_now_ns();
		if (next <= now) {
			if (flush_due(now))
				continue;
			/* memory short: try again a bound later */
			next = now + bound_ns();
		}
		/* a socket added meanwhile is due a whole bound from now,
		 * never before next */
		ts.tv_sec = next / 1000000000ull;
		ts.tv_nsec = next % 1000000000ull;
		pthread_cond_timedwait(&reg_cond, &reg_lock, &ts);
	}
	return NULL;
}

/* fork: the child has no flusher thread; its first kept byte starts one.
 * The flusher must not hold a socket's lock across the fork (the child's
 * copy would stay locked), hence work_lock. */
static void flusher_prepare(void)
{
	pthread_mutex_lock(&work_lock);
}

static void flusher_parent(void)
{
	pthread_mutex_unlock(&work_lock);
}

static void flusher_child(void)
{
	int i;

	pthread_mutex_init(&work_lock, NULL);
	pthread_mutex_init(&reg_lock, NULL);
	cond_setup();
	running = false;
	/* The parent's orphans are the parent's alone: the child closes its
	 * copies of their descriptors (its copy would hold TCP's FIN back
	 * for as long as the child lives) and never acts on them. Their
	 * sessions name the parent's endpoints and buffers, so they are not
	 * freed here: the memory stays with the child, unused. */
	for (i = 0; i < reg_n;) {
		struct sw_sock *s = reg[i];

		if (!s->orphan) {
			i++;
			continue;
		}
		if (!s->orphan_ended) {
			sw_fd_forget(s->fd);
			sdp_sys.close(s->fd);
			s->orphan_ended = true;
		}
		memset(&s->ss, 0, sizeof(s->ss));
		s->ptx_len = 0;
		s->flush_listed = false;
		reg[i] = reg[--reg_n];
	}
}

/* The registry as it is now, a copy the caller frees (NULL when empty or
 * out of memory). No reference is taken: the registry's own keep them
 * while the caller holds work_lock (the flusher drops them under it). */
static struct sw_sock **reg_snapshot(int *n)
{
	struct sw_sock **v;

	pthread_mutex_lock(&reg_lock);
	*n = reg_n;
	v = reg_n ? malloc(reg_n * sizeof(*v)) : NULL;
	if (v)
		memcpy(v, reg, reg_n * sizeof(*v));
	pthread_mutex_unlock(&reg_lock);
	return v;
}

/*
 * Orphans before exit or exec (work_lock held): the address space and
 * the endpoints go with them, so each is sent on while its peer takes its
 * bytes and given up after SDP_ORPHAN_TIMEOUT_MS without progress, as in
 * the flusher. Ended ones stay in the registry: the flusher thread, if it
 * runs on (exec failed), lets them go.
 */
static void orphans_settle(void)
{
	struct sw_sock **v;
	int n, i, busy;
	unsigned int nap_ms = 1;

	v = reg_snapshot(&n);
	if (!v)
		return;
	/* one whose other end is this process's own waits for nothing:
	 * that end reads no more either */
	for (i = 0; i < n; i++) {
		struct sw_sock *s = v[i];

		if (!__atomic_load_n(&s->orphan, __ATOMIC_RELAXED) ||
		    pthread_mutex_trylock(&s->lock))
			continue;
		if (!s->orphan_ended && sw_orphan_peer_here(s)) {
			s->orphan_peer_here = true;
			sw_orphan_close(s);
		}
		pthread_mutex_unlock(&s->lock);
	}
	for (;;) {
		uint64_t now = sw_now_ns();
		bool moved = false;

		busy = 0;
		for (i = 0; i < n; i++) {
			struct sw_sock *s = v[i];

			if (!__atomic_load_n(&s->orphan, __ATOMIC_RELAXED))
				continue;
			if (pthread_mutex_trylock(&s->lock)) {
				/* a thread still in a call on it: waited
				 * for within the same bound */
				if (now - __atomic_load_n(&s->orphan_moved_ns,
							  __ATOMIC_RELAXED) <
				    (uint64_t)sw_cfg.orphan_timeout_ms *
					    1000000ull)
					busy++;
				continue;
			}
			if (!s->orphan_ended) {
				uint64_t before = s->orphan_moved_ns;

				if (sw_orphan_step(s, now))
					sw_orphan_close(s);
				else
					busy++;
				moved |= s->orphan_moved_ns != before;
			}
			pthread_mutex_unlock(&s->lock);
		}
		if (!busy)
			break;
		/* soon while bytes move, up to 10 ms while none do */
		nap_ms = moved ? 1 : nap_ms < 10 ? nap_ms + 1 : 10;
		sw_wait_fd(-1, 0, (int)nap_ms);
	}
	free(v);
}

void sw_flusher_before_exec(void)
{
	if (!hooks_done)
		return;
	pthread_mutex_lock(&work_lock);
	orphans_settle();
	pthread_mutex_unlock(&work_lock);
}

/*
 * exit: kept bytes leave before the process ends, as a TCP socket's
 * buffer does (bounded: a peer that reads nothing more cannot hold the
 * exit for long). The flusher thread stays away from the sockets from
 * here on.
 */
#define SW_EXIT_FLUSH_NS 1000000000ull

static void exit_settle(uint64_t deadline)
{
	struct sw_sock **v;
	int n, i;

	v = reg_snapshot(&n);
	for (i = 0; v && i < n; i++) {
		struct sw_sock *s = v[i];

		if (!sw_sock_lock_by(s, deadline))
			continue;
		/* a sendfile's lend, until the peer has taken it */
		while (!s->closed && s->state == SW_SAN && sw_lend_poll(s) &&
		       !s->ss.peer_dead && !s->tcp_eof &&
		       sw_now_ns() < deadline) {
			pthread_mutex_unlock(&s->lock);
			usleep(100);
			pthread_mutex_lock(&s->lock);
		}
		while (s->ptx_len && !s->closed && s->state == SW_SAN &&
		       s->ss.cq && !s->ss.error && !s->ss.peer_dead &&
		       !s->tcp_eof && sw_now_ns() < deadline) {
			if (sw_ptx_flush(s) < 0 || !s->ptx_len)
				break;
			sw_session_wait(s, POLLOUT, deadline);
		}
		/* the messages must leave the provider before it goes */
		while (!s->closed && s->state == SW_SAN && s->ss.cq &&
		       sw_sends_pending(&s->ss) && !s->ss.peer_dead &&
		       !s->tcp_eof && sw_now_ns() < deadline)
			sw_session_wait(s, POLLOUT, deadline);
		pthread_mutex_unlock(&s->lock);
	}
	free(v);
	/* then the connections the program closed: a program that writes
	 * and exits at once (a daemon, a CGI) is the common case, and a TCP
	 * socket's buffer would outlive it */
	orphans_settle();
}

static void flusher_exit(void)
{
	if (exit_settled)
		return;
	exit_settled = true;
	pthread_mutex_lock(&work_lock);
	exit_settle(sw_now_ns() + SW_EXIT_FLUSH_NS);
	/* work_lock stays held: the flusher thread must not touch a socket
	 * while the process tears down */
}

/*
 * _exit: a forked child (Python's ForkingTCPServer, a prefork worker)
 * or a program that must not run its exit handlers ends with _exit,
 * often right after close(). The kept bytes and a sendfile's lend not
 * yet taken live in this address space, where TCP's would have been in
 * the kernel, so they are sent first as at exit. Nothing to do (the
 * common case) costs one load. Not from a signal handler (fork_exec.c).
 * work_lock is taken within a bound.
 */
void sw_flusher_before_exit(void)
{
	struct timespec ts;

	if (!hooks_done || exit_settled ||
	    !__atomic_load_n(&reg_n, __ATOMIC_RELAXED))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	if (pthread_mutex_timedlock(&work_lock, &ts)) {
		SW_WARN("_exit: the switch stayed busy for 1 s (another "
			"thread forking or exec'ing?): bytes still kept for "
			"the process's connections are lost");
		return;
	}
	exit_settled = true;
	exit_settle(sw_now_ns() + SW_EXIT_FLUSH_NS);
}

static int flusher_start(void)
{
	int r;

	if (!hooks_done) {
		cond_setup();
		sw_atfork(flusher_prepare, flusher_parent, flusher_child);
		atexit(flusher_exit);
		hooks_done = true;
	}
	r = sw_thread_start(flusher_main);
	if (r) {
		SW_WARN("cannot start the flusher thread (%s): small sends are not coalesced",
			strerror(r));
		start_failed = true;
		return -r;
	}
	running = true;
	return 0;
}

int sw_flusher_adopt(struct sw_sock *s)
{
	int r = 0;

	atomic_store_explicit(&s->flush_retry_ns, 0, memory_order_relaxed);
	if (!s->flush_listed)
		r = sw_flusher_watch(s);
	if (r)
		return r;
	/* the thread may sleep until a later socket's time: wake it */
	pthread_mutex_lock(&reg_lock);
	pthread_cond_signal(&reg_cond);
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

int sw_flusher_watch(struct sw_sock *s)
{
	int r = 0;

	if (s->flush_listed)
		return 0;
	pthread_mutex_lock(&reg_lock);
	if (start_failed) {
		r = -EAGAIN;
		goto unlock;
	}
	if (!running) {
		r = flusher_start();
		if (r)
			goto unlock;
	}
	if (reg_n == reg_cap) {
		int cap = reg_cap ? reg_cap * 2 : 16;
		struct sw_sock **nv = realloc(reg, cap * sizeof(*nv));

		if (!nv) {
			r = -ENOMEM;
			goto unlock;
		}
		reg = nv;
		reg_cap = cap;
	}
	sw_sock_ref(s);
	reg[reg_n++] = s;
	s->flush_listed = true;
	atomic_store_explicit(&s->flush_retry_ns, 0, memory_order_relaxed);
	if (reg_n == 1)
		pthread_cond_signal(&reg_cond);
unlock:
	pthread_mutex_unlock(&reg_lock);
	return r;
}

int sw_flusher_watch_lend(struct sw_sock *s)
{
	bool listed = s->flush_listed;
	int r = sw_flusher_watch(s);

	/* not due before then, unless kept bytes made it due sooner */
	if (!r && !listed)
		atomic_store_explicit(&s->flush_retry_ns,
				      sw_now_ns() + SW_LEND_LOOK_NS,
				      memory_order_relaxed);
	return r;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * wakeup.c - when a side sleeps and who wakes it: WAKE_ME, the bell after
 * our switch point, the completion queue's notify fd, and the bounded wait
 * that spins, arms a wake-up and sleeps on TCP (docs/protocol.md 8).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "credits.h"
#include "log.h"
#include "ownfd.h"
#include "providers.h"
#include "session_msg.h"
#include "session_rx.h"
#include "session_tx.h"
#include "sock.h"
#include "spin.h"
#include "sys.h"
#include "tcp_inband.h"
#include "util.h"
#include "wakeup.h"
#include "wire.h"

/*
 * Several threads may sleep on one carried socket at once: a reader in
 * poll for POLLIN beside a writer in poll for POLLOUT, or a blocking recv
 * beside a blocking send. The peer's doorbell on TCP wakes them all (it
 * stays there until the last one is up, sw_doorbell_drain_shared), but
 * the messages it announced may be taken by one of them before the other
 * looked: the writer's look for credits takes the DATA that came with
 * them, and the reader, asleep on a TCP fd with no byte left on it, waits
 * for a doorbell the peer rings only once it has read what it waits for
 * (an echo peer blocked in its own send hung so for good). So each
 * sleeping thread also watches an eventfd of its own, listed in the
 * socket while it sleeps, and the thread whose progress took news writes
 * to the others' (sw_sleep_wake_others). The eventfds are the switch's own
 * descriptors, one per thread that sleeps so; when the thread ends, its
 * eventfd goes to a small pool for the next thread, or is closed. One
 * still listed somewhere (the thread was cancelled in its sleep) stays
 * open for good instead: a listing left behind must not name a number
 * the program may get again.
 */
static __thread int tl_wake __attribute__((tls_model("initial-exec"))) = -1;
static __thread int tl_listed __attribute__((tls_model("initial-exec")));
static pthread_key_t wake_key;
static pthread_once_t wake_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t wake_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int wake_pool[4];
static int wake_npool;

static void wake_thread_end(void *arg)
{
	int fd = tl_wake;

	(void)arg;
	if (fd < 0 || tl_listed)
		return;
	tl_wake = -1;
	pthread_mutex_lock(&wake_pool_lock);
	if (wake_npool < (int)(sizeof(wake_pool) / sizeof(wake_pool[0]))) {
		wake_pool[wake_npool++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&wake_pool_lock);
	if (fd >= 0) {
		sw_fd_forget(fd);
		sdp_sys.close(fd);
	}
}

static void wake_key_make(void)
{
	pthread_key_create(&wake_key, wake_thread_end);
}

/* Said once per process: the sleeps it affects still end, later. */
static void wake_fd_failed(int err)
{
	static atomic_bool said;

	if (!atomic_exchange(&said, true))
		SW_WARN("no eventfd for a thread's wake-ups (%s): threads that "
			"share a carried socket now look every %d ms instead of "
			"being woken; raise the descriptor limit (ulimit -n) if "
			"this is EMFILE", strerror(err), SW_UNLISTED_NAP_MS);
}

/* The calling thread's eventfd, made (or taken from the pool) at its first
 * sleep, or -1. */
static int wake_fd(void)
{
	int fd;

	if (tl_wake >= 0)
		return tl_wake;
	pthread_once(&wake_once, wake_key_make);
	pthread_mutex_lock(&wake_pool_lock);
	fd = wake_npool ? wake_pool[--wake_npool] : -1;
	pthread_mutex_unlock(&wake_pool_lock);
	if (fd < 0) {
		/* the system call itself: the shim's eventfd would take it as
		 * the program's */
		fd = (int)syscall(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (fd >= 0)
			fd = sw_fd_own(fd, NULL);
		if (fd < 0) {
			wake_fd_failed(errno);
			return -1;
		}
	}
	tl_wake = fd;
	pthread_setspecific(wake_key, (void *)1);
	return fd;
}

void sw_wake_atfork_child(void)
{
	int i;

	/* the forking thread's eventfd and the pool's are shared with the
	 * parent's threads now: the child makes its own */
	if (tl_wake >= 0) {
		sw_fd_forget(tl_wake);
		sdp_sys.close(tl_wake);
		tl_wake = -1;
	}
	tl_listed = 0;
	for (i = 0; i < wake_npool; i++) {
		sw_fd_forget(wake_pool[i]);
		sdp_sys.close(wake_pool[i]);
	}
	wake_npool = 0;
	pthread_mutex_init(&wake_pool_lock, NULL);
}

int sw_sleep_begin(struct sw_sock *s)
{
	int fd, i, free_at = -1;

	atomic_fetch_add(&s->sleepers, 1);
	fd = wake_fd();
	if (fd < 0)
		return -1;
	for (i = 0; i < SW_SIB_MAX; i++) {
		if (s->sib_fd1[i] == fd + 1)
			return fd;
		if (!s->sib_fd1[i] && free_at < 0)
			free_at = i;
	}
	if (free_at < 0)
		return -1;
	s->sib_fd1[free_at] = fd + 1;
	tl_listed++;
	return fd;
}

void sw_sleep_end(struct sw_sock *s)
{
	int i;

	atomic_fetch_sub(&s->sleepers, 1);
	if (tl_wake < 0)
		return;
	for (i = 0; i < SW_SIB_MAX; i++) {
		if (s->sib_fd1[i] == tl_wake + 1) {
			s->sib_fd1[i] = 0;
			tl_listed--;
		}
	}
}

void sw_sleep_woken(int fd, short revents)
{
	uint64_t v;

	/* one read takes the whole count (not EFD_SEMAPHORE) */
	if (fd >= 0 && revents)
		(void)!sdp_sys.read(fd, &v, sizeof(v));
}

void sw_sleep_wake_others(struct sw_sock *s)
{
	uint64_t one = 1;
	int i, fd;

	for (i = 0; i < SW_SIB_MAX; i++) {
		fd = s->sib_fd1[i] - 1;
		if (fd >= 0 && fd != tl_wake &&
		    sdp_sys.write(fd, &one, sizeof(one)) < 0 &&
		    errno != EAGAIN)
			s->sib_fd1[i] = 0;	/* not ours any more */
	}
}

/*
 * The program's first bytes after our switch point are on their way: a
 * peer asleep on TCP in its program's read would not look at the provider,
 * nor would its provider move what needs both sides (staging-mode RDMA):
 * one doorbell wakes it. Even when the peer's messages say it has taken
 * our SWITCH: its upgrade thread may have taken it while its program
 * slept in a wait armed before the switch, with no wake-up asked for (an
 * nginx worker in epoll_wait held a keep-alive request for its whole
 * 75 s timeout).
 */
void sw_switch_bell(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (!ss->switch_bell)
		return;
	ss->switch_bell = false;
	sw_doorbell_ring(s);
}

int sw_session_arm(struct sw_sock *s)
{
	struct sdp_msg_wake w = { .seen_seq = s->ss.rx_seq };

	return sw_send_ctrl(s, SDP_MSG_WAKE_ME, &w, sizeof(w), NULL, 0, 0);
}

/* Asks the peer for a doorbell. Returns false when no credit allows it
 * (the peer then rings on its own when it returns credits). */
static bool arm_wake(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;

	if (ss->wake_armed)
		return true;
	/* a doorbell is a byte after the peer's switch point: asked for only
	 * once that point is known, so that it is never read as data */
	if (!ss->switch_rcvd || !sw_credit_can_send(ss, SDP_MSG_WAKE_ME))
		return false;
	if (sw_session_arm(s))
		return false;
	ss->wake_armed = true;
	return true;
}

/*
 * A provider that reaches other hosts delivers a message some time after its
 * sender posted it: the doorbell on TCP can overtake the message it
 * announces (the waiter wakes, finds nothing, and sleeps again with no
 * doorbell left to come), and our own sends and RDMA complete with no
 * doorbell at all. Such a wait sleeps on the provider's CQ as well, armed
 * here before the last check. A local provider's messages are in place
 * before the doorbell goes: its CQ keeps no fd (SDP_CAP_LOCAL_ONLY), except
 * for a wait on our own PENDING RDMA (shm's staging mode) or PENDING
 * sends (shm's ring full at the peer), which the peer's progress
 * completes without a message, hence without a doorbell: a sender asleep
 * for XFER_DONE with its last message still waiting for room in the
 * reader's ring would never deliver it, and a reader out of credits
 * could not send the XFER_DONE.
 * Returns the fd to add to the sleep, or -1.
 */
int sw_cq_sleep_fd(struct sw_sock *s)
{
	struct sw_session *ss = &s->ss;
	int fd;

	if (!ss->cq || ((ss->prov->mod.info.caps & SDP_CAP_LOCAL_ONLY) &&
			!ss->rdma_waiting && !ss->sends_pending))
		return -1;
	fd = ss->prov->mod.ops.cq_notify_fd(ss->cq);
	if (fd < 0 || ss->prov->mod.ops.cq_arm(ss->cq))
		return -1;
	return fd;
}

uint64_t sw_timeo_deadline(struct sw_sock *s, bool rcv, uint64_t from_ns)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (sdp_sys.getsockopt(s->fd, SOL_SOCKET,
			       rcv ? SO_RCVTIMEO : SO_SNDTIMEO, &tv, &len) ||
	    (!tv.tv_sec && !tv.tv_usec))
		return 0;
	return from_ns + (uint64_t)tv.tv_sec * 1000000000ull +
	       (uint64_t)tv.tv_usec * 1000ull;
}

/*
 * The kernel restarts an interrupted blocking socket call when the
 * handler of the signal that came has SA_RESTART and no timeout is set
 * on the socket for that direction. The switch's own wait cannot tell
 * which signal came: the call goes on when every signal with a handler
 * has SA_RESTART (glibc's signal() sets it), and fails with EINTR when
 * any has not (docs/semantics.md). Signals a fault raises in the thread
 * itself (SIGSEGV, ...) interrupt no wait and are not looked at.
 */
bool sw_intr_restarts(struct sw_sock *s, bool rcv)
{
	struct sigaction sa;
	int sig;

	if (sw_timeo_deadline(s, rcv, 0))
		return false;
	for (sig = 1; sig < NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV ||
		    sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
		    sig == SIGTRAP || sig == SIGSYS)
			continue;
		/* glibc's own signals (SIGCANCEL, SIGSETXID) answer EINVAL;
		 * its handlers have SA_RESTART */
		if (sigaction(sig, NULL, &sa))
			continue;
		if (!(sa.sa_flags & SA_SIGINFO) &&
		    (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return false;
	}
	return true;
}


/* sw_session_wait, and sw_session_wait_timeo when t is not NULL */
static int session_wait(struct sw_sock *s, short events, uint64_t deadline_ns,
			struct sw_timeo *t)
{
	struct sw_session *ss = &s->ss;
	uint64_t seq;

	/* bytes kept back to coalesce go before this side waits */
	if (s->ptx_len && s->state == SW_SAN)
		sw_ptx_flush(s);
	sw_credit_return_owed(s);
	seq = atomic_load(&s->event_seq);
	uint64_t start = sw_now_ns();
	uint64_t spin_end = start + sw_spin_budget_ns(&s->spin);
	uint64_t slept;
	unsigned spins = 0, sig0 = sdp_sig_seen;
	int timeout, r, cfd, w, wfd;
	bool nap;

	/* poll first: this is where the latency is won */
	while (sw_now_ns() < spin_end) {
		int i;

		/* a few hundred cycles off the lock without a system call
		 * (the peer usually runs on another core); every eighth
		 * round yields, in case the peer waits for this core */
		pthread_mutex_unlock(&s->lock);
		w = sdp_wait_begin();
		if (!(++spins & 7))
			sw_spin_yield();
		else
			for (i = 0; i < 16; i++)
				__builtin_ia32_pause();
		sdp_wait_end(w);
		pthread_mutex_lock(&s->lock);
		if (atomic_load(&s->event_seq) != seq)
			return 0;
		r = sw_progress(s);
		if (r < 0)
			return r;
		if (atomic_load(&s->event_seq) != seq)
			return 0;
		/* a handler ran while we polled: as if it had interrupted
		 * the sleep (the caller restarts under SA_RESTART) */
		if (sdp_sig_seen != sig0)
			return -EINTR;
	}
	/* then ask to be woken, check once more, and sleep in the kernel */
	sw_credit_adapt(s);
	/* a sender held by its last credit (data needs two) whose wake-up
	 * request is already out: the peer returns a single owed buffer only
	 * to a peer it believes has none, so it may never answer (a pool
	 * shrunk to two idle buffers hung here). The last credit goes as a
	 * CREDIT: the peer then owes two and returns them, ringing. */
	if ((events & POLLOUT) && ss->wake_armed && ss->credits == 1 &&
	    s->state == SW_SAN && !ss->error && !ss->peer_dead &&
	    sw_credit_can_send(ss, SDP_MSG_CREDIT))
		sw_send_ctrl(s, SDP_MSG_CREDIT, NULL, 0, NULL, 0, 0);
	/* no wake-up could be asked for (the last credit goes only with a
	 * returned buffer, credits.c), or a sender short of credits: the
	 * peer's switch holds our buffer and may not ring: nap, and look */
	nap = (!arm_wake(s) && ss->switch_rcvd) ||
	      ((events & POLLOUT) && !sw_credit_can_send(ss, SDP_MSG_DATA));
	cfd = sw_cq_sleep_fd(s);
	/* from here until the sleep ends, a doorbell is left for us, and
	 * another thread that takes news for the socket wakes us */
	wfd = sw_sleep_begin(s);
	r = sw_progress(s);
	if (r < 0 || atomic_load(&s->event_seq) != seq ||
	    sdp_sig_seen != sig0) {
		sw_sleep_end(s);
		return r < 0 ? r : sdp_sig_seen != sig0 ? -EINTR : 0;
	}
	sw_sleep_asks(s, events);
	if (t) {
		if (!t->read) {
			t->deadline = sw_timeo_deadline(s, t->rcv, start);
			t->read = true;
		}
		deadline_ns = t->deadline;
	}
	if (deadline_ns) {
		uint64_t now = sw_now_ns();

		if (now >= deadline_ns) {
			sw_sleep_end(s);
			return -ETIMEDOUT;
		}
		timeout = (int)((deadline_ns - now) / 1000000) + 1;
	} else {
		timeout = -1;
	}
	/* another thread in a call on s, or no eventfd of ours listed there
	 * (none could be made, or SW_SIB_MAX others are): a thread that
	 * takes news for s, now or later, cannot wake us */
	if ((atomic_load(&s->users) > 1 || wfd < 0) &&
	    (timeout < 0 || timeout > SW_UNLISTED_NAP_MS))
		timeout = SW_UNLISTED_NAP_MS;
	else if (sw_idle_sleep_ms() >= 0 &&
		 (timeout < 0 || timeout > sw_idle_sleep_ms()))
		timeout = sw_idle_sleep_ms();
	/* the peer's program bytes still on TCP keep it readable: no doorbell
	 * can be told apart there yet, so nap instead (a sender's short wait
	 * for credits while it has not read all the peer's TCP bytes) */
	if (!s->rx_san && (timeout < 0 || timeout > 1))
		timeout = 1;
	if (nap && s->state == SW_SAN && (timeout < 0 || timeout > SW_NAP_MS))
		timeout = SW_NAP_MS;
	pthread_mutex_unlock(&s->lock);
	{
		struct pollfd pfd[3] = {
			{ .fd = s->fd, .events = s->rx_san ? POLLIN : 0 },
			{ .fd = wfd, .events = POLLIN },
			{ .fd = cfd, .events = POLLIN },
		};
		nfds_t nf = cfd >= 0 ? 3 : 2;

		slept = sw_now_ns();
		w = sdp_wait_begin();
		r = sdp_sys.poll(pfd, nf, timeout);
		if (r < 0)
			r = -errno;
		sdp_wait_end(w);
		slept = sw_now_ns() - slept;
		sw_sleep_woken(wfd, r > 0 ? pfd[1].revents : 0);
	}
	pthread_mutex_lock(&s->lock);
	sw_sleep_end(s);
	sw_spin_slept(&s->spin, slept, r > 0);
	/* closed by another thread meanwhile: the session is gone and the
	 * fd number may already name another file, whose bytes are not
	 * ours to drain */
	if (s->closed && !ss->prov)
		return -EBADF;
	if (cfd >= 0 && ss->cq)
		ss->prov->mod.ops.cq_ack(ss->cq);
	sw_doorbell_drain_shared(s);
	/* a signal handler ran: the program's call returns EINTR, as a
	 * blocking socket call does when a handler interrupts it */
	if (r == -EINTR) {
		sw_progress(s);
		return -EINTR;
	}
	return sw_progress(s);
}

void sw_sleep_asks(struct sw_sock *s, short events)
{
	struct sw_session *ss = &s->ss;

	/* what we wait for may need the peer's progress (our queued sends,
	 * our RDMA in the provider's staging mode): a peer asleep must be
	 * woken for it. Nothing of ours pending: no doorbell, or two idle
	 * ends wake each other for ever. */
	if (ss->peer_wants_wake && (ss->sends_pending || ss->rdma_waiting))
		sw_doorbell_ring(s);
	/* a sender short of credits, or a message the peer's sender waits
	 * for (asleep) held for want of one: an XFER_DONE, room freed in
	 * our staging ring, buffers released. The doorbell asks for them
	 * (the peer's wait, woken, asks to be woken again, and that WAKE_ME
	 * returns what it owes) */
	if (((events & POLLOUT) && !sw_credit_can_send(ss, SDP_MSG_DATA)) ||
	    ((ss->xfer_ack_pending || ss->staging_freed_unsent) &&
	     !sw_credit_can_send(ss, SDP_MSG_XFER_DONE)) ||
	    (ss->release_owed &&
	     !sw_credit_can_send(ss, SDP_MSG_CREDIT_RELEASE)))
		sw_credit_ask(s);
	/* our program sleeps while bytes the peer sent hold buffers of
	 * ours, and by our count the peer holds its last credit, which goes
	 * only with a buffer it returns: it cannot send what we may be
	 * waiting for (an XFER_DONE, room in its staging ring, credits)
	 * until we return a buffer. The usual returns wait for our program
	 * to read those bytes, or for the peer's doorbell, which our TCP
	 * stream hides while program bytes sent before the switch point are
	 * still in it; a program blocked in a send reads nothing (an echo
	 * server that writes all before it reads on). Owing none, we set
	 * the oldest such bytes aside (sw_rx_spill). Only the peer's data
	 * queues bytes here: two idle ends cannot trade these returns. */
	if (ss->rxq && ss->peer_credits <= 1 && s->state == SW_SAN &&
	    !ss->error && !ss->peer_dead && sw_rx_spill(s) &&
	    sw_credit_can_send(ss, SDP_MSG_CREDIT))
		sw_send_ctrl(s, SDP_MSG_CREDIT, NULL, 0, NULL, 0, 0);
}

int sw_session_wait(struct sw_sock *s, short events, uint64_t deadline_ns)
{
	return session_wait(s, events, deadline_ns, NULL);
}

int sw_session_wait_timeo(struct sw_sock *s, short events,
			  struct sw_timeo *t)
{
	return session_wait(s, events, 0, t);
}

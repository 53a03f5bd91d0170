/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * readiness.c - poll, select and epoll over sets that hold switch sockets
 * (DESIGN.md 4a): SAN readiness first, a bounded busy-poll, "wake me" on
 * every switch socket, then a sleep in the kernel on the program's own TCP
 * fds, woken by doorbells. Keeps, per epoll set, what the program asked.
 */
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "readiness.h"
#include "spin.h"
#include "sys.h"

/* The kernel refuses epoll nesting deeper than this; so do we. */
#define RD_MAX_DEPTH 5
/* During the busy-poll, one zero-timeout kernel poll every so many checks
 * of SAN readiness. */
#define RD_SPIN_KERNEL_EVERY 8
#define RD_STACK_FDS 32

static struct sw_sock *(*rd_lookup)(int fd);
static struct rd_sys rd_sys;

/* Kernel reports whose data.u64 has this bit are for an fd of the switch
 * (a provider listener) that a sleep watched for the pending upgrade of
 * the program's fd in the low bits. */
#define RD_TAG (1ull << 62)
/* The most such fds one sleep watches; beyond, the sleep is bounded. */
#define RD_MAX_EXTRA 64
#define RD_PENDING_NAP_NS 2000000

/* ---- time --------------------------------------------------------------- */

static int64_t rd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Deadline in ns for a timeout (NULL = never: -1). */
static int64_t rd_deadline(const struct timespec *t)
{
	if (!t)
		return -1;
	if (t->tv_sec < 0 || t->tv_nsec < 0 || t->tv_nsec >= 1000000000)
		return -2;
	if (t->tv_sec > INT64_MAX / 2000000000)
		return -1;
	return rd_now() + (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* Time left before end, as a timespec for the kernel (NULL: forever). */
static struct timespec *rd_left(int64_t end, struct timespec *ts)
{
	int64_t left;

	if (end < 0)
		return NULL;
	left = end - rd_now();
	if (left < 0)
		left = 0;
	ts->tv_sec = left / 1000000000;
	ts->tv_nsec = left % 1000000000;
	return ts;
}

/* A sleep with switch sockets in the set wakes up at least every
 * sw_idle_sleep_ms() while connections hold buffers they may give back:
 * the wait loop then re-arms, which lets idle connections shrink. */
static struct timespec *rd_left_sleep(int64_t end, struct timespec *ts)
{
	int cap = sw_idle_sleep_ms();
	int64_t capend;

	if (cap < 0)
		return rd_left(end, ts);
	capend = rd_now() + (int64_t)cap * 1000000;
	if (end < 0 || capend < end)
		return rd_left(capend, ts);
	return rd_left(end, ts);
}

static bool rd_expired(int64_t end)
{
	return end >= 0 && rd_now() >= end;
}

static const struct timespec rd_zero;

/* ---- epoll bookkeeping -------------------------------------------------- */

/*
 * One fd in one epoll set, as the program registered it. The kernel holds
 * the same fd with data.u64 = fd, so that its reports can be mapped back.
 *
 * A carried switch socket (sw_poll_carried) keeps one kernel registration
 * for the doorbell, EPOLLIN, level-triggered, whatever the program asks:
 * its readiness is the switch's, so the program's EPOLL_CTL_MOD, and its
 * DEL and later ADD, change only this entry, with no system call (a
 * program that toggles EPOLLOUT or removes and re-adds a socket for each
 * request, as event libraries do, paid most of its time in the kernel's
 * epoll_ctl). A DEL leaves a ghost (live false): the kernel registration
 * stays, nothing is reported, and it goes at the next wait once the socket
 * is no longer carried, or when the fd is closed.
 */
struct rd_ent {
	int fd;
	uint32_t events;	/* the program's events and mode bits */
	epoll_data_t data;	/* the program's data */
	uint32_t kev;		/* what the kernel registration asks */
	uint64_t seq;		/* sw_event_seq last looked at (edge) */
	bool seq_valid;
	bool is_ep;		/* fd is an epoll set with bookkeeping */
	bool disarmed;		/* EPOLLONESHOT reported, until a MOD */
	bool out_veto;		/* the switch vetoed EPOLLOUT: not asked
				 * of the kernel, a credit doorbell wakes
				 * us instead */
	bool known;		/* pend looked at since the fd is managed */
	bool pend;		/* its upgrade is pending */
	bool pend_in;		/* ... and the kernel also watches EPOLLIN
				 * (the server's hello) */
	bool carried;		/* the kernel registration is the doorbell's */
	bool live;		/* the program has it registered */
};

struct rd_ep {
	int epfd;
	int refs;		/* under rd_reg_lock */
	struct sw_spin spin;	/* busy-poll budget of waits on this set */
	pthread_mutex_t lock;	/* the entries */
	int cap;
	struct rd_ent **ent;	/* indexed by fd */
	/* where the next scan starts: after the last fd the previous one
	 * reported, so that every ready socket's turn comes in order, as in
	 * the kernel's ready list (a scan from fd 0 served the low fds first
	 * on every call: under wrk with 16 connections to nginx the highest
	 * got half the requests of the lowest) */
	int scan_from;
};

struct rd_reg {
	int size;
	struct rd_ep *_Atomic ep[];
};

static pthread_mutex_t rd_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rd_reg *_Atomic rd_reg;
static atomic_int rd_nsets;

void rd_init(struct sw_sock *(*lookup)(int fd), const struct rd_sys *sys)
{
	rd_lookup = lookup;
	rd_sys = *sys;
}

static void rd_ep_free(struct rd_ep *ep)
{
	int i;

	for (i = 0; i < ep->cap; i++)
		free(ep->ent[i]);
	free(ep->ent);
	pthread_mutex_destroy(&ep->lock);
	free(ep);
}

static void rd_ep_put(struct rd_ep *ep)
{
	bool last;

	pthread_mutex_lock(&rd_reg_lock);
	last = --ep->refs == 0;
	pthread_mutex_unlock(&rd_reg_lock);
	if (last)
		rd_ep_free(ep);
}

/* The bookkeeping of epfd with a reference, or NULL. Lock-free when epfd
 * has none (the common case for poll of ordinary fds). */
static struct rd_ep *rd_ep_get(int epfd)
{
	struct rd_reg *r = atomic_load(&rd_reg);
	struct rd_ep *ep;

	if (!r || epfd < 0 || epfd >= r->size ||
	    !atomic_load_explicit(&r->ep[epfd], memory_order_relaxed))
		return NULL;
	pthread_mutex_lock(&rd_reg_lock);
	r = atomic_load(&rd_reg);
	ep = atomic_load(&r->ep[epfd]);
	if (ep)
		ep->refs++;
	pthread_mutex_unlock(&rd_reg_lock);
	return ep;
}

/* Under rd_reg_lock: makes room for epfd (old tables stay allocated for
 * lock-free readers, which only ever read "none" from them). */
static int rd_reg_grow(int epfd)
{
	struct rd_reg *old = atomic_load(&rd_reg), *r;
	int size = old ? old->size : 0, i;

	if (epfd < size)
		return 0;
	while (size <= epfd)
		size = size ? 2 * size : 256;
	r = calloc(1, sizeof(*r) + (size_t)size * sizeof(r->ep[0]));
	if (!r)
		return -ENOMEM;
	r->size = size;
	for (i = 0; old && i < old->size; i++)
		r->ep[i] = atomic_load(&old->ep[i]);
	atomic_store(&rd_reg, r);
	return 0;
}

void rd_epoll_created(int epfd)
{
	struct rd_ep *ep, *stale;

	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return;	/* the set then simply passes to the kernel */
	ep->epfd = epfd;
	ep->refs = 1;
	pthread_mutex_init(&ep->lock, NULL);
	pthread_mutex_lock(&rd_reg_lock);
	if (rd_reg_grow(epfd)) {
		pthread_mutex_unlock(&rd_reg_lock);
		rd_ep_free(ep);
		return;
	}
	stale = atomic_exchange(&atomic_load(&rd_reg)->ep[epfd], ep);
	if (!stale)
		atomic_fetch_add(&rd_nsets, 1);
	pthread_mutex_unlock(&rd_reg_lock);
	if (stale)
		rd_ep_put(stale);
}

static int rd_ep_reserve(struct rd_ep *ep, int fd)
{
	struct rd_ent **n;
	int cap = ep->cap;

	if (fd < cap)
		return 0;
	while (cap <= fd)
		cap = cap ? 2 * cap : 64;
	n = realloc(ep->ent, (size_t)cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	memset(n + ep->cap, 0, (size_t)(cap - ep->cap) * sizeof(*n));
	ep->ent = n;
	ep->cap = cap;
	return 0;
}

void rd_fds_closed(unsigned int first, unsigned int last)
{
	struct rd_ep *stack[32], **sets = stack, *ep;
	struct rd_reg *r;
	int n = 0, i, fd, hi, cap = 32;

	if (!atomic_load_explicit(&rd_nsets, memory_order_relaxed))
		return;
	pthread_mutex_lock(&rd_reg_lock);
	r = atomic_load(&rd_reg);
	if (r && atomic_load(&rd_nsets) > cap) {
		cap = r->size;
		sets = calloc((size_t)cap, sizeof(*sets));
		if (!sets) {
			/* Without memory the entries stay; a later wait
			 * drops kernel reports it cannot map. */
			pthread_mutex_unlock(&rd_reg_lock);
			return;
		}
	}
	for (i = 0; r && i < r->size && n < cap; i++) {
		ep = atomic_load(&r->ep[i]);
		if (!ep)
			continue;
		if ((unsigned int)i >= first && (unsigned int)i <= last) {
			/* The epoll fd itself is closed: its set goes. */
			atomic_store(&r->ep[i], NULL);
			atomic_fetch_sub(&rd_nsets, 1);
			sets[n++] = ep;	/* the registry's reference */
			continue;
		}
		ep->refs++;
		sets[n++] = ep;
	}
	pthread_mutex_unlock(&rd_reg_lock);
	for (i = 0; i < n; i++) {
		ep = sets[i];
		pthread_mutex_lock(&ep->lock);
		hi = last >= (unsigned int)ep->cap ? ep->cap - 1 : (int)last;
		for (fd = (int)first; fd >= 0 && fd <= hi; fd++) {
			/* the program's registrations end with the fd (or
			 * with the last fd of its file, as in the kernel);
			 * a ghost was the switch's, and goes now */
			if (ep->ent[fd] && !ep->ent[fd]->live)
				sdp_sys.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, fd,
						  NULL);
			free(ep->ent[fd]);
			ep->ent[fd] = NULL;
		}
		pthread_mutex_unlock(&ep->lock);
		rd_ep_put(ep);
	}
	if (sets != stack)
		free(sets);
}

/* What the kernel registration of e must ask: the program's events, but
 * while the switch vetoes EPOLLOUT (the TCP fd is always writable, the SAN
 * path may have no credits) EPOLLIN instead, for the credit doorbell. */
static uint32_t rd_kev(const struct rd_ent *e, bool managed)
{
	uint32_t ev = e->events;

	if (e->carried)
		return EPOLLIN;
	if (managed && e->out_veto)
		ev = (ev & ~(uint32_t)EPOLLOUT) | EPOLLIN;
	if (managed && e->pend_in)
		ev |= EPOLLIN;
	return ev;
}

static int rd_kernel_ctl(int epfd, int op, struct rd_ent *e, uint32_t kev)
{
	struct epoll_event kv = { .events = kev, .data.u64 = (uint64_t)e->fd };
	int ret;

	ret = sdp_sys.epoll_ctl(epfd, op, e->fd, &kv);
	if (ret == 0)
		e->kev = kev;
	return ret;
}

/* Whether events may share the doorbell registration: a one-shot or
 * exclusive registration keeps the kernel's own semantics. */
static bool rd_carry_ok(uint32_t events)
{
	return !(events & (EPOLLONESHOT | EPOLLEXCLUSIVE));
}

static bool rd_carry(const struct rd_ent *e, struct sw_sock *s)
{
	return s && (!e->live || rd_carry_ok(e->events)) &&
	       sw_poll_carried(s);
}

/*
 * Brings the kernel registration of e (switch socket s, or NULL) in line
 * with the fd's state: an fd that became managed after EPOLL_CTL_ADD, a
 * veto set or lifted, a socket that became carried or stopped being so.
 * Returns true when e was a ghost no longer carried: the kernel
 * registration and the entry are gone.
 */
static bool rd_ent_sync(struct rd_ep *ep, struct rd_ent *e, struct sw_sock *s)
{
	bool carry;
	uint32_t kev;

	if (!s && !e->carried && e->live)
		return false;	/* a plain fd: nothing to keep in line */
	carry = rd_carry(e, s);
	if (!e->live && !carry) {
		sdp_sys.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, e->fd, NULL);
		ep->ent[e->fd] = NULL;
		free(e);
		return true;
	}
	if (carry != e->carried) {
		e->carried = carry;
		e->seq_valid = false;	/* the kernel's edge restarts too */
	}
	kev = rd_kev(e, s != NULL);
	if (kev != e->kev && (!e->disarmed || e->carried))
		rd_kernel_ctl(ep->epfd, EPOLL_CTL_MOD, e, kev);
	return false;
}

/* EPOLL_CTL_ADD or _MOD of a carried socket's entry: the kernel's doorbell
 * registration stays as it is. */
static int rd_ent_recarry(struct rd_ent *e, int op,
			  const struct epoll_event *event)
{
	if (op == EPOLL_CTL_ADD && e->live) {
		errno = EEXIST;
		return -1;
	}
	if (op == EPOLL_CTL_MOD && !e->live) {
		errno = ENOENT;
		return -1;
	}
	e->events = event->events;
	e->data = event->data;
	e->live = true;
	e->disarmed = false;
	e->seq_valid = false;	/* as the kernel re-reports after a MOD */
	e->out_veto = false;
	return 0;
}

int rd_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	struct rd_ep *ep, *inner;
	struct rd_ent *e, *old;
	struct sw_sock *s;
	int ret = -1;

	ep = rd_ep_get(epfd);
	if (!ep)	/* a set made before the switch started, or not epoll */
		return sdp_sys.epoll_ctl(epfd, op, fd, event);
	if (op != EPOLL_CTL_DEL && !event) {
		rd_ep_put(ep);
		errno = EFAULT;
		return -1;
	}
	s = rd_lookup(fd);
	inner = s ? NULL : rd_ep_get(fd);
	pthread_mutex_lock(&ep->lock);
	old = fd >= 0 && fd < ep->cap ? ep->ent[fd] : NULL;
	switch (op) {
	case EPOLL_CTL_ADD:
	case EPOLL_CTL_MOD:
		if (old && old->carried && s && rd_carry_ok(event->events) &&
		    sw_poll_carried(s)) {
			ret = rd_ent_recarry(old, op, event);
			break;
		}
		if (old && !old->live) {
			/* a ghost that cannot stay carried: the kernel
			 * still holds the fd, with the doorbell's events */
			if (op == EPOLL_CTL_MOD) {
				errno = ENOENT;
				break;
			}
			op = EPOLL_CTL_MOD;
		}
		if (fd < 0 || rd_ep_reserve(ep, fd)) {
			errno = fd < 0 ? EBADF : ENOMEM;
			break;
		}
		e = calloc(1, sizeof(*e));
		if (!e) {
			errno = ENOMEM;
			break;
		}
		e->fd = fd;
		e->events = event->events;
		e->data = event->data;
		e->is_ep = inner != NULL;
		e->live = true;
		if (s) {
			e->known = true;
			int nap;

			e->pend = sw_poll_upgrade_fds(s, NULL, 0,
						      &e->pend_in, &nap) >= 0;
			e->carried = !e->pend && rd_carry(e, s);
		}
		ret = rd_kernel_ctl(epfd, op, e, rd_kev(e, s != NULL));
		if (ret) {
			free(e);
			break;
		}
		ep->ent[fd] = e;
		free(old);
		break;
	case EPOLL_CTL_DEL:
		if (old && !old->live) {
			errno = ENOENT;
			break;
		}
		if (old && old->carried && s && sw_poll_carried(s)) {
			/* the doorbell registration stays, for a later
			 * ADD (rd_ent_sync drops it when no longer
			 * carried) */
			old->live = false;
			old->events = 0;
			ret = 0;
			break;
		}
		ret = sdp_sys.epoll_ctl(epfd, op, fd, event);
		if (ret == 0 || errno == ENOENT || errno == EBADF) {
			if (old)
				ep->ent[fd] = NULL;
			free(old);
		}
		break;
	default:
		ret = sdp_sys.epoll_ctl(epfd, op, fd, event);
		break;
	}
	pthread_mutex_unlock(&ep->lock);
	if (inner)
		rd_ep_put(inner);
	if (s)
		sw_sock_unref(s);
	rd_ep_put(ep);
	return ret;
}

/* ---- SAN readiness of one entry and of whole sets ----------------------- */

static bool rd_ep_san_ready(struct rd_ep *ep, int depth);
static bool rd_ep_arm(struct rd_ep *ep, int depth);

static short rd_mask(short events)
{
	return (short)(events | POLLERR | POLLHUP | POLLNVAL);
}

/*
 * Edge-triggered: the revents of s, and in *after the arrival counter they
 * account for. Progress made by sw_poll_revents itself may move the
 * counter; an arrival that came after a "nothing" answer is looked at
 * again, so that recording *after never hides unreported data.
 */
static uint32_t rd_edge_revents(struct sw_sock *s, const struct rd_ent *e,
				uint32_t kr, uint64_t before, uint64_t *after)
{
	uint32_t mask = (e->events & 0xffff) | EPOLLERR | EPOLLHUP;
	uint32_t r;

	r = (uint16_t)sw_poll_revents(s, (short)e->events, (short)kr) & mask;
	*after = sw_event_seq(s);
	if (!r && *after != before) {
		before = *after;
		r = (uint16_t)sw_poll_revents(s, (short)e->events, 0) & mask;
		*after = sw_event_seq(s);
		if (!r)
			*after = before;
	}
	return r;
}

/*
 * SAN readiness of e (socket s, or a nested set) with no kernel report.
 * consume: this is the set being waited on (edge state advances); false
 * when an outer set only asks whether this one would report.
 */
static uint32_t rd_ent_san(struct rd_ent *e, struct sw_sock *s, int depth,
			   bool consume)
{
	struct rd_ep *inner;
	uint64_t seq, after;
	uint32_t r = 0;

	if (e->disarmed || !e->live)
		return 0;
	if (e->is_ep) {
		inner = rd_ep_get(e->fd);
		if (inner) {
			if (depth < RD_MAX_DEPTH &&
			    rd_ep_san_ready(inner, depth + 1))
				r = e->events & EPOLLIN;
			rd_ep_put(inner);
		}
		return r;
	}
	if (!s)
		return 0;
	if (!(e->events & EPOLLET)) {
		r = (uint16_t)sw_poll_revents(s, (short)e->events, 0);
		return r & ((e->events & 0xffff) | EPOLLERR | EPOLLHUP);
	}
	seq = sw_event_seq(s);
	if (e->seq_valid && seq == e->seq) {
		/* Nothing new that the switch knows of; what the provider
		 * holds is seen only by taking it (a busy-poll that never
		 * looked spun out its whole budget, 500 us, with a request
		 * waiting: wrk -c1 against nginx made 1.9 k requests/s). */
		sw_poll_progress(s);
		seq = sw_event_seq(s);
		if (seq == e->seq)
			return 0;
	}
	r = rd_edge_revents(s, e, 0, seq, &after);
	if (consume) {
		e->seq = after;
		e->seq_valid = true;
	}
	return r;
}

static bool rd_ep_san_ready(struct rd_ep *ep, int depth)
{
	struct sw_sock *s;
	struct rd_ent *e;
	bool ready = false;
	int fd;

	pthread_mutex_lock(&ep->lock);
	for (fd = 0; fd < ep->cap && !ready; fd++) {
		e = ep->ent[fd];
		if (!e)
			continue;
		s = e->is_ep ? NULL : rd_lookup(fd);
		if (s || e->is_ep)
			ready = rd_ent_san(e, s, depth, false) != 0;
		if (s)
			sw_sock_unref(s);
	}
	pthread_mutex_unlock(&ep->lock);
	return ready;
}

/* Set by rd_ent_arm in this thread: bound the coming sleep. */
static __thread bool rd_nap;
#define RD_EDGE_NAP_NS 10000000

static uint32_t rd_ent_arm(struct rd_ent *e, struct sw_sock *s, int depth)
{
	struct rd_ep *inner;
	uint32_t r = 0;

	if (e->disarmed || !e->live)
		return 0;
	if (e->is_ep) {
		inner = rd_ep_get(e->fd);
		if (inner) {
			if (depth < RD_MAX_DEPTH && rd_ep_arm(inner, depth + 1))
				r = e->events & EPOLLIN;
			rd_ep_put(inner);
		}
		return r;
	}
	if (!s)
		return 0;
	r = (uint16_t)sw_poll_arm(s, (short)e->events);
	r &= (e->events & 0xffff) | EPOLLERR | EPOLLHUP;
	if (r && (e->events & EPOLLET) && e->seq_valid &&
	    sw_event_seq(s) == e->seq) {
		/* Ready with data already reported: not an edge. The switch
		 * may not have armed the wake-up then, so the sleep is
		 * bounded (RD_EDGE_NAP_NS) instead of trusting a doorbell. */
		rd_nap = true;
		return 0;
	}
	if (r && (e->events & EPOLLET)) {
		/* reported now: this arrival is consumed as an edge */
		e->seq = sw_event_seq(s);
		e->seq_valid = true;
	}
	return r;
}

/* Announces "wake me" on every switch socket of the set (and of nested
 * sets); true when one turned out ready meanwhile. */
static bool rd_ep_arm(struct rd_ep *ep, int depth)
{
	struct sw_sock *s;
	struct rd_ent *e;
	bool ready = false;
	int fd;

	pthread_mutex_lock(&ep->lock);
	for (fd = 0; fd < ep->cap; fd++) {
		e = ep->ent[fd];
		if (!e)
			continue;
		s = e->is_ep ? NULL : rd_lookup(fd);
		if (s || e->is_ep)
			ready |= rd_ent_arm(e, s, depth) != 0;
		if (s)
			sw_sock_unref(s);
	}
	pthread_mutex_unlock(&ep->lock);
	return ready;
}

/* Nothing is ready and the caller will wait: every switch socket of the
 * set sends what it kept back (nested sets do so when armed). */
static void rd_ep_idle(struct rd_ep *ep)
{
	struct sw_sock *s;
	int fd;

	pthread_mutex_lock(&ep->lock);
	for (fd = 0; fd < ep->cap; fd++) {
		if (!ep->ent[fd] || ep->ent[fd]->is_ep || !ep->ent[fd]->live)
			continue;
		s = rd_lookup(fd);
		if (s) {
			sw_poll_idle(s);
			sw_sock_unref(s);
		}
	}
	pthread_mutex_unlock(&ep->lock);
}

/* ---- pending upgrades in a sleep ---------------------------------------- */

/*
 * What the coming sleep of epoll_wait, poll or select watches besides the
 * program's fds so that pending upgrades move on while the program sleeps:
 * the switch's fds (sw_poll_upgrade_fds), each with the program's fd it
 * serves.
 */
struct rd_extra {
	int xfd[RD_MAX_EXTRA];
	int xowner[RD_MAX_EXTRA];
	int nx;
	bool xfull;		/* more than fit: bound the sleep */
	int nap_ms;		/* an upgrade seen only by looking: bound */
	bool progressed;	/* an upgrade moved on while arming */
};

static void rd_extra_reset(struct rd_extra *x)
{
	x->nx = 0;
	x->nap_ms = 0;
	x->xfull = x->progressed = false;
}

/* Collects what moves the pending upgrade of s (the program's fd owner)
 * on. Returns -1 when s has no pending upgrade, 1 when its TCP fd must be
 * watched for POLLIN too, else 0. The program's bytes travel on TCP during
 * the upgrade, so a sleep with nothing to watch for it is no longer bounded:
 * the upgrade moves on at the program's next call. */
static int rd_extra_collect(struct rd_extra *x, struct sw_sock *s, int owner)
{
	int fds[2], k, i, nap;
	bool in;

	k = sw_poll_upgrade_fds(s, fds, 2, &in, &nap);
	if (k == -1)
		return -1;
	if (k == -2)
		x->progressed = true;
	if (nap && (!x->nap_ms || nap < x->nap_ms))
		x->nap_ms = nap;
	for (i = 0; i < k; i++) {
		if (x->nx >= RD_MAX_EXTRA) {
			x->xfull = true;
			break;
		}
		x->xfd[x->nx] = fds[i];
		x->xowner[x->nx++] = owner;
	}
	return in;
}

/* The sleep's bound for what was collected: none when an upgrade moved
 * on, a short nap when one has nothing to watch. */
static const struct timespec *rd_extra_bound(const struct rd_extra *x,
					     const struct timespec *t,
					     struct timespec *nap)
{
	int64_t bound = x->xfull ? RD_PENDING_NAP_NS :
				   (int64_t)x->nap_ms * 1000000;

	if (x->progressed)
		return &rd_zero;
	if (bound && (!t || (int64_t)t->tv_sec * 1000000000 + t->tv_nsec >
				    bound)) {
		nap->tv_sec = bound / 1000000000;
		nap->tv_nsec = bound % 1000000000;
		return nap;
	}
	return t;
}

/* After the sleep: every upgrade that was waited for moves on. */
static void rd_extra_woken(struct rd_extra *x)
{
	struct sw_sock *s;
	int i;

	for (i = 0; i < x->nx; i++) {
		if (i && x->xowner[i] == x->xowner[i - 1])
			continue;
		s = rd_lookup(x->xowner[i]);
		if (s) {
			sw_poll_upgrade_woken(s);
			sw_sock_unref(s);
		}
	}
	x->nx = 0;
}

/* ---- epoll_wait --------------------------------------------------------- */

/* The reports of one epoll_wait call, with the fd behind each. */
struct rd_out {
	struct epoll_event *evs;
	int *fds;
	int n;
	int max;
	struct rd_extra x;	/* for pending upgrades */
};

/* Adds (or merges) one report for e into the program's array. */
static void rd_report(struct rd_out *o, struct rd_ent *e, uint32_t r)
{
	int i;

	for (i = 0; i < o->n; i++)
		if (o->fds[i] == e->fd) {
			o->evs[i].events |= r;
			return;
		}
	if (o->n >= o->max)
		return;
	o->evs[o->n].events = r;
	o->evs[o->n].data = e->data;
	o->fds[o->n++] = e->fd;
	if (e->events & EPOLLONESHOT)
		e->disarmed = true;
}

/* SAN readiness of every entry of the set being waited on (or "wake me"
 * when arm). *special counts the switch sockets and nested sets. */
static void rd_ep_scan(struct rd_ep *ep, struct rd_out *o, bool arm,
		       int *special)
{
	struct sw_sock *s;
	struct rd_ent *e;
	uint32_t r;
	int fd, k;

	*special = 0;
	pthread_mutex_lock(&ep->lock);
	for (k = 0; k < ep->cap && o->n < o->max; k++) {
		fd = ep->scan_from + k < ep->cap ? ep->scan_from + k :
						   ep->scan_from + k - ep->cap;
		e = ep->ent[fd];
		if (!e)
			continue;
		s = e->is_ep ? NULL : rd_lookup(fd);
		if (!e->is_ep && (!e->live || (e->carried && !s)) &&
		    rd_ent_sync(ep, e, s)) {
			if (s)
				sw_sock_unref(s);
			continue;	/* a ghost, gone */
		}
		if (s && e->live && e->known && !e->carried && !e->pend &&
		    !e->out_veto && sw_poll_plain(s)) {
			/* on TCP for good: the kernel answers for it, and
			 * its reports pass through rd_ep_merge */
			sw_sock_unref(s);
			continue;
		}
		if (!s && !e->is_ep)
			continue;
		++*special;
		if (!e->live) {
			sw_sock_unref(s);
			continue;
		}
		if (s && (!e->known || e->pend)) {
			int nap;

			/* rare: only until the upgrade settles */
			e->pend = sw_poll_upgrade_fds(s, NULL, 0,
						      &e->pend_in, &nap) >= 0;
			e->known = true;
		}
		if (s && e->out_veto &&
		    (sw_poll_revents(s, POLLOUT, POLLOUT) & POLLOUT))
			e->out_veto = false;	/* writable again */
		if (s)
			rd_ent_sync(ep, e, s);
		r = arm ? rd_ent_arm(e, s, 0) : rd_ent_san(e, s, 0, true);
		if (arm && s && !r && (e->events & EPOLLOUT) && !e->out_veto &&
		    !(sw_poll_revents(s, POLLOUT, POLLOUT) & POLLOUT)) {
			/* Not writable by the switch's word while the kernel's
			 * TCP send buffer is: an edge-triggered registration
			 * would never hear of it again (the kernel reports
			 * EPOLLOUT only when its buffer drains). Sleep on the
			 * credit doorbell instead, as after a vetoed report. */
			e->out_veto = true;
			rd_ent_sync(ep, e, s);
		}
		if (r)
			rd_report(o, e, r);
		else if (arm && s && e->pend && !e->disarmed)
			rd_extra_collect(&o->x, s, e->fd);
		if (s)
			sw_sock_unref(s);
	}
	if (o->n && ep->cap)
		ep->scan_from = (o->fds[o->n - 1] + 1) % ep->cap;
	pthread_mutex_unlock(&ep->lock);
}

/* Maps the kernel's reports back to the program's entries. */
static void rd_ep_merge(struct rd_ep *ep, struct rd_out *o,
			const struct epoll_event *kev, int k)
{
	struct sw_sock *s;
	struct rd_ent *e;
	uint32_t r, kr;
	int i, fd;

	pthread_mutex_lock(&ep->lock);
	for (i = 0; i < k; i++) {
		fd = (int)(kev[i].data.u64 & ~RD_TAG);
		/* a switch fd of a pending upgrade: news for its socket,
		 * nothing the kernel knows of the socket itself */
		kr = kev[i].data.u64 & RD_TAG ? 0 : kev[i].events;
		e = fd >= 0 && fd < ep->cap ? ep->ent[fd] : NULL;
		if (!e || (e->disarmed && !e->carried))
			continue;	/* removed meanwhile, or oneshot */
		s = e->is_ep ? NULL : rd_lookup(fd);
		if (!s) {
			if (e->live && !e->carried)
				rd_report(o, e, kr);
			continue;
		}
		if (!e->live || e->disarmed) {
			/* a doorbell for no one: drained, not reported */
			sw_poll_revents(s, 0, (short)kr);
			rd_ent_sync(ep, e, s);
			sw_sock_unref(s);
			continue;
		}
		if (e->events & EPOLLET) {
			uint64_t prev = e->seq, after;
			bool had = e->seq_valid;

			r = rd_edge_revents(s, e, kr, sw_event_seq(s), &after);
			/* the kernel's edge may be a doorbell for data that
			 * was reported already: only news is an edge */
			if (had && after == prev &&
			    !(r & (EPOLLERR | EPOLLHUP)))
				r = 0;
			e->seq = after;
			e->seq_valid = true;
		} else {
			r = (uint16_t)sw_poll_revents(s, (short)e->events,
						      (short)kr);
			r &= (e->events & 0xffff) | EPOLLERR | EPOLLHUP;
		}
		if ((kr & EPOLLOUT) && (e->events & EPOLLOUT) &&
		    !(r & EPOLLOUT))
			e->out_veto = true;
		if (r) {
			rd_report(o, e, r);
		} else if (e->events & EPOLLONESHOT) {
			/* A doorbell only: the kernel disarmed the fd for
			 * nothing, arm it again. */
			rd_kernel_ctl(ep->epfd, EPOLL_CTL_MOD, e,
				      rd_kev(e, true));
		}
		rd_ent_sync(ep, e, s);
		sw_sock_unref(s);
	}
	pthread_mutex_unlock(&ep->lock);
}

static int rd_kernel_wait(int epfd, struct epoll_event *kev, int max,
			  const struct timespec *t, const sigset_t *mask)
{
	int ms;

	if (rd_sys.epoll_pwait2)
		return rd_sys.epoll_pwait2(epfd, kev, max, t, mask);
	if (!t) {
		ms = -1;
	} else if (t->tv_sec >= INT32_MAX / 1000) {
		ms = INT32_MAX;
	} else {
		/* Round up: waking early would only loop. */
		ms = (int)(t->tv_sec * 1000 + (t->tv_nsec + 999999) / 1000000);
	}
	return rd_sys.epoll_pwait(epfd, kev, max, ms, mask);
}

/* The kernel watches the switch fds of pending upgrades for one sleep.
 * An fd another thread's sleep on this set watches already (EEXIST) is
 * not ours to remove: the sleep is bounded instead. */
static void rd_extra_begin(struct rd_ep *ep, struct rd_out *o)
{
	struct rd_extra *x = &o->x;
	struct epoll_event ev = { .events = EPOLLIN };
	int i;

	for (i = 0; i < x->nx; i++) {
		ev.data.u64 = RD_TAG | (uint64_t)x->xowner[i];
		if (sdp_sys.epoll_ctl(ep->epfd, EPOLL_CTL_ADD, x->xfd[i],
				      &ev)) {
			x->xfd[i] = -1;
			x->xfull = true;
		}
	}
}

/* After the sleep: the switch fds leave the set, and every upgrade that
 * was waited for moves on. */
static void rd_extra_end(struct rd_ep *ep, struct rd_out *o, int k)
{
	struct rd_extra *x = &o->x;
	int saved = errno, i;

	(void)k;
	for (i = 0; i < x->nx; i++)
		if (x->xfd[i] >= 0)
			sdp_sys.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, x->xfd[i],
					  NULL);
	rd_extra_woken(x);
	errno = saved;
}

/*
 * One pass over the set: SAN readiness (or, when arm, "wake me" on each
 * switch socket), then the kernel, with timeout t when nothing was ready
 * (NULL: forever) and zero otherwise; when the set turns out to hold no
 * switch socket at all, with t_plain instead (the caller's whole timeout).
 * kernel false: SAN only. Returns the number of reports or -1; *special as
 * for rd_ep_scan.
 */
static int rd_ep_pass(struct rd_ep *ep, struct rd_out *o,
		      struct epoll_event *kev, bool arm, bool kernel,
		      const struct timespec *t, const sigset_t *mask,
		      const struct timespec *t_plain, int *special)
{
	struct timespec nap = { .tv_nsec = RD_EDGE_NAP_NS };
	int k;

	o->n = 0;
	rd_extra_reset(&o->x);
	rd_nap = false;
	rd_ep_scan(ep, o, false, special);
	if (!o->n && arm)
		rd_ep_scan(ep, o, true, special);
	if ((!kernel && !o->n) || o->n >= o->max) {
		rd_extra_end(ep, o, 0);
		return o->n;
	}
	if (!*special) {
		t = t_plain;
	} else {
		t = rd_extra_bound(&o->x, t, &nap);
		if (rd_nap && (!t || t->tv_sec || t->tv_nsec > nap.tv_nsec))
			t = &nap;
		if (t == &rd_zero)
			mask = NULL;
	}
	if (o->n)
		t = &rd_zero;
	else
		rd_extra_begin(ep, o);
	k = rd_kernel_wait(ep->epfd, kev, o->max - o->n, t,
			   o->n ? NULL : mask);
	rd_extra_end(ep, o, k);
	if (k < 0)
		return o->n ? o->n : -1;
	rd_ep_merge(ep, o, kev, k);
	return o->n;
}

static int rd_ep_wait(struct rd_ep *ep, struct epoll_event *evs, int max,
		      const struct timespec *timeout, const sigset_t *mask)
{
	struct epoll_event stack[RD_STACK_FDS], *kev = stack;
	int fdstack[RD_STACK_FDS];
	struct rd_out o = { .evs = evs, .fds = fdstack, .max = max };
	int64_t end, spin_end, slept;
	struct timespec ts;
	int n, special;
	unsigned int i;

	end = rd_deadline(timeout);
	if (end == -2) {
		errno = EINVAL;
		return -1;
	}
	if (max > RD_STACK_FDS) {
		kev = malloc((size_t)max * (sizeof(*kev) + sizeof(int)));
		if (!kev) {
			errno = ENOMEM;
			return -1;
		}
		o.fds = (int *)(kev + max);
	}
	for (;;) {
		/* A set without switch sockets sleeps in this first pass. */
		n = rd_ep_pass(ep, &o, kev, false, true, &rd_zero, mask,
			       rd_left(end, &ts), &special);
		if (n || rd_expired(end))
			break;
		if (!special)
			continue;
		rd_ep_idle(ep);
		spin_end = rd_now() + (int64_t)sw_spin_budget_ns(&ep->spin);
		for (i = 1; !n && rd_now() < spin_end && !rd_expired(end); i++) {
			if (!(i & 7))
				sched_yield(); /* the peer may need this core */
			n = rd_ep_pass(ep, &o, kev, false,
				       i % RD_SPIN_KERNEL_EVERY == 0,
				       &rd_zero, NULL, &rd_zero, &special);
		}
		if (n)
			break;
		slept = rd_now();
		n = rd_ep_pass(ep, &o, kev, true, true,
			       rd_left_sleep(end, &ts), mask,
			       rd_left_sleep(end, &ts), &special);
		sw_spin_slept(&ep->spin, (uint64_t)(rd_now() - slept), n > 0);
		if (n || rd_expired(end))
			break;
	}
	if (kev != stack) {
		int saved = errno;

		free(kev);
		errno = saved;
	}
	return n;
}

int rd_epoll_wait(int epfd, struct epoll_event *evs, int max,
		  const struct timespec *timeout, const sigset_t *mask)
{
	struct rd_ep *ep;
	int n;

	ep = max > 0 ? rd_ep_get(epfd) : NULL;
	if (!ep)
		return rd_kernel_wait(epfd, evs, max, timeout, mask);
	n = rd_ep_wait(ep, evs, max, timeout, mask);
	rd_ep_put(ep);
	return n;
}

/* ---- poll and select ---------------------------------------------------- */

/* One poll call's view of its fds: the switch socket or epoll set behind
 * each (NULL for plain fds) and the kernel's copy of the array. */
struct rd_pollset {
	struct pollfd *fds;
	nfds_t nfds;
	struct pollfd *kfds;
	struct sw_sock **socks;
	struct rd_ep **eps;
	short *san;		/* SAN revents found this pass */
	bool *veto;		/* POLLOUT vetoed by the switch */
	bool *pend;		/* its pending upgrade needs POLLIN (found
				 * arming) */
	struct rd_extra x;	/* kfds has room for these after nfds */
};

static bool rd_ps_special(const struct rd_pollset *ps, nfds_t i)
{
	return ps->socks[i] || ps->eps[i];
}

/* SAN readiness of each fd (or, when arm, "wake me" on each switch socket,
 * and what the sleep must watch for pending upgrades, as epoll does). */
static int rd_ps_scan(struct rd_pollset *ps, bool arm)
{
	struct pollfd *p;
	int n = 0;
	nfds_t i;
	short r;

	for (i = 0; i < ps->nfds; i++) {
		p = &ps->fds[i];
		r = 0;
		if (ps->socks[i])
			r = arm ? sw_poll_arm(ps->socks[i], p->events) :
				sw_poll_revents(ps->socks[i], p->events, 0);
		else if (ps->eps[i] && (arm ? rd_ep_arm(ps->eps[i], 1) :
					rd_ep_san_ready(ps->eps[i], 1)))
			r = POLLIN;
		r &= rd_mask(p->events);
		ps->san[i] = r;
		n += r != 0;
		if (arm && !r && ps->socks[i])
			ps->pend[i] = rd_extra_collect(&ps->x, ps->socks[i],
						       p->fd) > 0;
	}
	return n;
}

static int rd_ps_pass(struct rd_pollset *ps, bool arm, bool kernel,
		      const struct timespec *t, const sigset_t *mask)
{
	struct pollfd *p, *kp;
	struct timespec nap;
	int n, k, count = 0, j;
	nfds_t i;
	short r;

	rd_extra_reset(&ps->x);
	for (i = 0; i < ps->nfds; i++)
		ps->pend[i] = false;
	n = rd_ps_scan(ps, false);
	if (!n && arm)
		n = rd_ps_scan(ps, true);
	if (!kernel && !n)
		return 0;
	for (i = 0; i < ps->nfds; i++) {
		p = &ps->fds[i];
		kp = &ps->kfds[i];
		kp->fd = p->fd;
		kp->events = p->events;
		kp->revents = 0;
		if (ps->socks[i] && ps->veto[i]) {
			/* Not writable by the switch's word: wait for
			 * the credit doorbell instead. */
			kp->events &= ~POLLOUT;
			kp->events |= POLLIN;
		}
		/* a pending upgrade moves on with bytes on TCP (hello,
		 * doorbell), whatever the program asked */
		if (ps->pend[i])
			kp->events |= POLLIN;
	}
	if (n) {
		t = &rd_zero;
		ps->x.nx = 0;	/* no sleep: nothing more to watch */
	} else {
		t = rd_extra_bound(&ps->x, t, &nap);
	}
	for (j = 0; j < ps->x.nx; j++) {
		kp = &ps->kfds[ps->nfds + (nfds_t)j];
		kp->fd = ps->x.xfd[j];
		kp->events = POLLIN;
		kp->revents = 0;
	}
	k = rd_sys.ppoll(ps->kfds, ps->nfds + (nfds_t)ps->x.nx, t,
			 n || t == &rd_zero ? NULL : mask);
	if (ps->x.nx) {
		int saved = errno;

		/* the switch's own fds are not reported */
		for (j = 0; k > 0 && j < ps->x.nx; j++)
			if (ps->kfds[ps->nfds + (nfds_t)j].revents)
				k--;
		rd_extra_woken(&ps->x);
		errno = saved;
	}
	if (k < 0 && !n)
		return -1;
	for (i = 0; i < ps->nfds; i++) {
		p = &ps->fds[i];
		kp = &ps->kfds[i];
		if (k < 0)
			kp->revents = 0;
		r = kp->revents;
		if (ps->socks[i]) {
			r = sw_poll_revents(ps->socks[i], p->events, r);
			r &= rd_mask(p->events);
			if ((kp->revents & POLLOUT) && (p->events & POLLOUT) &&
			    !(r & POLLOUT))
				ps->veto[i] = true;
		} else if (ps->eps[i]) {
			r &= rd_mask(p->events);
		}
		r |= ps->san[i];
		p->revents = r;
		count += r != 0;
	}
	return count;
}

/* poll and select keep no state between calls: one budget per thread */
static __thread struct sw_spin rd_ps_spin;

static int rd_ps_wait(struct rd_pollset *ps, int64_t end,
		      const sigset_t *mask)
{
	struct timespec ts;
	int64_t spin_end, slept;
	unsigned int i;
	int n;

	for (;;) {
		n = rd_ps_pass(ps, false, true, &rd_zero, NULL);
		if (n || rd_expired(end))
			return n;
		for (i = 0; i < ps->nfds; i++)
			if (ps->socks[i])
				sw_poll_idle(ps->socks[i]);
		spin_end = rd_now() + (int64_t)sw_spin_budget_ns(&rd_ps_spin);
		for (i = 1; !n && rd_now() < spin_end && !rd_expired(end); i++) {
			if (!(i & 7))
				sched_yield(); /* the peer may need this core */
			n = rd_ps_pass(ps, false,
				       i % RD_SPIN_KERNEL_EVERY == 0,
				       &rd_zero, NULL);
		}
		if (n)
			return n;
		slept = rd_now();
		n = rd_ps_pass(ps, true, true, rd_left_sleep(end, &ts), mask);
		sw_spin_slept(&rd_ps_spin, (uint64_t)(rd_now() - slept), n > 0);
		if (n || rd_expired(end))
			return n;
	}
}

/* Fills the switch sockets and epoll sets behind fds; returns how many
 * fds are special (0: the kernel alone answers). */
static int rd_ps_lookup(struct rd_pollset *ps)
{
	int n = 0;
	nfds_t i;

	for (i = 0; i < ps->nfds; i++) {
		ps->socks[i] = rd_lookup(ps->fds[i].fd);
		if (ps->socks[i] && sw_poll_plain(ps->socks[i])) {
			/* on TCP for good: a plain fd to poll */
			sw_sock_unref(ps->socks[i]);
			ps->socks[i] = NULL;
		}
		ps->eps[i] = ps->socks[i] ? NULL : rd_ep_get(ps->fds[i].fd);
		ps->veto[i] = false;
		n += rd_ps_special(ps, i);
	}
	return n;
}

static void rd_ps_release(struct rd_pollset *ps)
{
	nfds_t i;

	for (i = 0; i < ps->nfds; i++) {
		if (ps->socks[i])
			sw_sock_unref(ps->socks[i]);
		if (ps->eps[i])
			rd_ep_put(ps->eps[i]);
	}
}

/* One allocation for the per-call arrays (on the stack for small sets). */
struct rd_ps_mem {
	struct pollfd kfds[RD_STACK_FDS + RD_MAX_EXTRA];
	struct sw_sock *socks[RD_STACK_FDS];
	struct rd_ep *eps[RD_STACK_FDS];
	short san[RD_STACK_FDS];
	bool veto[RD_STACK_FDS];
	bool pend[RD_STACK_FDS];
};

static int rd_ps_init(struct rd_pollset *ps, struct rd_ps_mem *m,
		      struct pollfd *fds, nfds_t nfds)
{
	size_t each = sizeof(struct pollfd) + sizeof(void *) * 2 +
		sizeof(short) + sizeof(bool) * 2;
	size_t extra = sizeof(struct pollfd) * RD_MAX_EXTRA;
	char *p;

	ps->fds = fds;
	ps->nfds = nfds;
	if (nfds <= RD_STACK_FDS) {
		ps->kfds = m->kfds;
		ps->socks = m->socks;
		ps->eps = m->eps;
		ps->san = m->san;
		ps->veto = m->veto;
		ps->pend = m->pend;
		return 0;
	}
	if (nfds > (SIZE_MAX - extra) / each) {
		errno = EINVAL;
		return -1;
	}
	p = malloc(nfds * each + extra);
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	/* Largest alignment first. */
	ps->socks = (struct sw_sock **)p;
	ps->eps = (struct rd_ep **)(p + nfds * sizeof(void *));
	ps->kfds = (struct pollfd *)(p + nfds * sizeof(void *) * 2);
	ps->san = (short *)((char *)ps->kfds + nfds * sizeof(struct pollfd) +
			    extra);
	ps->veto = (bool *)((char *)ps->san + nfds * sizeof(short));
	ps->pend = ps->veto + nfds;
	return 0;
}

static void rd_ps_fini(struct rd_pollset *ps, struct rd_ps_mem *m)
{
	if (ps->socks != m->socks)
		free(ps->socks);
}

int rd_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
	     const sigset_t *mask)
{
	struct rd_pollset ps;
	struct rd_ps_mem mem;
	int64_t end;
	int n, saved;

	if (!nfds || rd_ps_init(&ps, &mem, fds, nfds))
		return rd_sys.ppoll(fds, nfds, timeout, mask);
	if (!rd_ps_lookup(&ps)) {
		rd_ps_fini(&ps, &mem);
		return rd_sys.ppoll(fds, nfds, timeout, mask);
	}
	end = rd_deadline(timeout);
	if (end == -2) {
		errno = EINVAL;
		n = -1;
	} else {
		n = rd_ps_wait(&ps, end, mask);
	}
	saved = errno;
	rd_ps_release(&ps);
	rd_ps_fini(&ps, &mem);
	errno = saved;
	return n;
}

/* select(2) on poll: POLLIN|POLLHUP|POLLERR read, POLLOUT|POLLERR write,
 * POLLPRI except, as the kernel maps them. */
#define RD_SEL_IN (POLLIN | POLLRDNORM | POLLRDBAND | POLLHUP | POLLERR)
#define RD_SEL_OUT (POLLOUT | POLLWRNORM | POLLWRBAND | POLLERR)
#define RD_SEL_EX (POLLPRI)

/* fd_set bits by hand: sets larger than FD_SETSIZE are legal. */
#define RD_NFDBITS (8 * (int)sizeof(unsigned long))

static bool rd_isset(int fd, fd_set *set)
{
	unsigned long *w = (unsigned long *)set;

	return set && (w[fd / RD_NFDBITS] >> (fd % RD_NFDBITS)) & 1;
}

static void rd_clr(int fd, fd_set *set)
{
	unsigned long *w = (unsigned long *)set;

	w[fd / RD_NFDBITS] &= ~(1ul << (fd % RD_NFDBITS));
}

static int rd_select_kernel(int nfds, fd_set *r, fd_set *w, fd_set *e,
			    struct timespec *t, bool update,
			    const sigset_t *mask)
{
	struct timeval tv;
	int ret;

	if (!update || mask)
		return rd_sys.pselect(nfds, r, w, e, t, mask);
	if (t) {
		tv.tv_sec = t->tv_sec;
		tv.tv_usec = (t->tv_nsec + 999) / 1000;
	}
	ret = rd_sys.select(nfds, r, w, e, t ? &tv : NULL);
	if (t) {
		t->tv_sec = tv.tv_sec;
		t->tv_nsec = tv.tv_usec * 1000;
	}
	return ret;
}

int rd_pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
	       struct timespec *timeout, bool update, const sigset_t *mask)
{
	struct rd_ps_mem mem;
	struct rd_pollset ps;
	struct pollfd *pfds, stack[RD_STACK_FDS];
	struct sw_sock *s;
	struct rd_ep *ep;
	int fd, n = 0, special = 0, ret, saved;
	int64_t end;
	nfds_t i;

	if (nfds < 0) {
		errno = EINVAL;
		return -1;
	}
	/* One scan: is any fd of the sets special? */
	for (fd = 0; fd < nfds; fd++) {
		if (!rd_isset(fd, rfds) && !rd_isset(fd, wfds) &&
		    !rd_isset(fd, efds))
			continue;
		n++;
		if (special)
			continue;
		s = rd_lookup(fd);
		ep = s ? NULL : rd_ep_get(fd);
		special = s || ep;
		if (s)
			sw_sock_unref(s);
		if (ep)
			rd_ep_put(ep);
	}
	if (!special)
		return rd_select_kernel(nfds, rfds, wfds, efds, timeout,
					update, mask);
	end = rd_deadline(timeout);
	if (end == -2) {
		errno = EINVAL;
		return -1;
	}
	pfds = n <= RD_STACK_FDS ? stack : calloc((size_t)n, sizeof(*pfds));
	if (!pfds) {
		errno = ENOMEM;
		return -1;
	}
	for (fd = 0, i = 0; fd < nfds; fd++) {
		short ev = 0;

		if (rd_isset(fd, rfds))
			ev |= POLLIN;
		if (rd_isset(fd, wfds))
			ev |= POLLOUT;
		if (rd_isset(fd, efds))
			ev |= POLLPRI;
		if (!ev)
			continue;
		pfds[i].fd = fd;
		pfds[i].events = ev;
		pfds[i].revents = 0;
		i++;
	}
	ret = -1;
	if (rd_ps_init(&ps, &mem, pfds, (nfds_t)n))
		goto free_pfds;
	rd_ps_lookup(&ps);
	ret = rd_ps_wait(&ps, end, mask);
	saved = errno;
	rd_ps_release(&ps);
	rd_ps_fini(&ps, &mem);
	errno = saved;
	if (ret < 0)
		goto free_pfds;
	for (i = 0; i < (nfds_t)n; i++) {
		if (pfds[i].revents & POLLNVAL) {
			errno = EBADF;
			ret = -1;
			goto free_pfds;
		}
	}
	ret = 0;
	for (i = 0; i < (nfds_t)n; i++) {
		fd = pfds[i].fd;
		if (rd_isset(fd, rfds) && !(pfds[i].revents & RD_SEL_IN))
			rd_clr(fd, rfds);
		if (rd_isset(fd, wfds) && !(pfds[i].revents & RD_SEL_OUT))
			rd_clr(fd, wfds);
		if (rd_isset(fd, efds) && !(pfds[i].revents & RD_SEL_EX))
			rd_clr(fd, efds);
		ret += rd_isset(fd, rfds) + rd_isset(fd, wfds) +
			rd_isset(fd, efds);
	}
	if (timeout && update)
		rd_left(end, timeout);
free_pfds:
	saved = errno;
	if (pfds != stack)
		free(pfds);
	errno = saved;
	return ret;
}

/* ---- fork --------------------------------------------------------------- */

void rd_atfork_prepare(void)
{
	pthread_mutex_lock(&rd_reg_lock);
}

void rd_atfork_parent(void)
{
	pthread_mutex_unlock(&rd_reg_lock);
}

/* The child has one thread: no set lock can be held by anyone now. */
void rd_atfork_child(void)
{
	struct rd_reg *r = atomic_load(&rd_reg);
	struct rd_ep *ep;
	int i;

	for (i = 0; r && i < r->size; i++) {
		ep = atomic_load(&r->ep[i]);
		if (ep)
			pthread_mutex_init(&ep->lock, NULL);
	}
	pthread_mutex_init(&rd_reg_lock, NULL);
}

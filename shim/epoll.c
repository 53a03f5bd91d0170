/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * epoll.c - epoll for sets that hold switch sockets (DESIGN.md 4a): the
 * bookkeeping of each set (which fds, events, data, mode), SAN readiness
 * of its entries, and epoll_wait: a bounded busy-poll, "wake me" on every
 * switch socket, then a sleep in the kernel on the program's TCP fds.
 */
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd_budget.h"
#include "fdtable.h"
#include "rd_wait.h"
#include "readiness.h"
#include "ownfd.h"
#include "spin.h"
#include "sys.h"

/* The kernel refuses epoll nesting deeper than this; so do we. */
#define RD_MAX_DEPTH 5

/*
 * The kernel registrations this file makes carry data.u64 = RD_OWN | fd,
 * so that the kernel's reports can be told from those of registrations
 * made around the wrappers (io_uring's IORING_OP_EPOLL_CTL, a raw system
 * call, a set made before the switch started): those carry the program's
 * own data and are passed on exactly as the kernel reports them. Pointers
 * and small integers, what programs put there, never have these top bits.
 * Reports with RD_TAG as well are for an fd of the switch (a provider
 * listener) that a sleep watched for the pending upgrade of the program's
 * fd in the low bits; with RD_BELL, for the set's own bell (rd_ep_bell).
 */
#define RD_OWN_MASK (0xffffull << 48)
#define RD_OWN (0x5dbfull << 48)
#define RD_TAG (1ull << 40)
#define RD_BELL (1ull << 41)
#define RD_FD_MASK 0xffffffffull

/* ---- epoll bookkeeping -------------------------------------------------- */

/*
 * One fd in one epoll set, as the program registered it. The kernel holds
 * the same fd with data.u64 = RD_OWN | fd, so that its reports can be
 * mapped back.
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
	bool out_told;		/* edge-triggered EPOLLOUT reported, and
				 * writable at every look since */
	uint64_t nospace;	/* sw_nospace_seq when it was reported */
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
	/*
	 * The set's bell, an eventfd of the switch's in the kernel set, made
	 * when the first switch socket joins it (-1 before, or when no
	 * descriptor could be spared). Threads inside epoll_wait on the set
	 * count themselves in waiters. Another thread's EPOLL_CTL_ADD or
	 * MOD of a switch socket meanwhile rings the bell: the waiter, asleep
	 * in the kernel, had asked no "wake me" of that socket, and its bytes
	 * would come without a doorbell (Apache's event MPM hands each
	 * keep-alive connection back to its listener thread's set so; not
	 * woken, a request waits for the keep-alive timeout). The kernel's
	 * epoll_ctl wakes its waiters for a ready fd alike.
	 */
	int bellfd;
	atomic_int waiters;
};

struct rd_reg {
	int size;
	struct rd_ep *_Atomic ep[];
};

static pthread_mutex_t rd_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rd_reg *_Atomic rd_reg;
static atomic_int rd_nsets;


static void rd_ep_free(struct rd_ep *ep)
{
	int i;

	if (ep->bellfd >= 0) {
		sw_fd_forget(ep->bellfd);
		sdp_sys.close(ep->bellfd);
	}
	for (i = 0; i < ep->cap; i++)
		free(ep->ent[i]);
	free(ep->ent);
	pthread_mutex_destroy(&ep->lock);
	free(ep);
}

void rd_ep_put(struct rd_ep *ep)
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
struct rd_ep *rd_ep_get(int epfd)
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
	ep->bellfd = -1;
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

static void fds_closed(unsigned int first, unsigned int last, bool detach);

void rd_fds_closed(unsigned int first, unsigned int last)
{
	fds_closed(first, last, false);
}

void rd_sock_closed(int fd)
{
	fds_closed((unsigned int)fd, (unsigned int)fd, true);
}

static void fds_closed(unsigned int first, unsigned int last, bool detach)
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
			 * with the last fd of its file, as in the kernel),
			 * and so do the switch's own (a ghost, kept for a
			 * later ADD): the kernel ends them with the file's
			 * last fd in any process. A forked process that
			 * closes what it inherited must leave them in the
			 * set it shares with the other, which still holds
			 * the file and its entry. Every registration of a
			 * switch socket whose file the switch may hold open
			 * after the close (detach) goes now */
			if (ep->ent[fd] && detach)
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
	struct epoll_event kv = {
		.events = kev, .data.u64 = RD_OWN | (uint64_t)e->fd
	};
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
	e->out_told = false;
	return 0;
}

/* Under ep->lock: the set's bell, made and put in the kernel set once. */
static void rd_ep_bell(struct rd_ep *ep)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = RD_OWN | RD_BELL };
	int fd;

	if (ep->bellfd >= 0 || !sw_fd_may_open(1))
		return;
	fd = (int)syscall(SYS_eventfd2, 0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0)
		return;
	fd = sw_fd_own(fd, &ep->bellfd);
	if (fd < 0)
		return;
	if (sdp_sys.epoll_ctl(ep->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		sw_fd_forget(fd);
		sdp_sys.close(fd);
		return;
	}
	__atomic_store_n(&ep->bellfd, fd, __ATOMIC_RELEASE);
}

static void rd_ep_ring(struct rd_ep *ep)
{
	uint64_t one = 1;
	int fd = __atomic_load_n(&ep->bellfd, __ATOMIC_ACQUIRE);

	if (fd >= 0 && atomic_load(&ep->waiters))
		(void)!sdp_sys.write(fd, &one, sizeof(one));
}

static void rd_ep_bell_drain(struct rd_ep *ep)
{
	uint64_t n;
	int fd = __atomic_load_n(&ep->bellfd, __ATOMIC_ACQUIRE);

	if (fd >= 0)
		(void)!sdp_sys.read(fd, &n, sizeof(n));
}

int rd_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	struct rd_ep *ep, *inner;
	struct rd_ent *e, *old;
	struct sw_sock *s;
	bool carried = false;
	int ret = -1;

	ep = rd_ep_get(epfd);
	if (!ep)	/* a set made before the switch started, or not epoll */
		return sdp_sys.epoll_ctl(epfd, op, fd, event);
	if (op != EPOLL_CTL_DEL && !event) {
		rd_ep_put(ep);
		errno = EFAULT;
		return -1;
	}
	s = fdt_get(fd);
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
		if (s)
			rd_ep_bell(ep);
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
	if (!ret && s && op != EPOLL_CTL_DEL && fd < ep->cap && ep->ent[fd])
		carried = ep->ent[fd]->carried && ep->ent[fd]->live;
	pthread_mutex_unlock(&ep->lock);
	/* a waiter asleep on the set asked no "wake me" of this socket: a
	 * carried one is asked here, and its doorbell wakes the waiter when
	 * bytes come; one with bytes (or room) already, or not carried
	 * yet, rings the set's bell, and the waiter looks again */
	if (!ret && s && op != EPOLL_CTL_DEL && atomic_load(&ep->waiters) &&
	    (!carried || sw_poll_arm(s, (short)event->events)))
		rd_ep_ring(ep);
	if (inner)
		rd_ep_put(inner);
	if (s)
		sw_sock_unref(s);
	rd_ep_put(ep);
	return ret;
}

/* ---- SAN readiness of one entry and of whole sets ----------------------- */

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
 * Edge-triggered EPOLLOUT as the kernel reports it for a TCP socket: once
 * after the program's ADD or MOD, then again only when the socket is
 * woken: bytes (EPOLLIN), urgent data, the peer's end or an error come, or
 * it turns writable after it was not. The switch's own traffic (its
 * hellos, the upgrade's steps and the move of the kernel registration to
 * the doorbell, credit returns, doorbells) is no such wake-up. r: what is
 * about to be reported; returns it, EPOLLOUT dropped when it is no edge.
 */
static uint32_t rd_et_out(struct rd_ent *e, struct sw_sock *s, uint32_t r)
{
	uint64_t nospace;

	if (!(e->events & EPOLLET) || !(e->events & EPOLLOUT))
		return r;
	/* a send found no room since: the room that came is an edge */
	nospace = sw_nospace_seq(s);
	if (nospace != e->nospace) {
		e->nospace = nospace;
		e->out_told = false;
	}
	if (!(r & EPOLLOUT)) {
		if (r)	/* a look that found it not writable */
			e->out_told = false;
		return r;
	}
	if (e->out_told &&
	    !(r & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLERR | EPOLLHUP)))
		r &= ~(uint32_t)EPOLLOUT;
	e->out_told = true;
	return r;
}

/* e is a nested set: EPOLLIN when fn (SAN readiness or arming) finds one of
 * its entries ready, within the kernel's nesting limit. */
static uint32_t rd_ent_nested(struct rd_ent *e, int depth,
			      bool (*fn)(struct rd_ep *ep, int depth))
{
	struct rd_ep *inner = rd_ep_get(e->fd);
	uint32_t r = 0;

	if (inner) {
		if (depth < RD_MAX_DEPTH && fn(inner, depth + 1))
			r = e->events & EPOLLIN;
		rd_ep_put(inner);
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
	uint64_t seq, after;
	uint32_t r = 0;

	if (e->disarmed || !e->live)
		return 0;
	if (e->is_ep)
		return rd_ent_nested(e, depth, rd_ep_san_ready);
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
		r = rd_et_out(e, s, r);
	}
	return r;
}

/* Runs fn on each entry of the set that is a switch socket or a nested
 * set, until one answers non-zero unless all; true when one did. */
static bool rd_ep_each(struct rd_ep *ep, int depth, bool all,
		       uint32_t (*fn)(struct rd_ent *e, struct sw_sock *s,
				      int depth))
{
	struct sw_sock *s;
	struct rd_ent *e;
	bool ready = false;
	int fd;

	pthread_mutex_lock(&ep->lock);
	for (fd = 0; fd < ep->cap && (all || !ready); fd++) {
		e = ep->ent[fd];
		if (!e)
			continue;
		s = e->is_ep ? NULL : fdt_get(fd);
		if (s || e->is_ep)
			ready |= fn(e, s, depth) != 0;
		if (s)
			sw_sock_unref(s);
	}
	pthread_mutex_unlock(&ep->lock);
	return ready;
}

static uint32_t rd_ent_san_peek(struct rd_ent *e, struct sw_sock *s, int depth)
{
	return rd_ent_san(e, s, depth, false);
}

bool rd_ep_san_ready(struct rd_ep *ep, int depth)
{
	return rd_ep_each(ep, depth, false, rd_ent_san_peek);
}

/* Set by rd_ent_arm in this thread: bound the coming sleep. */
static __thread bool rd_nap;
#define RD_EDGE_NAP_NS 10000000

static uint32_t rd_ent_arm(struct rd_ent *e, struct sw_sock *s, int depth)
{
	uint32_t r;

	if (e->disarmed || !e->live)
		return 0;
	if (e->is_ep)
		return rd_ent_nested(e, depth, rd_ep_arm);
	if (!s)
		return 0;
	r = (uint16_t)sw_poll_arm(s, (short)e->events);
	r &= (e->events & 0xffff) | EPOLLERR | EPOLLHUP;
	if (r && (e->events & EPOLLET) && e->seq_valid &&
	    sw_event_seq(s) == e->seq) {
		/* Ready with what was already reported: not an edge. What is
		 * ready (most often EPOLLOUT, which stays: gRPC and libuv
		 * register EPOLLIN|EPOLLOUT|EPOLLET for good) kept the switch
		 * from arming the wake-up for the rest, whose arrival would
		 * then wait for the bound: armed for the rest alone now, the
		 * doorbell ends the sleep. Only when that cannot be (the rest
		 * is ready too, or nothing is left to wait for) is the sleep
		 * bounded (RD_EDGE_NAP_NS) instead of trusting a doorbell. */
		uint32_t rest = e->events & 0xffff & ~r &
				(EPOLLIN | EPOLLRDNORM | EPOLLPRI | EPOLLRDHUP);
		short q = rest ? sw_poll_arm_quiet(s, (short)rest) : -1;

		if (q == 0)
			return 0;
		if (q < 0 || !(q & rest)) {
			rd_nap = true;
			return 0;
		}
		/* the rest came meanwhile: an edge */
		r |= (uint16_t)q & rest;
	}
	if (r && (e->events & EPOLLET)) {
		/* reported now: this arrival is consumed as an edge */
		e->seq = sw_event_seq(s);
		e->seq_valid = true;
		r = rd_et_out(e, s, r);
	}
	return r;
}

/* Announces "wake me" on every switch socket of the set (and of nested
 * sets); true when one turned out ready meanwhile. */
bool rd_ep_arm(struct rd_ep *ep, int depth)
{
	return rd_ep_each(ep, depth, true, rd_ent_arm);
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
		s = fdt_get(fd);
		if (s) {
			sw_poll_idle(s);
			sw_sock_unref(s);
		}
	}
	pthread_mutex_unlock(&ep->lock);
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

/* A kernel report for a registration the wrappers did not make: passed on
 * as it is, never dropped (DESIGN.md 4, "sight"). */
static void rd_report_foreign(struct rd_out *o, const struct epoll_event *k)
{
	if (o->n >= o->max)
		return;
	o->evs[o->n] = *k;
	o->fds[o->n++] = -1;
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
		s = e->is_ep ? NULL : fdt_get(fd);
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
			e->out_told = false;
			rd_ent_sync(ep, e, s);
		}
		if (r)
			rd_report(o, e, r);
		else if (arm && s && e->pend && !e->disarmed)
			rd_extra_collect(&o->x, s, e->fd);
		if (arm && s && !r && !e->disarmed && e->live)
			rd_extra_nap(&o->x,
				     sw_poll_nap_ms(s, (short)e->events));
		if (s)
			sw_sock_unref(s);
	}
	if (o->n && ep->cap && o->fds[o->n - 1] >= 0)
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
		if ((kev[i].data.u64 & RD_OWN_MASK) != RD_OWN) {
			rd_report_foreign(o, &kev[i]);
			continue;
		}
		if (kev[i].data.u64 & RD_BELL) {
			/* the next pass arms what joined the set */
			rd_ep_bell_drain(ep);
			continue;
		}
		fd = (int)(kev[i].data.u64 & RD_FD_MASK);
		/* a switch fd of a pending upgrade: news for its socket,
		 * nothing the kernel knows of the socket itself */
		kr = kev[i].data.u64 & RD_TAG ? 0 : kev[i].events;
		e = fd >= 0 && fd < ep->cap ? ep->ent[fd] : NULL;
		if (!e || (e->disarmed && !e->carried))
			continue;	/* removed meanwhile, or oneshot */
		s = e->is_ep ? NULL : fdt_get(fd);
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
		    !(r & EPOLLOUT)) {
			e->out_veto = true;
			e->out_told = false;
		}
		r = rd_et_out(e, s, r);
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

	if (sdp_sys.epoll_pwait2)
		return sdp_sys.epoll_pwait2(epfd, kev, max, t, mask);
	if (!t) {
		ms = -1;
	} else if (t->tv_sec >= INT32_MAX / 1000) {
		ms = INT32_MAX;
	} else {
		/* Round up: waking early would only loop. */
		ms = (int)(t->tv_sec * 1000 + (t->tv_nsec + 999999) / 1000000);
	}
	return sdp_sys.epoll_pwait(epfd, kev, max, ms, mask);
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
		ev.data.u64 = RD_OWN | RD_TAG | (uint64_t)x->xowner[i];
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
	int k, w;

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
	w = sdp_wait_begin();
	k = rd_kernel_wait(ep->epfd, kev, o->max - o->n, t,
			   o->n ? NULL : mask);
	sdp_wait_end(w);
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
	unsigned int i, sig0 = sdp_sig_seen;

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
		for (i = 1; !n && rd_now() < spin_end && !rd_expired(end) &&
			    sdp_sig_seen == sig0; i++) {
			if (!(i & 7))
				rd_yield(); /* the peer may need this core */
			n = rd_ep_pass(ep, &o, kev, false,
				       i % RD_SPIN_KERNEL_EVERY == 0,
				       &rd_zero, NULL, &rd_zero, &special);
		}
		if (n)
			break;
		/* a handler ran while we polled: the kernel's epoll_wait
		 * returns EINTR then, whatever SA_RESTART says */
		if (sdp_sig_seen != sig0) {
			errno = EINTR;
			n = -1;
			break;
		}
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
	atomic_fetch_add(&ep->waiters, 1);
	n = rd_ep_wait(ep, evs, max, timeout, mask);
	atomic_fetch_sub(&ep->waiters, 1);
	rd_ep_put(ep);
	return n;
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

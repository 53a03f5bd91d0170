/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * poll.c - poll, ppoll, select and pselect over sets that hold switch
 * sockets or epoll sets (DESIGN.md 4a): SAN readiness first, a bounded
 * busy-poll, "wake me" on every switch socket, then a sleep in the kernel.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fdtable.h"
#include "rd_wait.h"
#include "readiness.h"
#include "spin.h"
#include "sys.h"

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
		if (arm && !r && ps->socks[i]) {
			ps->pend[i] = rd_extra_collect(&ps->x, ps->socks[i],
						       p->fd) > 0;
			rd_extra_nap(&ps->x, sw_poll_nap_ms(ps->socks[i],
							    p->events));
		}
	}
	return n;
}

/* A sleep on the switch sockets' TCP fds begins (or ends): until it ends,
 * other threads leave the doorbells there for it (sw_poll_sleep). */
static void rd_ps_sleepers(struct rd_pollset *ps, bool begin)
{
	nfds_t i;
	int fd;

	for (i = 0; i < ps->nfds; i++) {
		if (!ps->socks[i])
			continue;
		fd = sw_poll_sleep(ps->socks[i], begin);
		/* and the thread's eventfd: another thread that takes news
		 * for the socket wakes this one there */
		if (begin)
			rd_extra_wake_fd(&ps->x, fd);
	}
}

static int rd_ps_pass(struct rd_pollset *ps, bool arm, bool kernel,
		      const struct timespec *t, const sigset_t *mask)
{
	struct pollfd *p, *kp;
	struct timespec nap;
	int n, k, count = 0, j, w;
	bool sleep;
	nfds_t i;
	short r;

	rd_extra_reset(&ps->x);
	for (i = 0; i < ps->nfds; i++)
		ps->pend[i] = false;
	n = rd_ps_scan(ps, false);
	sleep = !n && arm;
	if (sleep) {
		rd_ps_sleepers(ps, true);
		n = rd_ps_scan(ps, true);
	}
	if (!kernel && !n) {
		if (sleep)
			rd_ps_sleepers(ps, false);
		return 0;
	}
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
	w = sdp_wait_begin();
	k = sdp_sys.ppoll(ps->kfds, ps->nfds + (nfds_t)ps->x.nx, t,
			 n || t == &rd_zero ? NULL : mask);
	sdp_wait_end(w);
	if (sleep) {
		int saved = errno;

		rd_ps_sleepers(ps, false);
		errno = saved;
	}
	if (ps->x.nx) {
		int saved = errno;

		/* the switch's own fds are not reported; the thread's
		 * eventfd is emptied */
		for (j = 0; k > 0 && j < ps->x.nx; j++) {
			kp = &ps->kfds[ps->nfds + (nfds_t)j];
			if (!kp->revents)
				continue;
			k--;
			if (ps->x.xowner[j] < 0)
				sw_poll_woken(kp->fd, kp->revents);
		}
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
	unsigned int i, sig0 = sdp_sig_seen;
	int n;

	for (;;) {
		n = rd_ps_pass(ps, false, true, &rd_zero, NULL);
		if (n || rd_expired(end))
			return n;
		for (i = 0; i < ps->nfds; i++)
			if (ps->socks[i])
				sw_poll_idle(ps->socks[i]);
		spin_end = rd_now() + (int64_t)sw_spin_budget_ns(&rd_ps_spin);
		for (i = 1; !n && rd_now() < spin_end && !rd_expired(end) &&
			    sdp_sig_seen == sig0; i++) {
			if (!(i & 7))
				rd_yield(); /* the peer may need this core */
			n = rd_ps_pass(ps, false,
				       i % RD_SPIN_KERNEL_EVERY == 0,
				       &rd_zero, NULL);
		}
		if (n)
			return n;
		/* a handler ran while we polled: poll and select return
		 * EINTR then, whatever SA_RESTART says */
		if (sdp_sig_seen != sig0) {
			errno = EINTR;
			return -1;
		}
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
		ps->socks[i] = fdt_get(ps->fds[i].fd);
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
		return sdp_sys.ppoll(fds, nfds, timeout, mask);
	if (!rd_ps_lookup(&ps)) {
		rd_ps_fini(&ps, &mem);
		return sdp_sys.ppoll(fds, nfds, timeout, mask);
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
		return sdp_sys.pselect(nfds, r, w, e, t, mask);
	if (t) {
		tv.tv_sec = t->tv_sec;
		tv.tv_usec = (t->tv_nsec + 999) / 1000;
	}
	ret = sdp_sys.select(nfds, r, w, e, t ? &tv : NULL);
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
		s = fdt_get(fd);
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

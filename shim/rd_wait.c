/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rd_wait.c - the part of a poll, select or epoll sleep that serves the
 * switch's pending upgrades: which of the switch's fds the sleep watches
 * besides the program's, how long it may last, and the upgrades it moves on.
 */
#include "fdtable.h"
#include "rd_wait.h"

const struct timespec rd_zero;

void rd_extra_reset(struct rd_extra *x)
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
int rd_extra_collect(struct rd_extra *x, struct sw_sock *s, int owner)
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

/* The sleeping thread's own eventfd (sw_poll_sleep), watched besides the
 * program's fds; no program fd owns it. A thread that could not list one
 * may miss news another thread takes for the socket: its sleep is short. */
void rd_extra_wake_fd(struct rd_extra *x, int fd)
{
	int i;

	if (fd < 0) {
		rd_extra_nap(x, SW_UNLISTED_NAP_MS);
		return;
	}
	for (i = 0; i < x->nx; i++)
		if (x->xfd[i] == fd)
			return;
	if (x->nx >= RD_MAX_EXTRA) {
		x->xfull = true;
		return;
	}
	x->xfd[x->nx] = fd;
	x->xowner[x->nx++] = -1;
}

/* A switch socket that no doorbell is sure to wake bounds the sleep. */
void rd_extra_nap(struct rd_extra *x, int ms)
{
	if (ms && (!x->nap_ms || ms < x->nap_ms))
		x->nap_ms = ms;
}

/* The sleep's bound for what was collected: none when an upgrade moved
 * on, a short nap when one has nothing to watch. */
const struct timespec *rd_extra_bound(const struct rd_extra *x,
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
void rd_extra_woken(struct rd_extra *x)
{
	struct sw_sock *s;
	int i;

	for (i = 0; i < x->nx; i++) {
		if ((i && x->xowner[i] == x->xowner[i - 1]) ||
		    x->xowner[i] < 0)
			continue;
		s = fdt_get(x->xowner[i]);
		if (s) {
			sw_poll_upgrade_woken(s);
			sw_sock_unref(s);
		}
	}
	x->nx = 0;
}


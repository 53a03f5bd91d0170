/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rd_wait.h - what the shim's poll/select (poll.c) and epoll (epoll.c)
 * emulations share: time and deadlines, the fds of pending upgrades a sleep
 * watches, and the epoll sets a poll set may hold.
 */
#ifndef SDP_SHIM_RD_WAIT_H
#define SDP_SHIM_RD_WAIT_H

#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sdp_switch.h"
#include "spin.h"
#include "sys.h"

/* During the busy-poll, one zero-timeout kernel poll every so many checks
 * of SAN readiness. */
#define RD_SPIN_KERNEL_EVERY 8
#define RD_STACK_FDS 32

/* The most fds of pending upgrades one sleep watches; beyond, the sleep is
 * bounded. */
#define RD_MAX_EXTRA 64
#define RD_PENDING_NAP_NS 2000000

/* ---- time --------------------------------------------------------------- */

static inline int64_t rd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Deadline in ns for a timeout (NULL = never: -1). */
static inline int64_t rd_deadline(const struct timespec *t)
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
static inline struct timespec *rd_left(int64_t end, struct timespec *ts)
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
static inline struct timespec *rd_left_sleep(int64_t end, struct timespec *ts)
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

/* A yield between looks of a spinning wait, which holds no lock of the
 * switch: a signal handler may call into it meanwhile (sys.h). */
static inline void rd_yield(void)
{
	int w = sdp_wait_begin();

	sw_spin_yield();
	sdp_wait_end(w);
}

static inline bool rd_expired(int64_t end)
{
	return end >= 0 && rd_now() >= end;
}

/* A zero timeout; waits compare against its address. */
extern const struct timespec rd_zero;

static inline short rd_mask(short events)
{
	return (short)(events | POLLERR | POLLHUP | POLLNVAL);
}

/* ---- pending upgrades in a sleep (rd_wait.c) ---------------------------- */


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

void rd_extra_reset(struct rd_extra *x);
int rd_extra_collect(struct rd_extra *x, struct sw_sock *s, int owner);
const struct timespec *rd_extra_bound(const struct rd_extra *x,
				      const struct timespec *t,
				      struct timespec *nap);
void rd_extra_woken(struct rd_extra *x);
void rd_extra_nap(struct rd_extra *x, int ms);
void rd_extra_wake_fd(struct rd_extra *x, int fd);

/* ---- epoll sets inside a poll set (epoll.c) ----------------------------- */

struct rd_ep;
/* The bookkeeping of epfd with a reference, or NULL when it has none. */
struct rd_ep *rd_ep_get(int epfd);
void rd_ep_put(struct rd_ep *ep);
/* SAN readiness of the set's switch sockets (and nested sets). */
bool rd_ep_san_ready(struct rd_ep *ep, int depth);
/* "Wake me" on each of them; true when one turned out ready meanwhile. */
bool rd_ep_arm(struct rd_ep *ep, int depth);

#endif /* SDP_SHIM_RD_WAIT_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * spin.c - the adaptive busy-poll budget (spin.h). Bounds come from
 * SDP_SPIN_US (the floor, where every budget starts) and SDP_SPIN_MAX_US
 * (the ceiling); docs/configuration.md and docs/performance.md say how the
 * defaults were chosen. Several threads may wait on one epoll set: the
 * budget is read and written whole (relaxed), and a lost update only
 * delays the adaptation by one sleep.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "spin.h"
#include "util.h"

/*
 * A crowded CPU (spin.h). Each thread keeps its own view: the kernel's
 * count of the time it ran and the time it waited, runnable, on a run
 * queue (/proc/thread-self/schedstat), read at most every
 * SW_CROWD_LOOK_NS when a wait is about to poll. A share of waiting above
 * SDP_CROWD_PCT stops this thread's polls for a hold; then it polls again
 * for one look to see if the crowd has gone, and each time it has not the
 * hold doubles, up to SW_CROWD_HOLD_MAX_NS (so the polls it wastes stay
 * below 2% of the time).
 */
#define SW_CROWD_LOOK_NS 20000000ull
/* A yield of a poll that kept the thread off its CPU this long gave the
 * CPU to a thread with work of its own (a whole scheduler slice, 0.75 ms
 * or more), not to a peer that takes its step and waits again. */
#define SW_YIELD_LONG_NS 500000ull
/* Fewer yields than this since the last look say nothing of who took the
 * CPU: the waits were sleeps. */
#define SW_CROWD_MIN_YIELDS 16
#define SW_CROWD_HOLD_NS 100000000ull
#define SW_CROWD_HOLD_MAX_NS 1600000000ull
/* a thread whose /proc cannot be read (none mounted, a sandbox) looks
 * again this much later, and meanwhile polls as on a quiet host */
#define SW_CROWD_UNREADABLE_NS 10000000000ull

struct crowd {
	uint64_t look;		/* when the counts below were read; 0: never */
	uint64_t ran, waited;	/* schedstat's first two fields, in ns */
	uint64_t until;		/* no polls before this */
	uint64_t hold;		/* the next hold; 0 when the last look was quiet */
	uint64_t blind_until;	/* /proc could not be read: no look before */
	/* the polls' yields since the last look, and how many were long */
	uint32_t yields, long_yields;
};

static __thread struct crowd crowd;

static bool read_schedstat(uint64_t *ran, uint64_t *waited)
{
	char buf[96], *end;

	if (sw_read_small("/proc/thread-self/schedstat", buf, sizeof(buf)) < 0)
		return false;
	*ran = strtoull(buf, &end, 10);
	if (end == buf || *end != ' ')
		return false;
	*waited = strtoull(end + 1, &end, 10);
	return *end == ' ' || *end == '\n';
}

bool sw_cpu_crowded(void)
{
	struct crowd *c = &crowd;
	uint64_t now, ran, waited, dr, dw, wall;
	uint32_t yields, long_yields;
	bool was_held;

	if (!sw_cfg.crowd_pct)
		return false;
	now = sw_now_ns();
	if (now < c->until)
		return true;
	if ((c->look && now - c->look < SW_CROWD_LOOK_NS) ||
	    now < c->blind_until)
		return false;
	if (!read_schedstat(&ran, &waited)) {
		c->blind_until = now + SW_CROWD_UNREADABLE_NS;
		c->look = 0;
		return false;
	}
	/* the first look, the first after a hold (whose sleeps say
	 * nothing of the polls), or the first in a child of fork (a new
	 * thread, whose counts start again): only the counts to start from */
	was_held = c->until && c->look < c->until;
	if (!c->look || was_held || ran < c->ran || waited < c->waited) {
		c->look = now;
		c->ran = ran;
		c->waited = waited;
		c->yields = c->long_yields = 0;
		return false;
	}
	dr = ran - c->ran;
	dw = waited - c->waited;
	wall = now - c->look;
	c->look = now;
	c->ran = ran;
	c->waited = waited;
	yields = c->yields;
	long_yields = c->long_yields;
	c->yields = c->long_yields = 0;
	if (dw * 100 <= (dr + dw) * sw_cfg.crowd_pct) {
		c->hold = 0;
		return false;
	}
	/* The wait was the peer's turn: this thread may run on one CPU only
	 * (pinned, a one-CPU container or machine), the peer shares it, and
	 * each yield of our polls handed it the CPU for a step and got it
	 * back. Polling is what makes that pair fast (a sleep costs each
	 * message a wake-up). Waits caused by threads with work of their own
	 * show as yields that lasted a slice. A thread that may run on
	 * several CPUs waits for others than its peer too. */
	if (yields >= SW_CROWD_MIN_YIELDS && !long_yields &&
	    !sw_cpus_several()) {
		c->hold = 0;
		return false;
	}
	c->hold = c->hold ? c->hold * 2 : SW_CROWD_HOLD_NS;
	if (c->hold > SW_CROWD_HOLD_MAX_NS)
		c->hold = SW_CROWD_HOLD_MAX_NS;
	c->until = now + c->hold;
	SW_DBG("thread %d waited for a CPU %llu%% of the last %llu ms: no busy-poll for %llu ms",
	       (int)gettid(), (unsigned long long)(dw * 100 / (dr + dw)),
	       (unsigned long long)(wall / 1000000),
	       (unsigned long long)(c->hold / 1000000));
	return true;
}

uint64_t sw_spin_floor_ns(void)
{
	return sw_cpu_crowded() ? 0 : (uint64_t)sw_cfg.spin_us * 1000;
}

uint64_t sw_spin_budget_ns(struct sw_spin *sp)
{
	uint64_t lo = (uint64_t)sw_cfg.spin_us * 1000;
	uint64_t ns = __atomic_load_n(&sp->ns, __ATOMIC_RELAXED);

	if (sw_cpu_crowded())
		return 0;
	return ns < lo ? lo : ns;
}

void sw_spin_slept(struct sw_spin *sp, uint64_t slept_ns, bool event)
{
	uint64_t lo = (uint64_t)sw_cfg.spin_us * 1000;
	uint64_t hi = (uint64_t)sw_cfg.spin_max_us * 1000;
	uint64_t ns = sw_spin_budget_ns(sp);

	if (hi <= lo) {
		ns = lo;
	} else if (event && slept_ns < hi) {
		/* woken within the ceiling: polling that long would have
		 * seen it without a wake-up */
		ns *= 2;
		if (ns < slept_ns + slept_ns / 4)
			ns = slept_ns + slept_ns / 4;
	} else if (slept_ns >= hi) {
		ns /= 2;
	}
	if (ns < lo)
		ns = lo;
	if (hi > lo && ns > hi)
		ns = hi;
	__atomic_store_n(&sp->ns, ns, __ATOMIC_RELAXED);
}

void sw_spin_yield(void)
{
	struct crowd *c = &crowd;
	uint64_t t0 = sw_now_ns();

	sched_yield();
	if (c->yields < UINT32_MAX) {
		c->yields++;
		if (sw_now_ns() - t0 >= SW_YIELD_LONG_NS)
			c->long_yields++;
	}
}

void sw_spin_relax(unsigned *rounds)
{
	if (++*rounds % SW_SPIN_YIELD_EVERY == 0)
		sw_spin_yield();
	else
		__builtin_ia32_pause();
}

/* The low half of a 64-bit word in memory (where the transfer slot keeps
 * its state or push step). */
static uint32_t *low_half(_Atomic uint64_t *word)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (uint32_t *)word;
#else
	return (uint32_t *)word + 1;
#endif
}

enum sw_wait_end sw_shared_wait(_Atomic uint64_t *word, uint32_t cur32,
				uint64_t timeout_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ns / 1000000000ull),
		.tv_nsec = (long)(timeout_ns % 1000000000ull),
	};

	/* not FUTEX_PRIVATE: the word is in another process's memory too */
	if (syscall(SYS_futex, low_half(word), FUTEX_WAIT, cur32, &ts, NULL,
		    0) == 0)
		return SW_WAIT_WOKEN;
	return errno == ETIMEDOUT ? SW_WAIT_TIMEOUT : SW_WAIT_CHANGED;
}

void sw_shared_wake(_Atomic uint64_t *word)
{
	syscall(SYS_futex, low_half(word), FUTEX_WAKE, 1, NULL, NULL, 0);
}

bool sw_cpus_several(void)
{
	cpu_set_t set;

	return !sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) > 1;
}

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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "spin.h"

uint64_t sw_spin_budget_ns(struct sw_spin *sp)
{
	uint64_t lo = (uint64_t)sw_cfg.spin_us * 1000;
	uint64_t ns = __atomic_load_n(&sp->ns, __ATOMIC_RELAXED);

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

void sw_spin_relax(unsigned *rounds)
{
	if (++*rounds % SW_SPIN_YIELD_EVERY == 0)
		sched_yield();
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

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * spin.h - the adaptive busy-poll budget: how long a wait polls before it
 * asks to be woken and sleeps (DESIGN.md 5, "polling time is tunable").
 * The budget grows while sleeps end soon after they begin (a longer poll
 * would have caught the event without a wake-up) and shrinks while they
 * are long (polling burns a CPU for nothing), as KVM's halt polling does.
 * One budget per waiter: a socket's blocking calls, an epoll set, a thread's
 * poll and select.
 */
#ifndef SW_SPIN_H
#define SW_SPIN_H

#include <stdbool.h>
#include <stdint.h>

struct sw_spin {
	uint64_t ns;	/* current budget; 0 until first used */
};

/* The budget for the coming poll, in nanoseconds. */
uint64_t sw_spin_budget_ns(struct sw_spin *sp);

/*
 * A wait polled its whole budget and then slept slept_ns; event: it woke
 * because something happened (not its timeout). Adapts the budget.
 */
void sw_spin_slept(struct sw_spin *sp, uint64_t slept_ns, bool event);

/*
 * One round of a busy-wait on the peer: a pause, and every
 * SW_SPIN_YIELD_EVERY rounds a sched_yield. A peer that shares this CPU
 * (a machine with more busy threads than cores, a container held to one
 * CPU, both ends pinned together) can only make the progress this loop
 * waits for when the loop lets it run; without the yield each wait ran to
 * its bound (up to SDP_XSLOT_BLOCK_US, 2 ms) before the peer got the CPU.
 * With the peer on another core the yield finds nothing else to run and
 * returns at once.
 */
#define SW_SPIN_YIELD_EVERY 16
void sw_spin_relax(unsigned *rounds);

#endif /* SW_SPIN_H */

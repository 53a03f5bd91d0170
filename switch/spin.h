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

#endif /* SW_SPIN_H */

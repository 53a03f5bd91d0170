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

/* The budget for the coming poll, in nanoseconds (0 on a crowded CPU). */
uint64_t sw_spin_budget_ns(struct sw_spin *sp);

/*
 * Is this thread's CPU crowded: did it wait, runnable, for a CPU more than
 * SDP_CROWD_PCT of the time lately? Then a poll for the peer is worse than
 * useless: the peer, or what it waits for, is likely waiting for a CPU
 * too, and the poll takes that CPU's time from it (four runnable threads
 * on two cores: iperf3 through the switch fell from 120 to 1 Gbit/s while
 * both ends polled, and the kernel's fair scheduler starves a thread that
 * yields in a loop). Every poll's budget is then 0: each wait sleeps at
 * once, and a woken thread gets a CPU ahead of the one that kept it busy.
 * Not for a thread that may run on one CPU only when every yield of its
 * polls since the last look (sw_spin_yield) came back within
 * SW_YIELD_LONG_NS: then the CPU went to the peer for a step, on the CPU
 * both share, and polling is what keeps that pair fast.
 * Cheap: one read of /proc/thread-self/schedstat per thread per 20 ms of
 * waits at most.
 */
bool sw_cpu_crowded(void);

/* SDP_SPIN_US in nanoseconds, or 0 on a crowded CPU: the bound of a poll
 * for a step the peer usually takes within microseconds. */
uint64_t sw_spin_floor_ns(void);

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

/* The sched_yield of a poll, timed: a yield that kept this thread off its
 * CPU for a scheduler slice tells sw_cpu_crowded that the CPU went to a
 * thread with work of its own, not to the peer. */
void sw_spin_yield(void);

/*
 * A wait on a word the peer changes in memory both processes map (the
 * transfer slot), for the one case where the peer does all of a long copy
 * while this side has nothing to do: across users, only one side may
 * reach the other's memory. A loop that spins meanwhile is a third
 * runnable thread beside the copier's two, and the scheduler may then put
 * both copying threads on one core. So such a wait spins briefly, then
 * sleeps on the low 32 bits of the 64-bit word (a futex on shared memory)
 * while they still hold cur32, for at most timeout_ns; the peer wakes it
 * when it changes the word. Returns SW_WAIT_WOKEN, SW_WAIT_CHANGED (the
 * word no longer held cur32: no sleep, no proof of a wake-up; also a
 * signal) or SW_WAIT_TIMEOUT (a peer that did not wake us, or has not
 * finished). Any word the peer writes is only a reason to look again.
 */
enum sw_wait_end { SW_WAIT_WOKEN, SW_WAIT_CHANGED, SW_WAIT_TIMEOUT };
enum sw_wait_end sw_shared_wait(_Atomic uint64_t *word, uint32_t cur32,
				uint64_t timeout_ns);
void sw_shared_wake(_Atomic uint64_t *word);

/* May this thread run on more than one CPU (so that a provider can spread
 * a copy, SDP_RDMA_SPREAD)? */
bool sw_cpus_several(void);

#endif /* SW_SPIN_H */

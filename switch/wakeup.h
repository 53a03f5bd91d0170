/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * wakeup.h - wake-ups and the bounded wait of a data call (wakeup.c).
 */
#ifndef SW_WAKEUP_H
#define SW_WAKEUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Sends WAKE_ME (the caller checked the credit). */
int sw_session_arm(struct sw_sock *s);

/* The first bytes after our switch point go now: wakes the peer once. */
void sw_switch_bell(struct sw_sock *s);

/* Across a wire, the CQ's notify fd, armed, for a sleep to watch besides
 * TCP (a doorbell can overtake the message it announces); -1 for a local
 * provider, whose messages are in place before its doorbells. */
int sw_cq_sleep_fd(struct sw_sock *s);

/* Waits (lock released) until progress may have happened: spins, then arms
 * wake-me and sleeps on the TCP fd. events: POLLIN or POLLOUT interest. */
int sw_session_wait(struct sw_sock *s, short events, uint64_t deadline_ns);

/*
 * Threads asleep on one socket (wakeup.c). sw_sleep_begin (s locked):
 * the calling thread is about to sleep on s; it counts itself among the
 * socket's sleepers (s->sleepers: doorbells are left for them), lists its
 * own eventfd there and returns it for the sleep to watch besides the TCP
 * fd (-1: none, or SW_SIB_MAX listed already; the sleep is then bounded).
 * sw_sleep_end (s locked): its sleep ended; undoes both. sw_sleep_woken: after the sleep, empties the eventfd when
 * the sleep reported it (revents). sw_sleep_wake_others (s locked): this
 * thread took news for s; every other thread listed wakes.
 */
int sw_sleep_begin(struct sw_sock *s);
void sw_sleep_end(struct sw_sock *s);
void sw_sleep_woken(int fd, short revents);
void sw_sleep_wake_others(struct sw_sock *s);
/* In the child of a fork: the eventfds are the parent's too. */
void sw_wake_atfork_child(void);

/* A wait for events about to sleep (s locked, state SAN): rings the peer
 * when what it waits for needs the peer's progress, or credits the peer
 * holds (a send short of them, an acknowledgment held for want of one).
 * Blocking calls and poll, select and epoll alike. */
void sw_sleep_asks(struct sw_sock *s, short events);
/*
 * The deadline of a blocking call on s under the program's SO_RCVTIMEO
 * (rcv) or SO_SNDTIMEO, which it set on the TCP fd, counted from from_ns:
 * 0 for none. A carried connection's wait honours it as the kernel's does.
 */
uint64_t sw_timeo_deadline(struct sw_sock *s, bool rcv, uint64_t from_ns);
/* A blocking call's bound by the program's SO_RCVTIMEO (rcv) or
 * SO_SNDTIMEO, set on the TCP fd: read from it only when a wait of the
 * call first has to sleep in the kernel (a wait the busy-poll ends costs
 * no system call), and counted from the start of that wait. */
struct sw_timeo {
	bool rcv;
	bool read;		/* the option was read: deadline holds */
	uint64_t deadline;	/* 0: none */
};
/* sw_session_wait bounded by t, which the call keeps across its waits. */
int sw_session_wait_timeo(struct sw_sock *s, short events,
			  struct sw_timeo *t);

/* A blocking receive (rcv) or send that a signal handler interrupted
 * before it moved a byte: whether it goes on, as the kernel restarts it
 * (signal(7)), rather than fail with EINTR. */
bool sw_intr_restarts(struct sw_sock *s, bool rcv);

#endif /* SW_WAKEUP_H */

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

uint64_t sw_timeo_deadline(struct sw_sock *s, bool rcv);

/* A blocking receive (rcv) or send that a signal handler interrupted
 * before it moved a byte: whether it goes on, as the kernel restarts it
 * (signal(7)), rather than fail with EINTR. */
bool sw_intr_restarts(struct sw_sock *s, bool rcv);

#endif /* SW_WAKEUP_H */

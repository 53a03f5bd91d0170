/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * flusher.h - the thread that sends small bytes kept back to coalesce
 * once they have waited long enough (flusher.c).
 */
#ifndef SW_FLUSHER_H
#define SW_FLUSHER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Has the flusher watch s, whose bytes are about to be kept back (called
 * with s->lock held; starts the thread the first time). Returns 0, or < 0
 * when no flusher can run: the bytes must not be kept. */
int sw_flusher_watch(struct sw_sock *s);

/* Has the flusher look at s's sendfile lend now and then: a receiver the
 * kernel no longer lets read us (REFUSED) waits for the rest, which only
 * this side can send, and its program may make no call meanwhile (s->lock
 * held). 0, or < 0 when no flusher can run. */
int sw_flusher_watch_lend(struct sw_sock *s);

/* Has the flusher finish s, which the program closed with bytes or its
 * FIN still to go (s->orphan set, s->lock held; orphan.c). 0, or < 0 when
 * no flusher can run. */
int sw_flusher_adopt(struct sw_sock *s);

/* Before exec: the orphans are finished or given up (bounded). */
void sw_flusher_before_exec(void);

/* Before _exit: what exit does (bounded), once. */
void sw_flusher_before_exit(void);

#endif /* SW_FLUSHER_H */

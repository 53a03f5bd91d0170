/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * probe_answer.h - the server's answers to discovery probes that cross a
 * wire, given as the probes come (probe_answer.c).
 */
#ifndef SW_PROBE_ANSWER_H
#define SW_PROBE_ANSWER_H

#include <stdbool.h>

#include "sock.h"

/* Takes the probes waiting at the listener ls's provider listeners and
 * answers them (force: now; else at most once a millisecond while none
 * come). Takes no lock: the caller holds ls->lock, or is accept. */
void sw_probes_drain(struct sw_sock *ls, bool force);

/* The listener ls has a provider listener that takes probes across a
 * wire: the answering thread watches it from now on (started on first
 * use). */
void sw_probe_answer_watch(struct sw_sock *ls);

/* accept on ls: the thread is started if this process has none yet (a
 * child that inherited the listener). */
void sw_probe_answer_ensure(struct sw_sock *ls);

#endif

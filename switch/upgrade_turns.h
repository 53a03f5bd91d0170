/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * upgrade_turns.h - the turns of a process's pending upgrades and the
 * thread that moves the upgrades holding one on (upgrade_turns.c).
 */
#ifndef SW_UPGRADE_TURNS_H
#define SW_UPGRADE_TURNS_H

#include <stdbool.h>

#include "sock.h"

enum { SW_TURN_NONE, SW_TURN_WAITING, SW_TURN_HELD };

/*
 * Called with s->lock held before a step that holds what an upgrade costs
 * (the client's provider listener, the server's provider connection): true
 * when s holds a turn, or got one now. Else, with wait, s joins the queue
 * and the upgrade thread gives it its turn when one is free (in order);
 * without, it asks again at its next step.
 */
bool sw_turn_take(struct sw_sock *s, bool wait);

/* s is no longer pending (carried, on TCP, closed): its turn or its place
 * in the queue goes to the next. Called with s->lock held. */
void sw_turn_give(struct sw_sock *s);

/*
 * Server, s waiting in line with its upgrade due (s->lock held, in a call
 * of the program), alone in line with a turn free: looks for the
 * client's listener as the thread would
 * (sw_upgrade_client_ready, at its pace), and when it is there takes a
 * turn that is free at once, or else marks s for the next one. True when
 * s holds a turn. A program that keeps the socket's lock busy (a peer that
 * floods it, or that it floods) thus never waits for the thread's look,
 * which only ever tries the lock.
 */
bool sw_turn_claim(struct sw_sock *s);

/* True in the upgrade thread (its steps need not share the program's
 * time: upgrade.c costly_step_may). */
bool sw_turn_in_thread(void);

/* True when the upgrade thread moves s on (s holds a turn, is past the
 * hellos and the thread runs): the program's sleeps need not. s->lock
 * held. */
bool sw_turn_driven(const struct sw_sock *s);

#endif /* SW_UPGRADE_TURNS_H */

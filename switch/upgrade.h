/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * upgrade.h - the upgrade's state machine (upgrade.c).
 */
#ifndef SW_UPGRADE_H
#define SW_UPGRADE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Takes the upgrade's next steps that need no waiting. Returns 0. */
int sw_upgrade_progress(struct sw_sock *s);

/* Gives a pending upgrade up if that loses nothing (docs/protocol.md 2.5):
 * returns true when it is still pending (a committed server). */
bool sw_upgrade_cut(struct sw_sock *s);

/* s (locked) is pending with a provider connection made (connecting: or
 * being made): its steps are driven for up to 20 ms, for it to be
 * carried; it may still be pending after. */
void sw_upgrade_finish_near(struct sw_sock *s, bool connecting);

/* Settles a pending upgrade for good before something it cannot follow
 * (shutdown, urgent data, fork, exec): gives it up while our SETUP is not
 * out, else waits (bounded, lock released while sleeping) for the switch.
 * Returns with the state SW_TCP or SW_SAN. */
void sw_upgrade_settle(struct sw_sock *s);

/* Takes the step the handshake allows now (after the provider connection
 * came up, a SETUP or a SWITCH arrived): our SETUP, or our SWITCH, after
 * which our bytes go on the SAN. Returns 0 or < 0 when a send failed. */
int sw_upgrade_step(struct sw_sock *s);

/* True while this side may still give the upgrade up without losing a byte
 * (docs/protocol.md 2.5): the client until the server's SETUP came, the
 * server until its own SETUP went. */
bool sw_upgrade_can_give_up(const struct sw_sock *s);

/* How long a sleep of the program may last before the switch looks again
 * at a pending upgrade (ms; growing while nothing changes), or 0: some of
 * the handshake's steps come with no wake-up (sw_upgrade_nap_ms). */
int sw_upgrade_nap_ms(struct sw_sock *s);

/*
 * The same for a connection whose upgrade the upgrade thread moves on (it
 * holds a turn): 0 on a provider local to this host, whose peer's SWITCH
 * rings a doorbell on TCP. Across a wire the thread may take this side's
 * switch point while the program sleeps; the peer's SWITCH and the bytes
 * behind it then come on the provider with no doorbell, and only a sleep
 * that watches the CQ sees them (sw_upgrade_fds), which one set up before
 * the switch point does not: it is bounded, 1, 2, 4 ..
 * SW_TURN_NAP_MAX_MS ms, so that the program looks again.
 */
#define SW_TURN_NAP_MAX_MS 32
int sw_upgrade_turn_nap_ms(struct sw_sock *s);

/* Takes the upgrade's next steps if it is pending, never waiting. */
void sw_upgrade_advance(struct sw_sock *s);

int sw_upgrade_fds(struct sw_sock *s, int *fds, int max, int *cq_fd);

/* Server, its connection waiting for a turn (upgrade_turns.c): true when
 * the client's provider listener is there (its own turn came). Else looks
 * again 0.25, 0.5, 1 .. 64 ms later (s->turn_look_ns), and after
 * SDP_UPGRADE_TIMEOUT_MS of looks gives the upgrade up. Looks with !clock
 * (the connection is too far back in line for its client to have reached
 * it) count toward nothing: they come every SW_LOOK_UNCLOCKED_MS and the
 * timeout starts at the first look with clock. s->lock held. */
#define SW_LOOK_UNCLOCKED_MS 8
bool sw_upgrade_client_ready(struct sw_sock *s, bool clock);

/* Server: acts on the client's hello in s->hello_buf (go on, or refuse by
 * never connecting). */
void sw_upgrade_server_hello_take(struct sw_sock *s);

/* Server: looks for the client's hello on TCP (writing: the program
 * is about to send, so it is decided now). */
void sw_upgrade_server_hello_in(struct sw_sock *s, bool writing);

/* Client: looks at the head of the server's stream after our hello: the
 * program's bytes, or an older server's refusal. */
void sw_upgrade_client_hello_sent(struct sw_sock *s);

/* Client, SW_HELLO_SENT with none of the head taken: the server's first
 * byte, seen, is its program's (no refusal): the upgrade goes on, those
 * bytes left where they are. */
void sw_upgrade_client_spoke_first(struct sw_sock *s);

/* Client: our hello just went; the connection waits for the server's
 * provider connect (in line for a turn once its listener is due). */
void sw_upgrade_client_hello_out(struct sw_sock *s);

/* The upgrade's deadline, no sooner than SDP_UPGRADE_TIMEOUT_MS after
 * from_ns (it is never brought forward). */
void sw_upgrade_deadline_from(struct sw_sock *s, uint64_t from_ns);

/*
 * Has the program's use of s shown that it lives on, so that an upgrade
 * due by age pays back (docs/protocol.md 2.1)? Its calls changed
 * direction SDP_UPGRADE_TURNS times (a request, its answer, the next
 * request), or SW_LIVELY_CALLS calls moved bytes; a client, which must
 * be listening before the server comes, asks one turn and half the calls
 * fewer. Without these an upgrade is due at SW_IDLE_FACTOR times its
 * age. Bytes (SDP_UPGRADE_AFTER_BYTES) make it due whatever the age.
 */
#define SW_LIVELY_CALLS 16
#define SW_IDLE_FACTOR 10
bool sw_upgrade_lively(const struct sw_sock *s);

/* Server: when its provider connection is due (sw_now_ns() time), bytes
 * aside. */
uint64_t sw_upgrade_server_at(const struct sw_sock *s);

#endif /* SW_UPGRADE_H */

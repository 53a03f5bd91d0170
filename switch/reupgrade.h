/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * reupgrade.h - a connection returned to TCP by a change of hands is
 * upgraded again once one process holds it (reupgrade.c).
 */
#ifndef SW_REUPGRADE_H
#define SW_REUPGRADE_H

#include <stdbool.h>
#include <stdint.h>

#include "sock.h"

/* Our bytes written on the TCP connection by any process, and the
 * peer's read from it by any process (the kernel's counts); 0 or -errno. */
int sw_tcp_counts(int fd, uint64_t *written, uint64_t *read);

/* Our downgrade marker is out (s locked): where our TCP bytes start. */
void sw_reup_tx_base(struct sw_sock *s);

/* The peer's downgrade marker was read (ok), or its stream went on
 * without one (not ok; s locked): where the peer's TCP bytes start. */
void sw_reup_rx_base(struct sw_sock *s, bool ok);

/* Both directions are back on TCP after a downgrade (s locked): the
 * connection may be upgraded again, after a back-off. */
void sw_reup_arm(struct sw_sock *s);

/* A data call of the program on s (s locked, the only call inside s):
 * starts the upgrade again when s may be (docs/protocol.md 2.8). */
void sw_reup_maybe(struct sw_sock *s);

#endif /* SW_REUPGRADE_H */

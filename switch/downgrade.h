/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * downgrade.h - returning a connection from the SAN to TCP mid-stream
 * (downgrade.c).
 */
#ifndef SW_DOWNGRADE_H
#define SW_DOWNGRADE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Starts our side's return to TCP: DOWNGRADE message, then the marker. */
int sw_downgrade_start(struct sw_sock *s);

/* The rx queue reached the peer's DOWNGRADE: finish if both sides are done. */
void sw_downgrade_rx_point(struct sw_sock *s);

/* At exit and _exit: the peer's markers on connections back on TCP are
 * taken off the kernel's queues, so that the kernel's closes are FINs,
 * not resets (bounded). */
void sw_markers_settle(void);

#define DG_TIMEOUT_NS 2000000000ull

#endif /* SW_DOWNGRADE_H */

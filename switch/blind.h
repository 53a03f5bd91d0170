/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * blind.h - I/O the switch cannot see (blind.c): a process with an io_uring
 * instance carries no connection (DESIGN.md section 4, "sight").
 */
#ifndef SW_BLIND_H
#define SW_BLIND_H

#include <stdbool.h>

/* True once the process is known to do I/O around libc. */
bool sw_blind(void);

/*
 * The process has (or is about to have) an io_uring instance; why names
 * the call that told. From now on no connection is carried: provider
 * listeners close, pending upgrades are given up, carried connections
 * return to TCP (downgrade.c). Runs once; callers hold the guard.
 */
void sw_blind_set(const char *why);

/* Looks for an io_uring descriptor among the process's descriptors
 * (/proc/self/fd) and calls sw_blind_set when it finds one. force: look
 * now; otherwise at most once per SW_BLIND_SCAN_NS. Returns sw_blind(). */
bool sw_blind_check(bool force);

#define SW_BLIND_SCAN_NS 1000000000ull

#endif /* SW_BLIND_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fdtable.h - which program fds name a switch socket: a table indexed by fd
 * of atomic pointers, a count of fds per socket (dup), and the references
 * callers hold for the length of one call.
 */
#ifndef SDP_SHIM_FDTABLE_H
#define SDP_SHIM_FDTABLE_H

#include <stdbool.h>
#include "sdp_switch.h"

int fdt_init(void);
/* The socket fd names, with a reference the caller drops with
 * sw_sock_unref; NULL when fd is not managed (one atomic load). */
struct sw_sock *fdt_get(int fd);
/* fd now names s; the table takes over one reference the caller owns. */
int fdt_install(int fd, struct sw_sock *s);
/* fd stops naming anything; returns the table's reference (or NULL) and
 * whether fd was the last fd naming the socket. When fd was the one the
 * switch makes its calls on and others remain, *primary is one of them
 * (else -1): the caller tells the switch before closing fd. */
struct sw_sock *fdt_remove(int fd, bool *last, int *primary);
/* First managed fd in [from, to], or -1. */
int fdt_next_managed(int from, int to);
/* Table size (one past the highest fd it can hold now). */
int fdt_size(void);

void fdt_atfork_prepare(void);
void fdt_atfork_parent(void);
void fdt_atfork_child(void);

#endif /* SDP_SHIM_FDTABLE_H */

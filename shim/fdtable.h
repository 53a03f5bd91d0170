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
/* What fd names, without a reference or a lock: only for a look that may
 * not block (a signal handler's); the socket may be going away. */
struct sw_sock *fdt_peek(int fd);
/* fd now names s; the table takes over one reference the caller owns. */
int fdt_install(int fd, struct sw_sock *s);
/* fd stops naming anything; returns the table's reference (or NULL) and
 * whether fd was the last fd naming the socket. When fd was the one the
 * switch makes its calls on and others remain, *primary is one of them
 * (else -1): the caller tells the switch before closing fd. */
struct sw_sock *fdt_remove(int fd, bool *last, int *primary);
/* fdt_remove, only while fd still names expect. */
struct sw_sock *fdt_remove_if(int fd, struct sw_sock *expect, bool *last,
			      int *primary);
/* First managed fd in [from, to], or -1. */
int fdt_next_managed(int from, int to);
/* Table size (one past the highest fd it can hold now). */
int fdt_size(void);

/*
 * What socket() made each fd as, for fds below FDI_SIZE: the family of an
 * IPv4/IPv6 TCP socket, FDI_OTHER for any other socket, 0 when the shim
 * did not see it made (then connect asks the kernel). A socket's family
 * and protocol never change; the record goes with the fd (close, dup2 onto
 * it) and is copied to a dup.
 */
#define FDI_SIZE 65536
#define FDI_OTHER 0xff
#define FDI_PLAIN 0xfe	/* a TCP socket the switch left to the kernel */
void fdi_set(int fd, int family);
/* fd is a TCP socket whose connect the switch left to TCP for good: the
 * shim passes its later set-up calls to the kernel (fdi_get says -1). */
void fdi_set_plain(int fd);
int fdi_get(int fd);
void fdi_copy(int oldfd, int newfd);
void fdi_clear(unsigned int first, unsigned int last);

void fdt_atfork_prepare(void);
void fdt_atfork_parent(void);
void fdt_atfork_child(void);

#endif /* SDP_SHIM_FDTABLE_H */

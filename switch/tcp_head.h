/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tcp_head.h - the program's bytes on TCP before each side's switch point
 * (tcp_head.c; docs/protocol.md 2.5).
 */
#ifndef SW_TCP_HEAD_H
#define SW_TCP_HEAD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"
#include "status.h"


/* Reads the peer's TCP bytes (never past its switch point), without
 * waiting: > 0 bytes, 0 at EOF, SW_HEAD_SWITCHED, or -errno (-EAGAIN). */
ssize_t sw_head_recv(struct sw_sock *s, struct msghdr *msg, int flags);

/* Sends on TCP and counts what went, without waiting: bytes or -errno. */
ssize_t sw_head_send(struct sw_sock *s, const struct msghdr *msg, int flags);

/* POLLIN for the program from the peer's TCP bytes (kernel_revents: the
 * kernel's report for the fd); SW_HEAD_SWITCHED when they are all read. */
int sw_head_readable(struct sw_sock *s, short kernel_revents);

#endif /* SW_TCP_HEAD_H */

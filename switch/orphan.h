/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * orphan.h - carried connections the program closed while bytes or its FIN
 * were still to go (orphan.c): kept by the switch, as the kernel keeps an
 * orphaned TCP socket, until the peer has them or is gone.
 */
#ifndef SW_ORPHAN_H
#define SW_ORPHAN_H

#include <stdbool.h>
#include <stdint.h>

#include "sock.h"

/* close starts here (s->lock held): the clock of "no progress" and what
 * is left to go are taken now. */
void sw_orphan_begin(struct sw_sock *s);

/* One step of sending what is left (s->lock held): progress, kept bytes,
 * the FIN, what the peer sends dropped. True once nothing more is to be
 * done: all went, the peer is gone, or nothing moved for the bound. */
bool sw_orphan_step(struct sw_sock *s, uint64_t now);

/* The end (s->lock held): says what was lost and why, if anything, and
 * frees the session. The caller closes s->fd (the program's number, or
 * the switch's copy). */
void sw_orphan_end(struct sw_sock *s);

/* close hands s over (s->lock held): s->fd becomes the switch's own copy
 * of fd, the flusher thread finishes it; the caller then closes fd. 0, or
 * -errno when no copy or no flusher can be had (close then waits). */
int sw_orphan_adopt(struct sw_sock *s, int fd);

/* The orphan's last step from the flusher, exit or exec (s->lock held):
 * ends it and closes the switch's copy. */
void sw_orphan_close(struct sw_sock *s);

/*
 * s is back on TCP (a fork, an exec, stdio, MSG_ZEROCOPY) and about to be
 * closed (s->lock held): the peer's doorbells and downgrade marker, which
 * its program did not read since, are taken from the kernel's receive
 * queue, the marker waited for within a second. A TCP socket closed with
 * unread bytes answers with a reset, and the peer's kernel then drops
 * what its program has not read yet. Bytes of the peer's program after
 * the marker stay, as TCP's would.
 */
void sw_marker_take(struct sw_sock *s);

/* The other end of s's connection is a socket of this process (both ends
 * carried between two threads or two connections of one program). */
bool sw_orphan_peer_here(struct sw_sock *s);

/* The end of close: doorbells, then the session goes (api_ctl.c). */
void sw_close_end(struct sw_sock *s);

#endif /* SW_ORPHAN_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * hello_token.h - the name a client holds while its hello may be unread on
 * one host, and the server's fence before its ring (hello_token.c).
 */
#ifndef SW_HELLO_TOKEN_H
#define SW_HELLO_TOKEN_H

#include "sock.h"

/*
 * Client, right before its hello goes: takes the name of its TCP
 * connection (s->tok_fd). 0, -EADDRINUSE when the name is taken (the
 * server's switch stopped seeing the connection, or a squatter: no hello
 * may go), or another -errno.
 */
int sw_hello_token_take(struct sw_sock *s);

/* Client: lets the name go once the server's kernel has acknowledged the
 * whole hello, or the server took it (its provider connection came); a
 * hello not acknowledged keeps it, after a fallback too, until the socket's
 * end. */
void sw_hello_token_check(struct sw_sock *s);

/* Lets the name go (the socket's end, a fallback). */
void sw_hello_token_drop(struct sw_sock *s);

/*
 * Server, before the process's ring exists (blind.c): for every accepted
 * connection whose head it has not seen, takes its name, so that no hello
 * goes after this; where the client's switch holds it, waits for that hello
 * (at most SDP_UPGRADE_TIMEOUT_MS) and drops it. Callers hold the guard.
 */
void sw_hello_fence(void);

/*
 * Before exec: the same fence for every accepted connection the new
 * program inherits whose head this process has not seen (a hello may
 * still come). The new program may read it through stdio, which no
 * wrapper sees, or run without the switch: no hello may reach it. A name
 * taken here stays open across the exec, with the new program, so that
 * no hello goes while the connection lives. Callers hold the guard.
 */
void sw_hello_fence_exec(void);

/* The same for one connection, accepted after the process stopped
 * carrying (s: SW_TCP with skip_hello). */
void sw_hello_fence_sock(struct sw_sock *s);

/*
 * Server, s pending in HELLO_WAIT with nothing of the client's here, about
 * to be put where stdio reads it (s not locked): when the client's switch
 * holds the name for its hello, waits for it (at most
 * SDP_UPGRADE_TIMEOUT_MS) and takes it; when nobody does, after a grace
 * of 20 ms from the handshake for a local client's switch to take it,
 * takes the name, so that none comes. True when the hello was taken and
 * the upgrade goes on.
 */
bool sw_hello_await(struct sw_sock *s);

/* s (locked) is passed to a process that may not drop a hello: the name
 * of its connection, if this process holds it, is held from now on until
 * the client can send no more, whatever this process's copy does. */
void sw_hello_name_outlive(struct sw_sock *s);

#endif /* SW_HELLO_TOKEN_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * session.h - set-up and tear-down of a provider session for one connection
 * (buffers, completion queue, staging), used by upgrade.c.
 */
#ifndef SW_SESSION_H
#define SW_SESSION_H

struct sw_sock;
struct sw_provider;

/* Allocates and registers control buffers and creates the CQ. */
int sw_session_prepare(struct sw_sock *s, struct sw_provider *p);

#endif /* SW_SESSION_H */

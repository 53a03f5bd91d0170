/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork_exec.h - fork and exec: connections returned to TCP, the buffer
 * parent and child share, the hellos still to drop after exec
 * (fork_exec.c).
 */
#ifndef SW_FORK_EXEC_H
#define SW_FORK_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock.h"

/* Bytes received on the SAN before a fork, readable once by either process. */
struct sw_fork_buf {
	pthread_mutex_t lock;	/* process-shared */
	size_t len, off;
	size_t map_len;
	uint8_t data[];
};

/* Bytes a fork's or exec's downgrade set aside that the program has not
 * read yet (s locked): they come before any other byte of the peer's. */
static inline bool sw_fork_buf_unread(const struct sw_sock *s)
{
	return s->fork_buf && s->fork_buf->off < s->fork_buf->len;
}

/* How many (s locked). */
static inline size_t sw_fork_buf_left(const struct sw_sock *s)
{
	return sw_fork_buf_unread(s) ? s->fork_buf->len - s->fork_buf->off : 0;
}

/* A fork buffer made at fb (map_len bytes mapped), its process-shared lock
 * made, len unread bytes in it (off 0). */
void sw_fork_buf_init(struct sw_fork_buf *fb, size_t map_len, size_t len);

/* s's fork buffer becomes nb (sw_fork_buf_init'd with room for them), the
 * unread bytes of the old one (whose lock the caller holds, or none)
 * copied in; another process sharing the old one reads them no more. */
void sw_fork_buf_move(struct sw_sock *s, struct sw_fork_buf *nb);

/* Reads from the fork buffer; returns bytes or 0 when it is empty. */
ssize_t sw_fork_buf_read(struct sw_sock *s, struct msghdr *msg, int flags);

/* The SW_EXEC_ENV entry for the new program (malloc'd), or NULL. */
char *sw_exec_hello_skips(void);

/* Returns every carried connection to TCP (capture: keep the bytes
 * that arrived on the SAN in a buffer parent and child share). */
void sw_downgrade_all(bool capture);

/* Returns s (carried, or its upgrade committed) to TCP, its unread SAN
 * bytes kept in s->fork_buf; s not locked. */
void sw_downgrade_one(struct sw_sock *s);

/* True once the process stepped aside for a seccomp sandbox
 * (sw_before_sandbox): the switch makes no provider call from then on. */
bool sw_stepped_aside(void);

/* In a forked child: its statistics start anew (stats.c). */
void sw_stats_after_fork_child(void);

#endif /* SW_FORK_EXEC_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * util.h - small helpers the switch's files share (util.c).
 */
#ifndef SW_UTIL_H
#define SW_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "wire.h"

/* CLOCK_MONOTONIC in ns. */
uint64_t sw_now_ns(void);

/* The start of a small file (a /proc entry), NUL-terminated, in buf of
 * size bytes: the length read, or -1 when it could not be opened or read
 * (nothing in buf then). */
ssize_t sw_read_small(const char *path, char *buf, size_t size);

/* len random bytes (keys), from a per-process pool of getrandom(). */
void sw_random(void *buf, size_t len);

/* Blocks until fd has events or timeout_ms passes (-1 = forever). */
int sw_wait_fd(int fd, short events, int timeout_ms);
/* The same for a wait inside a program's blocking call, with no timeout:
 * a signal ends it as it ends the kernel's (-1, errno EINTR). 0 or -1. */
int sw_wait_fd_call(int fd, short events);

/* The calling thread's bounce buffer of SW_BOUNCE_SIZE bytes (sendfile and
 * splice through the switch copy by it), or NULL (errno ENOMEM). */
#define SW_BOUNCE_SIZE (1u << 20)
uint8_t *sw_bounce_buf(void);
/* Starts fn in a detached thread that no signal is delivered to (signals
 * are the program's). 0 or pthread_create's error number. */
int sw_thread_start(void *(*fn)(void *));

/* pthread_atfork, with the handlers also recorded: a fork the C library
 * does not make (a raw clone through syscall(), shim/around.c) runs them
 * with sw_fork_prepare/parent/child, in the order fork() would. 0 or
 * pthread_atfork's error number. */
int sw_atfork(void (*prepare)(void), void (*parent)(void),
	      void (*child)(void));
void sw_fork_prepare(void);
void sw_fork_parent(void);
void sw_fork_child(void);

/* Writes all of buf on a TCP fd (blocking as needed). */
int sw_tcp_write_all(int fd, const void *buf, size_t len);

/* The port of an IPv4 or IPv6 address, in host order. */
void sw_addr_port(const struct sockaddr_storage *ss, uint16_t *port);

/* A provider's name into a hello's fixed-size field. */
void sw_name_copy(char dst[SDP_PROVIDER_NAME_LEN], const char *src);

/* May this process make a file reach size bytes? A file grown past
 * RLIMIT_FSIZE sends SIGXFSZ, which kills a program that does not handle
 * it: the switch's own files (log, statistics, pass records) stay below. */
bool sw_fsize_room(uint64_t size);

/* Is O_NONBLOCK set on fd? */
bool sw_fd_nonblocking(int fd);

#endif /* SW_UTIL_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ownfd.h - the descriptors of the switch and its providers (ownfd.c): kept
 * above the program's, close-on-exec, and out of reach of the program's
 * close, close_range, closefrom, dup2 and dup3.
 */
#ifndef SW_OWNFD_H
#define SW_OWNFD_H

#include <stdbool.h>

/*
 * Takes fd on as the switch's: moves it near the top of RLIMIT_NOFILE,
 * close-on-exec, and registers it. Returns the number to use (fd itself
 * when it could not move, still registered) or -errno; fd is closed when
 * moved. where (may be NULL) is the variable the caller keeps the number
 * in: when the program dup2s onto it, the switch moves its descriptor
 * elsewhere and stores the new number there (read it with
 * __atomic_load_n). Without where such a dup2 fails with EBUSY.
 * The shim calls this for every descriptor made under the guard (by the
 * switch or a provider: shim_switch_fd); the switch calls it itself for
 * the few it opens with calls the shim does not wrap (its log file).
 */
int sw_fd_own(int fd, int *where);

/*
 * sw_fd_own for a descriptor whose number lives in *where (read with
 * __atomic_load_n): *where holds fd while it moves, so that a dup2 of the
 * program's meanwhile finds it there, then the number to use, or -1 with
 * fd closed when it cannot be kept. Returns what it stored.
 */
int sw_fd_own_at(int fd, int *where);

/*
 * Registers fd, close-on-exec already, where it is: a descriptor the
 * switch closes within the call that made it (no move, no system call).
 * One kept longer is moved with sw_fd_forget and sw_fd_own. fd, or -errno.
 */
int sw_fd_own_here(int fd);

/* The switch closes fd (any close made under the guard calls this). */
void sw_fd_forget(int fd);

/* fd is one of the switch's. Lock-free. */
bool sw_fd_is_own(int fd);

/* The lowest of the switch's descriptors in [from, to], or -1. */
int sw_fd_next_own(unsigned int from, unsigned int to);

/*
 * The program is about to make fd name its own file (dup2, dup3): when fd
 * is the switch's, its descriptor moves first. 0, or -EBUSY when it cannot
 * move (registered without where): the program's call fails instead of
 * taking the switch's file from under it.
 */
int sw_fd_make_room(int fd);

#endif /* SW_OWNFD_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * readiness.h - the shim's poll, select and epoll for sets that hold switch
 * sockets (DESIGN.md 4a): SAN readiness (the switch's per-socket answers,
 * sdp_switch.h) added to the kernel's view, a bounded busy-poll, then
 * "wake me" and a sleep in the kernel on the TCP fds. All entry points
 * follow POSIX: -1 with errno on failure.
 */
#ifndef SDP_SHIM_READINESS_H
#define SDP_SHIM_READINESS_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include "sdp_switch.h"

/* The entry points below must be called with the recursion guard set
 * (shim_enter). poll.c: */
/* ppoll(2) (timeout NULL = forever); poll(2) converts its timeout. */
int rd_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
	     const sigset_t *sigmask);
/* pselect(2). When timeout is not NULL and update is true, *timeout is set
 * to the time not slept, as select(2) does on Linux. */
int rd_pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
	       struct timespec *timeout, bool update, const sigset_t *sigmask);

/* epoll.c: the bookkeeping of each epoll set (which fds, events, data, mode)
 * and the waits on it. */
void rd_epoll_created(int epfd);
int rd_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
int rd_epoll_wait(int epfd, struct epoll_event *events, int maxevents,
		  const struct timespec *timeout, const sigset_t *sigmask);

/* The program closed fds [first, last]: drop them from every epoll set's
 * bookkeeping, and drop the sets whose epoll fd it was. Cheap when no
 * bookkeeping exists. */
void rd_fds_closed(unsigned int first, unsigned int last);
/* The same for the program's close of fd, a switch socket: its kernel
 * registrations go too, as the switch may keep the file open (a closed
 * connection that still sends what was left). */
void rd_sock_closed(int fd);

void rd_atfork_prepare(void);
void rd_atfork_parent(void);
void rd_atfork_child(void);

#endif /* SDP_SHIM_READINESS_H */

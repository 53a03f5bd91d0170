/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * readiness.h - poll, select and epoll for sets that hold switch sockets
 * (DESIGN.md 4a): SAN readiness added to the kernel's view, a bounded
 * busy-poll, then "wake me" and a sleep in the kernel on the TCP fds.
 * All entry points follow POSIX: -1 with errno on failure.
 */
#ifndef SDP_READINESS_H
#define SDP_READINESS_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include "sdp_switch.h"

/* Real calls readiness needs besides those in sdp_sys (switch/sys.h). */
struct rd_sys {
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *,
		     const sigset_t *);
	int (*epoll_pwait)(int, struct epoll_event *, int, int,
			   const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *,
		       const struct timespec *, const sigset_t *);
	/* NULL when the C library lacks it. */
	int (*epoll_pwait2)(int, struct epoll_event *, int,
			    const struct timespec *, const sigset_t *);
};

/*
 * lookup(fd) returns the switch socket fd names, with a reference the
 * caller drops with sw_sock_unref, or NULL when fd is not managed. The
 * entry points below must be called with the shim's recursion guard set.
 */
void rd_init(struct sw_sock *(*lookup)(int fd), const struct rd_sys *sys);

/* ppoll(2) (timeout NULL = forever); poll(2) converts its timeout. */
int rd_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
	     const sigset_t *sigmask);
/* pselect(2). When timeout is not NULL and update is true, *timeout is set
 * to the time not slept, as select(2) does on Linux. */
int rd_pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
	       struct timespec *timeout, bool update, const sigset_t *sigmask);

/* epoll: the bookkeeping of each epoll set (which fds, events, data, mode)
 * and the waits on it. */
void rd_epoll_created(int epfd);
int rd_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
int rd_epoll_wait(int epfd, struct epoll_event *events, int maxevents,
		  const struct timespec *timeout, const sigset_t *sigmask);

/* The program closed fds [first, last]: drop them from every epoll set's
 * bookkeeping, and drop the sets whose epoll fd it was. Cheap when no
 * bookkeeping exists. */
void rd_fds_closed(unsigned int first, unsigned int last);

void rd_atfork_prepare(void);
void rd_atfork_parent(void);
void rd_atfork_child(void);

#endif /* SDP_READINESS_H */

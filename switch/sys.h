/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sys.h - the real libc calls the switch makes on the program's TCP fds.
 * The shim fills sdp_sys from dlsym(RTLD_NEXT) at init, so the switch never
 * re-enters its own wrappers; without the shim (unit tests) these are libc.
 */
#ifndef SDP_SYS_H
#define SDP_SYS_H

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

struct sdp_sys {
	int (*socket)(int, int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*close)(int);
	int (*shutdown)(int, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
};

/* Real calls; never NULL (initialised to libc's own functions). */
extern struct sdp_sys sdp_sys;

#endif /* SDP_SYS_H */

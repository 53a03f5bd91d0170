/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * shim.h - internals shared by the interposer's files: the lazy access to
 * the real libc functions (sys.h), the init state, the recursion guard and
 * the fast "is this fd ours" test every wrapper starts with.
 */
#ifndef SDP_SHIM_H
#define SDP_SHIM_H

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "ownfd.h"
#include "sdp_switch.h"
#include "sys.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

/*
 * Proposed addition to sdp_switch.h: the fd the switch makes its real calls
 * on for s is being closed while other fds (dup) still name s; use fd from
 * now on. Weak until the switch defines it.
 */
void sw_sock_set_fd(struct sw_sock *s, int fd) __attribute__((weak));


/* Resolves one real function on first use, so that wrappers called before
 * the library's constructor (from another library's constructor) work. */
void *shim_resolve(const char *name);
#define REAL(name)							\
	((__typeof__(sdp_sys.name))(					\
		__atomic_load_n(&sdp_sys.name, __ATOMIC_RELAXED) ?:	\
		shim_resolve(#name)))

/* True once init finished and the switch is active (sw_init said yes). */
extern bool shim_active;
bool shim_activate(void);

/* The recursion guard (sys.h), held while a wrapper runs switch code. */
static inline void shim_enter(void)
{
	sdp_guard_enter();
}

static inline void shim_leave(void)
{
	sdp_guard_leave();
}

/* The switch takes part in this call: it is active and we are not inside
 * it already. Triggers the lazy init. */
static inline bool shim_on(void)
{
	/* inside the switch, unless a signal handler runs while this thread
	 * waits there holding no lock (sys.h, sdp_wait_depth) */
	if (__builtin_expect(sdp_inside(), 0))
		return false;
	if (__builtin_expect(shim_active, 1))
		return true;
	return shim_activate();
}

/* glibc's fortified entry points (_FORTIFY_SOURCE builds call them); no
 * public header declares them. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen,
		       int flags, struct sockaddr *addr, socklen_t *alen);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *t,
		const sigset_t *mask, size_t fdslen);
void __chk_fail(void) __attribute__((noreturn));

/*
 * fd was just made by a call under the guard, so by the switch or one of
 * its providers, on any thread: it becomes the switch's (switch/ownfd.c),
 * moved above the program's numbers and kept from its close, close_range
 * and dup2. Returns the number the caller gets instead. The one way the
 * descriptors of providers are protected: they need do nothing.
 */
static inline int shim_switch_fd(int fd)
{
	int nfd;

	if (fd < 0 || !sdp_inside())
		return fd;
	nfd = sw_fd_own(fd, NULL);
	return nfd >= 0 ? nfd : fd;
}

/* Drops a call's reference; the last one may run switch code. */
static inline void shim_unref(struct sw_sock *s)
{
	shim_enter();
	sw_sock_unref(s);
	shim_leave();
}

/* Shared helpers of the wrappers (shim/sock_setup.c). */
int shim_close_fd(int fd);
void shim_closed_range(unsigned int first, unsigned int last);
/* sock_data.c: a socket the switch is done with leaves the fd table
 * (sw_sock_inherit_done); all such sockets. */
void shim_let_go(struct sw_sock *s);
void shim_let_go_all(void);

/* signals.c: a fork's child starts with the handler table unlocked */
void shim_signals_atfork_child(void);
/* process.c: at start, the fds an exec'd-from switch named (SW_EXEC_ENV) */
void shim_inherit(void);
/* process.c: the fds an SCM_RIGHTS message carries, sent or received */
void shim_fds_sending(int via, const struct msghdr *msg);
void shim_fds_received(const struct msghdr *msg);
int shim_tcp_family(int fd);

#endif /* SDP_SHIM_H */

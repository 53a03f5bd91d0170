/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * shim.h - internals shared by the interposer's files: the table of real
 * libc functions, the init state, the per-thread recursion guard and the
 * fast "is this fd ours" test every wrapper starts with.
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

#include "sdp_switch.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

/*
 * Proposed addition to sdp_switch.h: the fd the switch makes its real calls
 * on for s is being closed while other fds (dup) still name s; use fd from
 * now on. Weak until the switch defines it.
 */
void sw_sock_set_fd(struct sw_sock *s, int fd) __attribute__((weak));

/* The libc functions the wrappers fall back to, resolved by RTLD_NEXT. */
struct shim_real {
	int (*socket)(int, int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*__read_chk)(int, void *, size_t, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*__recv_chk)(int, void *, size_t, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
			    socklen_t *);
	ssize_t (*__recvfrom_chk)(int, void *, size_t, size_t, int,
				  struct sockaddr *, socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned int, int,
			struct timespec *);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int,
			  const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*sendfile64)(int, int, off_t *, size_t);
	int (*shutdown)(int, int);
	int (*close)(int);
	int (*close_range)(unsigned int, unsigned int, int);
	void (*closefrom)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*__poll_chk)(struct pollfd *, nfds_t, int, size_t);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *,
		     const sigset_t *);
	int (*__ppoll_chk)(struct pollfd *, nfds_t, const struct timespec *,
			   const sigset_t *, size_t);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *,
		       const struct timespec *, const sigset_t *);
	int (*epoll_create)(int);
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int,
			   const sigset_t *);
	int (*epoll_pwait2)(int, struct epoll_event *, int,
			    const struct timespec *, const sigset_t *);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvp)(const char *, char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*prctl)(int, ...);
};

extern struct shim_real shim_real;

/* Resolves one real function on first use, so that wrappers called before
 * the library's constructor (from another library's constructor) work. */
void *shim_resolve(const char *name);
#define REAL(name)							\
	((__typeof__(shim_real.name))(					\
		__atomic_load_n(&shim_real.name, __ATOMIC_RELAXED) ?:	\
		shim_resolve(#name)))

/* True once init finished and the switch is active (sw_init said yes). */
extern bool shim_active;
bool shim_activate(void);

/* Per-thread recursion guard: set while running inside the switch, so that
 * what the switch and the providers call goes straight to libc. */
extern __thread int shim_in_switch __attribute__((tls_model("initial-exec")));

static inline void shim_enter(void)
{
	shim_in_switch++;
}

static inline void shim_leave(void)
{
	shim_in_switch--;
}

/* The switch takes part in this call: it is active and we are not inside
 * it already. Triggers the lazy init. */
static inline bool shim_on(void)
{
	if (__builtin_expect(shim_in_switch != 0, 0))
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
/* process.c: at start, the fds an exec'd-from switch named (SW_EXEC_ENV) */
void shim_inherit(void);
int shim_tcp_family(int fd);

#endif /* SDP_SHIM_H */

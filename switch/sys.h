/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sys.h - the one table of real libc functions, used by the shim's wrappers
 * to reach libc and by the switch for its own calls on the program's fds,
 * and the per-thread guard that sends calls made inside the switch to libc.
 */
#ifndef SDP_SYS_H
#define SDP_SYS_H

#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

struct sdp_sys {
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
	ssize_t (*splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);
	int (*shutdown)(int, int);
	int (*close)(int);
	int (*close_range)(unsigned int, unsigned int, int);
	void (*closefrom)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	FILE *(*fdopen)(int, const char *);
	int (*fclose)(FILE *);
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
	/* NULL when the C library lacks it. */
	int (*epoll_pwait2)(int, struct epoll_event *, int,
			    const struct timespec *, const sigset_t *);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvp)(const char *, char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*prctl)(int, ...);
	void (*_exit)(int) __attribute__((noreturn));
	int (*sigaction)(int, const struct sigaction *, struct sigaction *);
	int (*__sigaction)(int, const struct sigaction *, struct sigaction *);
	__sighandler_t (*signal)(int, __sighandler_t);
	__sighandler_t (*bsd_signal)(int, __sighandler_t);
	__sighandler_t (*ssignal)(int, __sighandler_t);
	__sighandler_t (*sysv_signal)(int, __sighandler_t);
	__sighandler_t (*__sysv_signal)(int, __sighandler_t);
	__sighandler_t (*sigset)(int, __sighandler_t);
};

/*
 * The real functions: dlsym(RTLD_NEXT), so inside libsdp_switch.so they are
 * the functions after the interposer (libc's), and in a program linked with
 * the switch but not preloaded (unit tests) they are libc's own. Filled by
 * sdp_sys_init, which a constructor runs and the shim's init runs again in
 * case a wrapper is called before the constructors.
 */
extern struct sdp_sys sdp_sys;
void sdp_sys_init(void);

/*
 * Per-thread recursion guard: set while a thread runs inside the switch or
 * a provider (a wrapper's call into the switch, the switch's own threads),
 * so that what they call goes straight to libc.
 */
extern __thread int sdp_in_switch __attribute__((tls_model("initial-exec")));

static inline void sdp_guard_enter(void)
{
	sdp_in_switch++;
}

static inline void sdp_guard_leave(void)
{
	sdp_in_switch--;
}

/*
 * The depth of the guard at which this thread waits inside the switch
 * holding none of its locks (asleep in poll, ppoll or epoll_wait, or
 * spinning between looks), 0 when it does not. A signal handler that runs
 * in such a wait finds the guard at this depth, and its socket calls go
 * through the switch as the program's would (shim_on): the TCP socket of
 * a carried connection must never see them. Begin returns what end
 * restores (a handler's own call may wait too).
 */
extern __thread int sdp_wait_depth __attribute__((tls_model("initial-exec")));

/*
 * How many signal handlers of the program have run on this thread (only
 * counts; shim/signals.c). A wait of the switch's that busy-polls before
 * it sleeps compares it with its value at the start: a handler that ran
 * while it polled, outside any system call, interrupted the program's
 * blocking call as surely as one that interrupts the sleep, and the call
 * answers as the kernel's would (EINTR, or a restart under SA_RESTART).
 */
extern __thread unsigned int sdp_sig_seen __attribute__((tls_model("initial-exec")));
/* How many of the program's handlers of asynchronous signals this thread
 * is inside (shim/signals.c); one that left by longjmp stays counted. */
extern __thread unsigned int sdp_in_handler __attribute__((tls_model("initial-exec")));

static inline int sdp_wait_begin(void)
{
	int old = sdp_wait_depth;

	sdp_wait_depth = sdp_in_switch;
	return old;
}

static inline void sdp_wait_end(int old)
{
	sdp_wait_depth = old;
}

/*
 * This thread runs the switch's or a provider's own code, whose calls go
 * straight to libc; not a signal handler that interrupted one of the
 * switch's waits, nor a process forked from such a handler (it carries
 * the depth on, and calls as the program does for good).
 */
static inline bool sdp_inside(void)
{
	return sdp_in_switch != 0 && sdp_in_switch != sdp_wait_depth;
}

#endif /* SDP_SYS_H */

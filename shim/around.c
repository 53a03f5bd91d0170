/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * around.c - paths around the libc socket calls: libc's syscall() and the
 * ring set-up of liburing, caught so that a process about to use io_uring
 * stops carrying connections before its ring exists (switch/blind.c), and
 * raw close/close_range/dup2/dup3 sent through the wrappers, and a raw
 * fork (clone, clone3 or fork through syscall()) given the switch's fork
 * handlers; eventfd, memfd_create and pidfd_open only to see those the
 * providers make.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "blind.h"
#include "shim.h"
#include "util.h"

/* The switch stops carrying connections: the process is about to make
 * (or use) an io_uring instance. Before the call that makes the ring. */
static void shim_ring_seen(const char *why)
{
	/* not before the shim's init: that runs at start (and looks for
	 * rings then); a call from an allocator's own init must not start
	 * ours (it would allocate inside the allocator's lock) */
	if (sw_blind() || sdp_inside() ||
	    !__atomic_load_n(&shim_active, __ATOMIC_ACQUIRE))
		return;
	shim_enter();
	sw_blind_set(why);
	shim_leave();
}

/*
 * The system call itself, as libc's syscall() makes it: no dlsym, which
 * may allocate, and syscall() is called from inside allocators (jemalloc
 * closes a file with it during its init, under its init lock).
 */
static long raw_syscall(long nr, const long a[6])
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = a[3];
	register long r8 __asm__("r8") = a[4];
	register long r9 __asm__("r9") = a[5];
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a[0]), "S"(a[1]), "d"(a[2]),
			   "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a[0];
	register long x1 __asm__("x1") = a[1];
	register long x2 __asm__("x2") = a[2];
	register long x3 __asm__("x3") = a[3];
	register long x4 __asm__("x4") = a[4];
	register long x5 __asm__("x5") = a[5];
	long ret;

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4),
			   "r"(x5)
			 : "memory");
	ret = x0;
#else
	static long (*real_syscall)(long, ...);
	long ret;

	if (!real_syscall) {
		*(void **)&real_syscall = shim_resolve("syscall");
		if (!real_syscall)
			return -ENOSYS;
	}
	return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
#endif
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/*
 * Is this clone a fork, a new process with its own copy of memory that
 * goes on from here on the same stack? The C library's fork() runs the
 * pthread_atfork handlers around it, a raw one runs none: a lock that a
 * switch thread held at the clone would stay locked in the child for
 * good, and a carried connection would be carried by two processes. A
 * new stack (with CLONE_VM or not) is a thread or a posix_spawn-like
 * child, which runs no switch code before it execs.
 */
static bool raw_fork(long nr, const long a[6])
{
	unsigned long long flags, stack;

	switch (nr) {
#ifdef __NR_fork
	case __NR_fork:
		return true;
#endif
	case __NR_clone:
		flags = (unsigned long)a[0];
		stack = (unsigned long)a[1];
		break;
#ifdef __NR_clone3
	case __NR_clone3: {
		/* struct clone_args: flags is its first field, stack its
		 * sixth; every version of it has both */
		const unsigned long long *ca = (const void *)a[0];

		if (!ca || (size_t)a[1] < 8 * sizeof(*ca))
			return false;
		flags = ca[0];
		stack = ca[5];
		break;
	}
#endif
	default:
		return false;
	}
	return !(flags & (CLONE_VM | CLONE_THREAD)) && !stack;
}

/* The handlers run as fork() runs them: outside the switch (those that
 * call into it enter it themselves). */
static long raw_fork_call(long nr, const long a[6])
{
	long ret;
	int err;

	sw_fork_prepare();
	ret = raw_syscall(nr, a);
	err = errno;
	if (ret == 0)
		sw_fork_child();
	else
		sw_fork_parent();
	errno = err;
	return ret;
}

/*
 * syscall(2) is variadic: six register-sized arguments are read whatever
 * the call takes (the registers hold something either way, as in the C
 * library's own implementation). Where the ABI passes the sixth on the
 * stack (x86-64), a call with fewer reads a word of its caller's frame:
 * readable, never used, but outside any object, so AddressSanitizer is
 * told not to look at these reads.
 */
__attribute__((no_sanitize_address))
static void syscall_args(va_list ap, long a[6])
{
	int i;

	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
}

SHIM_EXPORT long syscall(long nr, ...)
{
	long a[6];
	va_list ap;

	va_start(ap, nr);
	syscall_args(ap, a);
	va_end(ap);
	/* the wrappers only once the shim runs: see shim_ring_seen */
	if (sdp_inside() || !__atomic_load_n(&shim_active, __ATOMIC_ACQUIRE))
		goto raw;
	switch (nr) {
	case __NR_io_uring_setup:
		shim_ring_seen("io_uring_setup through syscall()");
		break;
	case __NR_io_uring_enter:
	case __NR_io_uring_register:
		shim_ring_seen("an io_uring call through syscall()");
		break;
	case __NR_close:
		return close((int)a[0]);
	case __NR_close_range:
		return close_range((unsigned int)a[0], (unsigned int)a[1],
				   (int)a[2]);
	case __NR_dup2:
		return dup2((int)a[0], (int)a[1]);
	case __NR_dup3:
		return dup3((int)a[0], (int)a[1], (int)a[2]);
	default:
		if (raw_fork(nr, a))
			return raw_fork_call(nr, a);
	}
raw:
	if (nr == __NR_pidfd_open && sdp_inside())
		return shim_switch_fd((int)raw_syscall(nr, a));
	return raw_syscall(nr, a);
}

/* eventfd and memfd_create: only to give those a provider makes to the
 * switch (shim_switch_fd); the program's pass as they are. */
SHIM_EXPORT int eventfd(unsigned int initval, int flags)
{
	static int (*real)(unsigned int, int);

	if (!real)
		*(void **)&real = shim_resolve("eventfd");
	if (!real)
		return -1;
	return shim_switch_fd(real(initval, flags));
}

SHIM_EXPORT int memfd_create(const char *name, unsigned int flags)
{
	static int (*real)(const char *, unsigned int);

	if (!real)
		*(void **)&real = shim_resolve("memfd_create");
	if (!real)
		return -1;
	return shim_switch_fd(real(name, flags));
}

/*
 * liburing makes its rings with its own system call instructions, not
 * through syscall(): its exported entry points are caught instead (the
 * preloaded library comes first). Each calls liburing's own after the
 * switch stopped carrying; -ENOSYS (liburing's convention) when the
 * process has no liburing to call.
 */
#define SHIM_URING(ret, name, params, args)				\
	SHIM_EXPORT ret name params;					\
	SHIM_EXPORT ret name params					\
	{								\
		static ret (*real) params;				\
									\
		shim_ring_seen("liburing's " #name "()");		\
		if (!real)						\
			*(void **)&real = dlsym(RTLD_NEXT, #name);	\
		if (!real)						\
			return -ENOSYS;					\
		return real args;					\
	}

struct io_uring;
struct io_uring_params;

SHIM_URING(int, io_uring_queue_init,
	   (unsigned int entries, struct io_uring *ring, unsigned int flags),
	   (entries, ring, flags))
SHIM_URING(int, io_uring_queue_init_params,
	   (unsigned int entries, struct io_uring *ring,
	    struct io_uring_params *p),
	   (entries, ring, p))
SHIM_URING(int, io_uring_queue_init_mem,
	   (unsigned int entries, struct io_uring *ring,
	    struct io_uring_params *p, void *buf, size_t len),
	   (entries, ring, p, buf, len))
SHIM_URING(int, io_uring_queue_mmap,
	   (int fd, struct io_uring_params *p, struct io_uring *ring),
	   (fd, p, ring))
SHIM_URING(int, io_uring_setup,
	   (unsigned int entries, struct io_uring_params *p),
	   (entries, p))

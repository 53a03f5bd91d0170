/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * signals.c - the program's signal handlers run through one trampoline,
 * which counts them on their thread (sdp_sig_seen, sys.h) and then calls
 * the handler with what the kernel gave. The switch's waits busy-poll
 * outside any system call before they sleep; a handler that runs then
 * interrupted the program's blocking call all the same, and the count is
 * how the wait learns it (a server's SIGTERM, which its epoll_wait must
 * answer with EINTR, or the server never sees its flag).
 *
 * The program sees its own handlers and flags wherever it asks: the old
 * action of sigaction, the value signal returns. Only asynchronous
 * signals are counted: a fault's handler (SIGSEGV, ...) interrupts no
 * wait, and such handlers may rewrite the context they were given, which
 * they keep getting straight from the kernel.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "shim.h"

/* libc's, with no prototype in a public header (or none under
 * _GNU_SOURCE) */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *oact);
__sighandler_t bsd_signal(int sig, __sighandler_t h);
__sighandler_t __sysv_signal(int sig, __sighandler_t h);

/* What the program installed for one signal, while the kernel holds the
 * trampoline for it. */
struct prog_act {
	_Atomic(void *) fn;	/* NULL: the kernel holds no trampoline */
	atomic_int flags;	/* the program's sa_flags */
};

static struct prog_act acts[NSIG];
static atomic_flag acts_lock = ATOMIC_FLAG_INIT;

static bool counted(int sig)
{
	switch (sig) {
	case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGTRAP:
	case SIGSYS: case SIGKILL: case SIGSTOP:
		return false;
	default:
		return sig > 0 && sig < NSIG;
	}
}

static void tramp(int sig, siginfo_t *si, void *uc)
{
	struct prog_act *a = &acts[sig];
	void *fn = atomic_load_explicit(&a->fn, memory_order_acquire);
	int flags = atomic_load_explicit(&a->flags, memory_order_relaxed);
	void *was = fn;

	sdp_sig_seen++;
	/* only while another thread sets this signal's action */
	if (!fn)
		return;
	/* the kernel put SIG_DFL back before this call */
	if (flags & SA_RESETHAND)
		atomic_compare_exchange_strong(&a->fn, &was, NULL);
	sdp_in_handler++;
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
	else
		((void (*)(int))fn)(sig);
	sdp_in_handler--;
}

/* One change of the table and the kernel's action at a time, and none
 * interrupted by a handler of this thread (sigaction is async-signal-safe:
 * a handler may call it). */
static void acts_begin(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	while (atomic_flag_test_and_set_explicit(&acts_lock,
						 memory_order_acquire))
		sched_yield();
}

static void acts_end(const sigset_t *old)
{
	int e = errno;

	atomic_flag_clear_explicit(&acts_lock, memory_order_release);
	pthread_sigmask(SIG_SETMASK, old, NULL);
	errno = e;
}

/* A fork while another thread held the lock: the child has one thread. */
void shim_signals_atfork_child(void)
{
	atomic_flag_clear(&acts_lock);
}

static void *handler_of(const struct sigaction *a)
{
	return (a->sa_flags & SA_SIGINFO) ? (void *)a->sa_sigaction :
					    (void *)a->sa_handler;
}

static bool is_function(void *h)
{
	return h != (void *)SIG_DFL && h != (void *)SIG_IGN &&
	       h != (void *)SIG_HOLD && h != (void *)SIG_ERR;
}

static void table_set(int sig, void *fn, int flags)
{
	atomic_store_explicit(&acts[sig].flags, flags, memory_order_relaxed);
	atomic_store_explicit(&acts[sig].fn, fn, memory_order_release);
}

/* The program's handler h, installed with k's flags, runs through the
 * trampoline: the table records both, and k becomes the trampoline's
 * action (the program's mask and flags, and SA_SIGINFO). */
static void through_tramp(int sig, void *h, struct sigaction *k)
{
	table_set(sig, h, k->sa_flags);
	k->sa_sigaction = tramp;
	k->sa_flags |= SA_SIGINFO;
}

typedef int (*sigaction_fn)(int, const struct sigaction *,
			    struct sigaction *);

static int act_set(sigaction_fn real, int sig, const struct sigaction *act,
		   struct sigaction *oact)
{
	struct sigaction k, ko;
	void *ofn, *h;
	int oflags, r;
	sigset_t m;

	if (!counted(sig))
		return real(sig, act, oact);
	acts_begin(&m);
	ofn = atomic_load(&acts[sig].fn);
	oflags = atomic_load(&acts[sig].flags);
	if (act) {
		k = *act;
		h = handler_of(act);
		if (h == (void *)tramp) {
			/* an action read by a way round this file (a raw
			 * system call): the table still holds its handler */
		} else if (is_function(h)) {
			through_tramp(sig, h, &k);
		} else {
			table_set(sig, NULL, 0);
		}
	}
	r = real(sig, act ? &k : NULL, &ko);
	if (r && act)
		table_set(sig, ofn, oflags);
	if (!r && oact) {
		*oact = ko;
		if (ko.sa_sigaction == tramp) {
			/* the program's handler, with its own SA_SIGINFO; the
			 * rest of the flags as the kernel has them now */
			oact->sa_flags = (ko.sa_flags & ~SA_SIGINFO) |
					 (oflags & SA_SIGINFO);
			if (oflags & SA_SIGINFO)
				oact->sa_sigaction = ofn;
			else
				oact->sa_handler = (__sighandler_t)ofn;
		}
	}
	acts_end(&m);
	return r;
}

SHIM_EXPORT int sigaction(int sig, const struct sigaction *act,
			  struct sigaction *oact)
{
	return act_set(REAL(sigaction), sig, act, oact);
}

SHIM_EXPORT int __sigaction(int sig, const struct sigaction *act,
			    struct sigaction *oact)
{
	return act_set(REAL(__sigaction), sig, act, oact);
}

/*
 * The signal() family sets flags of libc's choosing (SA_RESTART, or not
 * after siginterrupt; SA_RESETHAND for System V's): libc installs the
 * handler, and the trampoline takes its place with the same flags.
 */
typedef __sighandler_t (*signal_fn)(int, __sighandler_t);

static __sighandler_t adopt(signal_fn real, int sig, __sighandler_t h)
{
	struct sigaction k;
	__sighandler_t old;
	void *ofn;
	sigset_t m;

	if (!counted(sig) || !real)
		return real ? real(sig, h) : SIG_ERR;
	acts_begin(&m);
	ofn = atomic_load(&acts[sig].fn);
	old = real(sig, h);
	if (old != SIG_ERR) {
		if ((void *)old == (void *)tramp)
			old = ofn ? (__sighandler_t)ofn : SIG_DFL;
		if ((void *)h == (void *)tramp || h == SIG_HOLD) {
			/* as in act_set; SIG_HOLD (sigset) only blocks */
		} else if (!is_function((void *)h)) {
			table_set(sig, NULL, 0);
		} else if (!REAL(sigaction)(sig, NULL, &k) &&
			   handler_of(&k) == (void *)h) {
			through_tramp(sig, (void *)h, &k);
			if (REAL(sigaction)(sig, &k, NULL))
				table_set(sig, NULL, 0);
		}
	}
	acts_end(&m);
	return old;
}

SHIM_EXPORT __sighandler_t signal(int sig, __sighandler_t h)
{
	return adopt(REAL(signal), sig, h);
}

SHIM_EXPORT __sighandler_t bsd_signal(int sig, __sighandler_t h)
{
	return adopt(REAL(bsd_signal), sig, h);
}

SHIM_EXPORT __sighandler_t ssignal(int sig, __sighandler_t h)
{
	return adopt(REAL(ssignal), sig, h);
}

SHIM_EXPORT __sighandler_t sysv_signal(int sig, __sighandler_t h)
{
	return adopt(REAL(sysv_signal), sig, h);
}

SHIM_EXPORT __sighandler_t __sysv_signal(int sig, __sighandler_t h)
{
	return adopt(REAL(__sysv_signal), sig, h);
}

SHIM_EXPORT __sighandler_t sigset(int sig, __sighandler_t h)
{
	return adopt(REAL(sigset), sig, h);
}

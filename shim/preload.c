/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * preload.c - start-up of the interposer: the real libc functions (sys.h)
 * resolved before anything else, the once-only init, the lazy resolution
 * of a wrapper called before it, and the fork handlers.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "blind.h"
#include "shim.h"
#include "sock.h"
#include "fdtable.h"
#include "log.h"
#include "readiness.h"
#include "sys.h"
#include "util.h"

bool shim_active;

/* 0: not started, 1: running (calls go to libc), 2: done. */
static atomic_int shim_state;

void *shim_resolve(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (!p) {
		/* Nothing to fall back to: the C library lacks a function
		 * the program called through us. */
		if (sw_stderr_is_log())
			fprintf(stderr, "sdp-switch: libc function %s not "
				"found; check that libsdp_switch.so is "
				"preloaded into a glibc program\n", name);
		errno = ENOSYS;
	}
	return p;
}

static void shim_atfork_prepare(void)
{
	rd_atfork_prepare();
	fdt_atfork_prepare();
}

static void shim_atfork_parent(void)
{
	fdt_atfork_parent();
	rd_atfork_parent();
}

static void shim_atfork_child(void)
{
	fdt_atfork_child();
	rd_atfork_child();
	shim_signals_atfork_child();
}

/* The switch's fork handlers run inside the switch, as its calls from a
 * wrapper do: a provider that closes one of its descriptors there (a
 * client's listener, parked for the child) must reach the kernel, not be
 * refused as the program's close of a descriptor it does not own. */
static void sw_prepare_guarded(void)
{
	shim_enter();
	sw_atfork_prepare();
	shim_leave();
}

static void sw_parent_guarded(void)
{
	shim_enter();
	sw_atfork_parent();
	shim_leave();
}

static void sw_child_guarded(void)
{
	shim_enter();
	sw_atfork_child();
	shim_leave();
}

static void shim_init(void)
{
	bool on;

	/* A wrapper may run before the constructors: resolve here too. */
	sdp_sys_init();
	if (fdt_init()) {
		if (sw_stderr_is_log())
			fprintf(stderr, "sdp-switch: no memory for the fd "
				"table; all connections stay plain TCP\n");
		return;
	}
	shim_enter();
	on = sw_init();
	shim_leave();
	if (!on)
		return;
	/* The switch's handlers run inside ours: prepare handlers run in
	 * reverse order of registration, the others in order. The socket
	 * list's are outermost: its prepare runs last, its child handler
	 * first (a socket lock held by another thread at the fork is free
	 * again before anything in the child takes it). */
	sw_atfork(sw_sock_atfork_prepare, sw_sock_atfork_parent,
		       sw_sock_atfork_child);
	sw_atfork(shim_atfork_prepare, shim_atfork_parent,
		       shim_atfork_child);
	sw_atfork(sw_prepare_guarded, sw_parent_guarded,
		       sw_child_guarded);
	shim_inherit();
	/* a ring inherited from the parent: nothing is carried here */
	shim_enter();
	sw_blind_check(true);
	shim_leave();
	__atomic_store_n(&shim_active, true, __ATOMIC_RELEASE);
}

/*
 * Runs the init once. The state says "running" before init starts, so
 * calls the init itself makes (or other threads make meanwhile) go to libc.
 */
bool shim_activate(void)
{
	int expect = 0;
	int saved = errno;

	if (atomic_compare_exchange_strong(&shim_state, &expect, 1)) {
		shim_init();
		atomic_store(&shim_state, 2);
	}
	errno = saved;
	return __atomic_load_n(&shim_active, __ATOMIC_ACQUIRE);
}

__attribute__((constructor)) static void shim_ctor(void)
{
	shim_activate();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * preload.c - start-up of the interposer: resolves the real libc functions
 * (dlsym RTLD_NEXT), hands them to the switch (sdp_sys) and to readiness,
 * runs the once-only init and owns the per-thread recursion guard.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"
#include "fdtable.h"
#include "readiness.h"
#include "sys.h"

struct shim_real shim_real;
bool shim_active;
__thread int shim_in_switch __attribute__((tls_model("initial-exec")));

/* 0: not started, 1: running (calls go to libc), 2: done. */
static atomic_int shim_state;

void *shim_resolve(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (!p) {
		/* Nothing to fall back to: the C library lacks a function
		 * the program called through us. */
		fprintf(stderr, "sdp-switch: libc function %s not found; "
			"check that libsdp_switch.so is preloaded into a "
			"glibc program\n", name);
		errno = ENOSYS;
	}
	return p;
}

#define RESOLVE(name) \
	__atomic_store_n(&shim_real.name, dlsym(RTLD_NEXT, #name), \
			 __ATOMIC_RELAXED)

static void shim_resolve_all(void)
{
	RESOLVE(socket);
	RESOLVE(connect);
	RESOLVE(bind);
	RESOLVE(listen);
	RESOLVE(accept);
	RESOLVE(accept4);
	RESOLVE(read);
	RESOLVE(__read_chk);
	RESOLVE(readv);
	RESOLVE(recv);
	RESOLVE(__recv_chk);
	RESOLVE(recvfrom);
	RESOLVE(__recvfrom_chk);
	RESOLVE(recvmsg);
	RESOLVE(recvmmsg);
	RESOLVE(write);
	RESOLVE(writev);
	RESOLVE(send);
	RESOLVE(sendto);
	RESOLVE(sendmsg);
	RESOLVE(sendmmsg);
	RESOLVE(sendfile);
	RESOLVE(sendfile64);
	RESOLVE(shutdown);
	RESOLVE(close);
	RESOLVE(close_range);
	RESOLVE(closefrom);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(fcntl);
	RESOLVE(fcntl64);
	RESOLVE(ioctl);
	RESOLVE(getsockopt);
	RESOLVE(setsockopt);
	RESOLVE(poll);
	RESOLVE(__poll_chk);
	RESOLVE(ppoll);
	RESOLVE(__ppoll_chk);
	RESOLVE(select);
	RESOLVE(pselect);
	RESOLVE(epoll_create);
	RESOLVE(epoll_create1);
	RESOLVE(epoll_ctl);
	RESOLVE(epoll_wait);
	RESOLVE(epoll_pwait);
	RESOLVE(epoll_pwait2);
	RESOLVE(execve);
	RESOLVE(execvp);
	RESOLVE(execvpe);
	RESOLVE(fexecve);
	RESOLVE(prctl);
}

/* The switch makes its own real calls through sdp_sys: point it past us. */
static void shim_fill_sys(void)
{
	struct shim_real *r = &shim_real;

#define SYS(name) do { if (r->name) sdp_sys.name = r->name; } while (0)
	SYS(socket);
	SYS(connect);
	SYS(bind);
	SYS(listen);
	SYS(accept4);
	SYS(close);
	SYS(shutdown);
	SYS(read);
	SYS(write);
	SYS(recv);
	SYS(send);
	SYS(recvmsg);
	SYS(sendmsg);
	SYS(poll);
	SYS(getsockopt);
	SYS(setsockopt);
	SYS(fcntl);
	SYS(ioctl);
	SYS(epoll_wait);
	SYS(epoll_ctl);
#undef SYS
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
}

static void shim_init(void)
{
	struct rd_sys rs;
	bool on;

	shim_resolve_all();
	shim_fill_sys();
	rs.ppoll = shim_real.ppoll;
	rs.epoll_pwait = shim_real.epoll_pwait;
	rs.epoll_pwait2 = shim_real.epoll_pwait2;
	rs.select = shim_real.select;
	rs.pselect = shim_real.pselect;
	rd_init(fdt_get, &rs);
	if (fdt_init()) {
		fprintf(stderr, "sdp-switch: no memory for the fd table; "
			"all connections stay plain TCP\n");
		return;
	}
	shim_enter();
	on = sw_init();
	shim_leave();
	if (!on)
		return;
	/* The switch's handlers run inside ours: prepare handlers run in
	 * reverse order of registration, the others in order. */
	pthread_atfork(shim_atfork_prepare, shim_atfork_parent,
		       shim_atfork_child);
	pthread_atfork(sw_atfork_prepare, sw_atfork_parent, sw_atfork_child);
	shim_inherit();
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

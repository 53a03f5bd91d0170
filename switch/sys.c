/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sys.c - fills the table of real libc functions (sys.h) and holds the
 * per-thread recursion guard shared by the shim and the switch.
 */
#include <dlfcn.h>

#include "sys.h"

struct sdp_sys sdp_sys;
__thread int sdp_in_switch __attribute__((tls_model("initial-exec")));
__thread int sdp_wait_depth __attribute__((tls_model("initial-exec")));
__thread unsigned int sdp_sig_seen __attribute__((tls_model("initial-exec")));
__thread unsigned int sdp_in_handler __attribute__((tls_model("initial-exec")));

#define RESOLVE(name) \
	__atomic_store_n(&sdp_sys.name, dlsym(RTLD_NEXT, #name), \
			 __ATOMIC_RELAXED)

void sdp_sys_init(void)
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
	RESOLVE(splice);
	RESOLVE(shutdown);
	RESOLVE(close);
	RESOLVE(close_range);
	RESOLVE(closefrom);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(fdopen);
	RESOLVE(fclose);
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
	RESOLVE(_exit);
	RESOLVE(sigaction);
	RESOLVE(__sigaction);
	RESOLVE(signal);
	RESOLVE(bsd_signal);
	RESOLVE(ssignal);
	RESOLVE(sysv_signal);
	RESOLVE(__sysv_signal);
	RESOLVE(sigset);
}

/* Before other constructors of the same object (the shim's included). */
__attribute__((constructor(101))) static void sdp_sys_ctor(void)
{
	sdp_sys_init();
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sys.c - default real calls for the switch: libc's own functions. The shim
 * replaces every member with the dlsym(RTLD_NEXT) result at start-up.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "sys.h"

struct sdp_sys sdp_sys = {
	.socket = socket,
	.connect = connect,
	.bind = bind,
	.listen = listen,
	.accept4 = accept4,
	.close = close,
	.shutdown = shutdown,
	.read = read,
	.write = write,
	.recv = recv,
	.send = send,
	.recvmsg = recvmsg,
	.sendmsg = sendmsg,
	.poll = poll,
	.getsockopt = getsockopt,
	.setsockopt = setsockopt,
	.fcntl = fcntl,
	.ioctl = ioctl,
	.epoll_wait = epoll_wait,
	.epoll_ctl = epoll_ctl,
};

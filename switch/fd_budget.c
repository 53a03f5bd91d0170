/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fd_budget.c - the descriptor reserve: the switch opens a descriptor only
 * while the program keeps a reserve below RLIMIT_NOFILE, and gives back
 * what it can do without when the program runs out all the same
 * (docs/protocol.md 2.7, docs/fallback-reasons.md "descriptors").
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fallback.h"
#include "fd_budget.h"
#include "log.h"
#include "sdp_switch.h"
#include "sock.h"
#include "sys.h"
#include "upgrade.h"

#define SW_FD_RESERVE_MIN 64

bool sw_fd_may_open(unsigned int n)
{
	struct rlimit rl;
	rlim_t reserve;
	int fd;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return false;
	if (rl.rlim_cur == RLIM_INFINITY)
		return true;
	reserve = rl.rlim_cur / 16;
	if (reserve < SW_FD_RESERVE_MIN)
		reserve = SW_FD_RESERVE_MIN;
	if (rl.rlim_cur <= reserve + n)
		return false;
	/* The kernel hands out the lowest free number, and every number
	 * below it is taken: a new descriptor at or past the line means the
	 * program holds that many already. (Holes can hide some: the line is
	 * checked again at each descriptor the switch wants.) */
	/* a raw system call: an eventfd the switch makes through libc is
	 * moved to the switch's own range at the top (ownfd.c), which says
	 * nothing of the program's numbers */
	fd = (int)syscall(SYS_eventfd2, 0, EFD_CLOEXEC);
	if (fd < 0)
		return false;
	sdp_sys.close(fd);
	return (rlim_t)fd + n + reserve <= rl.rlim_cur;
}

int sw_fd_shed(void)
{
	struct sw_sock **v;
	int n, i, j, freed = 0;

	n = sw_sock_list(&v);
	for (i = 0; i < n; i++) {
		struct sw_sock *s = v[i];
		bool held = false;

		/* a socket busy in another call keeps what it has */
		if (pthread_mutex_trylock(&s->lock))
			goto next;
		for (j = 0; j < SW_MAX_PROVIDERS; j++)
			held |= s->plisten[j] != NULL;
		if (held && s->state == SW_LISTENER) {
			/* its later connections stay on TCP */
			SW_WARN("listener fd %d: gives its provider listeners back: the program is out of descriptors",
				s->fd);
			sw_listeners_close(s);
			s->fd_shed = true;
			freed++;
		} else if (held && sw_pending(s) &&
			   sw_upgrade_can_give_up(s)) {
			sw_fallback(s, SDP_FB_DESCRIPTORS,
				    "the program is out of descriptors");
			freed++;
		}
		pthread_mutex_unlock(&s->lock);
next:
		sw_sock_unref(s);
	}
	free(v);
	return freed;
}

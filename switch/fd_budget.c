/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fd_budget.c - the descriptor reserve: the switch opens a descriptor only
 * while the program keeps a reserve below RLIMIT_NOFILE (docs/protocol.md
 * 2.6, docs/fallback-reasons.md "descriptors").
 */
#include <sys/eventfd.h>
#include <sys/resource.h>

#include "fd_budget.h"
#include "sys.h"

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
	fd = eventfd(0, EFD_CLOEXEC);
	if (fd < 0)
		return false;
	sdp_sys.close(fd);
	return (rlim_t)fd + n + reserve <= rl.rlim_cur;
}

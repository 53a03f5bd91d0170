/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * diff_pair.h - the differential programs' two connections: a loopback TCP
 * pair made with raw system calls, which the switch never sees (the
 * kernel's answers), beside a pair carried by the provider; and comparing
 * one answer of each.
 */
#ifndef DIFF_PAIR_H
#define DIFF_PAIR_H

#include <sys/syscall.h>
#include "tp_stats.h"

/* r and errno of an int-returning call, as one number to compare */
#define RES(x) ({ int _r = (x); _r < 0 ? -errno : _r; })

static inline void same(const char *what, long k, long c)
{
	TP_CHECK(k == c, "%s: %ld on the carried connection, the kernel %ld",
		 what, c, k);
}

#endif /* DIFF_PAIR_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fd_budget.h - the descriptors the switch leaves the program: the one test
 * every part of the switch and its providers makes before it opens one.
 */
#ifndef SW_FD_BUDGET_H
#define SW_FD_BUDGET_H

#include <stdbool.h>

/* May the switch (or a provider) open n more descriptors now? False while
 * that would eat into the reserve kept below RLIMIT_NOFILE for the program
 * (the larger of 64 and a sixteenth of the limit): the connection then
 * stays on TCP (SDP_FB_DESCRIPTORS), and the program's own calls never
 * fail for descriptors the switch holds. */
bool sw_fd_may_open(unsigned int n);

#endif /* SW_FD_BUDGET_H */

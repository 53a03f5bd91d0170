/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * config_check.h - `sdp-run --check` and `--explain` (config_check.c): the switch reports
 * the configuration it loaded, then the process exits.
 */
#ifndef SW_CONFIG_CHECK_H
#define SW_CONFIG_CHECK_H

/* Prints the report SDP_CHECK asks for and exits the process. */
void sw_check_run(void) __attribute__((noreturn));

#endif /* SW_CONFIG_CHECK_H */

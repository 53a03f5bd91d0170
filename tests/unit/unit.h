/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * unit.h - what every unit-test file shares: the suite constructors listed
 * in suites.h, and a test case constructor that always sets a timeout.
 */
#ifndef SDP_UNIT_H
#define SDP_UNIT_H

#include <check.h>

/* Seconds a test case may run before Check kills it (fork mode). */
#define UNIT_TIMEOUT 20

#define SUITE(name) Suite *name##_suite(void);
#include "suites.h"
#undef SUITE

/* A test case with the project's timeout, added to s. */
static inline TCase *unit_tcase(Suite *s, const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, UNIT_TIMEOUT);
	suite_add_tcase(s, tc);
	return tc;
}

#endif /* SDP_UNIT_H */

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * check_main.c - the unit-test runner: chains every suite listed in
 * suites.h into one Check run, in fork mode so a crashing test fails alone.
 *
 *   check_unit [SUITE [TCASE]]   (CK_RUN_SUITE / CK_RUN_CASE work as well)
 */
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

int main(int argc, char **argv)
{
	const char *suite = argc > 1 ? argv[1] : NULL;
	const char *tcase = argc > 2 ? argv[2] : NULL;
	SRunner *sr;
	int failed;

	sr = srunner_create(NULL);
#define SUITE(name) srunner_add_suite(sr, name##_suite());
#include "suites.h"
#undef SUITE
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run(sr, suite, tcase, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

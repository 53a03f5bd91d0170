/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * suites.h - the list of unit-test suites the runner chains, one SUITE(name)
 * line per tests/unit/check_<name>.c exporting <name>_suite(). Adding a
 * suite is one line here. No include guard: it is expanded more than once.
 */
SUITE(loader)
SUITE(rules)
SUITE(seen)

# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/diff/: the differential harness (run.py): another project's socket
# test suite, plain and preloaded, case by case (about 2 minutes).
#   make check-diff [DIFF_SUITES="test_socket"]

.PHONY: check-diff
check-diff: $(SHIM_LIB) $(SHM_LIB)
	SANITIZE=$(SANITIZE) PYTHONPATH=$(TEST_PYTHONPATH) \
		python3 tests/diff/run.py --lib $(SHIM_LIB) $(DIFF_SUITES)

CHECK_TARGETS += check-diff

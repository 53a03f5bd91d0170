# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/programs/hands.py: connections that change hands (fork after accept,
# connect then fork, SCM_RIGHTS, socat fork, PostgreSQL) under the switch.
#   make check-hands [HANDS_ONLY="postgresql"]

.PHONY: check-hands
check-hands: $(SHIM_LIB) $(SHM_LIB) $(O)/tests/programs/statdump
	SANITIZE=$(SANITIZE) PYTHONPATH=$(TEST_PYTHONPATH) timeout 900 \
		python3 tests/programs/hands.py \
		--lib $(SHIM_LIB) --statdump $(O)/tests/programs/statdump \
		$(HANDS_ONLY)

CHECK_TARGETS += check-hands

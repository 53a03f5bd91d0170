# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/programs/hands.py: connections that change hands (fork after accept,
# connect then fork, SCM_RIGHTS, socat fork, PostgreSQL) under the switch.
#   make check-hands [HANDS_ONLY="postgresql"]

.PHONY: check-hands
check-hands: $(SHIM_LIB) $(SHM_LIB) $(SDP_STAT_BIN)
	SANITIZE=$(SANITIZE) PYTHONPATH=$(TEST_PYTHONPATH) timeout 900 \
		python3 tests/programs/hands.py \
		--lib $(SHIM_LIB) --stat $(SDP_STAT_BIN) \
		$(HANDS_ONLY)

CHECK_TARGETS += check-hands

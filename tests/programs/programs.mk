# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/programs/: real programs (iperf3, redis, nginx, socat, Python
# servers...) run through the switch, with the bytes and sdp-stat checked.
#   make check-programs [PROGRAMS_ONLY="iperf3 redis"] [SDP_TEST_BIG=1]

.PHONY: check-programs
check-programs: $(SHIM_LIB) $(SHM_LIB) $(SDP_STAT_BIN)
	SANITIZE=$(SANITIZE) PYTHONPATH=$(TEST_PYTHONPATH) timeout 600 \
		python3 tests/programs/run.py \
		--lib $(SHIM_LIB) --stat $(SDP_STAT_BIN) \
		$(PROGRAMS_ONLY)

CHECK_TARGETS += check-programs

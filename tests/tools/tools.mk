# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/tools/: the check of sdp-stat (make check-tools): its names against
# the switch's sources, bad and stale files, the counters of a live transfer.

# Needs the preload library and the shm provider for its live transfer.
.PHONY: check-tools
check-tools: $(SDP_STAT_BIN) $(SHIM_LIB) $(PROVIDER_OUT)/libsdp-shm.so
	SANITIZE=$(SANITIZE) tests/tools/check-stat.sh $(SDP_STAT_BIN) \
		$(SHIM_LIB) $(PROVIDER_OUT)

CHECK_TARGETS += check-tools

# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/tools/: the operator's side: configuration checks (check-config) and
# the statistics file against other local users (check-statfile, as root:
# it makes unprivileged users).

.PHONY: check-config check-statfile
check-config: $(SHIM_LIB) $(SHM_LIB)
	SANITIZE=$(SANITIZE) tests/tools/check-config.sh scripts/sdp-run \
		$(SHIM_LIB) $(PROVIDER_OUT)

CHECK_TARGETS += check-config
check-statfile: $(SDP_STAT_BIN) $(SHIM_LIB) $(SHM_LIB)
	SANITIZE=$(SANITIZE) tests/tools/check-statfile.sh $(SDP_STAT_BIN) \
		$(SHIM_LIB) $(PROVIDER_OUT)

CHECK_TARGETS += check-statfile

.PHONY: check-stat-ops
check-stat-ops: $(SDP_STAT_BIN) $(SHIM_LIB) $(SHM_LIB)
	SANITIZE=$(SANITIZE) tests/tools/check-stat-ops.sh $(SDP_STAT_BIN) \
		$(SHIM_LIB) $(PROVIDER_OUT)

CHECK_TARGETS += check-stat-ops

# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/scale: many idle connections between two processes under the switch:
# all carried, none reported readable while idle, at most 64 KiB registered
# per idle connection, echoes exact. 10,000 connections take 20-40 s on
# two idle cores (their upgrades take turns, SDP_UPGRADE_MAX at a time), so
# `make check` leaves it out and CI (.ci/run) runs it as a step of its own;
# `make check-scale SCALE_N=1000` is a quick run.

SCALE_N ?= 10000

.PHONY: check-scale
check-scale: $(O)/lib/libsdp_switch.so $(PROVIDER_OUT)/libsdp-shm.so \
		$(O)/bin/sdp-stat
	SDP_PROVIDER_DIR=$(abspath $(PROVIDER_OUT)) \
		PYTHONPATH=$(TEST_PYTHONPATH) timeout 600 \
		python3 tests/scale/idle_conns.py -n $(SCALE_N) --idle 8 \
		--timeout 500 --lib $(O)/lib/libsdp_switch.so \
		--stat $(O)/bin/sdp-stat

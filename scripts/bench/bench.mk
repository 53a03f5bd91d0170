# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# scripts/bench/: the benchmark suite's own C program (connection set-up
# rate). The suite itself is scripts/bench/run; see docs/benchmarks.md.

BENCH_CONNRATE := $(O)/bin/sdp-bench-connrate

$(BENCH_CONNRATE): $(O)/obj/scripts/bench/connrate.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $<

.PHONY: bench bench-quick
bench-quick: $(BENCH_CONNRATE) $(SHIM_LIB) $(SHM_LIB)
	scripts/bench/run --quick --build $(O)
bench: $(BENCH_CONNRATE) $(SHIM_LIB) $(SHM_LIB)
	scripts/bench/run --build $(O)

ALL_TARGETS += $(BENCH_CONNRATE)
.SECONDARY: $(O)/obj/scripts/bench/connrate.o

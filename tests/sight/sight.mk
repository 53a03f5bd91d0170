# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/sight/: programs that do I/O the shim cannot see (io_uring through
# liburing, Node.js with libuv's io_uring backend, statically linked Go) or
# close what they do not know (daemons, ssh), against preloaded peers.
#   make check-sight

SIGHT_PROGS := $(O)/tests/sight/uring_peer $(O)/tests/sight/fd_closer
SIGHT_CFLAGS := -Itests/integration/progs

$(O)/obj/tests/sight/%.o: tests/sight/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SIGHT_CFLAGS) -MMD -MP -c -o $@ $<

$(O)/tests/sight/uring_peer: $(O)/obj/tests/sight/uring_peer.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -luring

$(O)/tests/sight/fd_closer: $(O)/obj/tests/sight/fd_closer.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $<

.PHONY: check-sight
check-sight: $(SIGHT_PROGS) $(SHIM_LIB) $(SHM_LIB)
	SANITIZE=$(SANITIZE) PYTHONPATH=$(TEST_PYTHONPATH) timeout 900 \
		python3 tests/sight/run.py --lib $(SHIM_LIB) \
		--bin $(O)/tests/sight $(SIGHT_ONLY)

CHECK_TARGETS += check-sight

.SECONDARY: $(O)/obj/tests/sight/uring_peer.o $(O)/obj/tests/sight/fd_closer.o

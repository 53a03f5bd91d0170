# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/hostile/: a hostile session peer, a forger and a squatter against a
# preloaded echo server, with an honest preloaded client beside them; then
# (run-trust.sh) a third user's attacks on the local trust boundary.
#   make check-hostile

HOSTILE_DIR  := $(O)/tests/hostile
HOSTILE_BINS := $(HOSTILE_DIR)/echo_server $(HOSTILE_DIR)/honest_client \
	$(HOSTILE_DIR)/hostile_peer $(HOSTILE_DIR)/mallory \
	$(HOSTILE_DIR)/many_client

$(HOSTILE_DIR)/echo_server $(HOSTILE_DIR)/honest_client \
$(HOSTILE_DIR)/mallory $(HOSTILE_DIR)/many_client: \
		$(HOSTILE_DIR)/%: $(O)/obj/tests/hostile/%.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -lpthread

$(HOSTILE_DIR)/hostile_peer: $(O)/obj/tests/hostile/hostile_peer.o \
		$(LOADER_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LOADER_LIB) -ldl -lpthread

.PHONY: hostile-progs check-hostile
hostile-progs: $(HOSTILE_BINS)

check-hostile: $(HOSTILE_BINS) $(SHIM_LIB) $(PROVIDER_OUT)/libsdp-shm.so
	SANITIZE=$(SANITIZE) tests/hostile/run-hostile.sh $(O)
	SANITIZE=$(SANITIZE) tests/hostile/run-trust.sh $(O)

CHECK_TARGETS += check-hostile

.SECONDARY: $(O)/obj/tests/hostile/echo_server.o \
	$(O)/obj/tests/hostile/honest_client.o \
	$(O)/obj/tests/hostile/hostile_peer.o \
	$(O)/obj/tests/hostile/mallory.o $(O)/obj/tests/hostile/many_client.o

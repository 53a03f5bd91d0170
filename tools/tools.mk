# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tools/: sdp-stat, the reader of the statistics the switch publishes, its
# check (names against the switch's sources, counters of a live transfer)
# and the installation of the operator's man pages.

SDP_STAT_BIN := $(O)/bin/sdp-stat
SDP_STAT_OBJ := $(O)/obj/tools/sdp_stat.o $(O)/obj/switch/fallback_names.o

$(SDP_STAT_BIN): $(SDP_STAT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

# Needs the preload library and the shm provider for its live transfer.
.PHONY: check-tools
check-tools: $(SDP_STAT_BIN) $(SHIM_LIB) $(PROVIDER_OUT)/libsdp-shm.so
	SANITIZE=$(SANITIZE) tools/check-stat.sh $(SDP_STAT_BIN) $(SHIM_LIB) \
		$(PROVIDER_OUT)

ALL_TARGETS += $(SDP_STAT_BIN)
CHECK_TARGETS += check-tools
INSTALL_TARGETS += install-tools
.PHONY: install-tools
# sdp-run.1 belongs to sdp-run (scripts/); installed here until whoever
# installs sdp-run does it beside it.
install-tools: $(SDP_STAT_BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5
	install -m 755 $(SDP_STAT_BIN) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 docs/man/sdp-stat.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 docs/man/sdp-run.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 docs/man/sdp-rules.5 $(DESTDIR)$(PREFIX)/share/man/man5/

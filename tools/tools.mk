# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tools/: sdp-stat, the reader of the statistics the switch publishes, and
# the installation of the operator's man pages. Its check (make check-tools)
# is in tests/tools/.

SDP_STAT_BIN := $(O)/bin/sdp-stat
SDP_STAT_OBJ := $(O)/obj/tools/sdp_stat.o $(O)/obj/switch/fallback_names.o

$(SDP_STAT_BIN): $(SDP_STAT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

ALL_TARGETS += $(SDP_STAT_BIN)
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

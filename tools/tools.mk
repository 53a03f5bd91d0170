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
install-tools: $(SDP_STAT_BIN)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(SDP_STAT_BIN) $(DESTDIR)$(BINDIR)/
	install -m 644 docs/man/sdp-stat.1 $(DESTDIR)$(MANDIR)/man1/

# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# scripts/sdp-run: installed with the library's place written into it, and
# its manual pages (sdp-run(1), sdp-rules(5)).

INSTALL_TARGETS += install-sdp-run
.PHONY: install-sdp-run
install-sdp-run:
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man5
	sed 's|^installed_lib=$$|installed_lib=$(LIBDIR)/libsdp_switch.so|' \
		scripts/sdp-run >$(DESTDIR)$(BINDIR)/sdp-run
	chmod 755 $(DESTDIR)$(BINDIR)/sdp-run
	install -m 644 docs/man/sdp-run.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 docs/man/sdp-rules.5 $(DESTDIR)$(MANDIR)/man5/

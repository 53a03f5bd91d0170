# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# etc/: the configuration files installed in /etc/sdp-switch: the provider
# catalog and a rules file whose rules are all examples, commented out.

INSTALL_TARGETS += install-etc
.PHONY: install-etc
install-etc:
	install -d $(DESTDIR)$(SYSCONFDIR)/sdp-switch
	install -m 644 etc/providers.conf etc/rules.conf \
		$(DESTDIR)$(SYSCONFDIR)/sdp-switch/

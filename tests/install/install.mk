# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/install/: `make check-install` installs into a temporary DESTDIR and
# runs a transfer through the installed tree with no variable set.

.PHONY: check-install
check-install: all
	SANITIZE=$(SANITIZE) tests/install/check-install.sh O=$(O) \
		SANITIZE=$(SANITIZE)

CHECK_TARGETS += check-install

# The Debian packages: build, dpkg -i, a transfer, purge (root; run by CI,
# not by make check, since it installs into the system).
.PHONY: check-deb
check-deb:
	tests/install/check-deb.sh

# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/conformance/: the provider conformance suite, $(O)/bin/sdp-conformance,
# and `make check-conformance`, which runs it on the shm provider in its normal
# mode and in its staging mode (SDP_SHM_NO_CMA=1).

CONF_SRCS := $(wildcard tests/conformance/*.c)
CONF_OBJS := $(CONF_SRCS:%.c=$(O)/obj/%.o)
CONF_BIN  := $(O)/bin/sdp-conformance

$(CONF_OBJS): CFLAGS += $(CHECK_CFLAGS) -Itests/conformance

$(CONF_BIN): $(CONF_OBJS) $(LOADER_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(CONF_OBJS) $(LOADER_LIB) $(CHECK_LIBS) \
		-ldl -lpthread

ALL_TARGETS += $(CONF_BIN)
CHECK_TARGETS += check-conformance
INSTALL_TARGETS += install-conformance
.PHONY: install-conformance
install-conformance: $(CONF_BIN)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(CONF_BIN) $(DESTDIR)$(BINDIR)/
	install -m 644 docs/man/sdp-conformance.1 $(DESTDIR)$(MANDIR)/man1/

.PHONY: check-conformance
check-conformance: $(CONF_BIN) $(PROVIDER_OUT)/libsdp-shm.so
	SDP_PROVIDER_DIR=$(PROVIDER_OUT) $(CONF_BIN) --provider shm
	SDP_PROVIDER_DIR=$(PROVIDER_OUT) SDP_SHM_NO_CMA=1 \
		$(CONF_BIN) --provider shm

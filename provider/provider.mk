# provider/: the SPI loader (a static library linked into the switch and the
# conformance suite) and the shared rule for building a provider module.

LOADER_SRCS := provider/loader.c provider/catalog.c provider/errors.c
LOADER_OBJS := $(LOADER_SRCS:%.c=$(O)/obj/%.o)
LOADER_LIB  := $(O)/lib/libsdp_loader.a

$(LOADER_LIB): $(LOADER_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# Provider modules go to $(O)/lib/sdp/libsdp-<name>.so and export only the
# entry point (provider/provider.map).
PROVIDER_OUT := $(O)/lib/sdp
PROVIDER_LDFLAGS := -shared -Wl,--version-script=provider/provider.map \
	-Wl,-z,defs -Wl,-z,now

ALL_TARGETS += $(LOADER_LIB)

# The provider SDK: the SPI header, the linker version script every module
# is linked with, and a pkg-config file that gives both (docs/provider-spi.md).
PROVIDER_PC := $(O)/lib/pkgconfig/sdp-switch-provider.pc
SDK_VERSION := $(shell sed -n 's/^\#define SDP_SPI_VERSION SDP_SPI_MKVER(\([0-9]*\), *\([0-9]*\)).*/\1.\2/p' provider/sdp_provider.h)

$(PROVIDER_PC): provider/sdp-switch-provider.pc.in provider/sdp_provider.h
	@mkdir -p $(dir $@)
	sed -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@DATADIR@|$(DATADIR)|' \
	    -e 's|@PROVIDERDIR@|$(PROVIDERDIR)|' -e 's|@VERSION@|$(SDK_VERSION)|' \
	    $< >$@

ALL_TARGETS += $(PROVIDER_PC)
INSTALL_TARGETS += install-provider-sdk
.PHONY: install-provider-sdk
install-provider-sdk: $(PROVIDER_PC)
	install -d $(DESTDIR)$(INCLUDEDIR)/sdp-switch \
		$(DESTDIR)$(DATADIR)/sdp-switch $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 provider/sdp_provider.h $(DESTDIR)$(INCLUDEDIR)/sdp-switch/
	install -m 644 provider/provider.map $(DESTDIR)$(DATADIR)/sdp-switch/
	install -m 644 $(PROVIDER_PC) $(DESTDIR)$(LIBDIR)/pkgconfig/

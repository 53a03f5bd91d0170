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
INSTALL_TARGETS += install-provider-headers
.PHONY: install-provider-headers
install-provider-headers:
	install -d $(DESTDIR)$(PREFIX)/include/sdp-switch
	install -m 644 provider/sdp_provider.h $(DESTDIR)$(PREFIX)/include/sdp-switch/

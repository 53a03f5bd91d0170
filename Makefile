# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Top-level build of sdp-switch. Each folder adds its targets through its own
# fragment (*.mk), so a reader finds a module's build beside its sources.
#
#   make [all]                build everything into $(O) (default: build/)
#   make check                every test suite, then a summary of them all
#   make check SANITIZE=1     the same with ASan + UBSan (into build-san/)
#   make install PREFIX=/usr/local DESTDIR=   (also LIBDIR, BINDIR, ...)
#   make clean

CC      ?= gcc
PREFIX  ?= /usr/local
DESTDIR ?=
SANITIZE ?= 0

ifeq ($(SANITIZE),1)
O ?= build-san
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	     -fno-omit-frame-pointer
else
O ?= build
SAN_FLAGS :=
endif

# Where `make install` puts things (under $(DESTDIR)). The configuration
# is in /etc/sdp-switch whatever the prefix: the switch reads it there.
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
SYSCONFDIR ?= /etc
# provider modules; the switch also looks in sdp-switch/ beside itself
PROVIDERDIR ?= $(LIBDIR)/sdp-switch
PROVIDER_DIR_INSTALLED := $(PROVIDERDIR)

WARN := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
	-Wmissing-prototypes -Wstrict-prototypes -Wformat=2
BASE_CFLAGS := -std=gnu11 -O2 -g -fPIC -fvisibility=hidden -D_GNU_SOURCE \
	$(WARN) $(SAN_FLAGS) -Iprovider -Iswitch -Ishim \
	-DSDP_PROVIDER_DIR_DEFAULT='"$(PROVIDER_DIR_INSTALLED)"'
override CFLAGS := $(BASE_CFLAGS) $(CFLAGS)
override LDFLAGS := $(SAN_FLAGS) $(LDFLAGS)

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)

ALL_TARGETS :=
CHECK_TARGETS :=
INSTALL_TARGETS :=
CLEAN_FILES :=

.PHONY: all check install clean
all:

# no built-in rules: every rule is written out here or in a fragment
MAKEFLAGS += -r
%.d: ;

include provider/provider.mk
-include provider/shm/shm.mk
-include provider/verbs/verbs.mk
-include switch/switch.mk
-include shim/shim.mk
-include tools/tools.mk
-include etc/etc.mk
-include $(sort $(wildcard tests/*/*.mk))
-include $(sort $(wildcard scripts/*.mk scripts/*/*.mk))

all: $(ALL_TARGETS)

# every suite, one after the other, even after a failure; a summary at
# the end (tests/run-checks.sh). `make check-NAME` runs one.
check: all
	@tests/run-checks.sh "$(MAKE)" $(CHECK_TARGETS)

install: all $(INSTALL_TARGETS)

clean:
	rm -rf build build-san $(CLEAN_FILES)

# Objects: $(O)/obj/<path>.o from <path>.c, with header dependencies.
$(O)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)

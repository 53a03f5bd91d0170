# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/unit/: the Check unit-test runner $(O)/tests/check_unit, built from
# every tests/unit/check_*.c (suites are listed in tests/unit/suites.h), and
# the tiny provider modules the loader tests load ($(O)/tests/modules/*.so).

UNIT_SRCS := $(wildcard tests/unit/check_*.c)
UNIT_OBJS := $(UNIT_SRCS:%.c=$(O)/obj/%.o)
UNIT_BIN  := $(O)/tests/check_unit

# One source, one build per -D variant (see tests/unit/modules/testprov.c).
UNIT_TP_good       :=
UNIT_TP_noentry    := -DTP_NO_ENTRY
UNIT_TP_spi2       := -DTP_SPI2
UNIT_TP_nomand     := -DTP_NO_MANDATORY
UNIT_TP_noopt      := -DTP_NO_OPTIONAL
UNIT_TP_shortops   := -DTP_SHORT_OPS
UNIT_TP_nodev      := -DTP_NODEVICE
UNIT_TP_VARIANTS   := good noentry spi2 nomand noopt shortops nodev
UNIT_MODULES := $(UNIT_TP_VARIANTS:%=$(O)/tests/modules/tp-%.so)
UNIT_TP_OBJS := $(UNIT_TP_VARIANTS:%=$(O)/obj/tests/unit/modules/tp-%.o)
.SECONDARY: $(UNIT_TP_OBJS)

$(UNIT_OBJS): override CFLAGS += $(CHECK_CFLAGS) -Itests/unit

# Static pattern rules: they apply to these files only (the top Makefile
# re-reads *.d files, and a plain pattern would match their names too).
$(UNIT_TP_OBJS): $(O)/obj/tests/unit/modules/tp-%.o: \
		 tests/unit/modules/testprov.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(UNIT_TP_$*) -MMD -MP -c -o $@ $<

$(UNIT_MODULES): $(O)/tests/modules/tp-%.so: \
		 $(O)/obj/tests/unit/modules/tp-%.o provider/provider.map
	@mkdir -p $(dir $@)
	$(CC) $(PROVIDER_LDFLAGS) $(LDFLAGS) -o $@ $<

# Switch objects the suites test directly (check_rules.c: rules.c;
# check_seen.c: peer_seen.c).
UNIT_SWITCH_OBJS := $(O)/obj/switch/rules.o $(O)/obj/switch/peer_seen.o

$(UNIT_BIN): $(UNIT_OBJS) $(UNIT_SWITCH_OBJS) $(LOADER_LIB) $(UNIT_MODULES)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(UNIT_OBJS) $(UNIT_SWITCH_OBJS) $(LOADER_LIB) \
		$(CHECK_LIBS) -ldl

.PHONY: check-unit
check-unit: $(UNIT_BIN)
	$(UNIT_BIN)

ALL_TARGETS += $(UNIT_BIN)
CHECK_TARGETS += check-unit

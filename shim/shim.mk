# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# shim/: libsdp_switch.so, the LD_PRELOAD library: the interposed libc
# calls and the poll/select/epoll emulation (shim/*.c), the switch engine
# ($(SWITCH_OBJS), switch/switch.mk) and the provider loader.

SHIM_SRCS := shim/preload.c shim/fdtable.c shim/sock_setup.c \
	shim/sock_data.c shim/sock_poll.c shim/process.c \
	shim/rd_wait.c shim/poll.c shim/epoll.c shim/around.c \
	shim/signals.c
SHIM_OBJS := $(SHIM_SRCS:%.c=$(O)/obj/%.o)
SHIM_LIB  := $(O)/lib/libsdp_switch.so

# SHIM_SWITCH_OBJS may be overridden on the command line to link a
# stand-in switch while switch/ is being written.
SHIM_SWITCH_OBJS ?= $(SWITCH_OBJS)

SHIM_LDFLAGS := -shared -Wl,--version-script=shim/libsdp_switch.map \
	-Wl,-z,defs -Wl,-z,now

$(SHIM_LIB): $(SHIM_OBJS) $(SHIM_SWITCH_OBJS) $(LOADER_LIB) \
		shim/libsdp_switch.map
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(SHIM_LDFLAGS) -o $@ $(SHIM_OBJS) \
		$(SHIM_SWITCH_OBJS) $(LOADER_LIB) -ldl -lpthread

ALL_TARGETS += $(SHIM_LIB)
INSTALL_TARGETS += install-shim
.PHONY: install-shim
install-shim: $(SHIM_LIB)
	install -d $(DESTDIR)$(LIBDIR)
	install -m 755 $(SHIM_LIB) $(DESTDIR)$(LIBDIR)/

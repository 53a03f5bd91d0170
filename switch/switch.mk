# switch/: the switch engine, linked into libsdp_switch.so by shim/shim.mk
# and into unit tests.

SWITCH_SRCS := switch/sys.c switch/log.c switch/config.c switch/rules.c \
	switch/core.c switch/stats.c switch/fallback.c switch/fallback_names.c switch/upgrade.c switch/tcp_head.c \
	switch/msg_decode.c switch/buffers.c switch/session.c switch/credits.c switch/session_tx.c \
	switch/session_rx.c switch/downgrade.c switch/api.c switch/flusher.c switch/spin.c
# readiness.c (poll/select/epoll emulation) is added by whoever owns it
SWITCH_SRCS += $(wildcard switch/readiness.c)
SWITCH_SRCS += switch/bind.c
SWITCH_OBJS := $(SWITCH_SRCS:%.c=$(O)/obj/%.o)

.PHONY: switch-objs
switch-objs: $(SWITCH_OBJS)

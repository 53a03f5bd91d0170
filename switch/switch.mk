# switch/: the switch engine, linked into libsdp_switch.so by shim/shim.mk
# and into unit tests.

SWITCH_SRCS := switch/sys.c switch/log.c switch/config.c switch/rules.c \
	switch/providers.c switch/sock.c switch/util.c switch/stats.c switch/fallback.c switch/fallback_names.c \
	switch/listen.c switch/probe_answer.c switch/connect.c switch/discovery.c switch/upgrade.c \
	switch/upgrade_turns.c switch/reupgrade.c switch/fd_budget.c \
	switch/tcp_inband.c switch/tcp_head.c switch/msg_decode.c \
	switch/buffers.c switch/session.c switch/session_msg.c switch/wakeup.c \
	switch/credits.c switch/iov.c switch/session_tx.c switch/session_rx.c \
	switch/rdma_read.c switch/rdma_write.c switch/xslot.c \
	switch/downgrade.c switch/orphan.c switch/fork_exec.c \
	switch/exec_reup.c switch/holders.c switch/blind.c \
	switch/hello_token.c switch/peer_seen.c \
	switch/ownfd.c switch/api_data.c switch/api_splice.c \
	switch/api_ctl.c switch/api_ready.c switch/flusher.c switch/spin.c switch/status.c \
	switch/config_check.c switch/bind.c
SWITCH_OBJS := $(SWITCH_SRCS:%.c=$(O)/obj/%.o)

.PHONY: switch-objs
switch-objs: $(SWITCH_OBJS)

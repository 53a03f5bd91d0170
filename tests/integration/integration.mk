# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/integration/: small C programs that exercise the shim and readiness
# under LD_PRELOAD (each checks the bytes it receives), and the runner that
# starts them, with the ASan runtime first when SANITIZE=1.

ITEST_PROGS := epoll_et epoll_carried plain_idle epoll_oneshot epoll_two_sets epoll_nested \
	poll_mixed dup2_sock fork_conn threads_conn prefork epoll_upgrade \
	poll_upgrade fork_peer server_first \
	stream_close upgrade_flush shut_pending fork_exec seccomp_exit \
	raw_close_epoll idle_readers close_under_read idle_ready fd_limit \
	idle_send recv_outparams hello_reader epoll_et_edges fdx_echo \
	sock_diff poll_threads intr_diff handler_write busy_reader \
	stdio_sock orphan_close read_release epoll_add_waiting \
	fork_close_epoll vfork_close fork_halfclosed fork_threads \
	fork_silent_peer sendfile_lend zerocopy epoll_et_wake zerocopy_rx \
	fork_sender_close tcp_inq kernel_opts tx_tstamp
ITEST_BINS := $(ITEST_PROGS:%=$(O)/tests/integration/%)

$(O)/tests/integration/%: $(O)/obj/tests/integration/progs/%.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -lpthread

.PHONY: integration-progs check-integration
integration-progs: $(ITEST_BINS)

check-integration: $(ITEST_BINS) $(SHIM_LIB)
	tests/integration/check-exports.sh $(SHIM_LIB) shim/libsdp_switch.map
	SANITIZE=$(SANITIZE) tests/integration/run-progs.sh $(SHIM_LIB) \
		$(ITEST_BINS)

CHECK_TARGETS += check-integration

.SECONDARY: $(ITEST_PROGS:%=$(O)/obj/tests/integration/progs/%.o)

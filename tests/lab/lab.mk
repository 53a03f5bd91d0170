# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/lab/: the programs the soft-RoCE lab drives through the switch
# (sdp-xfer: hashed bulk transfer; sdp-echo: epoll echo server and client),
# plain socket programs run under LD_PRELOAD by switch-tests.sh, the tests
# the lab runs in its guests (scripts/rxe-lab/ boots them).

RXE_PROGS := $(O)/tests/sdp-xfer $(O)/tests/sdp-echo
RXE_STAT_OBJ := $(O)/obj/tests/lab/rxe_stat.o

$(O)/obj/tests/lab/%.o: CFLAGS += -Itests/lab

$(O)/tests/sdp-xfer: $(O)/obj/tests/lab/xfer.o $(RXE_STAT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

$(O)/tests/sdp-echo: $(O)/obj/tests/lab/echo.o $(RXE_STAT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

.PHONY: rxe-progs
rxe-progs: $(RXE_PROGS)
ALL_TARGETS += $(RXE_PROGS)

# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/rxe/: the programs the soft-RoCE lab drives through the switch
# (sdp-xfer: hashed bulk transfer; sdp-echo: epoll echo server and client);
# plain socket programs, run under LD_PRELOAD by scripts/rxe-lab/switch-tests.sh.

RXE_PROGS := $(O)/tests/sdp-xfer $(O)/tests/sdp-echo
RXE_STAT_OBJ := $(O)/obj/tests/rxe/rxe_stat.o

$(O)/obj/tests/rxe/%.o: CFLAGS += -Itests/rxe

$(O)/tests/sdp-xfer: $(O)/obj/tests/rxe/xfer.o $(RXE_STAT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

$(O)/tests/sdp-echo: $(O)/obj/tests/rxe/echo.o $(RXE_STAT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

.PHONY: rxe-progs
rxe-progs: $(RXE_PROGS)
ALL_TARGETS += $(RXE_PROGS)

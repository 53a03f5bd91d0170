# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/fuzz/: libFuzzer targets for the control-message decoder (clang,
# -fsanitize=fuzzer,address,undefined) and their seed corpus.
#   make fuzz                  build $(O)/tests/fuzz/fuzz_{msg_decode,session}
#   make check-fuzz            run each over tests/fuzz/corpus for FUZZ_SECONDS
#   make fuzz-corpus           regenerate tests/fuzz/corpus (commit the result)

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 20
FUZZ_FLAGS   := -std=gnu11 -O1 -g -D_GNU_SOURCE -Iswitch -Iprovider \
	-Wall -Wextra -Werror -Wno-unused-parameter \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer
FUZZ_DIR     := $(O)/tests/fuzz
FUZZ_TARGETS := msg_decode session
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
FUZZ_HAVE_CC := $(shell command -v $(FUZZ_CC) 2>/dev/null)

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c switch/msg_decode.c \
		switch/msg_decode.h switch/wire.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< switch/msg_decode.c

$(FUZZ_DIR)/gen_corpus: tests/fuzz/gen_corpus.c switch/wire.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

.PHONY: fuzz check-fuzz fuzz-corpus
fuzz: $(FUZZ_BINS)

fuzz-corpus: $(FUZZ_DIR)/gen_corpus
	mkdir -p tests/fuzz/corpus/decode tests/fuzz/corpus/session
	$(FUZZ_DIR)/gen_corpus tests/fuzz/corpus

# New inputs go to a scratch corpus in $(O), not into the tree; a crash
# leaves its reproducer in $(FUZZ_DIR)/crash-* and fails the target.
check-fuzz: $(FUZZ_BINS)
	tests/fuzz/run-fuzz.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Only where clang is installed, and not in the ASan build (the targets
# carry their own sanitizers).
ifneq ($(FUZZ_HAVE_CC),)
ifneq ($(SANITIZE),1)
CHECK_TARGETS += check-fuzz
endif
endif

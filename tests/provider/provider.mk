# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/provider/: the self-tests of each provider module, loaded with
# dlopen as the switch loads it: test_shm (make check-shm) and test_verbs
# (make check-verbs; SKIP on a host without RDMA devices).

SHM_TEST := $(O)/tests/test_shm
VERBS_TEST := $(O)/tests/test_verbs

$(SHM_TEST): $(O)/obj/tests/provider/test_shm.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl -lpthread

$(VERBS_TEST): $(O)/obj/tests/provider/test_verbs.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl -lpthread

.PHONY: check-shm check-verbs
check-shm: $(SHM_LIB) $(SHM_TEST)
	timeout 300 $(SHM_TEST) $(SHM_LIB)

check-verbs: $(VERBS_SO) $(VERBS_TEST)
	SDP_PROVIDER_DIR=$(PROVIDER_OUT) $(VERBS_TEST)

ALL_TARGETS += $(SHM_TEST)
CHECK_TARGETS += check-shm
ifneq ($(VERBS_HAVE_RDMA),)
ALL_TARGETS += $(VERBS_TEST)
CHECK_TARGETS += check-verbs
endif

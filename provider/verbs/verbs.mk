# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# provider/verbs/: the rdma-core provider module libsdp-verbs.so, its smoke
# test, and `make check-rxe`, which runs them in the soft-RoCE lab VM.
# Built only where the rdma-core headers exist.

VERBS_SRCS := provider/verbs/verbs_main.c provider/verbs/verbs_cm.c \
	provider/verbs/verbs_cq.c provider/verbs/verbs_mr.c \
	provider/verbs/verbs_rdma.c
VERBS_OBJS := $(VERBS_SRCS:%.c=$(O)/obj/%.o)
VERBS_SO := $(PROVIDER_OUT)/libsdp-verbs.so
VERBS_TEST := $(O)/tests/test_verbs
VERBS_HAVE_RDMA := $(and $(wildcard /usr/include/infiniband/verbs.h),$(wildcard /usr/include/rdma/rdma_cma.h))

$(VERBS_SO): $(VERBS_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(PROVIDER_LDFLAGS) -o $@ $^ -libverbs -lrdmacm -lpthread

$(VERBS_TEST): $(O)/obj/provider/verbs/test_verbs.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl -lpthread

ifneq ($(VERBS_HAVE_RDMA),)
ALL_TARGETS += $(VERBS_SO) $(VERBS_TEST)
CHECK_TARGETS += check-verbs
INSTALL_TARGETS += install-verbs
endif
.PHONY: install-verbs
install-verbs: $(VERBS_SO)
	install -d $(DESTDIR)$(PROVIDERDIR)
	install -m 755 $(VERBS_SO) $(DESTDIR)$(PROVIDERDIR)/

# On a host without RDMA devices the smoke test reports SKIP and passes.
.PHONY: check-verbs check-rxe
check-verbs: $(VERBS_SO) $(VERBS_TEST)
	SDP_PROVIDER_DIR=$(PROVIDER_OUT) $(VERBS_TEST)

# The soft-RoCE lab run (not part of `make check`: it boots a VM).
check-rxe:
	scripts/rxe-lab/check.sh

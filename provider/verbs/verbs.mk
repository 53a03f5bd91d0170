# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# provider/verbs/: the rdma-core provider module libsdp-verbs.so and
# `make check-rxe`, which runs it in the soft-RoCE lab VM (its smoke test,
# make check-verbs, is in tests/provider/).
# Built only where the rdma-core headers exist.

VERBS_SRCS := provider/verbs/verbs_main.c provider/verbs/verbs_cm.c \
	provider/verbs/verbs_cq.c provider/verbs/verbs_mr.c \
	provider/verbs/verbs_rdma.c
VERBS_OBJS := $(VERBS_SRCS:%.c=$(O)/obj/%.o)
VERBS_SO := $(PROVIDER_OUT)/libsdp-verbs.so
VERBS_HAVE_RDMA := $(and $(wildcard /usr/include/infiniband/verbs.h),$(wildcard /usr/include/rdma/rdma_cma.h))

$(VERBS_SO): $(VERBS_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(PROVIDER_LDFLAGS) -o $@ $^ -libverbs -lrdmacm -lpthread

ifneq ($(VERBS_HAVE_RDMA),)
ALL_TARGETS += $(VERBS_SO)
INSTALL_TARGETS += install-verbs
endif
.PHONY: install-verbs
install-verbs: $(VERBS_SO)
	install -d $(DESTDIR)$(PROVIDERDIR)
	install -m 755 $(VERBS_SO) $(DESTDIR)$(PROVIDERDIR)/

# The soft-RoCE lab run (not part of `make check`: it boots a VM); what
# it runs in the guest is in tests/lab/.
.PHONY: check-rxe
check-rxe:
	scripts/rxe-lab/check.sh

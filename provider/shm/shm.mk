# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# provider/shm: the same-host provider module (shared-memory rings, CMA or
# staged RDMA); its self-test (make check-shm) is in tests/provider/.

SHM_SRCS := provider/shm/shm_main.c provider/shm/shm_cm.c \
	provider/shm/shm_rendezvous.c \
	provider/shm/shm_ring.c provider/shm/shm_cq.c provider/shm/shm_mr.c \
	provider/shm/shm_rdma.c provider/shm/shm_spread.c provider/shm/shm_fault.c \
	provider/shm/shm_peer.c provider/shm/shm_pool.c \
	provider/shm/shm_guard.c
SHM_OBJS := $(SHM_SRCS:%.c=$(O)/obj/%.o)
SHM_LIB  := $(PROVIDER_OUT)/libsdp-shm.so

$(SHM_LIB): $(SHM_OBJS) provider/provider.map
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(PROVIDER_LDFLAGS) -o $@ $(SHM_OBJS) -lpthread

ALL_TARGETS += $(SHM_LIB)
INSTALL_TARGETS += install-shm
.PHONY: install-shm
install-shm: $(SHM_LIB)
	install -d $(DESTDIR)$(PROVIDERDIR)
	install -m 755 $(SHM_LIB) $(DESTDIR)$(PROVIDERDIR)/

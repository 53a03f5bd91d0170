// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_fault.c - fault injection for tests: every Nth registration fails
 * with -ENOMEM, every Nth RDMA operation with -EIO (SDP_SHM_FAIL_REG_EVERY,
 * SDP_SHM_FAIL_RDMA_EVERY, or the options fail_reg_every, fail_rdma_every).
 */
#include "shm.h"

static bool every(_Atomic uint64_t *counter, uint32_t n)
{
	if (!n)
		return false;
	return (atomic_fetch_add(counter, 1) + 1) % n == 0;
}

bool shm_fault_reg(struct shm_provider *p)
{
	return every(&p->reg_count, p->opt.fail_reg_every);
}

bool shm_fault_rdma(struct shm_provider *p)
{
	return every(&p->rdma_count, p->opt.fail_rdma_every);
}

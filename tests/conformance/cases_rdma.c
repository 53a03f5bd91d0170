// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cases_rdma.c - conformance cases for RDMA between two processes: exact
 * transfers from 1 B to 64 MiB (unaligned, one or several SGEs, with and
 * without SDP_RDMA_SPREAD, timed at 64 MiB), and the protection rules a
 * peer can never get around.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

static const size_t sizes[] = { 1, 7, 4096, 65536 + 3, 1 << 20, 64 << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define ROFF 7		/* remote offset inside the registered region */
#define LOFF 5		/* local misalignment */
#define GAP 16		/* bytes between local SGEs */
/* variants of each size: one SGE; several; several with SDP_RDMA_SPREAD (a
 * hint the provider may follow or not: the bytes are the same) */
#define NVARIANTS 3

struct xfer_req {
	uint64_t n;
	uint32_t seed, nsge;
	struct sdp_rdma_desc d;
};

struct rdma_arg {
	int write;
};

static int nsge_for(struct side *s, size_t n, int variant)
{
	uint32_t k = s->attr.max_sge < 4 ? s->attr.max_sge : 4;

	if (variant == 0 || k < 2 || n < k || n > s->attr.max_rdma_size)
		return 1;
	return (int)k;
}

/* Target side: exposes a region per transfer and checks it afterwards. */
static int role_target(struct side *s, void *arg)
{
	struct rdma_arg *ra = arg;
	uint32_t access = ra->write ? SDP_ACCESS_REMOTE_WRITE :
				      SDP_ACCESS_REMOTE_READ;
	struct xfer_req rq;
	struct sdp_rmr *rmr;
	uint8_t *base, *reg;
	size_t i, rlen, n;
	int64_t bad;
	int v, rc;
	char done;

	for (i = 0; i < NSIZES; i++) {
		for (v = 0; v < NVARIANTS; v++) {
			n = sizes[i];
			rlen = n + 2 * ROFF + 1;
			base = malloc(rlen + 8);
			CHECK(base, "out of memory (%zu bytes)", rlen);
			reg = base + 3;
			rq.n = n;
			rq.seed = (uint32_t)(i * 10 + v + 1);
			pat_fill(reg, rlen, rq.seed + 500, 0);
			if (!ra->write)
				pat_fill(reg + ROFF, n, rq.seed, 0);
			rc = s->m->ext.register_rdma_memory(s->ep, reg, rlen,
							    access, &rq.d,
							    &rmr);
			CHECK(rc == 0, "RegisterRdmaMemory(%zu bytes): %s",
			      rlen, conf_err(rc));
			TRY(side_send(s, &rq, sizeof(rq)));
			TRY(side_recv(s, &done, 1, NULL, 60000));
			rc = s->m->ext.deregister_rdma_memory(s->ep, rmr);
			CHECK(rc == 0, "DeregisterRdmaMemory: %s",
			      conf_err(rc));
			if (ra->write) {
				bad = pat_check(reg + ROFF, n, rq.seed, 0);
				CHECK(bad < 0, "RdmaWrite of %zu bytes: target "
				      "byte %lld wrong", n, (long long)bad);
			}
			bad = pat_check(reg, ROFF, rq.seed + 500, 0);
			CHECK(bad < 0, "%zu-byte transfer changed target byte "
			      "%lld before the range", n, (long long)bad);
			bad = pat_check(reg + ROFF + n, rlen - ROFF - n,
					rq.seed + 500, ROFF + n);
			CHECK(bad < 0, "%zu-byte transfer changed a target "
			      "byte after the range", n);
			if (!ra->write) {
				bad = pat_check(reg + ROFF, n, rq.seed, 0);
				CHECK(bad < 0, "RdmaRead changed its source");
			}
			TRY(conf_reg_free(s->m, base, rlen + 8));
		}
	}
	return 0;
}

static int do_xfer(struct side *s, int write, uint8_t *loc, struct sdp_mr *mr,
		   const struct xfer_req *rq, int nsge, uint64_t *us)
{
	uint64_t max = s->attr.max_rdma_size, done = 0, t0;
	struct sdp_sge sgl[4];
	size_t piece, off;
	int i, rc;

	t0 = conf_now_us();
	if (nsge > 1) {
		/* uneven pieces separated by GAP untouched bytes */
		for (i = 0, off = 0; i < nsge; i++) {
			piece = i == nsge - 1 ? rq->n - off :
				rq->n / (size_t)nsge + (size_t)i;
			sgl[i] = (struct sdp_sge){ loc + off + (size_t)i * GAP,
						   piece, mr };
			off += piece;
		}
		rc = side_rdma(s, write, sgl, nsge, &rq->d, ROFF, 60000);
		CHECK(rc == 0, "%s of %llu bytes in %d SGEs: %s",
		      write ? "RdmaWrite" : "RdmaRead",
		      (unsigned long long)rq->n, nsge, conf_err(rc));
	} else {
		CHECK(max > 0, "ep_query reports max_rdma_size 0");
		while (done < rq->n) {
			piece = rq->n - done < max ? rq->n - done : max;
			sgl[0] = (struct sdp_sge){ loc + done, piece, mr };
			rc = side_rdma(s, write, sgl, 1, &rq->d, ROFF + done,
				       60000);
			CHECK(rc == 0, "%s of %zu bytes at offset %llu: %s",
			      write ? "RdmaWrite" : "RdmaRead", piece,
			      (unsigned long long)(ROFF + done), conf_err(rc));
			done += piece;
		}
	}
	*us = conf_now_us() - t0;
	return 0;
}

/* Initiator side: writes or reads each region the target exposes. */
static int role_initiator(struct side *s, void *arg)
{
	struct rdma_arg *ra = arg;
	struct xfer_req rq;
	size_t i, llen, off;
	struct sdp_mr *mr;
	uint8_t *base, *loc;
	int64_t bad;
	uint64_t us = 0;
	int v, k, nsge, rc;

	for (i = 0; i < NSIZES; i++) {
		for (v = 0; v < NVARIANTS; v++) {
			TRY(side_recv(s, &rq, sizeof(rq), NULL, 30000));
			CHECK(rq.n == sizes[i], "protocol: size %llu, expected "
			      "%zu", (unsigned long long)rq.n, sizes[i]);
			nsge = nsge_for(s, rq.n, v);
			llen = rq.n + 4 * GAP;
			base = malloc(llen + 8);
			CHECK(base, "out of memory");
			loc = base + LOFF;
			pat_fill(loc, llen, rq.seed + 900, 0);
			/* writes: place the data piece by piece */
			if (ra->write)
				for (k = 0, off = 0; k < nsge; k++) {
					size_t piece = k == nsge - 1 ?
						rq.n - off : rq.n /
						(size_t)nsge + (size_t)k;

					pat_fill(loc + off + (size_t)k * GAP,
						 piece, rq.seed, off);
					off += piece;
				}
			rc = s->m->ext.register_memory(s->m->prov, loc, llen,
				SDP_ACCESS_LOCAL_WRITE, &mr);
			CHECK(rc == 0, "RegisterMemory(%zu): %s", llen,
			      conf_err(rc));
			s->rdma_flags = v == 2 ? SDP_RDMA_SPREAD : 0;
			rc = do_xfer(s, ra->write, loc, mr, &rq, nsge, &us);
			s->rdma_flags = 0;
			TRY(rc);
			if (!ra->write) {
				for (k = 0, off = 0; k < nsge; k++) {
					size_t piece = k == nsge - 1 ?
						rq.n - off : rq.n /
						(size_t)nsge + (size_t)k;
					uint8_t *p = loc + off +
						     (size_t)k * GAP;

					bad = pat_check(p, piece, rq.seed,
							off);
					CHECK(bad < 0, "RdmaRead of %llu bytes"
					      " (%d SGEs): byte %lld of piece "
					      "%d wrong",
					      (unsigned long long)rq.n, nsge,
					      (long long)bad, k);
					if (k < nsge - 1) {
						bad = pat_check(p + piece, GAP,
							rq.seed + 900,
							(size_t)(p + piece -
								 loc));
						CHECK(bad < 0, "RdmaRead wrote "
						      "into the gap after "
						      "SGE %d", k);
					}
					off += piece;
				}
			}
			if (rq.n == sizes[NSIZES - 1])
				printf("    %s %llu MiB, %d SGE%s%s: %.1f ms, "
				       "%.0f MiB/s\n",
				       ra->write ? "rdma_write" : "rdma_read",
				       (unsigned long long)(rq.n >> 20), nsge,
				       nsge > 1 ? "s" : "",
				       v == 2 ? ", spread" : "", us / 1000.0,
				       (double)rq.n / 1048576.0 /
				       ((double)(us ? us : 1) / 1e6));
			rc = s->m->ext.deregister_memory(s->m->prov, mr);
			CHECK(rc == 0, "DeregisterMemory: %s", conf_err(rc));
			TRY(conf_reg_free(s->m, base, llen + 8));
			TRY(side_send(s, "d", 1));
		}
	}
	return 0;
}

int case_rdma_write_sizes(void)
{
	struct rdma_arg ra = { .write = 1 };

	return conf_run_pair(PAIR_FORK, role_target, &ra, role_initiator, &ra);
}

int case_rdma_read_sizes(void)
{
	struct rdma_arg ra = { .write = 0 };
	struct sdp_module m;

	TRY(conf_load(&m));
	if (!m.ext.rdma_read) {
		CHECK(!(m.info.caps & SDP_CAP_RDMA_READ), "RdmaRead answers "
		      "-EOPNOTSUPP but caps claim SDP_CAP_RDMA_READ");
		sdp_module_unload(&m);
		conf_skip("RdmaRead not offered by this provider "
			  "(-EOPNOTSUPP)");
	}
	sdp_module_unload(&m);
	return conf_run_pair(PAIR_FORK, role_target, &ra, role_initiator, &ra);
}

/* ---- protection ---------------------------------------------------------- */

/*
 * The initiator makes NATT refused attempts per direction (attempt i: write
 * for i < NATT, read after), announcing each to the target first. A
 * provider with SDP_CAP_RDMA_ERR_FATAL may end the endpoint when a refusal
 * is found by the hardware (an error completion rather than an error
 * answer): the target then checks its bytes, the case reconnects and goes on
 * with the next attempt, and a last connection proves one legal write.
 * Without the cap the whole run uses one connection.
 */
enum { R_RW, R_RO, R_WO, R_STALE, R_N };
#define PSZ 4096
#define NATT 10

struct prot_msg {
	struct sdp_rdma_desc d[R_N];
	uint32_t start;		/* first attempt on this connection */
};

/* What the case driver (the server's process) learns from one connection. */
struct prot_arg {
	uint32_t start;
	uint32_t next;		/* attempt to resume at after an end */
	bool finished;		/* all made, legal write seen */
};

/* Checks every region still holds its pattern, apart from the legal write. */
static int prot_check_regions(uint8_t *reg[R_N], const char *when)
{
	int64_t bad;
	int i;

	for (i = 0; i < R_N; i++) {
		bad = pat_check(reg[i], PSZ, 300 + i, 0);
		CHECK(bad < 0, "region %d byte %lld changed by a refused "
		      "access %s", i, (long long)bad, when);
	}
	return 0;
}

static int role_prot_target(struct side *s, void *arg)
{
	static const uint32_t want[R_N] = {
		SDP_ACCESS_REMOTE_READ | SDP_ACCESS_REMOTE_WRITE,
		SDP_ACCESS_REMOTE_READ, SDP_ACCESS_REMOTE_WRITE,
		/* stale: every right, so staleness is its only fault */
		SDP_ACCESS_REMOTE_READ | SDP_ACCESS_REMOTE_WRITE,
	};
	bool fatal = s->m->info.caps & SDP_CAP_RDMA_ERR_FATAL;
	struct prot_arg *pa = arg;
	struct sdp_rmr *rmr[R_N];
	int64_t last = -1, bad;
	struct prot_msg pm;
	uint8_t *reg[R_N];
	uint8_t msg[8];
	uint32_t access, idx;
	size_t len;
	int i, rc, ended;

	memset(&pm, 0, sizeof(pm));
	pm.start = pa->start;
	for (i = 0; i < R_N; i++) {
		reg[i] = malloc(PSZ);
		CHECK(reg[i], "out of memory");
		pat_fill(reg[i], PSZ, 300 + i, 0);
		access = want[i];
		rc = s->m->ext.register_rdma_memory(s->ep, reg[i], PSZ, access,
						    &pm.d[i], &rmr[i]);
		if (rc < 0 && !s->m->ext.rdma_read &&
		    (access & SDP_ACCESS_REMOTE_WRITE)) {
			/* without RdmaRead, read rights may be refused */
			access &= ~(uint32_t)SDP_ACCESS_REMOTE_READ;
			rc = s->m->ext.register_rdma_memory(s->ep, reg[i], PSZ,
				access, &pm.d[i], &rmr[i]);
		}
		CHECK(rc == 0 || (i == R_RO && !s->m->ext.rdma_read),
		      "RegisterRdmaMemory(region %d, access %#x): %s", i,
		      access, conf_err(rc));
		if (rc < 0) {	/* read-only region refused: not tested */
			memset(&pm.d[i], 0, sizeof(pm.d[i]));
			rmr[i] = NULL;
			continue;
		}
		CHECK(pm.d[i].access == access, "descriptor access %#x, "
		      "registered with %#x", pm.d[i].access, access);
	}
	rc = s->m->ext.deregister_rdma_memory(s->ep, rmr[R_STALE]);
	CHECK(rc == 0, "DeregisterRdmaMemory: %s", conf_err(rc));
	rmr[R_STALE] = NULL;
	TRY(side_send(s, &pm, sizeof(pm)));
	for (;;) {
		ended = side_recv_or_end(s, msg, sizeof(msg), &len, 30000);
		if (ended < 0)
			return -1;
		if (ended)
			break;
		if (len == 1 && msg[0] == 'd')
			break;
		CHECK(len == sizeof(idx), "protocol: %zu-byte message", len);
		memcpy(&idx, msg, sizeof(idx));
		last = idx;
	}
	if (ended) {
		CHECK(fatal, "the endpoint ended after attempt %lld, but the "
		      "provider lacks SDP_CAP_RDMA_ERR_FATAL: a refused access "
		      "must leave the connection working", (long long)last);
		CHECK(last >= (int64_t)pa->start, "the endpoint ended before "
		      "the first attempt on it (%u)", pa->start);
		TRY(prot_check_regions(reg, "(before the endpoint ended)"));
		pa->next = (uint32_t)last + 1;
	} else {
		/* Only the one legal write (16 bytes at offset 100 of R_RW)
		 * landed. */
		bad = pat_check(reg[R_RW] + 100, 16, 999, 0);
		CHECK(bad < 0, "the legal RdmaWrite after the refused ones "
		      "left byte %lld wrong", (long long)bad);
		pat_fill(reg[R_RW] + 100, 16, 300 + R_RW, 100);
		TRY(prot_check_regions(reg, "(or the legal write went "
				       "elsewhere)"));
		pa->finished = true;
	}
	for (i = 0; i < R_N; i++) {
		if (rmr[i]) {
			rc = s->m->ext.deregister_rdma_memory(s->ep, rmr[i]);
			CHECK(rc == 0 || (ended && rc == -ECONNRESET),
			      "DeregisterRdmaMemory: %s", conf_err(rc));
		}
		TRY(conf_reg_free(s->m, reg[i], PSZ));
	}
	return 0;
}

struct prot_att {
	int write;
	size_t len;
	struct sdp_rdma_desc d;
	uint64_t off;
	int want1, want2;
	const char *what;
};

/* Attempt i against the descriptors in pm: 0, or 1 when it does not apply
 * to this provider (no RdmaRead, or a region it refused to register). */
static int prot_attempt(uint32_t i, const struct prot_msg *pm, int rd,
			struct prot_att *a)
{
	int w = i < NATT;
	const struct sdp_rdma_desc *lim = &pm->d[w ? R_RO : R_WO];

	if (!w && !rd)
		return 1;
	*a = (struct prot_att){ .write = w, .len = 16, .d = pm->d[R_RW],
				.want1 = -SDP_EBOUNDS, .want2 = -SDP_EBOUNDS };
	switch (i % NATT) {
	case 0:
		a->off = PSZ - 8;
		a->what = "across the region's end";
		break;
	case 1:
		a->len = PSZ + 1;
		a->what = "longer than the region";
		break;
	case 2:
		a->off = UINT64_MAX - 7;
		a->what = "at an offset that wraps around";
		break;
	case 3:
		a->d.key ^= 0x5a5a;
		a->want1 = a->want2 = -SDP_EBADKEY;
		a->what = "with a wrong key";
		break;
	case 4:
		a->d.tag += 1;
		a->want1 = a->want2 = -SDP_EBADKEY;
		a->what = "with a wrong tag";
		break;
	case 5:
		a->d.addr -= PSZ;
		a->d.length += PSZ;
		a->want2 = -SDP_EBADKEY;
		a->what = "with a forged start address";
		break;
	case 6:
		a->d.access = SDP_ACCESS_REMOTE_READ | SDP_ACCESS_REMOTE_WRITE;
		a->d.length = (uint64_t)PSZ * 16;
		a->off = PSZ;
		a->want2 = -SDP_EBADKEY;
		a->what = "with a forged length";
		break;
	case 7:
		a->d = pm->d[R_STALE];
		a->want1 = a->want2 = -SDP_EBADKEY;
		a->what = "with a stale descriptor";
		break;
	case 8:
		if (!lim->length)
			return 1;	/* region the provider refused */
		a->d = *lim;
		a->want1 = a->want2 = -SDP_ERIGHTS;
		a->what = w ? "into a read-only region" :
			      "from a write-only region";
		break;
	default:
		if (!lim->length)
			return 1;
		a->d = *lim;
		a->d.access = SDP_ACCESS_REMOTE_READ | SDP_ACCESS_REMOTE_WRITE;
		a->want1 = -SDP_ERIGHTS;
		a->want2 = -SDP_EBADKEY;
		a->what = "with forged access bits";
		break;
	}
	return 0;
}

/* Makes one attempt: 0 (refused as expected, endpoint kept), 1 (refused
 * by an error completion on a provider where that ends the endpoint), -1. */
static int prot_try(struct side *s, uint8_t *loc, struct sdp_mr *mr,
		    const struct prot_att *a)
{
	static atomic_uint seq;
	uint64_t ctx = CTX_TAG(TAG_RDMA) | atomic_fetch_add(&seq, 1);
	struct sdp_sge sge = { loc, a->len, mr };
	int rc, pending;

	pat_fill(loc, PSZ, 777, 0);
	if (a->write)
		rc = s->m->ext.rdma_write(s->ep, &sge, 1, &a->d, a->off, ctx,
					  0);
	else
		rc = s->m->ext.rdma_read(s->ep, &sge, 1, &a->d, a->off, ctx,
					 0);
	pending = rc == SDP_PENDING;
	rc = side_finish(s, rc, a->write ? SDP_OP_RDMA_WRITE :
			 SDP_OP_RDMA_READ, ctx, 5000);
	if (conf_aborted())
		return -1;
	/* iWARP (writes complete when sent): a key only the target can
	 * judge is refused there, by ending the connection (the write
	 * completes, the read flushes); the target checks its bytes */
	if (pending && a->want1 == -SDP_EBADKEY &&
	    (s->m->info.caps & SDP_CAP_RDMA_WRITE_UNACKED) &&
	    (a->write ? rc == 0 : rc == -ECONNRESET))
		return 1;
	CHECK(rc == a->want1 || rc == a->want2, "%s %s: answered %s, "
	      "expected %s", a->write ? "RdmaWrite" : "RdmaRead", a->what,
	      conf_err(rc), sdp_strerror(a->want1));
	if (!a->write)
		CHECK(pat_check(loc, PSZ, 777, 0) < 0, "refused RdmaRead %s "
		      "changed the local buffer", a->what);
	return pending && (s->m->info.caps & SDP_CAP_RDMA_ERR_FATAL) ? 1 : 0;
}

static int role_prot_initiator(struct side *s, void *arg)
{
	int rd = s->m->ext.rdma_read != NULL;
	struct prot_msg pm;
	struct prot_att a;
	struct sdp_mr *mr;
	uint8_t *loc;
	uint32_t i;
	int rc, ended = 0;

	TRY(side_recv(s, &pm, sizeof(pm), NULL, 10000));
	loc = malloc(2 * PSZ);
	CHECK(loc, "out of memory");
	rc = s->m->ext.register_memory(s->m->prov, loc, 2 * PSZ,
				       SDP_ACCESS_LOCAL_WRITE, &mr);
	CHECK(rc == 0, "RegisterMemory: %s", conf_err(rc));

	for (i = pm.start; i < 2 * NATT && !ended; i++) {
		if (prot_attempt(i, &pm, rd, &a))
			continue;
		TRY(side_send(s, &i, sizeof(i)));
		ended = prot_try(s, loc, mr, &a);
		if (ended < 0)
			return -1;
	}
	if (!ended) {
		/* The endpoint still works: one legal write. */
		pat_fill(loc, 16, 999, 0);
		rc = side_rdma(s, 1, &(struct sdp_sge){ loc, 16, mr }, 1,
			       &pm.d[R_RW], 100, 5000);
		CHECK(rc == 0, "a legal RdmaWrite after the refused ones: %s",
		      conf_err(rc));
	}
	CHECK(s->m->ext.deregister_memory(s->m->prov, mr) == 0,
	      "DeregisterMemory failed");
	TRY(conf_reg_free(s->m, loc, 2 * PSZ));
	/* An ended endpoint: closing it tells the target. */
	return ended ? 0 : side_send(s, "d", 1);
}

int case_rdma_protection(void)
{
	struct prot_arg pa = { 0 };
	int round;

	for (round = 0; round <= 2 * NATT && !pa.finished; round++) {
		pa.next = pa.start;
		TRY(conf_run_pair(PAIR_FORK, role_prot_target, &pa,
				  role_prot_initiator, NULL));
		if (pa.finished)
			break;
		CHECK(pa.next > pa.start, "no progress past attempt %u",
		      pa.start);
		pa.start = pa.next;
	}
	CHECK(pa.finished, "the attempts never finished on one connection");
	return 0;
}

/* ---- SharedArea ------------------------------------------------------------ */

#define AREA_ADDS 200000	/* atomic increments per side */
#define AREA_PAT 64		/* pattern bytes after the words used */

static int area_get(struct side *s, _Atomic uint64_t **mine,
		    _Atomic uint64_t **peers)
{
	static const struct sdp_guid g = SDP_GUID_SHARED_AREA;
	sdp_shared_area_fn fn = NULL;
	void *a, *b;
	size_t len = 0;
	int rc;

	rc = s->m->ops.ioctl(s->m->prov,
			     SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER, &g,
			     sizeof(g), &fn, sizeof(fn));
	if (rc == -EOPNOTSUPP)
		conf_skip("the provider offers no SharedArea (optional)");
	CHECK(rc == 0 && fn, "GET_EXTENSION(SharedArea): %s", conf_err(rc));
	rc = fn(s->ep, &a, &b, &len);
	CHECK(rc == 0, "%s: shared_area: %s", s->who, conf_err(rc));
	CHECK(len >= 128, "%s: shared area of %zu bytes, not >= 128", s->who,
	      len);
	CHECK(!((uintptr_t)a & 63) && !((uintptr_t)b & 63),
	      "%s: shared areas %p and %p not cache-line aligned", s->who, a,
	      b);
	CHECK(a != b, "%s: mine and the peer's area are the same", s->who);
	*mine = a;
	*peers = b;
	return 0;
}

/* Both sides: the areas start zeroed; each sees the other's plain writes,
 * and increments by both processes at once on the same word all count
 * (the memory is coherent and atomics work across the processes); a CAS
 * that the peer's write made stale fails. */
static int role_area(struct side *s, void *arg)
{
	bool srv = arg != NULL;
	_Atomic uint64_t *mine = NULL, *peers = NULL, *word;
	uint8_t *pm, *pp;
	uint64_t v;
	char c = 0;
	int i;

	TRY(area_get(s, &mine, &peers));
	pm = (uint8_t *)(mine + 2);
	pp = (uint8_t *)(peers + 2);
	for (i = 0; i < 16 + AREA_PAT; i++)
		CHECK(((uint8_t *)mine)[i] == 0, "%s: own area byte %d is %u "
		      "on a new connection, not 0", s->who, i,
		      ((uint8_t *)mine)[i]);
	pat_fill(pm, AREA_PAT, srv ? 11 : 12, 0);
	TRY(side_send(s, &c, 1));
	TRY(side_recv(s, &c, 1, NULL, 10000));
	v = (uint64_t)pat_check(pp, AREA_PAT, srv ? 12 : 11, 0);
	CHECK((int64_t)v < 0, "%s: byte %lld of the peer's area is not what "
	      "it wrote", s->who, (long long)v);
	/* both add to the server's word 0 at once */
	word = srv ? mine : peers;
	for (i = 0; i < AREA_ADDS; i++)
		atomic_fetch_add(word, 1);
	TRY(side_send(s, &c, 1));
	TRY(side_recv(s, &c, 1, NULL, 30000));
	v = atomic_load(word);
	CHECK(v == 2 * AREA_ADDS, "%s: %llu increments counted of %d: "
	      "atomics do not work across the processes", s->who,
	      (unsigned long long)v, 2 * AREA_ADDS);
	/* the client swaps the server's word 1 from 0 to 7; then the
	 * server's swap expecting 0 must fail and see 7 */
	if (!srv) {
		v = 0;
		CHECK(atomic_compare_exchange_strong(peers + 1, &v, 7),
		      "client: CAS on the peer's area failed (saw %llu)",
		      (unsigned long long)v);
	}
	TRY(side_send(s, &c, 1));
	TRY(side_recv(s, &c, 1, NULL, 10000));
	if (srv) {
		v = 0;
		CHECK(!atomic_compare_exchange_strong(mine + 1, &v, 9) &&
		      v == 7, "server: CAS on its own area ignored the "
		      "peer's swap (saw %llu)", (unsigned long long)v);
	}
	TRY(side_send(s, &c, 1));
	TRY(side_recv(s, &c, 1, NULL, 10000));
	return 0;
}

int case_shared_area(void)
{
	static int srv_tag;

	return conf_run_pair(PAIR_FORK, role_area, &srv_tag, role_area, NULL);
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cases_mr.c - conformance cases for registration: zero length, unaligned,
 * very large and overlapping regions, and descriptors that outlive their
 * DeregisterRdmaMemory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "conf.h"

struct lp {
	struct sdp_module m;
	struct side *srv, *cli;
	struct sdp_listener *l;
};

static int lp_open(struct lp *p)
{
	memset(p, 0, sizeof(*p));
	TRY(conf_load(&p->m));
	p->srv = calloc(1, sizeof(*p->srv));
	p->cli = calloc(1, sizeof(*p->cli));
	CHECK(p->srv && p->cli, "out of memory");
	/* No control slots: a receive posted here gets the next message. */
	return conf_local_pair(&p->m, p->srv, p->cli, &p->l, NULL, 0, NULL, 0);
}

static void lp_close(struct lp *p)
{
	conf_local_unpair(p->srv, p->cli, p->l);
	free(p->srv);
	free(p->cli);
	sdp_module_unload(&p->m);
}

int case_mr_zero_length(void)
{
	struct sdp_rdma_desc d;
	struct sdp_rmr *rmr;
	struct sdp_mr *mr;
	int first = 1, want = 0, rc, i;
	static char buf[64];
	struct lp p;

	TRY(lp_open(&p));
	for (i = 0; i < 6; i++) {
		mr = NULL;
		rmr = NULL;
		if (i % 2 == 0)
			rc = p.m.ext.register_memory(p.m.prov, buf + i, 0,
						     SDP_ACCESS_LOCAL_WRITE,
						     &mr);
		else
			rc = p.m.ext.register_rdma_memory(p.srv->ep, buf + i, 0,
				SDP_ACCESS_REMOTE_WRITE |
				SDP_ACCESS_REMOTE_READ, &d, &rmr);
		CHECK(rc == 0 || rc == -EINVAL, "zero-length %s registration "
		      "answered %s; expected 0 or -EINVAL",
		      i % 2 ? "RDMA" : "local", conf_err(rc));
		if (first)
			want = rc;
		first = 0;
		CHECK(rc == want, "zero-length registration answered %s, "
		      "earlier %s: the result must be the same every time",
		      conf_err(rc), conf_err(want));
		if (rc == 0 && i % 2 == 0) {
			rc = p.m.ext.deregister_memory(p.m.prov, mr);
			CHECK(rc == 0, "DeregisterMemory of a zero-length "
			      "registration: %s", conf_err(rc));
		} else if (rc == 0) {
			CHECK(d.length == 0, "zero-length RDMA registration "
			      "gave a descriptor of length %llu",
			      (unsigned long long)d.length);
			rc = p.m.ext.deregister_rdma_memory(p.srv->ep, rmr);
			CHECK(rc == 0, "DeregisterRdmaMemory of a zero-length "
			      "registration: %s", conf_err(rc));
		}
	}
	lp_close(&p);
	return 0;
}

/*
 * rc, the answer to an access the target must refuse, as -SDP_EBADKEY
 * where the target refused it (else rc); -1 after a failed check.
 * iWARP (SDP_CAP_RDMA_WRITE_UNACKED) refuses by ending the connection: a
 * write completes when sent, and the target's side must then see its
 * end; or, still being sent when the end comes, the write fails with
 * -ECONNRESET.
 */
static int target_refused(struct lp *p, int rc, const char *what)
{
	struct match mt = { .mask = ~0ull, .value = CTX_TAG(TAG_USER) | 77 };
	struct sdp_completion c;
	struct sdp_mr *mr;
	uint8_t *b;
	int r;

	if (!(p->m.info.caps & SDP_CAP_RDMA_WRITE_UNACKED))
		return rc;
	if (rc == -ECONNRESET)
		return -SDP_EBADKEY;
	if (rc != 0)
		return rc;
	/* a receive on the target's side flushes once its end is gone */
	b = malloc(64);
	CHECK(b, "out of memory");
	r = p->m.ext.register_memory(p->m.prov, b, 64, SDP_ACCESS_LOCAL_WRITE,
				     &mr);
	CHECK(r == 0, "RegisterMemory: %s", conf_err(r));
	r = p->m.ops.post_recv(p->srv->ep, &(struct sdp_sge){ b, 64, mr }, 1,
			       mt.value);
	if (r == SDP_PENDING) {
		/* the end comes through the writer taking the target's
		 * TERMINATE and closing the stream: slow on a loaded host */
		if (side_wait(p->srv, &mt, &c, 20000) < 0)
			return -1;
		r = c.status;
	}
	CHECK(r == -ECONNRESET, "%s completed and the target's connection "
	      "did not end (a receive there: %s)", what, conf_err(r));
	CHECK(p->m.ext.deregister_memory(p->m.prov, mr) == 0,
	      "DeregisterMemory failed");
	TRY(conf_reg_free(&p->m, b, 64));
	return -SDP_EBADKEY;
}

/* Writes len bytes (pattern seed) from src into the peer's region d at off
 * and checks the region's bytes inside and its guards outside. */
static int write_and_check(struct lp *p, uint8_t *src, struct sdp_mr *smr,
			   uint8_t *region, size_t rlen,
			   const struct sdp_rdma_desc *d, size_t off,
			   size_t len, uint32_t seed, uint32_t guard_seed)
{
	struct sdp_sge sge = { .addr = src, .length = len, .mr = smr };
	int64_t bad;
	int rc;

	pat_fill(src, len, seed, 0);
	pat_fill(region, rlen, guard_seed, 0);
	rc = side_rdma(p->cli, 1, &sge, 1, d, off, 10000);
	CHECK(rc == 0, "RdmaWrite of %zu bytes at offset %zu: %s", len, off,
	      conf_err(rc));
	bad = pat_check(region + off, len, seed, 0);
	CHECK(bad < 0, "RdmaWrite of %zu bytes at offset %zu: byte %lld "
	      "wrong", len, off, (long long)bad);
	bad = pat_check(region, off, guard_seed, 0);
	CHECK(bad < 0, "RdmaWrite at offset %zu changed byte %lld before it",
	      off, (long long)bad);
	bad = pat_check(region + off + len, rlen - off - len, guard_seed,
			off + len);
	CHECK(bad < 0, "RdmaWrite of %zu bytes at offset %zu changed byte "
	      "%lld after it", len, off, (long long)(off + len + bad));
	return 0;
}

int case_mr_unaligned(void)
{
	uint8_t *sbuf, *rbuf, *tbuf, *wbuf;
	struct sdp_mr *smr, *rmr_local, *wmr;
	struct sdp_sge sge;
	struct sdp_completion c;
	struct match mt = { .mask = ~0ull, .value = CTX_TAG(TAG_USER) | 1 };
	struct sdp_rdma_desc d;
	struct sdp_rmr *rmr;
	size_t len = 333;
	int64_t bad;
	struct lp p;
	int rc;

	TRY(lp_open(&p));
	sbuf = malloc(8192);
	rbuf = malloc(8192);
	tbuf = malloc(8192);
	wbuf = malloc(8192);
	CHECK(sbuf && rbuf && tbuf && wbuf, "out of memory");

	/* Control message from and into odd addresses. */
	rc = p.m.ext.register_memory(p.m.prov, sbuf + 3, len, 0, &smr);
	CHECK(rc == 0, "RegisterMemory(%p, %zu): %s", sbuf + 3, len,
	      conf_err(rc));
	rc = p.m.ext.register_memory(p.m.prov, rbuf + 5, len + 2,
				     SDP_ACCESS_LOCAL_WRITE, &rmr_local);
	CHECK(rc == 0, "RegisterMemory(%p, %zu): %s", rbuf + 5, len + 2,
	      conf_err(rc));
	memset(rbuf, 0xee, 8192);
	sge = (struct sdp_sge){ rbuf + 5, len + 2, rmr_local };
	rc = p.m.ops.post_recv(p.srv->ep, &sge, 1, mt.value);
	CHECK(rc == SDP_PENDING || rc == 0, "post_recv into an odd address: "
	      "%s", conf_err(rc));
	pat_fill(sbuf + 3, len, 77, 0);
	sge = (struct sdp_sge){ sbuf + 3, len, smr };
	rc = p.m.ops.post_send(p.cli->ep, &sge, 1, CTX_TAG(TAG_USER) | 2, 0);
	rc = side_finish(p.cli, rc, SDP_OP_SEND, CTX_TAG(TAG_USER) | 2, 5000);
	CHECK(rc == 0, "post_send from an odd address: %s", conf_err(rc));
	TRY(side_wait(p.srv, &mt, &c, 5000));
	CHECK(c.status == 0 && c.bytes == len, "receive into an odd address: "
	      "status %s, %llu bytes (sent %zu)", conf_err(c.status),
	      (unsigned long long)c.bytes, len);
	bad = pat_check(rbuf + 5, len, 77, 0);
	CHECK(bad < 0, "received message differs at byte %lld",
	      (long long)bad);
	CHECK(rbuf[4] == 0xee && rbuf[5 + len] == 0xee,
	      "receive wrote outside the message bytes");

	/* RDMA write between odd addresses. */
	rc = p.m.ext.register_rdma_memory(p.srv->ep, tbuf + 5, 1001,
					  SDP_ACCESS_REMOTE_WRITE, &d, &rmr);
	CHECK(rc == 0, "RegisterRdmaMemory(%p, 1001): %s", tbuf + 5,
	      conf_err(rc));
	CHECK(d.length == 1001 && d.addr == (uintptr_t)(tbuf + 5),
	      "descriptor says addr %#llx length %llu for %p length 1001",
	      (unsigned long long)d.addr, (unsigned long long)d.length,
	      tbuf + 5);
	rc = p.m.ext.register_memory(p.m.prov, wbuf + 7, 1001, 0, &wmr);
	CHECK(rc == 0, "RegisterMemory(%p, 1001): %s", wbuf + 7,
	      conf_err(rc));
	TRY(write_and_check(&p, wbuf + 7, wmr, tbuf + 5, 1001, &d, 0, 1001,
			    11, 12));
	TRY(write_and_check(&p, wbuf + 7, wmr, tbuf + 5, 1001, &d, 3, 997,
			    13, 14));

	CHECK(p.m.ext.deregister_rdma_memory(p.srv->ep, rmr) == 0,
	      "DeregisterRdmaMemory failed");
	CHECK(p.m.ext.deregister_memory(p.m.prov, wmr) == 0 &&
	      p.m.ext.deregister_memory(p.m.prov, smr) == 0 &&
	      p.m.ext.deregister_memory(p.m.prov, rmr_local) == 0,
	      "DeregisterMemory of an unaligned registration failed");
	TRY(conf_reg_free(&p.m, sbuf, 8192));
	TRY(conf_reg_free(&p.m, rbuf, 8192));
	TRY(conf_reg_free(&p.m, tbuf, 8192));
	TRY(conf_reg_free(&p.m, wbuf, 8192));
	lp_close(&p);
	return 0;
}

int case_mr_large(void)
{
	size_t big = 1ull << 30, tail = 4096;
	struct sdp_rdma_desc d;
	struct sdp_rmr *rmr;
	struct sdp_mr *mr, *wmr;
	uint8_t *region, *w;
	struct lp p;
	int rc;

	TRY(lp_open(&p));
	region = mmap(NULL, big, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(region != MAP_FAILED, "cannot map 1 GiB of address space to "
	      "test with");
	rc = p.m.ext.register_memory(p.m.prov, region, big,
				     SDP_ACCESS_LOCAL_WRITE, &mr);
	CHECK(rc == 0 || rc == -ENOMEM || rc == -EINVAL,
	      "RegisterMemory(1 GiB) answered %s; expected 0, -ENOMEM or "
	      "-EINVAL", conf_err(rc));
	if (rc == 0)
		CHECK(p.m.ext.deregister_memory(p.m.prov, mr) == 0,
		      "DeregisterMemory(1 GiB) failed");
	rc = p.m.ext.register_rdma_memory(p.srv->ep, region, big,
					  SDP_ACCESS_REMOTE_WRITE, &d, &rmr);
	CHECK(rc == 0 || rc == -ENOMEM || rc == -EINVAL,
	      "RegisterRdmaMemory(1 GiB) answered %s; expected 0, -ENOMEM or "
	      "-EINVAL", conf_err(rc));
	if (rc == 0) {
		CHECK(d.length == big, "1 GiB descriptor has length %llu",
		      (unsigned long long)d.length);
		w = malloc(tail);
		CHECK(w, "out of memory");
		rc = p.m.ext.register_memory(p.m.prov, w, tail, 0, &wmr);
		CHECK(rc == 0, "RegisterMemory(4 KiB): %s", conf_err(rc));
		/* Only the first and last pages are ever touched. */
		pat_fill(w, tail, 21, 0);
		rc = side_rdma(p.cli, 1, &(struct sdp_sge){ w, tail, wmr }, 1,
			       &d, big - tail, 20000);
		CHECK(rc == 0, "RdmaWrite into the last 4 KiB of 1 GiB: %s",
		      conf_err(rc));
		CHECK(pat_check(region + big - tail, tail, 21, 0) < 0,
		      "the last 4 KiB of the 1 GiB region hold wrong bytes");
		rc = side_rdma(p.cli, 1, &(struct sdp_sge){ w, 100, wmr }, 1,
			       &d, 0, 20000);
		CHECK(rc == 0 && pat_check(region, 100, 21, 0) < 0,
		      "RdmaWrite at the start of 1 GiB: %s or wrong bytes",
		      conf_err(rc));
		CHECK(p.m.ext.deregister_rdma_memory(p.srv->ep, rmr) == 0,
		      "DeregisterRdmaMemory(1 GiB) failed");
		CHECK(p.m.ext.deregister_memory(p.m.prov, wmr) == 0,
		      "DeregisterMemory failed");
		TRY(conf_reg_free(&p.m, w, tail));
	}
	TRY(conf_reg_unmap(&p.m, region, big));
	lp_close(&p);
	return 0;
}

int case_mr_overlap(void)
{
	struct sdp_rdma_desc d1, d2;
	struct sdp_rmr *r1, *r2;
	struct sdp_mr *m1, *m2;
	uint8_t *t, *w;
	struct lp p;
	int rc;

	TRY(lp_open(&p));
	t = malloc(65536);
	w = malloc(65536);
	CHECK(t && w, "out of memory");
	rc = p.m.ext.register_rdma_memory(p.srv->ep, t, 65536,
					  SDP_ACCESS_REMOTE_WRITE, &d1, &r1);
	CHECK(rc == 0, "RegisterRdmaMemory(64 KiB): %s", conf_err(rc));
	rc = p.m.ext.register_rdma_memory(p.srv->ep, t + 16384, 32768,
					  SDP_ACCESS_REMOTE_WRITE, &d2, &r2);
	CHECK(rc == 0, "RegisterRdmaMemory over a registered range: %s",
	      conf_err(rc));
	CHECK(d1.key != d2.key || d1.tag != d2.tag, "two live registrations "
	      "got the same descriptor key and tag");
	rc = p.m.ext.register_memory(p.m.prov, w, 65536, 0, &m1);
	CHECK(rc == 0, "RegisterMemory(64 KiB): %s", conf_err(rc));
	rc = p.m.ext.register_memory(p.m.prov, w + 1000, 20000, 0, &m2);
	CHECK(rc == 0, "RegisterMemory over a registered range: %s",
	      conf_err(rc));

	TRY(write_and_check(&p, w, m1, t, 65536, &d1, 100, 30000, 31, 32));
	TRY(write_and_check(&p, w + 1000, m2, t + 16384, 32768, &d2, 5,
			    20000, 33, 34));
	/* Dropping the outer ones leaves the inner ones working. */
	CHECK(p.m.ext.deregister_rdma_memory(p.srv->ep, r1) == 0,
	      "DeregisterRdmaMemory of the outer region failed");
	CHECK(p.m.ext.deregister_memory(p.m.prov, m1) == 0,
	      "DeregisterMemory of the outer buffer failed");
	TRY(write_and_check(&p, w + 1000, m2, t + 16384, 32768, &d2, 12000,
			    20000, 35, 36));
	rc = side_rdma(p.cli, 1, &(struct sdp_sge){ w + 1000, 16, m2 }, 1,
		       &d1, 0, 5000);
	rc = target_refused(&p, rc, "RdmaWrite through the deregistered "
			    "outer descriptor");
	if (conf_aborted())
		return -1;
	CHECK(rc == -SDP_EBADKEY, "RdmaWrite through the deregistered outer "
	      "descriptor answered %s, expected -SDP_EBADKEY", conf_err(rc));
	CHECK(p.m.ext.deregister_rdma_memory(p.srv->ep, r2) == 0 &&
	      p.m.ext.deregister_memory(p.m.prov, m2) == 0,
	      "deregistering the inner registrations failed");
	TRY(conf_reg_free(&p.m, t, 65536));
	TRY(conf_reg_free(&p.m, w, 65536));
	lp_close(&p);
	return 0;
}

/* On a provider with SDP_CAP_RDMA_ERR_FATAL a refused access may end the
 * endpoint: the case then opens a fresh connection (same module, so local
 * registrations survive) before the next attempt. */
static int lp_fresh(struct lp *p)
{
	conf_local_unpair(p->srv, p->cli, p->l);
	memset(p->srv, 0, sizeof(*p->srv));
	memset(p->cli, 0, sizeof(*p->cli));
	p->l = NULL;
	return conf_local_pair(&p->m, p->srv, p->cli, &p->l, NULL, 0, NULL, 0);
}

/* Registers t on the server's endpoint, proves the descriptor works, and
 * deregisters it: *d is then a stale descriptor of this connection. */
static int make_stale(struct lp *p, uint8_t *t, uint8_t *w, struct sdp_mr *wm,
		      struct sdp_rdma_desc *d, uint32_t seed)
{
	struct sdp_rmr *r;
	int rc;

	rc = p->m.ext.register_rdma_memory(p->srv->ep, t, 8192,
		SDP_ACCESS_REMOTE_WRITE | (p->m.ext.rdma_read ?
		SDP_ACCESS_REMOTE_READ : 0), d, &r);
	CHECK(rc == 0, "RegisterRdmaMemory: %s", conf_err(rc));
	TRY(write_and_check(p, w, wm, t, 8192, d, 0, 8192, seed, seed + 1));
	rc = p->m.ext.deregister_rdma_memory(p->srv->ep, r);
	CHECK(rc == 0, "DeregisterRdmaMemory: %s", conf_err(rc));
	return 0;
}

/* A write through the stale descriptor d: -SDP_EBADKEY (or refused by the
 * target, target_refused), target unchanged. */
static int stale_write(struct lp *p, uint8_t *t, uint8_t *w, struct sdp_mr *wm,
		       const struct sdp_rdma_desc *d, const char *when)
{
	int64_t bad;
	int rc;

	pat_fill(t, 8192, 43, 0);
	pat_fill(w, 8192, 44, 0);
	rc = side_rdma(p->cli, 1, &(struct sdp_sge){ w, 8192, wm }, 1, d, 0,
		       5000);
	rc = target_refused(p, rc, "RdmaWrite with a deregistered "
			    "descriptor");
	if (conf_aborted())
		return -1;
	CHECK(rc == -SDP_EBADKEY, "RdmaWrite with a deregistered descriptor "
	      "%sanswered %s, expected -SDP_EBADKEY", when, conf_err(rc));
	bad = pat_check(t, 8192, 43, 0);
	CHECK(bad < 0, "RdmaWrite with a deregistered descriptor %schanged "
	      "target byte %lld", when, (long long)bad);
	return 0;
}

int case_mr_stale_desc(void)
{
	struct sdp_rdma_desc d1, d2;
	struct sdp_rmr *r2;
	struct sdp_mr *wm;
	uint8_t *t, *w;
	struct lp p;
	int64_t bad;
	bool fatal;
	int rc;

	TRY(lp_open(&p));
	fatal = p.m.info.caps & SDP_CAP_RDMA_ERR_FATAL;
	t = malloc(8192);
	w = malloc(8192);
	CHECK(t && w, "out of memory");
	rc = p.m.ext.register_memory(p.m.prov, w, 8192,
				     SDP_ACCESS_LOCAL_WRITE, &wm);
	CHECK(rc == 0, "RegisterMemory: %s", conf_err(rc));

	/* A stale descriptor moves nothing in either direction. */
	TRY(make_stale(&p, t, w, wm, &d1, 41));
	TRY(stale_write(&p, t, w, wm, &d1, ""));
	if (p.m.ext.rdma_read) {
		if (fatal) {
			TRY(lp_fresh(&p));
			TRY(make_stale(&p, t, w, wm, &d1, 47));
		}
		pat_fill(t, 8192, 43, 0);
		pat_fill(w, 8192, 44, 0);
		rc = side_rdma(p.cli, 0, &(struct sdp_sge){ w, 8192, wm }, 1,
			       &d1, 0, 5000);
		/* iWARP: the target refuses it by ending the connection */
		if (rc == -ECONNRESET &&
		    (p.m.info.caps & SDP_CAP_RDMA_WRITE_UNACKED))
			rc = -SDP_EBADKEY;
		CHECK(rc == -SDP_EBADKEY, "RdmaRead with a deregistered "
		      "descriptor answered %s, expected -SDP_EBADKEY",
		      conf_err(rc));
		bad = pat_check(w, 8192, 44, 0);
		CHECK(bad < 0, "RdmaRead with a deregistered descriptor "
		      "changed local byte %lld", (long long)bad);
	}

	/* The same memory registered again: only the new descriptor works.
	 * Where a refused access ends the endpoint, the new descriptor is
	 * proven first and the stale one tried last. */
	if (fatal) {
		TRY(lp_fresh(&p));
		TRY(make_stale(&p, t, w, wm, &d1, 48));
	}
	rc = p.m.ext.register_rdma_memory(p.srv->ep, t, 8192,
					  SDP_ACCESS_REMOTE_WRITE, &d2, &r2);
	CHECK(rc == 0, "RegisterRdmaMemory again: %s", conf_err(rc));
	CHECK(d1.key != d2.key || d1.tag != d2.tag, "the new registration "
	      "got the stale descriptor's key and tag: the old one would work");
	if (fatal)
		TRY(write_and_check(&p, w, wm, t, 8192, &d2, 0, 8192, 45, 46));
	TRY(stale_write(&p, t, w, wm, &d1, "after re-registration "));
	if (!fatal)
		TRY(write_and_check(&p, w, wm, t, 8192, &d2, 0, 8192, 45, 46));
	rc = p.m.ext.deregister_rdma_memory(p.srv->ep, r2);
	CHECK(rc == 0, "DeregisterRdmaMemory: %s", conf_err(rc));
	CHECK(p.m.ext.deregister_memory(p.m.prov, wm) == 0,
	      "DeregisterMemory failed");
	TRY(conf_reg_free(&p.m, t, 8192));
	TRY(conf_reg_free(&p.m, w, 8192));
	lp_close(&p);
	return 0;
}

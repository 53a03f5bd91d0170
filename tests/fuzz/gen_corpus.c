// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * gen_corpus.c - writes the fuzz targets' seed corpus (tests/fuzz/corpus/):
 * valid messages of every type and the malformed variants the session must
 * refuse, one file each, and message sequences for fuzz_session.
 * Usage: gen_corpus DIR   (creates DIR/decode and DIR/session)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "wire.h"

static const char *outdir;

struct msg {
	uint8_t b[512];
	size_t n;
};

static void build(struct msg *m, uint8_t type, uint8_t flags,
		  uint16_t credits, uint32_t seq, const void *body,
		  size_t blen, const void *pay, size_t plen)
{
	struct sdp_msg_hdr h = {
		.type = type, .flags = flags, .credits = credits,
		.len = (uint32_t)plen, .seq = seq,
	};

	memcpy(m->b, &h, sizeof(h));
	memcpy(m->b + sizeof(h), body, blen);
	memcpy(m->b + sizeof(h) + blen, pay, plen);
	m->n = sizeof(h) + blen + plen;
}

static void put(const char *sub, const char *name, const void *p, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", outdir, sub, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
		fprintf(stderr, "gen_corpus: cannot write %s: %s\n", path,
			strerror(errno));
		exit(1);
	}
}

/* Session records: [u8 op][u16 len][bytes]. */
struct seq {
	uint8_t b[4096];
	size_t n;
};

static void seq_start(struct seq *s, uint8_t params)
{
	s->b[0] = params;
	s->n = 1;
}

static void seq_msg(struct seq *s, const struct msg *m)
{
	s->b[s->n++] = 0;
	s->b[s->n++] = m->n & 0xff;
	s->b[s->n++] = m->n >> 8;
	memcpy(s->b + s->n, m->b, m->n);
	s->n += m->n;
}

static void seq_read(struct seq *s, uint16_t len)
{
	s->b[s->n++] = 1;
	s->b[s->n++] = len & 0xff;
	s->b[s->n++] = len >> 8;
}

int main(int argc, char **argv)
{
	struct sdp_msg_setup su = { .msg_size = 16384, .recv_credits = 16 };
	struct sdp_msg_rdata rd = { .xfer_id = 7, .total = 100000,
		.region = { .addr = 0x7f0000001000ull, .length = 100000,
			    .key = 3, .access = SDP_ACCESS_REMOTE_READ,
			    .tag = 1 } };
	struct sdp_msg_wdata wd = { .offset = 0, .bytes = 4000 };
	struct sdp_msg_ack ack = { .xfer_id = 7, .bytes = 100000 };
	struct sdp_msg_ack sfree = { .bytes = 4096 };
	struct sdp_msg_wake wk = { .seen_seq = 3 };
	struct sdp_msg_switch swb = { .tcp_bytes = 1500 };
	uint8_t pay[300];
	struct msg m;
	struct seq s;
	char name[64];
	int i;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus DIR\n");
		return 2;
	}
	outdir = argv[1];
	for (i = 0; i < (int)sizeof(pay); i++)
		pay[i] = (uint8_t)(i * 7 + 1);
	su.staging.addr = 0x7f0000200000ull;
	su.staging.length = 1 << 20;
	su.staging.key = 1;
	su.staging.access = SDP_ACCESS_REMOTE_WRITE;
	su.staging.tag = 1;
	su.flags = SDP_SETUP_F_RDMA_READ;

	/* valid messages, one per type */
	build(&m, SDP_MSG_SETUP, 0, 0, 0, &su, sizeof(su), NULL, 0);
	put("decode", "ok-setup", m.b, m.n);
	build(&m, SDP_MSG_DATA, 0, 2, 1, NULL, 0, pay, 1);
	put("decode", "ok-data-1", m.b, m.n);
	build(&m, SDP_MSG_DATA, SDP_MSG_F_WAKE_ME, 0, 2, NULL, 0, pay, 300);
	put("decode", "ok-data-300-wake", m.b, m.n);
	build(&m, SDP_MSG_RDATA, 0, 0, 3, &rd, sizeof(rd), pay, 64);
	put("decode", "ok-rdata-head", m.b, m.n);
	build(&m, SDP_MSG_RDATA, 0, 1, 3, &rd, sizeof(rd), NULL, 0);
	put("decode", "ok-rdata", m.b, m.n);
	build(&m, SDP_MSG_WDATA, 0, 0, 4, &wd, sizeof(wd), NULL, 0);
	put("decode", "ok-wdata", m.b, m.n);
	rd.xfer_id = 9;
	build(&m, SDP_MSG_XOFFER, 0, 0, 4, &rd, sizeof(rd), NULL, 0);
	put("decode", "ok-xoffer", m.b, m.n);
	build(&m, SDP_MSG_XOFFER, 0, 0, 4, &rd, sizeof(rd), pay, 8);
	put("decode", "bad-xoffer-payload", m.b, m.n);
	rd.xfer_id = 7;
	build(&m, SDP_MSG_XFER_DONE, 0, 0, 5, &ack, sizeof(ack), NULL, 0);
	put("decode", "ok-xfer-done", m.b, m.n);
	build(&m, SDP_MSG_STAGING_FREE, 0, 3, 6, &sfree, sizeof(sfree),
	      NULL, 0);
	put("decode", "ok-staging-free", m.b, m.n);
	build(&m, SDP_MSG_CREDIT, 0, 8, 7, NULL, 0, NULL, 0);
	put("decode", "ok-credit", m.b, m.n);
	build(&m, SDP_MSG_WAKE_ME, 0, 0, 8, &wk, sizeof(wk), NULL, 0);
	put("decode", "ok-wake-me", m.b, m.n);
	build(&m, SDP_MSG_FIN, 0, 0, 9, NULL, 0, NULL, 0);
	put("decode", "ok-fin", m.b, m.n);
	build(&m, SDP_MSG_ABORT, 0, 0, 10, NULL, 0, NULL, 0);
	put("decode", "ok-abort", m.b, m.n);
	build(&m, SDP_MSG_OOB, 0, 0, 11, NULL, 0, pay, 1);
	put("decode", "ok-oob", m.b, m.n);
	build(&m, SDP_MSG_DOWNGRADE, 0, 0, 12, NULL, 0, NULL, 0);
	put("decode", "ok-downgrade", m.b, m.n);
	build(&m, SDP_MSG_SWITCH, SDP_MSG_F_SWITCHED, 0, 1, &swb, sizeof(swb),
	      NULL, 0);
	put("decode", "ok-switch", m.b, m.n);

	/* malformed: each breaks one rule of the decoder */
	put("decode", "bad-short-header", m.b, 7);
	build(&m, 0, 0, 0, 0, NULL, 0, NULL, 0);
	put("decode", "bad-type-0", m.b, m.n);
	build(&m, SDP_MSG_TYPE_MAX, 0, 0, 0, NULL, 0, NULL, 0);
	put("decode", "bad-type-max", m.b, m.n);
	build(&m, 0xff, 0, 0, 0, NULL, 0, pay, 4);
	put("decode", "bad-type-ff", m.b, m.n);
	build(&m, SDP_MSG_DATA, 0x80, 0, 1, NULL, 0, pay, 10);
	put("decode", "bad-flags", m.b, m.n);
	build(&m, SDP_MSG_DATA, 0, 0, 1, NULL, 0, pay, 10);
	m.b[12] = 1;
	put("decode", "bad-reserved", m.b, m.n);
	build(&m, SDP_MSG_DATA, 0, 0, 1, NULL, 0, pay, 10);
	put("decode", "bad-data-truncated", m.b, m.n - 3);
	build(&m, SDP_MSG_DATA, 0, 0, 1, NULL, 0, pay, 10);
	m.b[4] = 0xff;
	m.b[5] = 0xff;
	m.b[6] = 0xff;
	m.b[7] = 0xff;
	put("decode", "bad-data-len-huge", m.b, m.n);
	build(&m, SDP_MSG_DATA, 0, 0, 1, NULL, 0, NULL, 0);
	put("decode", "bad-data-empty", m.b, m.n);
	build(&m, SDP_MSG_OOB, 0, 0, 1, NULL, 0, pay, 2);
	put("decode", "bad-oob-2", m.b, m.n);
	build(&m, SDP_MSG_SETUP, 0, 0, 0, &su, sizeof(su) - 8, NULL, 0);
	put("decode", "bad-setup-short", m.b, m.n);
	su.staging.length = (1ull << 32) + 1;
	build(&m, SDP_MSG_SETUP, 0, 0, 0, &su, sizeof(su), NULL, 0);
	put("decode", "bad-setup-staging-huge", m.b, m.n);
	su.staging.length = 1 << 20;
	su.staging.access = SDP_ACCESS_REMOTE_READ;
	build(&m, SDP_MSG_SETUP, 0, 0, 0, &su, sizeof(su), NULL, 0);
	put("decode", "bad-setup-staging-ro", m.b, m.n);
	su.staging.access = SDP_ACCESS_REMOTE_WRITE;
	su.flags = 0x80;
	build(&m, SDP_MSG_SETUP, 0, 0, 0, &su, sizeof(su), NULL, 0);
	put("decode", "bad-setup-flags", m.b, m.n);
	su.flags = SDP_SETUP_F_RDMA_READ;
	rd.total = rd.region.length + 1;
	build(&m, SDP_MSG_RDATA, 0, 0, 3, &rd, sizeof(rd), NULL, 0);
	put("decode", "bad-rdata-total", m.b, m.n);
	rd.total = 100;
	rd.region.access = SDP_ACCESS_REMOTE_WRITE;
	build(&m, SDP_MSG_RDATA, 0, 0, 3, &rd, sizeof(rd), NULL, 0);
	put("decode", "bad-rdata-access", m.b, m.n);
	rd.region.access = SDP_ACCESS_REMOTE_READ;
	rd.reserved = 9;
	build(&m, SDP_MSG_RDATA, 0, 0, 3, &rd, sizeof(rd), NULL, 0);
	put("decode", "bad-rdata-reserved", m.b, m.n);
	rd.reserved = 0;
	wd.bytes = 0;
	build(&m, SDP_MSG_WDATA, 0, 0, 4, &wd, sizeof(wd), NULL, 0);
	put("decode", "bad-wdata-empty", m.b, m.n);
	wd.bytes = 4000;
	build(&m, SDP_MSG_WDATA, 0, 0, 4, &wd, sizeof(wd), pay, 5);
	put("decode", "bad-wdata-payload", m.b, m.n);
	wk.reserved = 1;
	build(&m, SDP_MSG_WAKE_ME, 0, 0, 8, &wk, sizeof(wk), NULL, 0);
	put("decode", "bad-wake-reserved", m.b, m.n);
	wk.reserved = 0;
	build(&m, SDP_MSG_FIN, 0, 0, 9, NULL, 0, pay, 3);
	put("decode", "bad-fin-payload", m.b, m.n);
	build(&m, SDP_MSG_CREDIT, 0, 0, 9, NULL, 0, pay, 1);
	put("decode", "bad-credit-payload", m.b, m.n);
	swb.reserved = 1;
	build(&m, SDP_MSG_SWITCH, 0, 0, 1, &swb, sizeof(swb), NULL, 0);
	put("decode", "bad-switch-reserved", m.b, m.n);
	swb.reserved = 0;
	build(&m, SDP_MSG_SWITCH, 0, 0, 1, &swb, sizeof(swb), pay, 2);
	put("decode", "bad-switch-payload", m.b, m.n);

	/* sequences: SETUP, then traffic */
	for (i = 0; i < 8; i++) {
		uint32_t sq = 0;
		int k;

		seq_start(&s, (uint8_t)(0x45 + i * 0x1b));
		build(&m, SDP_MSG_SETUP, 0, 0, sq++, &su, sizeof(su), NULL, 0);
		seq_msg(&s, &m);
		swb.tcp_bytes = (uint64_t)i * 300;
		build(&m, SDP_MSG_SWITCH, 0, 0, sq++, &swb, sizeof(swb), NULL,
		      0);
		seq_msg(&s, &m);
		for (k = 0; k < 4; k++) {
			wd.offset = (uint64_t)k * 1000;
			wd.bytes = 1000;
			build(&m, SDP_MSG_WDATA, 0, 0, sq++, &wd, sizeof(wd),
			      NULL, 0);
			seq_msg(&s, &m);
			if (i & 1)
				seq_read(&s, 700);
		}
		build(&m, SDP_MSG_DATA, 0, 1, sq++, NULL, 0, pay, 10 + i);
		seq_msg(&s, &m);
		rd.total = 5000;
		build(&m, SDP_MSG_RDATA, 0, 0, sq++, &rd, sizeof(rd), NULL, 0);
		seq_msg(&s, &m);
		build(&m, SDP_MSG_XFER_DONE, 0, 0, sq++, &ack, sizeof(ack),
		      NULL, 0);
		seq_msg(&s, &m);
		build(&m, SDP_MSG_STAGING_FREE, 0, 0, sq++, &sfree,
		      sizeof(sfree), NULL, 0);
		seq_msg(&s, &m);
		seq_read(&s, 4096);
		build(&m, SDP_MSG_CREDIT, 0, (uint16_t)(i + 1), sq++, NULL,
		      0, NULL, 0);
		seq_msg(&s, &m);
		build(&m, i & 2 ? SDP_MSG_FIN : SDP_MSG_DOWNGRADE, 0, 0, sq++,
		      NULL, 0, NULL, 0);
		seq_msg(&s, &m);
		build(&m, SDP_MSG_DATA, 0, 0, sq++, NULL, 0, pay, 5);
		seq_msg(&s, &m);
		snprintf(name, sizeof(name), "seq-%d", i);
		put("session", name, s.b, s.n);
	}
	return 0;
}

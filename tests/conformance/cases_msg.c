// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cases_msg.c - conformance cases for control messages: ordered, whole,
 * checksummed streams of varying sizes up to max_msg_size within one process
 * and between two, and sends the endpoint's limits forbid.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "conf.h"

#define STREAM_N 3000
#define HDR_MAGIC 0xc0dec0deu

struct hdr {
	uint32_t seq, len, sum, magic;
};

static uint32_t msg_len(uint32_t k, uint32_t seed, uint32_t max)
{
	uint32_t h = (k + 1) * 2654435761u ^ seed * 40503u;

	if (k % 7 == 0)
		return max;
	if (k % 5 == 0)
		return 1 + k % 15;
	if (k % 3 == 0)
		return 1 + h % max;
	return 1 + h % 512;
}

static void msg_fill(uint8_t *b, uint32_t k, uint32_t len, uint32_t seed)
{
	struct hdr h;

	pat_fill(b, len, seed + k, 0);
	if (len < sizeof(h))
		return;
	h.seq = k;
	h.len = len;
	h.sum = conf_fnv(b + sizeof(h), len - sizeof(h));
	h.magic = HDR_MAGIC;
	memcpy(b, &h, sizeof(h));
}

static int msg_verify(const char *who, const uint8_t *b, uint64_t got,
		      uint32_t k, uint32_t len, uint32_t seed)
{
	size_t off = 0;
	struct hdr h;
	int64_t bad;

	CHECK(got == len, "%s: message %u arrived with %llu bytes, sent %u "
	      "(lost, merged or cut)", who, k, (unsigned long long)got, len);
	if (len >= sizeof(h)) {
		memcpy(&h, b, sizeof(h));
		CHECK(h.magic == HDR_MAGIC && h.len == len, "%s: message %u "
		      "has a broken header (magic %#x len %u)", who, k,
		      h.magic, h.len);
		CHECK(h.seq == k, "%s: message %u arrived where %u was "
		      "expected: out of order", who, h.seq, k);
		CHECK(h.sum == conf_fnv(b + sizeof(h), len - sizeof(h)),
		      "%s: message %u checksum mismatch", who, k);
		off = sizeof(h);
	}
	bad = pat_check(b + off, len - off, seed + k, off);
	CHECK(bad < 0, "%s: message %u (%u bytes) wrong at byte %lld", who, k,
	      len, (long long)(bad + (int64_t)off));
	return 0;
}

/*
 * Messages per acknowledgement: one of the peer's CONF_CTL_SLOTS receives
 * stays free, since the acknowledgement that ends a stream takes one of
 * ours while the peer may already be sending its own stream (a message that
 * finds no receive ends an iWARP connection; InfiniBand and RoCE retry).
 */
#define STREAM_BATCH (CONF_CTL_SLOTS - 1)

static int stream_send(struct side *s, uint32_t n, uint32_t seed,
		       uint32_t max)
{
	uint32_t k, ack;
	uint8_t *b = side_send_buf(s);

	for (k = 0; k < n; k++) {
		uint32_t len = msg_len(k, seed, max);

		msg_fill(b, k, len, seed);
		TRY(side_send(s, b, len));
		/* The receiver reposts every slot before it acknowledges. */
		if ((k + 1) % STREAM_BATCH == 0 || k + 1 == n) {
			TRY(side_recv(s, &ack, sizeof(ack), NULL, 20000));
			CHECK(ack == k + 1, "%s: receiver acknowledged %u "
			      "messages, %u were sent", s->who, ack, k + 1);
		}
	}
	return 0;
}

static int stream_recv(struct side *s, uint32_t n, uint32_t seed,
		       uint32_t max)
{
	uint64_t got;
	uint32_t k;
	uint8_t *b;
	int slot;

	for (k = 0; k < n; k++) {
		TRY(side_recv_ptr(s, &b, &got, &slot, 20000));
		TRY(msg_verify(s->who, b, got, k, msg_len(k, seed, max),
			       seed));
		memset(b, 0, got);
		TRY(side_repost(s, slot));
		if ((k + 1) % STREAM_BATCH == 0 || k + 1 == n)
			TRY(side_send(s, &(uint32_t){ k + 1 }, 4));
	}
	return 0;
}

int msg_role_server(struct side *s, void *arg)
{
	struct stream *st = arg;

	TRY(stream_recv(s, st->n, st->seed, (uint32_t)s->slot));
	return stream_send(s, st->n, st->seed, (uint32_t)s->slot);
}

int msg_role_client(struct side *s, void *arg)
{
	struct stream *st = arg;

	TRY(stream_send(s, st->n, st->seed, (uint32_t)s->slot));
	return stream_recv(s, st->n, st->seed, (uint32_t)s->slot);
}

int case_msg_order_threads(void)
{
	struct stream st = { STREAM_N, 1000 };

	return conf_run_pair(PAIR_THREADS, msg_role_server, &st,
			     msg_role_client, &st);
}

int case_msg_order_fork(void)
{
	struct stream st = { STREAM_N, 2000 };

	return conf_run_pair(PAIR_FORK, msg_role_server, &st,
			     msg_role_client, &st);
}

static int role_oversize_server(struct side *s, void *arg)
{
	struct match mt = { .mask = CTX_MASK, .value = CTX_TAG(TAG_USER) };
	uint32_t max = s->attr.max_msg_size, nsge = s->attr.max_sge + 1, i;
	struct sdp_sge *sgl;
	struct sdp_mr *mr;
	uint8_t *buf;
	char ok[3];
	int rc;

	buf = calloc(1, (size_t)max + 64);
	sgl = calloc(nsge, sizeof(*sgl));
	CHECK(buf && sgl, "out of memory");
	rc = s->m->ext.register_memory(s->m->prov, buf, (size_t)max + 64,
				       SDP_ACCESS_LOCAL_WRITE, &mr);
	CHECK(rc == 0, "RegisterMemory: %s", conf_err(rc));
	rc = s->m->ops.post_send(s->ep, &(struct sdp_sge){ buf, max + 1, mr },
				 1, CTX_TAG(TAG_USER) | 1, 0);
	CHECK(rc < 0, "post_send of max_msg_size + 1 = %u bytes answered %s, "
	      "expected an error", max + 1, conf_err(rc));
	for (i = 0; i < nsge; i++)
		sgl[i] = (struct sdp_sge){ buf + i, 1, mr };
	rc = s->m->ops.post_send(s->ep, sgl, (int)nsge, CTX_TAG(TAG_USER) | 2,
				 0);
	CHECK(rc < 0, "post_send with max_sge + 1 = %u elements answered %s,"
	      " expected an error", nsge, conf_err(rc));
	rc = s->m->ops.post_recv(s->ep, sgl, (int)nsge, CTX_TAG(TAG_USER) | 3);
	CHECK(rc < 0, "post_recv with max_sge + 1 = %u elements answered %s,"
	      " expected an error", nsge, conf_err(rc));
	rc = s->m->ops.post_send(s->ep, sgl, 0, CTX_TAG(TAG_USER) | 4, 0);
	/* An empty message is legal or refused; the client skips it. */
	rc = side_finish(s, rc, SDP_OP_SEND, CTX_TAG(TAG_USER) | 4, 5000);
	CHECK(rc == 0 || rc == -EINVAL, "post_send with no element answered "
	      "%s, expected 0 or -EINVAL", conf_err(rc));
	rc = side_count(s, &mt, 300);
	CHECK(rc == 0, "failed posts reported %d completion(s)", rc);
	/* The endpoint still works both ways. */
	TRY(side_send(s, "ok", 3));
	TRY(side_recv(s, ok, 3, NULL, 5000));
	CHECK(!memcmp(ok, "ok", 3), "reply corrupted");
	CHECK(s->m->ext.deregister_memory(s->m->prov, mr) == 0,
	      "DeregisterMemory failed");
	TRY(conf_reg_free(s->m, buf, (size_t)max + 64));
	free(sgl);
	return 0;
}

static int role_oversize_client(struct side *s, void *arg)
{
	size_t len;
	char ok[3];

	TRY(side_recv(s, ok, 3, &len, 10000));
	if (len == 0)
		TRY(side_recv(s, ok, 3, &len, 10000));
	CHECK(len == 3 && !memcmp(ok, "ok", 3), "message after the failed "
	      "sends was %zu bytes, corrupted or lost", len);
	return side_send(s, "ok", 3);
}

int case_msg_oversize(void)
{
	return conf_run_pair(PAIR_THREADS, role_oversize_server, NULL,
			     role_oversize_client, NULL);
}

/*
 * SDP_SEND_INLINE (providers with SDP_CAP_SEND_INLINE): messages gathered
 * from unregistered memory (the stack, a malloc'd block) in up to max_sge
 * pieces are taken at once (0) or refused with -EAGAIN, never queued
 * (SDP_PENDING) and never completed; the receiver gets them whole and in
 * order, interleaved with ordinary sends.
 */
#define INLINE_N 200

static int role_inline_server(struct side *s, void *arg)
{
	struct match mt = { .mask = CTX_MASK, .value = CTX_TAG(TAG_USER) };
	uint32_t max = s->attr.max_msg_size, nsge = s->attr.max_sge, k;
	uint8_t *heap = malloc((size_t)max);
	struct sdp_sge sgl[4];
	uint8_t head[64];
	char ok[3];
	int rc, tries;

	if (!(s->m->info.caps & SDP_CAP_SEND_INLINE))
		conf_skip("the provider does not take SDP_SEND_INLINE "
			  "(optional)");
	CHECK(heap, "out of memory");
	if (nsge > 4)
		nsge = 4;
	for (k = 0; k < INLINE_N; k++) {
		uint32_t len = msg_len(k, 7, max), cut, n, i;

		if (k % 3 == 2) {
			/* an ordinary send between inline ones */
			uint8_t *b = side_send_buf(s);

			msg_fill(b, k, len, 7);
			TRY(side_send(s, b, len));
			continue;
		}
		msg_fill(heap, k, len, 7);
		/* the first bytes from the stack, the rest from the heap, in
		 * up to nsge pieces */
		cut = len < sizeof(head) ? len : (uint32_t)sizeof(head);
		memcpy(head, heap, cut);
		sgl[0] = (struct sdp_sge){ head, cut, NULL };
		n = 1;
		for (i = cut; i < len && n < nsge; n++) {
			uint32_t piece = n + 1 == nsge ? len - i :
				(len - i + 1) / 2;

			sgl[n] = (struct sdp_sge){ heap + i, piece, NULL };
			i += piece;
		}
		for (tries = 0;; tries++) {
			rc = s->m->ops.post_send(s->ep, sgl, (int)n,
						 CTX_TAG(TAG_USER) | k,
						 SDP_SEND_INLINE);
			if (rc != -EAGAIN || tries > 20000)
				break;
			/* the peer's ring is full: it drains as the client
			 * reads */
			usleep(100);
		}
		CHECK(rc == 0, "inline post_send of message %u (%u bytes, %u "
		      "pieces) answered %s, expected 0 (or -EAGAIN for a "
		      "while)", k, len, n, conf_err(rc));
		/* the buffer is ours again at once: scribbling on it must
		 * not change what the receiver gets */
		memset(heap, 0xa5, len);
		memset(head, 0x5a, sizeof(head));
	}
	rc = side_count(s, &mt, 300);
	CHECK(rc == 0, "inline sends reported %d completion(s)", rc);
	TRY(side_recv(s, ok, 3, NULL, 20000));
	CHECK(!memcmp(ok, "ok", 3), "reply corrupted");
	free(heap);
	return 0;
}

static int role_inline_client(struct side *s, void *arg)
{
	uint32_t max, k;
	uint64_t got;
	uint8_t *b;
	int slot;

	max = s->attr.max_msg_size;
	for (k = 0; k < INLINE_N; k++) {
		TRY(side_recv_ptr(s, &b, &got, &slot, 20000));
		TRY(msg_verify(s->who, b, got, k, msg_len(k, 7, max), 7));
		TRY(side_repost(s, slot));
	}
	return side_send(s, "ok", 3);
}

int case_msg_inline(void)
{
	return conf_run_pair(PAIR_FORK, role_inline_server, NULL,
			     role_inline_client, NULL);
}

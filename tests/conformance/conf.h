/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * conf.h - shared declarations of the provider conformance suite: the case
 * table, the failure/skip channel shared by every process of a case, and the
 * helpers that connect endpoints and wait for completions on any provider.
 */
#ifndef SDP_CONF_H
#define SDP_CONF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <netinet/in.h>
#include <sys/types.h>
#include "sdp_loader.h"

/* ---- the case table ------------------------------------------------------ */

/* A case returns 0 (pass) or -1 (fail, reason in conf_sh->fail); it may
 * also call conf_skip(), which does not return. */
struct conf_case {
	const char *name;
	const char *desc;	/* the one behaviour the case pins down */
	int (*fn)(void);
	int timeout;		/* seconds, before CK_TIMEOUT_MULTIPLIER */
};

extern const struct conf_case conf_cases[];
extern const int conf_ncases;

/* ---- state shared by the runner, the case and every peer it forks -------- */

struct conf_shared {
	atomic_int failed;	/* first failure wins the message */
	char fail[1536];
	atomic_int skipped;
	char skip[512];
};

extern struct conf_shared *conf_sh;
extern const char *conf_provider;	/* --provider NAME|PATH */
extern const char *conf_options;	/* --options STR or NULL */

/* Records a failure (first one wins) and returns -1. */
int conf_failf(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define FAIL(...) conf_failf(__FILE__, __LINE__, __VA_ARGS__)
/* Fails the enclosing function (returning -1) when cond is false. */
#define CHECK(cond, ...)                                               \
	do {                                                           \
		if (!(cond))                                           \
			return FAIL(__VA_ARGS__);                      \
	} while (0)
/* Propagates a failure already recorded. */
#define TRY(expr)                                                      \
	do {                                                           \
		if ((expr) < 0)                                        \
			return -1;                                     \
	} while (0)

/* Marks the case skipped with a reason and ends this process (exit 0). */
void conf_skip(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
bool conf_aborted(void);
const char *conf_err(int rc);	/* "-4103 (RDMA descriptor unknown...)" */

/* ---- loading ------------------------------------------------------------- */

/* Loads the provider under test; skips the case on -SDP_ENODEVICE. */
int conf_load(struct sdp_module *m);
uint16_t conf_port(void);
void conf_addr(struct sockaddr_in *sin, uint16_t port);
uint64_t conf_now_us(void);
void conf_raise_nofile(unsigned int want);
/* Frees (or unmaps) memory that was registered with m's provider after
 * reporting [p, p + len) through MemoryRegistrationCacheCallback when the
 * provider offers it, so a registration cache may keep registrations and
 * never hands out pages that went back to the system. -1 (failure
 * recorded) when the callback answered an error. */
int conf_reg_free(struct sdp_module *m, void *p, size_t len);
int conf_reg_unmap(struct sdp_module *m, void *p, size_t len);

/* ---- one side of a connection -------------------------------------------- */

#define CONF_CTL_SLOTS 16	/* control receives kept posted */
#define CONF_CTL_SIZE 512	/* smallest max_msg_size the suite needs */
#define CONF_SLOT_MAX (4u << 20) /* largest slot (message) it uses */
#define CONF_QCAP 4096

/* Context tags (top byte of the 64-bit context). */
#define CTX_TAG(t) ((uint64_t)(t) << 56)
#define CTX_MASK CTX_TAG(0xff)
enum { TAG_CTL_RECV = 1, TAG_CTL_SEND, TAG_USER, TAG_STREAM_RECV,
       TAG_STREAM_SEND, TAG_RDMA };

struct side {
	const char *who;		/* "server" / "client": for messages */
	struct sdp_module *m;
	struct sdp_cq *cq;
	struct sdp_ep *ep;
	struct sdp_ep_attr attr;
	struct side *buddy;	/* polled too while waiting (one thread) */
	uint32_t rdma_flags;	/* given to rdma_write/rdma_read (SDP_RDMA_*) */
	/* control receives go up when the connection starts, before it
	 * completes: the peer may send at once, and iWARP has no
	 * receiver-not-ready retry (a send that finds none ends it). Set by
	 * side_init; off for a local pair (conf_local_pair) */
	bool early_ctl;
	/* message slots: 0..CONF_CTL_SLOTS-1 receive, the last sends */
	uint8_t *ctl;
	size_t ctl_len;		/* bytes allocated at ctl */
	struct sdp_mr *ctl_mr;
	size_t slot;		/* bytes per slot: max_msg_size, capped */
	/* completions taken from the CQ but not yet asked for */
	struct sdp_completion q[CONF_QCAP];
	int qn;
};

struct match {
	uint64_t mask, value;	/* (context & mask) == value */
	uint32_t op;		/* 0 = any */
	struct sdp_ep *ep;	/* NULL = any */
};

int side_init(struct side *s, struct sdp_module *m, const char *who);
void side_fini(struct side *s);
/* Waits up to ms for a completion matching mt; -1 and a message on timeout
 * or CQ error. The completion's own status is left to the caller. */
int side_wait(struct side *s, const struct match *mt, struct sdp_completion *c,
	      int ms);
/* Counts completions matching mt that arrive within ms (draining). */
int side_count(struct side *s, const struct match *mt, int ms);
/* Waits for a posted operation whose post returned rc: 0 -> nothing,
 * SDP_PENDING -> its completion (status returned), < 0 -> rc. */
int side_finish(struct side *s, int rc, uint32_t op, uint64_t ctx, int ms);

/* Connection set-up. */
int side_listen(struct side *s, uint16_t port, struct sdp_listener **l);
int side_accept(struct side *s, struct sdp_listener *l, const void *priv,
		size_t privlen, void *req_priv, size_t *req_privlen, int ms);
int side_connect_start(struct side *s, uint16_t port, const void *priv,
		       size_t privlen, int *pending);
int side_connect_finish(struct side *s, int pending, int ms);
int side_connect(struct side *s, uint16_t port, const void *priv,
		 size_t privlen, int ms);
/* After the ep exists: reads attributes, registers and posts ctl slots. */
int side_ctl_init(struct side *s);
void side_close(struct side *s);

/* Messages through the slots (lock-step; at most CONF_CTL_SLOTS in flight).
 * Receives are consumed in the order posted, so every message of a case
 * goes through these slots, whatever its purpose. */
int side_send(struct side *s, const void *buf, size_t len);
int side_recv(struct side *s, void *buf, size_t max, size_t *len, int ms);
/* side_recv, except that a receive completing with -ECONNRESET or
 * -ECANCELED (the endpoint ended) answers 1 and records no failure. */
int side_recv_or_end(struct side *s, void *buf, size_t max, size_t *len,
		     int ms);
/* The send slot, to build a message in place for side_send. */
uint8_t *side_send_buf(struct side *s);
/* Zero-copy receive: the message stays in its slot until side_repost. */
int side_recv_ptr(struct side *s, uint8_t **buf, uint64_t *len, int *slot,
		  int ms);
int side_repost(struct side *s, int slot);

/* One RDMA operation to its end: 0 or the (negative) status, synchronous
 * or from its completion; a timeout is recorded as a failure. */
int side_rdma(struct side *s, int write, const struct sdp_sge *sgl, int n,
	      const struct sdp_rdma_desc *d, uint64_t off, int ms);
/* Both sides in this thread (each polls the other while waiting); no
 * control slots are posted (call side_ctl_init when wanted). */
int conf_local_pair(struct sdp_module *m, struct side *srv, struct side *cli,
		    struct sdp_listener **l, const void *cpriv, size_t cplen,
		    const void *spriv, size_t splen);
void conf_local_unpair(struct side *srv, struct side *cli,
		       struct sdp_listener *l);

/* ---- running two sides --------------------------------------------------- */

typedef int (*role_fn)(struct side *s, void *arg);
enum pair_mode { PAIR_THREADS, PAIR_FORK };
/* Server listens and accepts, client connects; each then runs its role.
 * PAIR_FORK: the server is this process, the client a child that loads its
 * own module. PAIR_THREADS: one module, two threads. */
int conf_run_pair(enum pair_mode mode, role_fn server, void *sarg,
		  role_fn client, void *carg);
/* The same with n pairs at once, each pair in its own pair of threads
 * (PAIR_FORK: n server threads here, n client threads in one child). */
int conf_run_pairs(enum pair_mode mode, int n, role_fn server, void *sarg,
		   role_fn client, void *carg);
/* Fork helpers: a child that dies with this process. */
pid_t conf_fork(void);
int conf_reap(pid_t pid, int ms, const char *what);

/* ---- data patterns ------------------------------------------------------- */

static inline uint8_t pat_byte(uint32_t seed, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)seed *
		     0xC2B2AE3D27D4EB4Full;

	return (uint8_t)((x >> 29) ^ (x >> 47));
}

void pat_fill(void *buf, size_t len, uint32_t seed, uint64_t off);
/* Index of the first byte differing from the pattern, or -1. */
int64_t pat_check(const void *buf, size_t len, uint32_t seed, uint64_t off);
uint32_t conf_fnv(const void *buf, size_t len);

/* ---- shared roles -------------------------------------------------------- */

/* n checksummed messages of varying size each way (cases_msg.c). */
struct stream {
	uint32_t n, seed;
};
int msg_role_server(struct side *s, void *arg);
int msg_role_client(struct side *s, void *arg);

/* ---- the cases ----------------------------------------------------------- */

int case_load_version(void);
int case_extensions(void);
int case_addresses(void);
int case_mr_zero_length(void);
int case_mr_unaligned(void);
int case_mr_large(void);
int case_mr_overlap(void);
int case_mr_stale_desc(void);
int case_msg_order_threads(void);
int case_msg_order_fork(void);
int case_msg_oversize(void);
int case_msg_inline(void);
int case_rdma_write_sizes(void);
int case_rdma_read_sizes(void);
int case_rdma_protection(void);
int case_cq_outcomes(void);
int case_notify_wakeup(void);
int case_peer_death(void);
int case_many_connections(void);
int case_threads(void);
int case_connect_refused(void);
int case_reject(void);
int case_private_data(void);
int case_probe(void);
int case_shared_area(void);

#endif /* SDP_CONF_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * verbs.h - internal objects of the verbs provider (rdma-core): the provider
 * with its devices and protection domains, completion queues, listeners,
 * endpoints and registrations, shared by the verbs_*.c files of the module.
 */
#ifndef SDP_VERBS_H
#define SDP_VERBS_H

#include <pthread.h>
#include <stdbool.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include "sdp_provider.h"

#define VERBS_MAX_DEVICES 8
#define VERBS_MAX_ADDRS 16
#define VERBS_MAX_SGE 4
/* Largest control message we advertise (ep_query max_msg_size). */
#define VERBS_MAX_MSG (64u * 1024)

/*
 * Private data travels behind a 4-byte header of ours: rdma_cm hands the
 * passive side the whole fixed-size REQ area (56 bytes on IB and RoCE), so
 * the real length must travel with it; the kind tells probes apart.
 */
#define VERBS_PRIV_MAGIC0 0x53
#define VERBS_PRIV_MAGIC1 0x56
enum verbs_priv_kind {
	VERBS_PRIV_CONNECT = 1,
	VERBS_PRIV_PROBE = 2,
	VERBS_PRIV_ACCEPT = 3,
	VERBS_PRIV_PROBE_ACK = 4,
};
struct verbs_priv_hdr {
	uint8_t magic[2];
	uint8_t kind;	/* enum verbs_priv_kind */
	uint8_t len;	/* bytes of caller data that follow */
};
/* REQ private data is 56 bytes on IB/RoCE (the REP area is larger): our
 * header and SDP_MAX_PRIVATE_DATA (48) bytes of caller data fit in it. */
#define VERBS_REQ_PRIV_AREA 56
_Static_assert(sizeof(struct verbs_priv_hdr) + SDP_MAX_PRIVATE_DATA <=
	       VERBS_REQ_PRIV_AREA,
	       "connect private data must fit an RDMA CM request");

struct verbs_dev {
	struct ibv_context *ctx;	/* owned by librdmacm */
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	uint64_t max_msg_sz;		/* port 1 */
	bool iwarp;			/* iWARP rules (verbs_cm.c) */
	int max_sge;			/* send / recv SGEs we use */
	int max_sge_rd;			/* SGEs of one RDMA read's sink */
	struct ibv_mr *hello_mr;	/* iWARP: the hello's receive buffer */
	uint64_t hello_buf;
};

/*
 * iWARP runs over the host's own TCP: its listener takes a real TCP port,
 * which for TCP port P the program already holds. The RDMA side of port P
 * uses port P ^ VERBS_IWARP_PORT_XOR instead, on both ends.
 */
#define VERBS_IWARP_PORT_XOR 0x8000

struct verbs_options {
	bool no_rdma_read;
	bool mr_cache;
	bool cache_keep;	/* keep unused MRs (needs the callback) */
	bool loopback_map;
	bool iwarp_defer_accept;	/* accept at the next CQ poll */
	int probe_ms;
	int resolve_ms;
	uint32_t qp_send;
	uint32_t qp_recv;
	size_t cache_max_entries;
};

struct verbs_mr;

struct verbs_provider {
	struct sdp_provider base;
	void (*log)(int level, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));
	struct verbs_options opt;
	struct ibv_context **ctx_list;	/* rdma_get_devices() */
	int ndev;
	struct verbs_dev dev[VERBS_MAX_DEVICES];
	struct sockaddr_storage addrs[VERBS_MAX_ADDRS];
	size_t naddrs;
	bool any_iwarp;			/* a device follows iWARP rules */
	int reapers;			/* probe ids still being destroyed */

	/* all CQs, so polling one also drives the CM of the others */
	pthread_mutex_t cq_list_lock;
	struct sdp_cq *cqs;

	/* registration cache (verbs_mr.c), LRU order: head = newest */
	pthread_mutex_t cache_lock;
	struct verbs_mr *cache_head;
	size_t cache_count;
};

/* Internal work of the iWARP start (verbs_cm.c): never reported. */
#define VERBS_OP_HELLO 0x100

/*
 * One posted work request; its address is the wr_id. Every op is on its
 * endpoint's list (ep->ops) from before it is posted until its last piece
 * completes or the endpoint is closed.
 */
struct verbs_op {
	struct sdp_ep *ep;
	uint64_t context;
	uint64_t bytes;		/* bytes posted (sends and RDMA) */
	uint32_t op;		/* enum sdp_op */
	int pieces;		/* work requests not yet completed */
	int status;		/* first error among the pieces */
	bool reported;		/* completed as flushed by verbs_flush_ep */
	struct verbs_op *prev, *next;	/* ep->ops, under ep->ops_lock */
};
/* RDMA transfers longer than the port's max_msg_sz are split into up to
 * this many work requests; one completion reports the whole transfer. */
#define VERBS_MAX_PIECES 32

/* A completion produced in software (connect results, drained CQEs). */
struct verbs_backlog {
	struct sdp_completion c;
	struct verbs_backlog *next;
};

struct verbs_cq_dev {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
};

struct sdp_cq {
	struct verbs_provider *vp;
	pthread_mutex_t lock;
	struct verbs_cq_dev dev[VERBS_MAX_DEVICES];
	uint32_t depth;
	struct rdma_event_channel *cm_ch;	/* events of this CQ's eps */
	int epfd;				/* the notification fd */
	int evfd;		/* eventfd: backlog filled from outside */
	struct sdp_cq *next;			/* vp->cqs */
	struct verbs_backlog *bl_head, *bl_tail;
	int neps;				/* eps still attached */
	struct sdp_ep *accepts;			/* deferred iWARP accepts */
	struct sdp_ep *hellos;			/* deferred iWARP hellos */
	bool foreign;		/* CM events driven by another CQ's poll */
};

/* Send-queue work held back until an iWARP passive side may send. */
struct verbs_held {
	struct verbs_held *next;
	int n;				/* work requests in wr[] */
	struct ibv_send_wr wr[VERBS_MAX_PIECES];
	struct ibv_sge sge[VERBS_MAX_PIECES][VERBS_MAX_SGE];
};

enum verbs_ep_state {
	VERBS_EP_CONNECTING,
	VERBS_EP_CONNECTED,
	VERBS_EP_DEAD,		/* refused, disconnected or in error */
};

struct sdp_ep {
	struct verbs_provider *vp;
	struct sdp_cq *cq;
	struct rdma_cm_id *id;
	int devi;			/* index in vp->dev */
	void *ep_context;
	enum verbs_ep_state state;
	bool closed;			/* ep_close ran; drop completions */
	/* the work posted and not yet completed (struct verbs_op); once
	 * ops_flushed, nothing more is taken */
	pthread_mutex_t ops_lock;
	struct verbs_op *ops;
	bool ops_flushed;
	uint8_t peer_priv[SDP_MAX_PRIVATE_DATA];
	uint32_t peer_priv_len;
	uint32_t max_send, max_recv;
	uint64_t max_rdma;
	/*
	 * iWARP (MPA): the active side must send first. It sends an empty
	 * hello as soon as it is connected; the passive side holds its
	 * send-queue work (gate_closed) until the hello has arrived.
	 */
	bool active;
	bool gate_closed;
	pthread_mutex_t gate_lock;
	struct verbs_held *held_head, *held_tail;
	struct verbs_op *hello;		/* passive side's posted receive */
	/* iWARP passive side: rdma_accept waits for the next poll of the
	 * CQ, so the caller's receives are posted first (no RNR retry) */
	struct sdp_ep *accept_next;	/* cq->accepts */
	bool accept_due;
	pthread_t accept_thread;	/* the thread that accepted */
	/* iWARP active side connected while another thread polled: the
	 * hello and the connect completion wait for the owner's poll */
	struct sdp_ep *hello_next;	/* cq->hellos */
	bool hello_due;
	struct rdma_conn_param accept_cp;
	uint8_t accept_priv[sizeof(struct verbs_priv_hdr) +
			    SDP_MAX_PRIVATE_DATA];
};

/* Takes op off ep->ops; called with ep->ops_lock held. */
static inline void verbs_op_unlink(struct sdp_ep *ep, struct verbs_op *op)
{
	if (op->prev)
		op->prev->next = op->next;
	else
		ep->ops = op->next;
	if (op->next)
		op->next->prev = op->prev;
	op->prev = op->next = NULL;
}

struct sdp_listener {
	struct verbs_provider *vp;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	/* iWARP, on [::]: the IPv4 peers' id beside it (verbs_cm.c) */
	struct rdma_cm_id *id4;
};

struct sdp_conn_req {
	struct verbs_provider *vp;
	struct rdma_cm_id *id;
	uint8_t initiator_depth, responder_resources;
	uint8_t priv[SDP_MAX_PRIVATE_DATA];
	uint32_t priv_len;
};

/* A local registration; one ibv_mr per device. Cached (verbs_mr.c). */
struct verbs_mr {
	void *addr;
	size_t len;
	uint32_t access;
	struct ibv_mr *mr[VERBS_MAX_DEVICES];
	int refs;		/* holders (RegisterMemory calls not undone) */
	bool stale;		/* dropped by the callback while held */
	struct verbs_mr *prev, *next;
};

struct sdp_rmr {
	struct sdp_ep *ep;
	struct ibv_mr *mr;
};

/* verbs_main.c */
SDP_PROVIDER_EXPORT int sdp_provider_startup(const struct sdp_startup_args *a,
					     struct sdp_provider_info *info,
					     struct sdp_provider **prov);
#define vlog(vp, level, ...) \
	do { \
		if ((vp)->log) \
			(vp)->log(level, "verbs: " __VA_ARGS__); \
	} while (0)
int verbs_errno(int fallback);
int verbs_dev_index(struct verbs_provider *vp, struct ibv_context *ctx);
int verbs_map_addr(struct verbs_provider *vp, const struct sockaddr *in,
		   socklen_t inlen, struct sockaddr_storage *out);

/* verbs_cq.c */
int verbs_cq_create(struct sdp_provider *p, uint32_t depth,
		    struct sdp_cq **cqp);
int verbs_cq_destroy(struct sdp_cq *cq);
int verbs_cq_poll(struct sdp_cq *cq, struct sdp_completion *c, int max);
int verbs_cq_notify_fd(struct sdp_cq *cq);
int verbs_cq_arm(struct sdp_cq *cq);
int verbs_cq_ack(struct sdp_cq *cq);
void verbs_cq_push(struct sdp_cq *cq, const struct sdp_completion *c);
void verbs_flush_ep(struct sdp_cq *cq, struct sdp_ep *ep);
void verbs_cq_forget_ep(struct sdp_cq *cq, struct sdp_ep *ep);
void verbs_fail_wr(struct sdp_cq *cq, struct ibv_send_wr *wr,
		   enum ibv_wc_status status);

/* verbs_cm.c */
int verbs_hello_post(struct sdp_ep *ep);
int verbs_probe(struct sdp_provider *p, const struct sockaddr *addr,
		socklen_t addrlen);
int verbs_listen(struct sdp_provider *p, const struct sockaddr *addr,
		 socklen_t addrlen, int backlog, struct sdp_listener **l);
int verbs_listener_fd(struct sdp_listener *l);
int verbs_get_request(struct sdp_listener *l, struct sdp_conn_req **req,
		      void *priv, size_t *privlen);
int verbs_accept(struct sdp_conn_req *req, struct sdp_cq *cq,
		 const void *priv, size_t privlen, void *ep_context,
		 struct sdp_ep **ep);
int verbs_reject(struct sdp_conn_req *req);
int verbs_listener_close(struct sdp_listener *l);
int verbs_connect(struct sdp_provider *p, struct sdp_cq *cq,
		  const struct sockaddr *dst, socklen_t dstlen,
		  const void *priv, size_t privlen, void *ep_context,
		  struct sdp_ep **ep);
int verbs_ep_query(struct sdp_ep *ep, struct sdp_ep_attr *attr);
int verbs_ep_close(struct sdp_ep *ep);
/* Handles one CM event of a CQ's channel (cq lock held). */
void verbs_cm_event(struct sdp_cq *cq, struct rdma_cm_event *ev);
void verbs_ep_free(struct sdp_ep *ep);
void verbs_run_accepts(struct sdp_cq *cq, bool mine_only);
void verbs_run_all_accepts(struct verbs_provider *vp);
void verbs_run_hellos(struct sdp_cq *cq);

/* verbs_mr.c */
int verbs_register_memory(struct sdp_provider *p, void *addr, size_t len,
			  uint32_t access, struct sdp_mr **mr);
int verbs_deregister_memory(struct sdp_provider *p, struct sdp_mr *mr);
int verbs_register_rdma_memory(struct sdp_ep *ep, void *addr, size_t len,
			       uint32_t access, struct sdp_rdma_desc *desc,
			       struct sdp_rmr **rmr);
int verbs_deregister_rdma_memory(struct sdp_ep *ep, struct sdp_rmr *rmr);
int verbs_mr_cache_callback(struct sdp_provider *p, void *addr, size_t len);
void verbs_mr_cache_flush(struct verbs_provider *vp);

/*
 * The descriptor tag: a check value over the other fields, so a descriptor
 * altered in transit or by hand (bounds widened, rights added, key changed)
 * is refused before posting, without the RDMA access error that would move
 * the QP to the error state. Not a secret: the hardware still enforces the
 * registration itself.
 */
static inline uint64_t verbs_desc_tag(const struct sdp_rdma_desc *d)
{
	uint64_t h = 0x5344505645524253ull;	/* "SDPVERBS" */

	h ^= d->addr;
	h *= 0x9e3779b97f4a7c15ull;
	h ^= d->length + ((uint64_t)d->key << 32 | d->access);
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 31;
	return h | 1;
}

/* verbs_rdma.c */
int verbs_qp_post(struct sdp_ep *ep, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad);
void verbs_gate_open(struct sdp_ep *ep, bool post);
int verbs_post_send(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		    uint64_t context, uint32_t flags);
int verbs_post_recv(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		    uint64_t context);
int verbs_rdma_write(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		     const struct sdp_rdma_desc *remote, uint64_t offset,
		     uint64_t context, uint32_t flags);
int verbs_rdma_read(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		    const struct sdp_rdma_desc *remote, uint64_t offset,
		    uint64_t context, uint32_t flags);

#endif /* SDP_VERBS_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * shm.h - internal objects of the shm provider: options, the shared region
 * layout (docs/provider-shm.md, "Shared region"), endpoints, CQs and
 * registrations, and the functions the module's files offer one another.
 */
#ifndef SHM_H
#define SHM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "sdp_provider.h"

#define SHM_CL 64			/* cache line */
#define SHM_MAX_SGE 4
/* posted receives and queued sends per endpoint: the switch posts at most
 * 64 receives, so it never has more than 64 messages the peer's ring could
 * not take */
#define SHM_MAX_RECV 64
#define SHM_MAX_SEND 64
#define SHM_MAX_WRITES 64		/* staged RDMA writes per endpoint */
#define SHM_STAGE_MAX 256		/* most staging slots */
#define SHM_MAX_RDMA (1ull << 40)	/* largest single RDMA transfer */
#define SHM_POOL 8			/* regions kept for reuse, each kind */
#define SHM_MEMFD_KEEP 16		/* live endpoints keeping their memfd */
#define SHM_POOL_TTL_NS 5000000000ull	/* a pooled region's lifetime */
#define SHM_OWNER_CACHE 16		/* watched destinations per process */
#define SHM_MAX_WATCH 256		/* watches a listener keeps */
#define SHM_WATCH_PER_UID 32		/* of them, from one user */
#define SHM_PEND_PER_UID 8		/* silent connections, one user */
#define SHM_MAX_PENDING 32		/* accepted, first message not come */
#define SHM_WATCH_BACKOFF_NS 1000000000ull

/* ---- options ------------------------------------------------------------ */

struct shm_opts {
	uint32_t msg_size;	/* largest control message (bytes) */
	uint32_t ring_slots;	/* slots per control ring (power of 2) */
	uint32_t stage_chunk;	/* staging slot payload (bytes) */
	uint32_t stage_slots;	/* staging slots (power of 2) */
	uint32_t rdma_regs;	/* registration table entries per endpoint */
	uint32_t fail_reg_every;
	uint32_t fail_rdma_every;
	uint32_t handshake_ms;	/* how long a silent connection is kept */
	bool no_cma;		/* force the staging mode */
};

/* ---- shared region (one per endpoint, owned by that endpoint) ------------ */

#define SHM_MAGIC 0x4d485353u		/* "SSHM" little-endian */
#define SHM_LAYOUT_VERSION 4
#define SHM_AREA_LEN 256		/* shared_area: bytes per side */

/* Written once by the owner before the region is shared; read by the peer,
 * which checks it against the memfd size (shm_region_map). */
struct shm_geom {
	uint32_t magic;
	uint32_t version;
	uint64_t size;		/* whole region */
	uint64_t ring_off;	/* inbound control ring */
	uint32_t ring_slots;
	uint32_t slot_stride;	/* bytes per slot, header included */
	uint64_t stage_off;	/* inbound staging ring */
	uint32_t stage_slots;
	uint32_t stage_stride;
	uint64_t table_off;	/* registration table, PROT_READ at the peer */
	uint32_t table_ents;
	uint32_t msg_size;	/* largest message payload */
	uint32_t stage_chunk;	/* largest staged chunk payload */
	uint32_t owner_pid;
};

struct shm_hdr {
	struct shm_geom g;
	/* each index on its own cache line: producer and consumer differ */
	_Alignas(SHM_CL) _Atomic uint64_t ring_prod;	/* peer writes */
	_Alignas(SHM_CL) _Atomic uint64_t ring_cons;	/* owner writes */
	_Alignas(SHM_CL) _Atomic uint32_t armed; /* owner sets, peer clears */
	_Alignas(SHM_CL) _Atomic uint64_t stage_prod;	/* peer writes */
	_Alignas(SHM_CL) _Atomic uint64_t stage_cons;	/* owner writes */
	/* owner writes the result of staged chunk s at [s % stage_slots] */
	_Alignas(SHM_CL) _Atomic int32_t stage_result[SHM_STAGE_MAX];
	/* the peer sets it when it closes its endpoint (an orderly close;
	 * a peer process that dies is seen through its pidfd): 1, then 2
	 * once it will touch the region no more (SHM_CLOSED_DONE) */
	_Alignas(SHM_CL) _Atomic uint32_t closed;
	/* written by the owner before the region is shared: the address, in
	 * the owner's memory, of probe_word, and its random value; the peer
	 * reads it there with process_vm_readv to learn whether the kernel
	 * lets it reach the owner at all (shm_cma_check) */
	_Alignas(SHM_CL) uint64_t probe_addr;
	uint64_t probe_word;
	/* the owner's shared area (SharedArea extension): the switch's
	 * own use; both ends read and write it */
	_Alignas(SHM_CL) uint8_t area[SHM_AREA_LEN];
};

#define SHM_CLOSED_DONE 2u

struct shm_slot {		/* control ring slot */
	uint32_t len;		/* payload bytes */
	uint32_t rsvd;
	uint8_t data[];
};

struct shm_stage {		/* staging ring slot */
	uint32_t key;		/* registration slot at the owner */
	uint32_t len;		/* payload bytes */
	uint64_t tag;		/* generation */
	uint64_t addr;		/* target address in the owner */
	uint64_t rsvd;
	uint8_t data[];
};

struct shm_ent {		/* registration table entry (32 bytes) */
	_Atomic uint64_t gen;
	uint64_t addr;
	uint64_t len;
	_Atomic uint32_t access;	/* 0 = free / deregistered */
	uint32_t rsvd;
};

/* ---- objects ------------------------------------------------------------ */

/* The socket at the other end of a TCP connection (shm_guard.c). */
struct shm_tcp_peer {
	uint32_t uid;		/* owner of the socket at the other end */
	uint64_t ino;		/* its inode in this network namespace */
};

/* Another process we have endpoints with, shared by all of them: its bell
 * (the eventfd it sent) and a pidfd that becomes readable when it exits.
 * Keyed by (pid, bell_id): a pid alone may be reused or exec'd. */
struct shm_peer {
	struct shm_peer *next;		/* on prov->peers (peer_lock) */
	pid_t pid;
	uint64_t bell_id;
	int bell;			/* the peer process's bell */
	int pidfd;			/* -1: same process, or no pidfd here */
	uint32_t refs;			/* endpoints using it */
	_Atomic bool gone;		/* the process has exited */
};

struct shm_cq;

/* A region kept after its endpoint closed, for the next endpoint with the
 * same peer process (shm_pool.c): our own (with its memfd, to pass again)
 * or the peer's mapping (known by the memfd's inode). */
struct shm_pooled {
	struct shm_hdr *h;
	struct shm_geom g;
	int memfd;			/* own regions; -1 for peer mappings */
	dev_t dev;			/* peer mappings: the memfd's file */
	ino_t ino;
	struct shm_peer *pe;		/* the peer process (a reference) */
	uint64_t expires;		/* CLOCK_MONOTONIC ns */
};

/* A listener's owner as a rendezvous told it, kept with the socket of that
 * rendezvous (fd, the watch) while the listener keeps the other end. */
struct shm_owner_ent {
	struct sockaddr_storage addr;	/* the destination asked about */
	socklen_t len;			/* 0: a free entry */
	int fd;				/* the watch, or -1 */
	uint32_t uid;
	int32_t pid;
	uint64_t made_ns, used_ns;
	uint64_t plain_until_ns;	/* no watch asked before then */
};

struct shm_provider {
	struct sdp_provider base;
	/* the process bell, the peer table and the CQs with a notify fd
	 * (shm_peer.c); taken before any cq->lock */
	pthread_mutex_t lock;
	pthread_mutex_t peer_lock;	/* prov->peers and refs; a leaf */
	int bell;			/* peers ring it; -1 until needed */
	pid_t bell_pid;			/* the process that created it */
	uint64_t bell_id;
	struct shm_peer *peers;
	struct shm_cq *ncqs;		/* CQs with a notify fd */
	struct shm_opts opt;
	bool cma;		/* process_vm_* works across processes here */
	void (*log)(int level, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));
	_Atomic uint64_t reg_count;
	_Atomic uint64_t rdma_count;
	/* shm_pool.c: regions of closed endpoints, per process; a leaf
	 * lock but for shm_peer_put (peer_lock) */
	pthread_mutex_t pool_lock;
	pid_t pool_pid;			/* the process the pools belong to */
	struct shm_pooled own_pool[SHM_POOL];
	struct shm_pooled map_pool[SHM_POOL];
	uint32_t n_own, n_map;
	uint32_t memfds_kept;		/* by live endpoints */
	/* a new region made ahead for the next connect (h NULL: none) */
	struct shm_pooled spare;
	/* shm_rendezvous.c: owner answers with their watches; a leaf */
	pthread_mutex_t owner_lock;
	struct shm_owner_ent owners[SHM_OWNER_CACHE];
	/* shm_spread.c: the second copier (NULL: none yet; one that a
	 * parent made before a fork is replaced, never used) */
	struct shm_copier *_Atomic copier;
};

struct shm_mr {
	void *addr;
	size_t len;
	uint32_t access;
};

struct shm_rmr {
	struct shm_ep *ep;
	uint32_t slot;
	uint64_t gen;
	uint64_t addr;
	uint64_t len;
	uint32_t access;
};

struct shm_wr {			/* a queued operation */
	struct sdp_sge sge[SHM_MAX_SGE];
	int nsge;
	uint64_t context;
	uint64_t len;
};

struct shm_write {		/* a staged RDMA write in progress */
	struct shm_wr wr;
	struct sdp_rdma_desc remote;
	uint64_t offset;
	uint64_t pushed;	/* bytes copied into the staging ring */
	uint64_t first_seq;	/* first staging chunk */
	uint64_t end_seq;	/* one past its last chunk, once all pushed */
	int32_t status;
};

enum shm_ep_state {
	SHM_EP_CONNECTING,
	SHM_EP_CONNECTED,
	SHM_EP_DEAD,
};

struct shm_ep {
	struct shm_provider *prov;
	struct shm_cq *cq;
	void *ep_context;
	struct shm_ep *next, *prev;	/* on cq->eps, under cq->lock */
	pthread_mutex_t lock;		/* queues below; after cq->lock */
	enum shm_ep_state state;
	/* the peer is gone but left messages in our ring: they are handed
	 * out as receives are posted, then the endpoint fails */
	bool peer_gone;
	int32_t dead_status;
	/* the rendezvous socket: closed once connected, unless no pidfd can
	 * watch the peer, then kept as the liveness channel */
	int sock;
	struct shm_peer *pe;		/* the peer process (its bell) */
	pid_t peer_pid;
	pid_t owner_pid;		/* the process that made it */
	bool cma;			/* connection mode agreed at connect */
	bool same_pid;
	bool watched;			/* sock or pidfd is in cq->epfd */

	struct shm_hdr *own;		/* my region: my inbound rings, table */
	struct shm_geom og;		/* private copy of its geometry */
	struct shm_hdr *peer;		/* peer's region: I produce into it */
	struct shm_geom pg;		/* validated copy of its geometry */
	/* reuse (shm_pool.c): my memfd kept to pass again (-1: closed),
	 * the peer memfd's file, the process a reused region of mine was
	 * offered for (connect side, checked at ACCEPT), and whether the
	 * regions may not be pooled (a failed or suspicious set-up) */
	int memfd;
	dev_t peer_dev;
	ino_t peer_ino;
	struct shm_peer *pool_pe;
	bool retire;

	uint64_t rx_cons, stage_cons;	/* my consumer cursors */
	uint64_t tx_prod, tx_cons;	/* producer cursor + cached cons */
	uint64_t st_prod, st_done;	/* staging producer, harvested */

	uint32_t recv_head, recv_cnt;
	uint32_t send_head, send_cnt;
	uint32_t wr_head, wr_cnt;

	struct shm_rmr **rmr;		/* authoritative table, og.table_ents */

	uint8_t peer_priv[SDP_MAX_PRIVATE_DATA];
	uint32_t peer_priv_len;

	/* connect_bound: waiting for the listener's proof (PROVE) before
	 * the HELLO, with what the HELLO will carry (taken at connect: the
	 * bell's lock comes before cq->lock, held when the proof comes) */
	bool proving;
	int tcp_fd;
	struct shm_tcp_peer tp;
	int hello_memfd;		/* -1 once sent */
	int hello_bell;			/* the process bell (not ours to close) */
	uint64_t hello_bell_id;
	uint8_t hello_priv[SDP_MAX_PRIVATE_DATA];
	uint32_t hello_priv_len;

	/* The queues, last: an entry is written before it is read, so they
	 * are not cleared at allocation (ep_alloc), and their pages are
	 * first touched as they are used. */
	struct shm_wr recv[SHM_MAX_RECV];
	struct shm_wr send[SHM_MAX_SEND];
	struct shm_write wr[SHM_MAX_WRITES];
};

struct shm_cq {
	struct shm_provider *prov;
	pthread_mutex_t lock;
	/* interrupt mode, made by the first cq_notify_fd (-1 before): an
	 * epoll fd over evfd, the process bell, the peers' pidfds and the
	 * sockets of pending connects */
	int epfd;			/* the notification fd */
	int evfd;			/* the bell dispatch signals this */
	struct shm_cq *nnext;		/* on prov->ncqs */
	_Atomic bool waiting;		/* armed, not yet signalled */
	struct shm_ep *eps;
	struct shm_ep *rr;		/* round-robin start */
	struct sdp_completion *q;	/* completions ready to hand out */
	uint32_t depth, head, cnt;
	uint32_t idle;
	bool check_now;
};

struct shm_listener {
	struct shm_provider *prov;
	int fd;
	/* bound (listen_bound): the TCP connection it serves (the caller's
	 * fd) and the socket at its other end, whose holder alone may
	 * connect */
	bool bound;
	int tcp_fd;
	struct shm_tcp_peer tp;
	/* listener_fd's: an epoll set over fd and the pending connections
	 * (a bound listener's request is complete only when the HELLO comes
	 * on its pending connection, after our PROVE); made on first ask,
	 * -1 before */
	int epfd;
	/* accepted connections whose first message has not come yet */
	struct {
		int fd;
		uint32_t uid;
		uint64_t since_ns;
	} pend[SHM_MAX_PENDING];
	uint32_t npend;
	/* clients' watches (their owner queries), kept until the close */
	struct shm_watch {
		int fd;
		uint32_t uid;
	} *watch;
	uint32_t nwatch, cap_watch;
};

struct shm_conn_req {
	struct shm_provider *prov;
	int sock;
	int memfd;
	int bell;			/* the client's process bell */
	uint64_t bell_id;
	pid_t pid;
	uid_t uid;			/* the client's user (SO_PEERCRED) */
	uint32_t flags;
	uint8_t priv[SDP_MAX_PRIVATE_DATA];
	uint32_t priv_len;
};

/* ---- handshake messages over the rendezvous socket ----------------------- */

enum shm_msg_type { SHM_HELLO = 1, SHM_ACCEPT, SHM_REJECT, SHM_WATCH,
		    SHM_PROVE };
/* the most fds a handshake message carries */
#define SHM_HS_FDS 3
#define SHM_F_CMA 1u

struct shm_hs {
	uint32_t magic;		/* SHM_MAGIC */
	uint16_t version;	/* SHM_LAYOUT_VERSION */
	uint16_t type;		/* enum shm_msg_type */
	uint32_t flags;		/* SHM_F_* */
	uint32_t priv_len;
	uint8_t priv[SDP_MAX_PRIVATE_DATA];
	uint64_t bell_id;	/* names the process bell sent along */
};

/* The rendezvous socket's name for host:port: abstract, "sdp-shm/HOST:PORT"
 * (docs/provider-shm.md); returns the address length. */
static inline socklen_t shm_sockname(struct sockaddr_un *sun,
				     const char *host, unsigned int port)
{
	int k;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	k = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1,
		     "sdp-shm/%s:%u", host, port);
	return offsetof(struct sockaddr_un, sun_path) + 1 + k;
}

/* Attaches nfds descriptors to a handshake message m as one SCM_RIGHTS
 * control message in buf (CMSG_SPACE(sizeof(int) * nfds) bytes at least,
 * aligned for struct cmsghdr); nothing when nfds is 0. */
static inline void shm_hs_put_fds(struct msghdr *m, void *buf, size_t size,
				  const int *fds, int nfds)
{
	struct cmsghdr *c;

	if (!nfds)
		return;
	memset(buf, 0, size);
	m->msg_control = buf;
	m->msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
	c = CMSG_FIRSTHDR(m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
}

/* ---- between files ------------------------------------------------------ */

#define shm_log(p, lvl, ...) \
	do { if ((p)->log) (p)->log(lvl, "shm: " __VA_ARGS__); } while (0)

/* A line another user can provoke at will (a refusal of a squatter, of a
 * bad proof or region): at most once a second from each place, so that
 * nobody floods the program's log with it. */
bool shm_log_due(_Atomic uint64_t *last);
#define shm_log_limited(p, lvl, ...) \
	do { \
		static _Atomic uint64_t last_; \
		if (shm_log_due(&last_)) \
			shm_log(p, lvl, __VA_ARGS__); \
	} while (0)

static inline struct shm_provider *shm_prov(struct sdp_provider *p)
{
	return (struct shm_provider *)p;
}

/* shm_main.c */
int shm_parse_options(struct shm_opts *o, const char *s,
		      char *err, size_t errlen);

/* shm_peer.c */
int shm_bell_get(struct shm_provider *p, uint64_t *id);
void shm_bell_dispatch(struct shm_provider *p);
void shm_bell_ring(int bell);
int shm_peer_get(struct shm_provider *p, pid_t pid, uint64_t bell_id,
		 int bell, struct shm_peer **out);
void shm_peer_put(struct shm_provider *p, struct shm_peer *pe);
void shm_peer_hold(struct shm_provider *p, struct shm_peer *pe);
bool shm_peer_gone(struct shm_peer *pe);
void shm_ncq_add(struct shm_provider *p, struct shm_cq *cq);
void shm_ncq_del(struct shm_provider *p, struct shm_cq *cq);
void shm_peers_free(struct shm_provider *p);

/* shm_guard.c */
int shm_fd_keep(int fd);
bool shm_fd_ok(int fd);
bool shm_fd_spare(int fd);
bool shm_commit_all(void);
bool shm_fsize_room(uint64_t size);
int shm_region_seal(int fd);
int shm_region_trust(int fd, const char **why);
int shm_tcp_ends(int fd, struct sockaddr_storage *local,
		 struct sockaddr_storage *peer);
int shm_tcp_peer(int fd, struct shm_tcp_peer *out);
int shm_tcp_proof(int got, int fd, struct shm_tcp_peer *want);
bool shm_pid_holds_socket(pid_t pid, uint64_t ino);

/* shm_fault.c */
bool shm_fault_reg(struct shm_provider *p);
bool shm_fault_rdma(struct shm_provider *p);

/* shm_ring.c */
int shm_region_new(struct shm_provider *p, struct shm_hdr **out,
		   struct shm_geom *og, int *memfd);
int shm_region_create(struct shm_provider *p, struct shm_ep *ep, int *memfd);
int shm_region_map(struct shm_ep *ep, int memfd);
void shm_region_unmap(struct shm_ep *ep);

/* shm_pool.c */
int shm_region_get(struct shm_provider *p, struct shm_ep *ep,
		   struct shm_peer *pe, pid_t pid, int *memfd);
void shm_region_sent(struct shm_ep *ep, int memfd);
int shm_region_map_peer(struct shm_ep *ep, int memfd);
void shm_region_release(struct shm_ep *ep);
void shm_region_spare_fill(struct shm_provider *p);
void shm_pool_free(struct shm_provider *p);
int shm_ring_put(struct shm_ep *ep, const struct sdp_sge *sgl, int nsge,
		 uint64_t len);
int shm_ring_rx(struct shm_ep *ep);
void shm_doorbell(struct shm_ep *ep);
uint64_t shm_sge_len(const struct sdp_sge *sgl, int nsge);
int shm_sge_check(const struct sdp_sge *sgl, int nsge);

/* shm_cq.c */
bool shm_cq_room(struct shm_cq *cq);
void shm_cq_push(struct shm_cq *cq, struct shm_ep *ep, uint32_t op,
		 uint64_t context, int32_t status, uint64_t bytes);
void shm_cq_add_ep(struct shm_cq *cq, struct shm_ep *ep);
void shm_cq_del_ep(struct shm_cq *cq, struct shm_ep *ep);
void shm_ep_fail(struct shm_ep *ep, int32_t status);
bool shm_ep_drained(struct shm_ep *ep);
void shm_ep_watch(struct shm_ep *ep, bool on);
bool shm_cq_rung(struct shm_cq *cq);
int shm_cq_create(struct sdp_provider *p, uint32_t depth, struct sdp_cq **cq);
int shm_cq_destroy(struct sdp_cq *cq);
int shm_cq_poll(struct sdp_cq *cq, struct sdp_completion *c, int max);
int shm_cq_notify_fd(struct sdp_cq *cq);
int shm_cq_arm(struct sdp_cq *cq);
int shm_cq_ack(struct sdp_cq *cq);

/* shm_rendezvous.c */
int shm_rendezvous(const struct sockaddr *a, socklen_t alen, bool creds,
		   bool exact, int *out);
int shm_probe_bound(struct sdp_provider *p, int tcp_fd);
int shm_listen_bound(struct sdp_provider *p, int tcp_fd, int backlog,
		     struct sdp_listener **l);
int shm_probe(struct sdp_provider *p, const struct sockaddr *addr,
	      socklen_t addrlen);
int shm_listener_owner(struct shm_provider *p, const struct sockaddr *addr,
		       socklen_t addrlen, struct sdp_listener_owner *o);
void shm_owners_free(struct shm_provider *p);
int shm_listen(struct sdp_provider *p, const struct sockaddr *addr,
	       socklen_t addrlen, int backlog, struct sdp_listener **l);
int shm_listener_fd(struct sdp_listener *l);
int shm_get_request(struct sdp_listener *l, struct sdp_conn_req **req,
		    void *priv, size_t *privlen);
int shm_listener_close(struct sdp_listener *l);

/* shm_cm.c */
int shm_hs_send(int fd, uint16_t type, uint32_t flags, const void *priv,
		size_t privlen, const int *fds, int nfds, uint64_t bell_id);
int shm_hs_recv(int fd, struct shm_hs *hs, int fds[SHM_HS_FDS], pid_t *pid);
int shm_accept(struct sdp_conn_req *req, struct sdp_cq *cq, const void *priv,
	       size_t privlen, void *ep_context, struct sdp_ep **ep);
int shm_reject(struct sdp_conn_req *req);
int shm_connect_bound(struct sdp_provider *p, struct sdp_cq *cq, int tcp_fd,
		      const void *priv, size_t privlen, void *ep_context,
		      struct sdp_ep **ep);
int shm_connect(struct sdp_provider *p, struct sdp_cq *cq,
		const struct sockaddr *dst, socklen_t dstlen, const void *priv,
		size_t privlen, void *ep_context, struct sdp_ep **ep);
int shm_ep_query(struct sdp_ep *ep, struct sdp_ep_attr *attr);
int shm_ep_close(struct sdp_ep *ep);
int shm_post_send(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		  uint64_t context, uint32_t flags);
int shm_post_recv(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		  uint64_t context);
void shm_cm_sock_event(struct shm_ep *ep);
void shm_ep_peer_gone(struct shm_ep *ep);
void shm_send_progress(struct shm_ep *ep);

/* shm_mr.c */
int shm_register_memory(struct sdp_provider *p, void *addr, size_t len,
			uint32_t access, struct sdp_mr **mr);
int shm_deregister_memory(struct sdp_provider *p, struct sdp_mr *mr);
int shm_register_rdma_memory(struct sdp_ep *ep, void *addr, size_t len,
			     uint32_t access, struct sdp_rdma_desc *desc,
			     struct sdp_rmr **rmr);
int shm_deregister_rdma_memory(struct sdp_ep *ep, struct sdp_rmr *rmr);
int shm_mr_cache_callback(struct sdp_provider *p, void *addr, size_t len);
int shm_peer_validate(struct shm_ep *ep, const struct sdp_rdma_desc *d,
		      uint64_t offset, uint64_t len, uint32_t right,
		      uint64_t *addr);
int shm_own_validate(struct shm_ep *ep, uint32_t key, uint64_t tag,
		     uint64_t addr, uint64_t len, uint32_t right);
void shm_rmr_free_all(struct shm_ep *ep);

/* shm_rdma.c */
int shm_rdma_write(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		   const struct sdp_rdma_desc *remote, uint64_t offset,
		   uint64_t context, uint32_t flags);
int shm_rdma_read(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
		  const struct sdp_rdma_desc *remote, uint64_t offset,
		  uint64_t context, uint32_t flags);
int shm_shared_area(struct sdp_ep *ep, void **mine, void **peers,
		    size_t *len);
int shm_stage_rx(struct shm_ep *ep);
void shm_cma_publish(struct shm_ep *ep);
bool shm_cma_check(struct shm_ep *ep, pid_t pid);
int shm_cma_copy(pid_t pid, bool write, const struct sdp_sge *sgl,
		 int nsge, uint64_t skip, uint64_t raddr, uint64_t len);

/* shm_spread.c */
#define SHM_SPREAD_MIN (256u << 10)	/* smaller copies: one thread */
#define SHM_SPREAD_CHUNK (128u << 10)	/* what a thread takes at a time */
int shm_spread_copy(struct shm_provider *p, pid_t pid, bool write,
		    const struct sdp_sge *sgl, int nsge, uint64_t raddr,
		    uint64_t len);
void shm_spread_free(struct shm_provider *p);
int shm_stage_tx_progress(struct shm_ep *ep);
bool shm_cma_probe(void);

#endif /* SHM_H */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sdp_provider.h - the provider SPI: the one entry point a provider module
 * exports, its sized base operations table, and the SAN extension functions
 * fetched by GUID through ioctl(SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER).
 * This header is the whole contract between the switch and a provider.
 */
#ifndef SDP_PROVIDER_H
#define SDP_PROVIDER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions --------------------------------------------------------- */

#define SDP_SPI_MKVER(major, minor) (((uint32_t)(major) << 16) | (uint16_t)(minor))
#define SDP_SPI_MAJOR(v) ((uint32_t)(v) >> 16)
#define SDP_SPI_MINOR(v) ((uint32_t)(v) & 0xffff)
/* The SPI version this header describes. Minor versions only append. */
#define SDP_SPI_VERSION SDP_SPI_MKVER(1, 1)

/* ---- status codes ----------------------------------------------------- */

/*
 * Every SPI call returns 0 or a negative errno; asynchronous calls may also
 * return SDP_PENDING. The three outcomes (NetworkDirect):
 *   0            done now; no completion will ever be reported for it
 *   SDP_PENDING  accepted; exactly one completion is reported later
 *   < 0          failed now; nothing is reported
 */
#define SDP_PENDING 1

/* Project error codes start above the errno range; see sdp_strerror(). */
#define SDP_ERRNO_BASE 4096
enum sdp_error {
	SDP_EVERSION = SDP_ERRNO_BASE, /* module speaks another SPI version */
	SDP_ENOENTRY,	/* module lacks the entry point */
	SDP_ENOEXT,	/* module lacks a mandatory extension function */
	SDP_ENODEVICE,	/* provider found no device to use */
	SDP_EBADKEY,	/* RDMA descriptor unknown, stale or forged */
	SDP_EBOUNDS,	/* RDMA access outside the registered region */
	SDP_ERIGHTS,	/* RDMA access the region was not registered for */
	SDP_ECATALOG,	/* bad provider catalog entry */
	SDP_ERRNO_MAX
};

/* ---- objects ----------------------------------------------------------- */

/*
 * All objects are created and owned by the provider. The switch sees only
 * pointers; the first member of struct sdp_provider is its operations table.
 */
struct sdp_provider;
struct sdp_cq;		/* completion queue, with a pollable notification fd */
struct sdp_listener;	/* passive endpoint on the provider's address space */
struct sdp_conn_req;	/* a connection request taken from a listener */
struct sdp_ep;		/* a connected endpoint (one per SAN connection) */
struct sdp_mr;		/* local registration (RegisterMemory) */
struct sdp_rmr;		/* RDMA registration exposed to the peer */

/* 128-bit identifier, laid out as the Windows GUID. */
struct sdp_guid {
	uint32_t data1;
	uint16_t data2;
	uint16_t data3;
	uint8_t data4[8];
};

/* Access rights of a registration. */
enum sdp_access {
	SDP_ACCESS_LOCAL_WRITE = 1 << 0,  /* local buffer may be written by the provider */
	SDP_ACCESS_REMOTE_READ = 1 << 1,  /* peer may RdmaRead from it */
	SDP_ACCESS_REMOTE_WRITE = 1 << 2, /* peer may RdmaWrite into it */
};

/* A local scatter/gather element; mr must cover [addr, addr + length). */
struct sdp_sge {
	void *addr;
	size_t length;
	struct sdp_mr *mr;
};

/*
 * What a peer needs to reach an RDMA registration. Travels on the wire as
 * 32 bytes, little-endian, in this field order (docs/protocol.md).
 * key and tag are provider-defined (verbs: rkey; shm: slot and generation).
 */
struct sdp_rdma_desc {
	uint64_t addr;	 /* start of the region in the owner's address space */
	uint64_t length; /* bytes */
	uint32_t key;	 /* provider handle of the registration */
	uint32_t access; /* enum sdp_access, remote bits only */
	uint64_t tag;	 /* provider validation tag (e.g. generation) */
};

enum sdp_op {
	SDP_OP_SEND = 1,
	SDP_OP_RECV,
	SDP_OP_RDMA_WRITE,
	SDP_OP_RDMA_READ,
	SDP_OP_CONNECT,	   /* an active or passive connect finished */
};

/* One completion. status is 0 or a negative error code. */
struct sdp_completion {
	uint64_t context;     /* the context given when the operation was posted */
	struct sdp_ep *ep;    /* endpoint the operation belonged to */
	void *ep_context;     /* the ep_context given at connect/accept */
	int32_t status;
	uint32_t op;	      /* enum sdp_op */
	uint64_t bytes;	      /* bytes moved (received length for RECV) */
};

/* Limits and properties of a connected endpoint. */
struct sdp_ep_attr {
	size_t size;		 /* sizeof(struct sdp_ep_attr) of the caller */
	uint32_t max_msg_size;	 /* largest control message (post_send) */
	uint32_t max_send;	 /* sends that may be outstanding */
	uint32_t max_recv;	 /* receives that may be posted */
	uint32_t max_sge;
	uint64_t max_rdma_size;	 /* largest single RDMA transfer */
	uint8_t peer_priv[64];	 /* private data the peer sent at connect/accept */
	uint32_t peer_priv_len;
	uint32_t flags;		 /* SDP_EP_F_*: what this endpoint lacks */
};

/* sdp_ep_attr.flags: limits of one endpoint within what the provider's caps
 * promise (set at connect, e.g. the kernel lets one peer process be read
 * and another not). 0 means the endpoint can do all the caps say. */
#define SDP_EP_F_NO_RDMA_READ	(1u << 0) /* RdmaRead answers EOPNOTSUPP */
#define SDP_EP_F_WRITE_STAGED	(1u << 1) /* RdmaWrite costs an extra copy */

/* Private data carried by connect and accept. 48 bytes: what an
 * InfiniBand/RoCE connect request holds (56) less a provider's own header. */
#define SDP_MAX_PRIVATE_DATA 48

/* ---- the base operations table ----------------------------------------- */

/*
 * Sized operations table (libfabric's fi_ops convention): size is
 * sizeof(struct sdp_provider_ops) as the module was built; the loader fills
 * every operation beyond size, and every NULL one, with a stub that answers
 * -EOPNOTSUPP, so a table can grow without breaking older modules.
 */
struct sdp_provider_ops {
	size_t size;

	/* WSPIoctl analogue; see SDP_IOCTL_*. First, so that even the
	 * shortest table can hand out the extension functions. New
	 * operations are only ever appended at the end. */
	int (*ioctl)(struct sdp_provider *p, uint32_t code, const void *in,
		     size_t inlen, void *out, size_t outlen);

	/* ND QueryAddressList: the local addresses this provider can use.
	 * In: *count = room in addrs. Out: *count = addresses available;
	 * -ENOBUFS when room was too small (count tells how much is needed). */
	int (*query_address_list)(struct sdp_provider *p,
				  struct sockaddr_storage *addrs, size_t *count);
	/* Releases everything the provider holds; the provider is unusable. */
	void (*cleanup)(struct sdp_provider *p);

	/* Completion queues. depth bounds outstanding operations. */
	int (*cq_create)(struct sdp_provider *p, uint32_t depth,
			 struct sdp_cq **cq);
	int (*cq_destroy)(struct sdp_cq *cq);
	/* Drives progress and returns up to max completions (>= 0) or < 0. */
	int (*cq_poll)(struct sdp_cq *cq, struct sdp_completion *c, int max);
	/* A pollable fd for interrupt mode: after cq_arm, it becomes
	 * readable when a completion is ready or the peer of an endpoint on
	 * this CQ is gone. Poll the CQ once more after arming, then sleep. */
	int (*cq_notify_fd)(struct sdp_cq *cq);
	int (*cq_arm)(struct sdp_cq *cq);
	/* Consumes the notification so the fd is no longer readable. */
	int (*cq_ack)(struct sdp_cq *cq);

	/* Discovery: 0 when a listener exists at addr, -ECONNREFUSED when
	 * none does, -ENETUNREACH when the provider cannot reach addr. */
	int (*probe)(struct sdp_provider *p, const struct sockaddr *addr,
		     socklen_t addrlen);

	/* Listeners on the provider's own address space (address + port). */
	int (*listen)(struct sdp_provider *p, const struct sockaddr *addr,
		      socklen_t addrlen, int backlog, struct sdp_listener **l);
	/* Readable when a connection request is waiting. */
	int (*listener_fd)(struct sdp_listener *l);
	/* Takes one request: 0, or -EAGAIN when none waits. Never waits: the
	 * caller is the program's thread (an accept(), an event loop). The
	 * request's private data is returned through priv/privlen (in:
	 * room). */
	int (*get_request)(struct sdp_listener *l, struct sdp_conn_req **req,
			   void *priv, size_t *privlen);
	/* Accepts a request: 0 = connected now, SDP_PENDING = an
	 * SDP_OP_CONNECT completion on cq follows. */
	int (*accept)(struct sdp_conn_req *req, struct sdp_cq *cq,
		      const void *priv, size_t privlen, void *ep_context,
		      struct sdp_ep **ep);
	/* Refuses a request; the connecting side sees -ECONNREFUSED. */
	int (*reject)(struct sdp_conn_req *req);
	int (*listener_close)(struct sdp_listener *l);

	/* Active connect: 0 = connected now, SDP_PENDING = an SDP_OP_CONNECT
	 * completion follows (status -ECONNREFUSED if refused), < 0 failed.
	 * *ep is valid in the first two cases. */
	int (*connect)(struct sdp_provider *p, struct sdp_cq *cq,
		       const struct sockaddr *dst, socklen_t dstlen,
		       const void *priv, size_t privlen, void *ep_context,
		       struct sdp_ep **ep);
	int (*ep_query)(struct sdp_ep *ep, struct sdp_ep_attr *attr);
	/* Closes the endpoint; operations still pending complete with
	 * -ECANCELED before this returns or are silently dropped with it:
	 * the ep pointer is invalid afterwards. */
	int (*ep_close)(struct sdp_ep *ep);

	/* Control messages. A send is 0 (buffer reusable now) or
	 * SDP_PENDING; a receive is always SDP_PENDING until its message
	 * arrives. Messages arrive whole, in order, never merged. If the
	 * peer dies, pending operations complete with -ECONNRESET and later
	 * calls fail with -ECONNRESET. flags SDP_SEND_INLINE (providers with
	 * SDP_CAP_SEND_INLINE): the message is taken at once from memory
	 * that need not be registered (sge.mr may be NULL), and the call is
	 * 0, or -EAGAIN when it could not be taken at once (nothing sent,
	 * no completion); never SDP_PENDING. */
	int (*post_send)(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
			 uint64_t context, uint32_t flags);
	int (*post_recv)(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
			 uint64_t context);

	/* ---- SPI 1.1: connections bound to their TCP connection ---------
	 * Providers with SDP_CAP_TCP_BOUND (same host). tcp_fd is the
	 * connected TCP socket the provider connection is for; the provider
	 * takes its addresses from it, and before any key, memory or
	 * doorbell changes hands each end proves from kernel facts that it
	 * holds its end of that very TCP connection and checks the other's
	 * proof (docs/security.md, "Binding"). tcp_fd stays the caller's:
	 * it must stay open while the listener lives, until the connect
	 * completes, and during probe_bound. */
	/* A listener on tcp_fd's local address that takes only a connection
	 * from the holder of tcp_fd's other end. */
	int (*listen_bound)(struct sdp_provider *p, int tcp_fd, int backlog,
			    struct sdp_listener **l);
	/* connect to the listener the holder of tcp_fd's other end made with
	 * listen_bound; -ECONNREFUSED when none listens there (yet) or it is
	 * not that process's. */
	int (*connect_bound)(struct sdp_provider *p, struct sdp_cq *cq,
			     int tcp_fd, const void *priv, size_t privlen,
			     void *ep_context, struct sdp_ep **ep);
	/* 0 when a listener made with listen_bound by the other end's owner
	 * stands at tcp_fd's peer address; -ECONNREFUSED otherwise (nobody,
	 * or somebody else). */
	int (*probe_bound)(struct sdp_provider *p, int tcp_fd);
};

/* Every provider object starts with this. */
struct sdp_provider {
	const struct sdp_provider_ops *ops;
};

/* ---- ioctl codes -------------------------------------------------------- */

/* in: struct sdp_guid; out: a function pointer (sizeof(void (*)(void))).
 * -EOPNOTSUPP for an identifier the provider does not support. */
#define SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER 0x53440001u

/* Optional. in: the struct sockaddr a probe would try; out: struct
 * sdp_listener_owner, the process whose listener answers there (as the
 * kernel reports it). Lets a caller check that a same-host listener
 * belongs to whoever owns the matching TCP socket. -EOPNOTSUPP when the
 * provider cannot tell (e.g. across hosts), -ECONNREFUSED when nobody
 * listens. */
#define SDP_IOCTL_LISTENER_OWNER 0x53440002u
struct sdp_listener_owner {
	uint32_t uid;
	int32_t pid;
};

/* ---- SAN extension functions (fetched by GUID) --------------------------- */

/* RegisterMemory: a local buffer for send/recv and as the local side of
 * RDMA. access: SDP_ACCESS_LOCAL_WRITE or 0. */
typedef int (*sdp_register_memory_fn)(struct sdp_provider *p, void *addr,
				      size_t len, uint32_t access,
				      struct sdp_mr **mr);
/* DeregisterMemory: the mr is invalid afterwards. */
typedef int (*sdp_deregister_memory_fn)(struct sdp_provider *p,
					struct sdp_mr *mr);
/* RegisterRdmaMemory: exposes [addr, addr+len) to the peer of ep with the
 * remote access bits given; fills the descriptor to send the peer. */
typedef int (*sdp_register_rdma_memory_fn)(struct sdp_ep *ep, void *addr,
					   size_t len, uint32_t access,
					   struct sdp_rdma_desc *desc,
					   struct sdp_rmr **rmr);
/* DeregisterRdmaMemory: the descriptor stops working at once. */
typedef int (*sdp_deregister_rdma_memory_fn)(struct sdp_ep *ep,
					     struct sdp_rmr *rmr);
/* RdmaWrite / RdmaRead: moves sum(sgl lengths) bytes between the local
 * sgl and [remote->addr + offset, ...) of the peer's region. 0, PENDING
 * (an SDP_OP_RDMA_* completion follows) or < 0 (-SDP_EBADKEY,
 * -SDP_EBOUNDS, -SDP_ERIGHTS, -ECONNRESET, ...). */
typedef int (*sdp_rdma_write_fn)(struct sdp_ep *ep, const struct sdp_sge *sgl,
				 int nsge, const struct sdp_rdma_desc *remote,
				 uint64_t offset, uint64_t context,
				 uint32_t flags);
typedef int (*sdp_rdma_read_fn)(struct sdp_ep *ep, const struct sdp_sge *sgl,
				int nsge, const struct sdp_rdma_desc *remote,
				uint64_t offset, uint64_t context,
				uint32_t flags);
/* MemoryRegistrationCacheCallback: drops every cached registration that
 * overlaps [addr, addr+len) (the memory is about to be freed). */
typedef int (*sdp_mr_cache_callback_fn)(struct sdp_provider *p, void *addr,
					size_t len);

/* SharedArea (optional): a small area of memory that both ends of a
 * connected ep map. *mine is this side's area, *peers the peer's area as
 * mapped here; each is *len bytes (>= 128), cache-line aligned, readable
 * and writable here, coherent with the peer's view (atomic compare-and-
 * swap works across the two processes). Both start zeroed for a new
 * connection. The pointers stay valid until ep_close. Only a provider
 * whose two ends share memory (same host) can offer it; the peer may
 * write anything into either area at any time. */
typedef int (*sdp_shared_area_fn)(struct sdp_ep *ep, void **mine,
				  void **peers, size_t *len);

/* The GUIDs. Mandatory: the first five. Optional: RdmaRead,
 * MemoryRegistrationCacheCallback and SharedArea (a provider answers
 * -EOPNOTSUPP). The loader fetches the first seven; SharedArea is fetched
 * by whoever uses it. */
#define SDP_GUID_REGISTER_MEMORY \
	{ 0x6f97b1be, 0x3e70, 0x4972, { 0xa4, 0x1d, 0xc8, 0xea, 0xdf, 0x00, 0xd0, 0xf3 } }
#define SDP_GUID_DEREGISTER_MEMORY \
	{ 0x7fa13c30, 0x1ad4, 0x433a, { 0xbc, 0xae, 0x91, 0x0a, 0x8b, 0xcc, 0x80, 0x05 } }
#define SDP_GUID_REGISTER_RDMA_MEMORY \
	{ 0x726c63a1, 0x926c, 0x45b1, { 0xb2, 0xe4, 0x25, 0x8b, 0x13, 0x0d, 0xdc, 0x8c } }
#define SDP_GUID_DEREGISTER_RDMA_MEMORY \
	{ 0xdea3f4e8, 0xb596, 0x4f66, { 0xac, 0xc1, 0x07, 0x03, 0x4b, 0x82, 0xb5, 0x28 } }
#define SDP_GUID_RDMA_WRITE \
	{ 0xf95add60, 0x8a3b, 0x4de9, { 0x9f, 0x04, 0x7d, 0x73, 0x55, 0xbc, 0x38, 0x4d } }
#define SDP_GUID_RDMA_READ \
	{ 0xbd3abfeb, 0x754c, 0x410e, { 0xb0, 0x29, 0x08, 0x48, 0xf9, 0x70, 0x83, 0xc1 } }
#define SDP_GUID_MR_CACHE_CALLBACK \
	{ 0xca72bf27, 0xc8e9, 0x44b8, { 0xb7, 0x7f, 0xa2, 0xea, 0x8f, 0xe1, 0x1c, 0x1e } }
#define SDP_GUID_SHARED_AREA \
	{ 0x7b964fba, 0x2878, 0x49b6, { 0x8e, 0x7f, 0x2a, 0x91, 0xed, 0x00, 0x12, 0xc1 } }

/* ---- the entry point ---------------------------------------------------- */

/* What the switch passes in (WSPStartupEx's wVersionRequested and more). */
struct sdp_startup_args {
	size_t size;		/* sizeof(struct sdp_startup_args) */
	uint32_t version_min;	/* oldest SPI version the caller accepts */
	uint32_t version_max;	/* newest SPI version the caller speaks */
	const char *options;	/* provider options from the catalog, or NULL */
	/* Logging sink for the provider; level as syslog (3 err .. 7 debug). */
	void (*log)(int level, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));
};

/* What the module reports back (WSPStartupEx's WSPDATA). */
struct sdp_provider_info {
	size_t size;		/* sizeof(struct sdp_provider_info) */
	uint32_t version;	/* version chosen for this session */
	uint32_t low_version;	/* oldest version the module speaks */
	uint32_t high_version;	/* newest version the module speaks */
	char name[32];		/* short name, e.g. "shm" */
	char description[96];
	uint64_t caps;		/* SDP_CAP_* */
};

#define SDP_CAP_LOCAL_ONLY (1ull << 0) /* reaches only this host */
#define SDP_CAP_RDMA_READ  (1ull << 1) /* RdmaRead is offered */
/* An RDMA access error (bad key, bounds, rights) also ends the endpoint,
 * as on verbs RC queue pairs: callers must not expect the endpoint to
 * carry on after one. */
#define SDP_CAP_RDMA_ERR_FATAL (1ull << 2)
/* post_send takes SDP_SEND_INLINE. */
#define SDP_CAP_SEND_INLINE (1ull << 3)
/* listen_bound, connect_bound and probe_bound are offered; a same-host
 * caller must use them (SPI 1.1). */
#define SDP_CAP_TCP_BOUND (1ull << 4)
/* An RdmaWrite completes once it is sent, not once the target placed it
 * (iWARP): the target refuses a key it does not know (a stale one) by ending
 * the connection, so such a write completes without error and such a read
 * with -ECONNRESET. Implies SDP_CAP_RDMA_ERR_FATAL. */
#define SDP_CAP_RDMA_WRITE_UNACKED (1ull << 5)

/* post_send flags */
#define SDP_SEND_INLINE 1u

/* rdma_write / rdma_read flags. SDP_RDMA_SPREAD: the peer copies nothing
 * while this operation runs (it waits for it), so a provider that moves
 * the bytes with this process's CPU may spread the copy over more than
 * one thread. A hint: a provider may ignore it. */
#define SDP_RDMA_SPREAD 1u

/*
 * The one function a module exports. Returns 0 and *prov, or a negative
 * error: -SDP_EVERSION (info->low/high_version say what the module speaks),
 * -SDP_ENODEVICE (module loaded but found no device; info filled), ...
 */
typedef int (*sdp_provider_startup_fn)(const struct sdp_startup_args *args,
				       struct sdp_provider_info *info,
				       struct sdp_provider **prov);
#define SDP_PROVIDER_ENTRY sdp_provider_startup
#define SDP_PROVIDER_ENTRY_NAME "sdp_provider_startup"

/* Exporting macro for the entry point, to be used with -fvisibility=hidden. */
#define SDP_PROVIDER_EXPORT __attribute__((visibility("default")))

/* The entry point's prototype, for modules to define. */
SDP_PROVIDER_EXPORT int sdp_provider_startup(const struct sdp_startup_args *args,
					     struct sdp_provider_info *info,
					     struct sdp_provider **prov);

#ifdef __cplusplus
}
#endif
#endif /* SDP_PROVIDER_H */

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * testprov.c - a tiny provider module for the loader's unit tests. One
 * source, built several times with -D flags (tests/unit/unit.mk), each build
 * breaking the SPI in one way the loader must notice.
 *
 *   (none)           complete: address list, CQs, memory registration, all
 *                    seven extension functions; connections are left NULL
 *   TP_NO_ENTRY      the entry point has another name (not exported)
 *   TP_SPI2          speaks SPI 2.0-2.3 only
 *   TP_NO_MANDATORY  RdmaWrite (mandatory) answers -EOPNOTSUPP
 *   TP_NO_OPTIONAL   RdmaRead and MemoryRegistrationCacheCallback answer
 *                    -EOPNOTSUPP
 *   TP_SHORT_OPS     ops table ends before probe, right before a page the
 *                    loader cannot read
 *   TP_NODEVICE      startup reports -SDP_ENODEVICE
 *
 * Options (complete build): "version=MAJOR.MINOR" chooses that version
 * whatever was asked, "fail=N" makes startup return -N, "mark=FILE" makes
 * cleanup write "cleanup" into FILE. TP_NODEVICE: "say=WORD" logs WORD
 * before reporting no device.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sdp_provider.h"

#ifdef TP_SPI2
#define TP_LOW SDP_SPI_MKVER(2, 0)
#define TP_HIGH SDP_SPI_MKVER(2, 3)
#else
#define TP_LOW SDP_SPI_MKVER(1, 0)
#define TP_HIGH SDP_SPI_MKVER(1, 0)
#endif

struct tp_provider {
	struct sdp_provider base;
	void *ops_map; /* TP_SHORT_OPS: the two mapped pages */
	size_t page;
	char mark[256];
};

struct tp_cq {
	struct tp_provider *p;
	int efd;
};

struct tp_mr {
	void *addr;
	size_t len;
	uint32_t access;
};

static int tp_query_address_list(struct sdp_provider *p,
				 struct sockaddr_storage *addrs, size_t *count)
{
	struct sockaddr_in *sin;

	if (*count < 1) {
		*count = 1;
		return -ENOBUFS;
	}
	*count = 1;
	memset(&addrs[0], 0, sizeof(addrs[0]));
	sin = (struct sockaddr_in *)&addrs[0];
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return 0;
}

static void tp_cleanup(struct sdp_provider *p)
{
	struct tp_provider *tp = (struct tp_provider *)p;
	FILE *f;

	if (tp->mark[0]) {
		f = fopen(tp->mark, "we");
		if (f) {
			fputs("cleanup", f);
			fclose(f);
		}
	}
	if (tp->ops_map)
		munmap(tp->ops_map, 2 * tp->page);
	free(tp);
}

static int tp_cq_create(struct sdp_provider *p, uint32_t depth,
			struct sdp_cq **cq)
{
	struct tp_cq *c;

	if (!depth)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->p = (struct tp_provider *)p;
	c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->efd < 0) {
		int rc = -errno;

		free(c);
		return rc;
	}
	*cq = (struct sdp_cq *)c;
	return 0;
}

static int tp_cq_destroy(struct sdp_cq *cq)
{
	struct tp_cq *c = (struct tp_cq *)cq;

	close(c->efd);
	free(c);
	return 0;
}

/* Nothing is ever posted on this provider, so no completion ever arrives. */
static int tp_cq_poll(struct sdp_cq *cq, struct sdp_completion *c, int max)
{
	return max < 0 ? -EINVAL : 0;
}

static int tp_cq_notify_fd(struct sdp_cq *cq)
{
	return ((struct tp_cq *)cq)->efd;
}

static int tp_cq_arm(struct sdp_cq *cq)
{
	return 0;
}

static int tp_cq_ack(struct sdp_cq *cq)
{
	uint64_t v;

	if (read(((struct tp_cq *)cq)->efd, &v, sizeof(v)) < 0 &&
	    errno != EAGAIN)
		return -errno;
	return 0;
}

static int tp_register_memory(struct sdp_provider *p, void *addr, size_t len,
			      uint32_t access, struct sdp_mr **mr)
{
	struct tp_mr *m;

	if (!addr || !len || (access & ~SDP_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->addr = addr;
	m->len = len;
	m->access = access;
	*mr = (struct sdp_mr *)m;
	return 0;
}

static int tp_deregister_memory(struct sdp_provider *p, struct sdp_mr *mr)
{
	free(mr);
	return 0;
}

/* This provider never connects, so there is no peer to expose memory to. */
static int tp_register_rdma_memory(struct sdp_ep *ep, void *addr, size_t len,
				   uint32_t access, struct sdp_rdma_desc *desc,
				   struct sdp_rmr **rmr)
{
	return -ENOTCONN;
}

static int tp_deregister_rdma_memory(struct sdp_ep *ep, struct sdp_rmr *rmr)
{
	return -ENOTCONN;
}

#ifndef TP_NO_MANDATORY
static int tp_rdma_write(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
			 const struct sdp_rdma_desc *remote, uint64_t offset,
			 uint64_t context, uint32_t flags)
{
	return -ENOTCONN;
}
#endif

#ifndef TP_NO_OPTIONAL
static int tp_rdma_read(struct sdp_ep *ep, const struct sdp_sge *sgl, int nsge,
			const struct sdp_rdma_desc *remote, uint64_t offset,
			uint64_t context, uint32_t flags)
{
	return -ENOTCONN;
}

static int tp_mr_cache_callback(struct sdp_provider *p, void *addr, size_t len)
{
	return 0;
}
#endif

typedef void (*tp_fn)(void);

static int guid_is(const struct sdp_guid *g, const struct sdp_guid ref)
{
	return memcmp(g, &ref, sizeof(ref)) == 0;
}

static int tp_ioctl(struct sdp_provider *p, uint32_t code, const void *in,
		    size_t inlen, void *out, size_t outlen)
{
	const struct sdp_guid *g = in;
	tp_fn fn = NULL;

	if (code != SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER)
		return -EOPNOTSUPP;
	if (inlen != sizeof(*g) || outlen != sizeof(fn))
		return -EINVAL;
	if (guid_is(g, (struct sdp_guid)SDP_GUID_REGISTER_MEMORY))
		fn = (tp_fn)tp_register_memory;
	else if (guid_is(g, (struct sdp_guid)SDP_GUID_DEREGISTER_MEMORY))
		fn = (tp_fn)tp_deregister_memory;
	else if (guid_is(g, (struct sdp_guid)SDP_GUID_REGISTER_RDMA_MEMORY))
		fn = (tp_fn)tp_register_rdma_memory;
	else if (guid_is(g, (struct sdp_guid)SDP_GUID_DEREGISTER_RDMA_MEMORY))
		fn = (tp_fn)tp_deregister_rdma_memory;
#ifndef TP_NO_MANDATORY
	else if (guid_is(g, (struct sdp_guid)SDP_GUID_RDMA_WRITE))
		fn = (tp_fn)tp_rdma_write;
#endif
#ifndef TP_NO_OPTIONAL
	else if (guid_is(g, (struct sdp_guid)SDP_GUID_RDMA_READ))
		fn = (tp_fn)tp_rdma_read;
	else if (guid_is(g, (struct sdp_guid)SDP_GUID_MR_CACHE_CALLBACK))
		fn = (tp_fn)tp_mr_cache_callback;
#endif
	if (!fn)
		return -EOPNOTSUPP;
	memcpy(out, &fn, sizeof(fn));
	return 0;
}

/* Connection operations are left NULL: the loader must stub them. */
static const struct sdp_provider_ops tp_ops = {
	.size = sizeof(struct sdp_provider_ops),
	.query_address_list = tp_query_address_list,
	.cleanup = tp_cleanup,
	.cq_create = tp_cq_create,
	.cq_destroy = tp_cq_destroy,
	.cq_poll = tp_cq_poll,
	.cq_notify_fd = tp_cq_notify_fd,
	.cq_arm = tp_cq_arm,
	.cq_ack = tp_cq_ack,
	.ioctl = tp_ioctl,
};

/* Reads "key=value" from the options string into val. */
static int tp_option(const char *opts, const char *key, char *val, size_t vlen)
{
	size_t klen = strlen(key);
	const char *p = opts;

	while (p && *p) {
		while (*p == ' ')
			p++;
		if (!strncmp(p, key, klen) && p[klen] == '=') {
			size_t n = strcspn(p + klen + 1, " ");

			if (n >= vlen)
				return 0;
			memcpy(val, p + klen + 1, n);
			val[n] = '\0';
			return 1;
		}
		p = strchr(p, ' ');
	}
	return 0;
}

#ifdef TP_NO_ENTRY
#define TP_ENTRY tp_startup_misnamed
#else
#define TP_ENTRY SDP_PROVIDER_ENTRY
#endif

SDP_PROVIDER_EXPORT int TP_ENTRY(const struct sdp_startup_args *args,
				 struct sdp_provider_info *info,
				 struct sdp_provider **prov);

SDP_PROVIDER_EXPORT int TP_ENTRY(const struct sdp_startup_args *args,
				 struct sdp_provider_info *info,
				 struct sdp_provider **prov)
{
	struct tp_provider *tp;
	uint32_t version;
	char val[256];

	info->low_version = TP_LOW;
	info->high_version = TP_HIGH;
	snprintf(info->name, sizeof(info->name), "tp");
	if (args->version_max < TP_LOW || args->version_min > TP_HIGH)
		return -SDP_EVERSION;
	version = args->version_max < TP_HIGH ? args->version_max : TP_HIGH;
	if (tp_option(args->options, "version", val, sizeof(val))) {
		unsigned int maj, min;

		if (sscanf(val, "%u.%u", &maj, &min) != 2)
			return -EINVAL;
		version = SDP_SPI_MKVER(maj, min);
	}
	if (tp_option(args->options, "fail", val, sizeof(val))) {
		if (args->log)
			args->log(3, "tp: failing as the options ask");
		return -atoi(val);
	}
	info->version = version;
#ifdef TP_NODEVICE
	snprintf(info->description, sizeof(info->description),
		 "test provider: no adapter present");
	if (tp_option(args->options, "say", val, sizeof(val)) && args->log)
		args->log(5, "tp: %s", val);
	return -SDP_ENODEVICE;
#else
	snprintf(info->description, sizeof(info->description),
		 "loader test provider");
#endif
	info->caps = SDP_CAP_LOCAL_ONLY | SDP_CAP_RDMA_READ;

	tp = calloc(1, sizeof(*tp));
	if (!tp)
		return -ENOMEM;
	tp_option(args->options, "mark", tp->mark, sizeof(tp->mark));
	tp->base.ops = &tp_ops;
#ifdef TP_SHORT_OPS
	{
		size_t len = offsetof(struct sdp_provider_ops, probe);
		char *map;

		tp->page = (size_t)sysconf(_SC_PAGESIZE);
		map = mmap(NULL, 2 * tp->page, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (map == MAP_FAILED) {
			free(tp);
			return -ENOMEM;
		}
		/* Any read past len faults: the loader must honour size. */
		memcpy(map + tp->page - len, &tp_ops, len);
		((struct sdp_provider_ops *)(map + tp->page - len))->size = len;
		mprotect(map + tp->page, tp->page, PROT_NONE);
		tp->ops_map = map;
		tp->base.ops =
			(struct sdp_provider_ops *)(map + tp->page - len);
	}
#endif
	if (args->log)
		args->log(7, "tp: started, SPI %u.%u", SDP_SPI_MAJOR(version),
			  SDP_SPI_MINOR(version));
	*prov = &tp->base;
	return 0;
}

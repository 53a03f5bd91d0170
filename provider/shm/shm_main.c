// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shm_main.c - entry point of the shm provider: version negotiation, the
 * option string and environment, the operations table, the extension GUIDs
 * (ioctl) and the local address list.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm.h"

static const struct shm_opts shm_default_opts = {
	.msg_size = 65536,
	.ring_slots = 32,
	.stage_chunk = 65536,
	.stage_slots = 16,
	.rdma_regs = 256,
	.handshake_ms = 2000,
};

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

static int opt_u32(const char *val, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (!val || !*val)
		return -EINVAL;
	errno = 0;
	v = strtoul(val, &end, 0);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* Parses "key=value,key=value,flag" (',' or whitespace separated). */
int shm_parse_options(struct shm_opts *o, const char *s, char *err,
		      size_t errlen)
{
	char buf[512], *tok, *save;

	if (!s)
		return 0;
	if (strlen(s) >= sizeof(buf)) {
		snprintf(err, errlen, "option string longer than %zu bytes",
			 sizeof(buf) - 1);
		return -EINVAL;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, ", \t", &save); tok;
	     tok = strtok_r(NULL, ", \t", &save)) {
		char *val = strchr(tok, '=');
		int ret = -EINVAL;

		if (val)
			*val++ = '\0';
		if (!strcmp(tok, "no_cma")) {
			o->no_cma = !val || strcmp(val, "0");
			ret = 0;
		} else if (!strcmp(tok, "msg_size")) {
			ret = opt_u32(val, 64, 16 << 20, &o->msg_size);
		} else if (!strcmp(tok, "ring_slots")) {
			ret = opt_u32(val, 2, 4096, &o->ring_slots);
			if (!ret && !is_pow2(o->ring_slots))
				ret = -EINVAL;
		} else if (!strcmp(tok, "stage_chunk")) {
			ret = opt_u32(val, 4096, 16 << 20, &o->stage_chunk);
		} else if (!strcmp(tok, "stage_slots")) {
			ret = opt_u32(val, 2, SHM_STAGE_MAX, &o->stage_slots);
			if (!ret && !is_pow2(o->stage_slots))
				ret = -EINVAL;
		} else if (!strcmp(tok, "rdma_regs")) {
			ret = opt_u32(val, 1, 1 << 20, &o->rdma_regs);
		} else if (!strcmp(tok, "fail_reg_every")) {
			ret = opt_u32(val, 0, UINT32_MAX, &o->fail_reg_every);
		} else if (!strcmp(tok, "fail_rdma_every")) {
			ret = opt_u32(val, 0, UINT32_MAX, &o->fail_rdma_every);
		} else if (!strcmp(tok, "handshake_ms")) {
			ret = opt_u32(val, 1, 60000, &o->handshake_ms);
		} else {
			snprintf(err, errlen,
				 "unknown option '%s' (known: msg_size, ring_slots, stage_chunk, stage_slots, rdma_regs, fail_reg_every, fail_rdma_every, handshake_ms, no_cma)",
				 tok);
			return -EINVAL;
		}
		if (ret) {
			snprintf(err, errlen,
				 "bad value '%s' for option '%s' (slot counts are powers of two; see docs/provider-shm.md)",
				 val ? val : "", tok);
			return ret;
		}
	}
	return 0;
}

static int env_u32(const char *name, uint32_t *out, char *err, size_t errlen)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return 0;
	if (opt_u32(v, 0, UINT32_MAX, out)) {
		snprintf(err, errlen, "%s=%s is not a number", name, v);
		return -EINVAL;
	}
	return 0;
}

static int shm_query_address_list(struct sdp_provider *p,
				  struct sockaddr_storage *addrs,
				  size_t *count)
{
	struct ifaddrs *ifa, *i;
	size_t n = 0;

	if (!count || (*count && !addrs))
		return -EINVAL;
	if (getifaddrs(&ifa))
		return -errno;
	for (i = ifa; i; i = i->ifa_next) {
		size_t len;

		if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			len = sizeof(struct sockaddr_in);
		else if (i->ifa_addr->sa_family == AF_INET6)
			len = sizeof(struct sockaddr_in6);
		else
			continue;
		if (n < *count) {
			memset(&addrs[n], 0, sizeof(addrs[n]));
			memcpy(&addrs[n], i->ifa_addr, len);
		}
		n++;
	}
	freeifaddrs(ifa);
	if (n > *count) {
		*count = n;
		return -ENOBUFS;
	}
	*count = n;
	return 0;
}

static void shm_cleanup(struct sdp_provider *p)
{
	shm_spread_free(shm_prov(p));
	shm_owners_free(shm_prov(p));
	shm_pool_free(shm_prov(p));
	shm_peers_free(shm_prov(p));
	free(shm_prov(p));
}

static int guid_eq(const struct sdp_guid *a, const struct sdp_guid *b)
{
	return !memcmp(a, b, sizeof(*a));
}

static int shm_ioctl(struct sdp_provider *p, uint32_t code, const void *in,
		     size_t inlen, void *out, size_t outlen)
{
	static const struct sdp_guid g_reg = SDP_GUID_REGISTER_MEMORY,
		g_dereg = SDP_GUID_DEREGISTER_MEMORY,
		g_rreg = SDP_GUID_REGISTER_RDMA_MEMORY,
		g_rdereg = SDP_GUID_DEREGISTER_RDMA_MEMORY,
		g_write = SDP_GUID_RDMA_WRITE,
		g_read = SDP_GUID_RDMA_READ,
		g_cache = SDP_GUID_MR_CACHE_CALLBACK,
		g_area = SDP_GUID_SHARED_AREA;
	const struct sdp_guid *g = in;
	void (*fn)(void) = NULL;

	if (code == SDP_IOCTL_LISTENER_OWNER) {
		struct sdp_listener_owner o;
		int r;

		if (!in || inlen < sizeof(sa_family_t) || !out ||
		    outlen < sizeof(o))
			return -EINVAL;
		r = shm_listener_owner(shm_prov(p), in, (socklen_t)inlen, &o);
		if (!r)
			memcpy(out, &o, sizeof(o));
		return r;
	}
	if (code != SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER)
		return -EOPNOTSUPP;
	if (!in || inlen < sizeof(*g) || !out || outlen < sizeof(fn))
		return -EINVAL;
	if (guid_eq(g, &g_reg))
		fn = (void (*)(void))shm_register_memory;
	else if (guid_eq(g, &g_dereg))
		fn = (void (*)(void))shm_deregister_memory;
	else if (guid_eq(g, &g_rreg))
		fn = (void (*)(void))shm_register_rdma_memory;
	else if (guid_eq(g, &g_rdereg))
		fn = (void (*)(void))shm_deregister_rdma_memory;
	else if (guid_eq(g, &g_write))
		fn = (void (*)(void))shm_rdma_write;
	else if (guid_eq(g, &g_read) && shm_prov(p)->cma)
		fn = (void (*)(void))shm_rdma_read;
	else if (guid_eq(g, &g_cache))
		fn = (void (*)(void))shm_mr_cache_callback;
	else if (guid_eq(g, &g_area))
		fn = (void (*)(void))shm_shared_area;
	if (!fn)
		return -EOPNOTSUPP;
	memcpy(out, &fn, sizeof(fn));
	return 0;
}

static const struct sdp_provider_ops shm_ops = {
	.size = sizeof(struct sdp_provider_ops),
	.query_address_list = shm_query_address_list,
	.cleanup = shm_cleanup,
	.cq_create = shm_cq_create,
	.cq_destroy = shm_cq_destroy,
	.cq_poll = shm_cq_poll,
	.cq_notify_fd = shm_cq_notify_fd,
	.cq_arm = shm_cq_arm,
	.cq_ack = shm_cq_ack,
	.probe = shm_probe,
	.listen = shm_listen,
	.listener_fd = shm_listener_fd,
	.get_request = shm_get_request,
	.accept = shm_accept,
	.reject = shm_reject,
	.listener_close = shm_listener_close,
	.connect = shm_connect,
	.ep_query = shm_ep_query,
	.ep_close = shm_ep_close,
	.post_send = shm_post_send,
	.post_recv = shm_post_recv,
	.ioctl = shm_ioctl,
	.listen_bound = shm_listen_bound,
	.connect_bound = shm_connect_bound,
	.probe_bound = shm_probe_bound,
};

static void fill_info(struct sdp_provider_info *info, uint32_t version,
		      bool cma)
{
	info->version = version;
	info->low_version = SDP_SPI_MKVER(SDP_SPI_MAJOR(SDP_SPI_VERSION), 0);
	info->high_version = SDP_SPI_VERSION;
	snprintf(info->name, sizeof(info->name), "shm");
	snprintf(info->description, sizeof(info->description),
		 "same-host shared memory rings, RDMA by %s",
		 cma ? "process_vm_readv/writev" : "staging copy");
	info->caps = SDP_CAP_LOCAL_ONLY | SDP_CAP_SEND_INLINE |
		     (cma ? SDP_CAP_RDMA_READ : 0) |
		     (version >= SDP_SPI_MKVER(1, 1) ? SDP_CAP_TCP_BOUND : 0);
}

/* The one exported symbol (prototype in sdp_provider.h). */
SDP_PROVIDER_EXPORT int
sdp_provider_startup(const struct sdp_startup_args *args,
		     struct sdp_provider_info *info, struct sdp_provider **prov)
{
	struct shm_provider *p;
	uint32_t major = SDP_SPI_MAJOR(SDP_SPI_VERSION), version;
	char err[256] = "";
	const char *env;
	int ret;

	if (!args || !info || !prov ||
	    args->size < offsetof(struct sdp_startup_args, log) ||
	    info->size < sizeof(struct sdp_provider_info))
		return -EINVAL;
	if (SDP_SPI_MAJOR(args->version_min) > major ||
	    SDP_SPI_MAJOR(args->version_max) < major ||
	    args->version_min > args->version_max) {
		fill_info(info, 0, false);
		return -SDP_EVERSION;
	}
	version = SDP_SPI_MAJOR(args->version_max) == major &&
		  args->version_max < SDP_SPI_VERSION ?
		  args->version_max : SDP_SPI_VERSION;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->base.ops = &shm_ops;
	p->opt = shm_default_opts;
	p->bell = -1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->peer_lock, NULL);
	pthread_mutex_init(&p->pool_lock, NULL);
	pthread_mutex_init(&p->owner_lock, NULL);
	if (args->size >= sizeof(struct sdp_startup_args))
		p->log = args->log;
	ret = env_u32("SDP_SHM_FAIL_REG_EVERY", &p->opt.fail_reg_every,
		      err, sizeof(err));
	if (!ret)
		ret = env_u32("SDP_SHM_FAIL_RDMA_EVERY",
			      &p->opt.fail_rdma_every, err, sizeof(err));
	if (!ret)
		ret = shm_parse_options(&p->opt, args->options, err,
					sizeof(err));
	if (ret) {
		shm_log(p, 3, "%s", err);
		goto free_prov;
	}
	env = getenv("SDP_SHM_NO_CMA");
	if (env && *env && strcmp(env, "0"))
		p->opt.no_cma = true;
	p->cma = !p->opt.no_cma && shm_cma_probe();
	shm_log(p, 6, "RDMA mode %s%s", p->cma ? "cma" : "staging",
		p->opt.no_cma ? " (forced by no_cma)" : "");
	fill_info(info, version, p->cma);
	*prov = &p->base;
	return 0;

free_prov:
	pthread_mutex_destroy(&p->owner_lock);
	pthread_mutex_destroy(&p->pool_lock);
	pthread_mutex_destroy(&p->peer_lock);
	pthread_mutex_destroy(&p->lock);
	free(p);
	return ret;
}

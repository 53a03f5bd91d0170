// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * verbs_main.c - entry point of the verbs provider: option parsing, device
 * discovery (rdma_get_devices, one PD per device), the local address list,
 * the operations table and the GUID ioctl for the SAN extension functions.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "verbs.h"

/*
 * rdma-core reports errors three ways (positive errno from ibv_post_*,
 * NULL + errno from constructors, -1 + errno from librdmacm); everything in
 * this module turns them into a negative errno through this helper.
 */
int verbs_errno(int fallback)
{
	int e = errno;

	return e > 0 ? -e : -fallback;
}

int verbs_dev_index(struct verbs_provider *vp, struct ibv_context *ctx)
{
	int i;

	for (i = 0; i < vp->ndev; i++)
		if (vp->dev[i].ctx == ctx)
			return i;
	return -1;
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return false;
}

static socklen_t sa_len(int family)
{
	return family == AF_INET6 ? sizeof(struct sockaddr_in6)
				  : sizeof(struct sockaddr_in);
}

/*
 * rdma_cm cannot route to loopback addresses (there is no RDMA device on
 * lo). With loopback_map on (default), a loopback address is replaced by the
 * first RDMA-capable local address of the same family, port kept, so "same
 * host over 127.0.0.1" works over the local device.
 */
int verbs_map_addr(struct verbs_provider *vp, const struct sockaddr *in,
		   socklen_t inlen, struct sockaddr_storage *out)
{
	size_t i;

	if (!in || (in->sa_family != AF_INET && in->sa_family != AF_INET6) ||
	    inlen < sa_len(in->sa_family))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	memcpy(out, in, sa_len(in->sa_family));
	/* A dual-stack program (iperf3 listens on [::]) sees IPv4 peers as
	 * ::ffff:a.b.c.d. rdma_cm would carry such an address as IPv6 in its
	 * connection header, where a listener bound to the peer's plain
	 * IPv4 address never sees the request: speak IPv4 to rdma_cm. */
	if (in->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)in)->sin6_addr)) {
		const struct sockaddr_in6 *i6 = (const void *)in;
		struct sockaddr_in *o = (void *)out;

		memset(out, 0, sizeof(*out));
		o->sin_family = AF_INET;
		o->sin_port = i6->sin6_port;
		memcpy(&o->sin_addr, &i6->sin6_addr.s6_addr[12], 4);
		in = (const struct sockaddr *)out;
	}
	if (!vp->opt.loopback_map || !is_loopback(in))
		return 0;
	for (i = 0; i < vp->naddrs; i++) {
		if (vp->addrs[i].ss_family != in->sa_family)
			continue;
		if (in->sa_family == AF_INET) {
			struct sockaddr_in *o = (void *)out;

			o->sin_addr =
				((struct sockaddr_in *)&vp->addrs[i])->sin_addr;
		} else {
			struct sockaddr_in6 *o = (void *)out;
			struct sockaddr_in6 *a = (void *)&vp->addrs[i];

			o->sin6_addr = a->sin6_addr;
			o->sin6_scope_id = a->sin6_scope_id;
		}
		return 0;
	}
	return -ENETUNREACH;
}

/* An address counts when rdma_cm binds it to one of our devices. */
static bool addr_has_device(struct verbs_provider *vp, struct sockaddr *sa)
{
	struct rdma_cm_id *id;
	bool ok = false;

	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return false;
	if (!rdma_bind_addr(id, sa) && id->verbs &&
	    verbs_dev_index(vp, id->verbs) >= 0)
		ok = true;
	rdma_destroy_id(id);
	return ok;
}

static void scan_addresses(struct verbs_provider *vp)
{
	struct ifaddrs *ifa, *it;

	vp->naddrs = 0;
	if (getifaddrs(&ifa))
		return;
	for (it = ifa; it && vp->naddrs < VERBS_MAX_ADDRS; it = it->ifa_next) {
		struct sockaddr_storage ss;

		if (!it->ifa_addr || !(it->ifa_flags & IFF_UP))
			continue;
		if (it->ifa_addr->sa_family != AF_INET &&
		    it->ifa_addr->sa_family != AF_INET6)
			continue;
		if (is_loopback(it->ifa_addr))
			continue;
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, it->ifa_addr, sa_len(it->ifa_addr->sa_family));
		if (addr_has_device(vp, (struct sockaddr *)&ss))
			vp->addrs[vp->naddrs++] = ss;
	}
	freeifaddrs(ifa);
}

static int verbs_query_address_list(struct sdp_provider *p,
				    struct sockaddr_storage *addrs,
				    size_t *count)
{
	struct verbs_provider *vp = (struct verbs_provider *)p;
	size_t room;

	if (!count)
		return -EINVAL;
	room = *count;
	*count = vp->naddrs;
	if (room < vp->naddrs)
		return -ENOBUFS;
	if (vp->naddrs && !addrs)
		return -EINVAL;
	memcpy(addrs, vp->addrs, vp->naddrs * sizeof(*addrs));
	return 0;
}

static void release_devices(struct verbs_provider *vp)
{
	int i;

	for (i = 0; i < vp->ndev; i++) {
		if (vp->dev[i].hello_mr)
			ibv_dereg_mr(vp->dev[i].hello_mr);
		if (vp->dev[i].pd)
			ibv_dealloc_pd(vp->dev[i].pd);
	}
	if (vp->ctx_list)
		rdma_free_devices(vp->ctx_list);
	vp->ctx_list = NULL;
	vp->ndev = 0;
}

static void verbs_cleanup(struct sdp_provider *p)
{
	struct verbs_provider *vp = (struct verbs_provider *)p;
	int ms;

	/* unanswered iWARP probes still being destroyed hold a QP of our
	 * PD: their wait ends with the peer's MPA timeout */
	for (ms = 0; __atomic_load_n(&vp->reapers, __ATOMIC_SEQ_CST) &&
	     ms < 15000; ms += 10)
		usleep(10000);
	verbs_mr_cache_flush(vp);
	release_devices(vp);
	pthread_mutex_destroy(&vp->cache_lock);
	pthread_mutex_destroy(&vp->cq_list_lock);
	free(vp);
}

static const struct sdp_guid guid_register_memory = SDP_GUID_REGISTER_MEMORY;
static const struct sdp_guid guid_deregister_memory =
	SDP_GUID_DEREGISTER_MEMORY;
static const struct sdp_guid guid_register_rdma = SDP_GUID_REGISTER_RDMA_MEMORY;
static const struct sdp_guid guid_deregister_rdma =
	SDP_GUID_DEREGISTER_RDMA_MEMORY;
static const struct sdp_guid guid_rdma_write = SDP_GUID_RDMA_WRITE;
static const struct sdp_guid guid_rdma_read = SDP_GUID_RDMA_READ;
static const struct sdp_guid guid_mr_cache = SDP_GUID_MR_CACHE_CALLBACK;

static bool guid_is(const struct sdp_guid *a, const struct sdp_guid *b)
{
	return !memcmp(a, b, sizeof(*a));
}

static int verbs_ioctl(struct sdp_provider *p, uint32_t code, const void *in,
		       size_t inlen, void *out, size_t outlen)
{
	struct verbs_provider *vp = (struct verbs_provider *)p;
	const struct sdp_guid *g = in;
	void (*fn)(void) = NULL;

	if (code != SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER)
		return -EOPNOTSUPP;
	if (!in || inlen < sizeof(*g) || !out || outlen < sizeof(fn))
		return -EINVAL;
	if (guid_is(g, &guid_register_memory))
		fn = (void (*)(void))verbs_register_memory;
	else if (guid_is(g, &guid_deregister_memory))
		fn = (void (*)(void))verbs_deregister_memory;
	else if (guid_is(g, &guid_register_rdma))
		fn = (void (*)(void))verbs_register_rdma_memory;
	else if (guid_is(g, &guid_deregister_rdma))
		fn = (void (*)(void))verbs_deregister_rdma_memory;
	else if (guid_is(g, &guid_rdma_write))
		fn = (void (*)(void))verbs_rdma_write;
	else if (guid_is(g, &guid_rdma_read) && !vp->opt.no_rdma_read)
		fn = (void (*)(void))verbs_rdma_read;
	else if (guid_is(g, &guid_mr_cache) && vp->opt.mr_cache)
		fn = (void (*)(void))verbs_mr_cache_callback;
	if (!fn)
		return -EOPNOTSUPP;
	memcpy(out, &fn, sizeof(fn));
	return 0;
}

static const struct sdp_provider_ops verbs_ops = {
	.size = sizeof(struct sdp_provider_ops),
	.query_address_list = verbs_query_address_list,
	.cleanup = verbs_cleanup,
	.cq_create = verbs_cq_create,
	.cq_destroy = verbs_cq_destroy,
	.cq_poll = verbs_cq_poll,
	.cq_notify_fd = verbs_cq_notify_fd,
	.cq_arm = verbs_cq_arm,
	.cq_ack = verbs_cq_ack,
	.probe = verbs_probe,
	.listen = verbs_listen,
	.listener_fd = verbs_listener_fd,
	.get_request = verbs_get_request,
	.accept = verbs_accept,
	.reject = verbs_reject,
	.listener_close = verbs_listener_close,
	.connect = verbs_connect,
	.ep_query = verbs_ep_query,
	.ep_close = verbs_ep_close,
	.post_send = verbs_post_send,
	.post_recv = verbs_post_recv,
	.ioctl = verbs_ioctl,
};

static bool env_true(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") && strcasecmp(v, "no");
}

/*
 * Options: space or comma separated words from the catalog:
 *   no_rdma_read  mr_cache=0|1  cache_keep=0|1  cache_entries=N
 *   loopback_map=0|1  probe_ms=N  resolve_ms=N  qp_send=N  qp_recv=N
 *   iwarp_defer_accept=0|1
 * Environment: SDP_VERBS_NO_RDMA_READ=1, SDP_VERBS_MR_CACHE=0,
 * SDP_VERBS_MR_CACHE_KEEP=1.
 */
static int parse_options(struct verbs_provider *vp, const char *s)
{
	char buf[256], *tok, *save = NULL;
	const char *v;

	vp->opt = (struct verbs_options){
		.mr_cache = true,
		.loopback_map = true,
		.iwarp_defer_accept = true,
		.probe_ms = 1000,
		.resolve_ms = 2000,
		.qp_send = 128,
		.qp_recv = 128,
		.cache_max_entries = 64,
	};
	if (env_true("SDP_VERBS_NO_RDMA_READ"))
		vp->opt.no_rdma_read = true;
	v = getenv("SDP_VERBS_MR_CACHE");
	if (v && !strcmp(v, "0"))
		vp->opt.mr_cache = false;
	if (env_true("SDP_VERBS_MR_CACHE_KEEP"))
		vp->opt.cache_keep = true;
	if (!s)
		return 0;
	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	for (tok = strtok_r(buf, " ,\t", &save); tok;
	     tok = strtok_r(NULL, " ,\t", &save)) {
		char *eq = strchr(tok, '=');
		long n = 0;

		if (eq) {
			char *end;

			*eq++ = '\0';
			n = strtol(eq, &end, 10);
			if (!*eq || *end || n < 0 || n > 1 << 20)
				goto bad;
		}
		if (!strcmp(tok, "no_rdma_read") && !eq)
			vp->opt.no_rdma_read = true;
		else if (!strcmp(tok, "mr_cache") && eq)
			vp->opt.mr_cache = n != 0;
		else if (!strcmp(tok, "loopback_map") && eq)
			vp->opt.loopback_map = n != 0;
		else if (!strcmp(tok, "probe_ms") && eq && n > 0)
			vp->opt.probe_ms = n;
		else if (!strcmp(tok, "resolve_ms") && eq && n > 0)
			vp->opt.resolve_ms = n;
		else if (!strcmp(tok, "qp_send") && eq && n > 0)
			vp->opt.qp_send = n;
		else if (!strcmp(tok, "qp_recv") && eq && n > 0)
			vp->opt.qp_recv = n;
		else if (!strcmp(tok, "cache_keep") && eq)
			vp->opt.cache_keep = n != 0;
		else if (!strcmp(tok, "cache_entries") && eq)
			vp->opt.cache_max_entries = n;
		else if (!strcmp(tok, "iwarp_defer_accept") && eq)
			vp->opt.iwarp_defer_accept = n != 0;
		else
			goto bad;
	}
	return 0;
bad:
	vlog(vp, 3, "bad option '%s' in \"%s\"; known: no_rdma_read "
	     "mr_cache=0|1 cache_keep=0|1 loopback_map=0|1 probe_ms=N "
	     "resolve_ms=N "
	     "qp_send=N qp_recv=N cache_entries=N iwarp_defer_accept=0|1",
	     tok, s);
	return -EINVAL;
}

static int open_devices(struct verbs_provider *vp)
{
	int i, n = 0;

	vp->ctx_list = rdma_get_devices(&n);
	if (!vp->ctx_list || n <= 0)
		return -SDP_ENODEVICE;
	if (n > VERBS_MAX_DEVICES)
		n = VERBS_MAX_DEVICES;
	vp->ndev = n;
	for (i = 0; i < n; i++) {
		struct verbs_dev *d = &vp->dev[i];
		struct ibv_port_attr pa;

		d->ctx = vp->ctx_list[i];
		if (ibv_query_device(d->ctx, &d->attr))
			return verbs_errno(EIO);
		d->max_msg_sz = 1u << 20;
		if (!ibv_query_port(d->ctx, 1, &pa))
			d->max_msg_sz = pa.max_msg_sz;
		/* the device's limits, not RoCE's: siw takes 6 SGEs per
		 * work request and one for an RDMA read's sink */
		d->iwarp = d->ctx->device->transport_type ==
			   IBV_TRANSPORT_IWARP;
		vp->any_iwarp |= d->iwarp;
		d->max_sge = d->attr.max_sge < VERBS_MAX_SGE ?
			     d->attr.max_sge : VERBS_MAX_SGE;
		d->max_sge_rd = d->attr.max_sge_rd < d->max_sge ?
				d->attr.max_sge_rd : d->max_sge;
		if (d->max_sge < 1)
			d->max_sge = 1;
		if (d->max_sge_rd < 1)
			d->max_sge_rd = 1;
		d->pd = ibv_alloc_pd(d->ctx);
		if (!d->pd)
			return verbs_errno(ENOMEM);
		if (d->iwarp) {
			/* siw takes no receive without an SGE */
			d->hello_mr = ibv_reg_mr(d->pd, &d->hello_buf,
						 sizeof(d->hello_buf),
						 IBV_ACCESS_LOCAL_WRITE);
			if (!d->hello_mr)
				return verbs_errno(ENOMEM);
		}
	}
	return 0;
}

SDP_PROVIDER_EXPORT int sdp_provider_startup(const struct sdp_startup_args *a,
					     struct sdp_provider_info *info,
					     struct sdp_provider **prov)
{
	struct verbs_provider *vp;
	uint32_t v = SDP_SPI_VERSION;
	int ret;

	if (!a || !info || !prov || a->size < sizeof(*a) ||
	    info->size < sizeof(*info))
		return -EINVAL;
	*prov = NULL;
	info->version = 0;
	info->low_version = SDP_SPI_MKVER(1, 0);
	info->high_version = SDP_SPI_VERSION;
	snprintf(info->name, sizeof(info->name), "verbs");
	snprintf(info->description, sizeof(info->description),
		 "rdma-core verbs (InfiniBand, RoCE, iWARP) via librdmacm");
	/* An RDMA access error moves an RC QP to the error state. */
	info->caps = SDP_CAP_RDMA_ERR_FATAL;
	if (a->version_min > v || a->version_max < info->low_version ||
	    a->version_min > a->version_max)
		return -SDP_EVERSION;
	if (a->version_max < v)
		v = a->version_max;
	info->version = v;

	vp = calloc(1, sizeof(*vp));
	if (!vp)
		return -ENOMEM;
	vp->base.ops = &verbs_ops;
	vp->log = a->log;	/* the switch's log (SDP_LOG) */
	pthread_mutex_init(&vp->cache_lock, NULL);
	pthread_mutex_init(&vp->cq_list_lock, NULL);
	ret = parse_options(vp, a->options);
	if (ret)
		goto free_vp;
	if (!vp->opt.no_rdma_read)
		info->caps |= SDP_CAP_RDMA_READ;

	ret = open_devices(vp);
	if (ret == -SDP_ENODEVICE) {
		vlog(vp, 4, "no RDMA device (rdma_get_devices found none); "
		     "load rdma_rxe/siw or a hardware driver to use verbs");
		goto release;
	}
	if (ret) {
		vlog(vp, 3, "opening the RDMA devices failed: %s",
		     strerror(-ret));
		goto release;
	}
	if (vp->any_iwarp)
		info->caps |= SDP_CAP_RDMA_WRITE_UNACKED;
	scan_addresses(vp);
	if (!vp->naddrs)
		vlog(vp, 4, "RDMA devices found but no IP address is bound to "
		     "one; connections need an address on an RDMA netdev");
	*prov = &vp->base;
	return 0;

release:
	release_devices(vp);
free_vp:
	pthread_mutex_destroy(&vp->cache_lock);
	pthread_mutex_destroy(&vp->cq_list_lock);
	free(vp);
	return ret;
}

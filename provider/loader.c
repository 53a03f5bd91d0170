// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * loader.c - loading one provider module: dlopen, the entry point and SPI
 * version negotiation, widening the module's sized operations table with
 * -EOPNOTSUPP stubs, and fetching the SAN extension functions by GUID.
 * Also finds the provider directory.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdp_loader.h"

/* The SPI versions this loader accepts: any minor of major 1. */
#define LOADER_VERSION_MIN SDP_SPI_MKVER(1, 0)
#define LOADER_VERSION_MAX SDP_SPI_VERSION

/* ---- stubs: one per operation signature ---------------------------------- */

static int stub_query_address_list(struct sdp_provider *p,
				   struct sockaddr_storage *addrs,
				   size_t *count)
{
	return -EOPNOTSUPP;
}

static void stub_cleanup(struct sdp_provider *p)
{
}

static int stub_cq_create(struct sdp_provider *p, uint32_t depth,
			  struct sdp_cq **cq)
{
	return -EOPNOTSUPP;
}

/* cq_destroy, cq_notify_fd, cq_arm, cq_ack */
static int stub_cq(struct sdp_cq *cq)
{
	return -EOPNOTSUPP;
}

static int stub_cq_poll(struct sdp_cq *cq, struct sdp_completion *c, int max)
{
	return -EOPNOTSUPP;
}

static int stub_probe(struct sdp_provider *p, const struct sockaddr *addr,
		      socklen_t addrlen)
{
	return -EOPNOTSUPP;
}

static int stub_listen(struct sdp_provider *p, const struct sockaddr *addr,
		       socklen_t addrlen, int backlog, struct sdp_listener **l)
{
	return -EOPNOTSUPP;
}

/* listener_fd, listener_close */
static int stub_listener(struct sdp_listener *l)
{
	return -EOPNOTSUPP;
}

static int stub_get_request(struct sdp_listener *l, struct sdp_conn_req **req,
			    void *priv, size_t *privlen)
{
	return -EOPNOTSUPP;
}

static int stub_accept(struct sdp_conn_req *req, struct sdp_cq *cq,
		       const void *priv, size_t privlen, void *ep_context,
		       struct sdp_ep **ep)
{
	return -EOPNOTSUPP;
}

static int stub_reject(struct sdp_conn_req *req)
{
	return -EOPNOTSUPP;
}

static int stub_connect(struct sdp_provider *p, struct sdp_cq *cq,
			const struct sockaddr *dst, socklen_t dstlen,
			const void *priv, size_t privlen, void *ep_context,
			struct sdp_ep **ep)
{
	return -EOPNOTSUPP;
}

static int stub_ep_query(struct sdp_ep *ep, struct sdp_ep_attr *attr)
{
	return -EOPNOTSUPP;
}

static int stub_ep_close(struct sdp_ep *ep)
{
	return -EOPNOTSUPP;
}

static int stub_post_send(struct sdp_ep *ep, const struct sdp_sge *sgl,
			  int nsge, uint64_t context, uint32_t flags)
{
	return -EOPNOTSUPP;
}

static int stub_post_recv(struct sdp_ep *ep, const struct sdp_sge *sgl,
			  int nsge, uint64_t context)
{
	return -EOPNOTSUPP;
}

static int stub_ioctl(struct sdp_provider *p, uint32_t code, const void *in,
		      size_t inlen, void *out, size_t outlen)
{
	return -EOPNOTSUPP;
}

static const struct sdp_provider_ops stub_ops = {
	.size = sizeof(struct sdp_provider_ops),
	.query_address_list = stub_query_address_list,
	.cleanup = stub_cleanup,
	.cq_create = stub_cq_create,
	.cq_destroy = stub_cq,
	.cq_poll = stub_cq_poll,
	.cq_notify_fd = stub_cq,
	.cq_arm = stub_cq,
	.cq_ack = stub_cq,
	.probe = stub_probe,
	.listen = stub_listen,
	.listener_fd = stub_listener,
	.get_request = stub_get_request,
	.accept = stub_accept,
	.reject = stub_reject,
	.listener_close = stub_listener,
	.connect = stub_connect,
	.ep_query = stub_ep_query,
	.ep_close = stub_ep_close,
	.post_send = stub_post_send,
	.post_recv = stub_post_recv,
	.ioctl = stub_ioctl,
};

/* Takes op from the module's table when it lies within size and is set. */
#define WIDEN(dst, src, n, op)                                                 \
	do {                                                                   \
		if ((n) >= offsetof(struct sdp_provider_ops, op) +             \
				    sizeof((dst)->op) &&                       \
		    (src)->op)                                                 \
			(dst)->op = (src)->op;                                 \
	} while (0)

/*
 * Builds dst from the module's table: copies only min(size, ours) bytes of
 * it (the module's table may be shorter than this header's), and every
 * operation the copy lacks or leaves NULL answers -EOPNOTSUPP.
 */
static void widen_ops(struct sdp_provider_ops *dst,
		      const struct sdp_provider_ops *mod)
{
	struct sdp_provider_ops src;
	size_t n = mod->size;

	if (n > sizeof(src))
		n = sizeof(src);
	memset(&src, 0, sizeof(src));
	memcpy(&src, mod, n);

	*dst = stub_ops;
	WIDEN(dst, &src, n, query_address_list);
	WIDEN(dst, &src, n, cleanup);
	WIDEN(dst, &src, n, cq_create);
	WIDEN(dst, &src, n, cq_destroy);
	WIDEN(dst, &src, n, cq_poll);
	WIDEN(dst, &src, n, cq_notify_fd);
	WIDEN(dst, &src, n, cq_arm);
	WIDEN(dst, &src, n, cq_ack);
	WIDEN(dst, &src, n, probe);
	WIDEN(dst, &src, n, listen);
	WIDEN(dst, &src, n, listener_fd);
	WIDEN(dst, &src, n, get_request);
	WIDEN(dst, &src, n, accept);
	WIDEN(dst, &src, n, reject);
	WIDEN(dst, &src, n, listener_close);
	WIDEN(dst, &src, n, connect);
	WIDEN(dst, &src, n, ep_query);
	WIDEN(dst, &src, n, ep_close);
	WIDEN(dst, &src, n, post_send);
	WIDEN(dst, &src, n, post_recv);
	WIDEN(dst, &src, n, ioctl);
}

/* ---- extension functions ------------------------------------------------- */

typedef void (*generic_fn)(void);

struct ext_desc {
	const char *name;
	struct sdp_guid guid;
	size_t offset; /* in struct sdp_ext */
	int mandatory;
};

static const struct ext_desc ext_table[] = {
	{ "RegisterMemory", SDP_GUID_REGISTER_MEMORY,
	  offsetof(struct sdp_ext, register_memory), 1 },
	{ "DeregisterMemory", SDP_GUID_DEREGISTER_MEMORY,
	  offsetof(struct sdp_ext, deregister_memory), 1 },
	{ "RegisterRdmaMemory", SDP_GUID_REGISTER_RDMA_MEMORY,
	  offsetof(struct sdp_ext, register_rdma_memory), 1 },
	{ "DeregisterRdmaMemory", SDP_GUID_DEREGISTER_RDMA_MEMORY,
	  offsetof(struct sdp_ext, deregister_rdma_memory), 1 },
	{ "RdmaWrite", SDP_GUID_RDMA_WRITE,
	  offsetof(struct sdp_ext, rdma_write), 1 },
	{ "RdmaRead", SDP_GUID_RDMA_READ, offsetof(struct sdp_ext, rdma_read),
	  0 },
	{ "MemoryRegistrationCacheCallback", SDP_GUID_MR_CACHE_CALLBACK,
	  offsetof(struct sdp_ext, mr_cache_callback), 0 },
};

/* The caller's error buffer; messages name the module and its file. */
struct errbuf {
	char *buf;
	size_t len;
};

/* snprintf that may truncate: status and error texts are bounded. */
static void __attribute__((format(printf, 3, 4)))
fmt_into(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static void __attribute__((format(printf, 3, 4)))
say(struct errbuf *e, const struct sdp_module *m, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!e->buf || !e->len)
		return;
	n = snprintf(e->buf, e->len, "provider '%s' (%s): ", m->name, m->path);
	if (n < 0 || (size_t)n >= e->len)
		return;
	va_start(ap, fmt);
	vsnprintf(e->buf + n, e->len - n, fmt, ap);
	va_end(ap);
}

/*
 * Fetches the seven extension functions through ioctl. A missing mandatory
 * one refuses the module; an optional one answering -EOPNOTSUPP stays NULL.
 */
static int fetch_extensions(struct sdp_module *m, struct errbuf *e)
{
	char gs[37];
	size_t i;

	for (i = 0; i < sizeof(ext_table) / sizeof(ext_table[0]); i++) {
		const struct ext_desc *d = &ext_table[i];
		struct sdp_guid guid = d->guid;
		generic_fn fn = NULL;
		int rc;

		rc = m->ops.ioctl(m->prov,
				  SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER,
				  &guid, sizeof(guid), &fn, sizeof(fn));
		if (rc == 0 && fn) {
			memcpy((char *)&m->ext + d->offset, &fn, sizeof(fn));
			continue;
		}
		sdp_guid_format(&d->guid, gs);
		if (rc == 0 || rc == -EOPNOTSUPP) {
			if (!d->mandatory)
				continue;
			say(e, m,
			    "lacks the mandatory extension function %s {%s}%s; a provider must answer SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER for all five mandatory GUIDs (docs/provider-spi.md)",
			    d->name, gs,
			    m->ops.ioctl == stub_ioctl ?
				    " (its operations table has no ioctl: table too short or ioctl NULL)" :
				    "");
			return -SDP_ENOEXT;
		}
		say(e, m,
		    "fetching extension function %s {%s} failed: %s; the provider must return 0 or -EOPNOTSUPP for it",
		    d->name, gs, sdp_strerror(rc));
		return rc < 0 ? rc : -EPROTO;
	}
	/* Keep the capability bit honest with what was fetched. */
	if (!m->ext.rdma_read)
		m->info.caps &= ~SDP_CAP_RDMA_READ;
	return 0;
}

/* ---- the provider's log sink --------------------------------------------- */

static int log_threshold(void)
{
	const char *s = getenv("SDP_LOG_LEVEL");
	char *end;
	long v;

	if (!s || !*s)
		return 3; /* errors only: we share the program's stderr */
	v = strtol(s, &end, 10);
	if (*end || v < 0)
		return 3;
	return (int)v;
}

/* While a module starts, its last message up to this level is kept: it is
 * usually the reason for a failure or for "no device". */
#define NOTE_LEVEL 6
static __thread char *startup_note;
static __thread size_t startup_note_len;

static void __attribute__((format(printf, 2, 3)))
provider_log(int level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (startup_note && level <= NOTE_LEVEL)
		snprintf(startup_note, startup_note_len, "%s", line);
	if (level <= log_threshold())
		fprintf(stderr, "sdp-switch: provider: %s\n", line);
}

/* ---- load / unload ------------------------------------------------------- */

static int resolve_path(const char *name, const char *path, char *out,
			size_t outlen)
{
	char file[PATH_MAX];
	int n;

	if (!path || !*path) {
		n = snprintf(file, sizeof(file), "libsdp-%s.so", name);
		if (n < 0 || (size_t)n >= sizeof(file))
			return -ENAMETOOLONG;
		path = file;
	}
	if (strchr(path, '/'))
		n = snprintf(out, outlen, "%s", path);
	else
		n = snprintf(out, outlen, "%s/%s", sdp_provider_dir(), path);
	if (n < 0 || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

static void format_version_range(char *out, size_t len, uint32_t lo,
				 uint32_t hi)
{
	if (lo == hi)
		snprintf(out, len, "%u.%u", SDP_SPI_MAJOR(lo),
			 SDP_SPI_MINOR(lo));
	else
		snprintf(out, len, "%u.%u-%u.%u", SDP_SPI_MAJOR(lo),
			 SDP_SPI_MINOR(lo), SDP_SPI_MAJOR(hi),
			 SDP_SPI_MINOR(hi));
}

static void say_version(struct errbuf *e, const struct sdp_module *m)
{
	char mod[40];

	format_version_range(mod, sizeof(mod), m->info.low_version,
			     m->info.high_version);
	say(e, m,
	    "SPI version mismatch: module speaks %s, switch needs %u.x; rebuild the module against this sdp_provider.h",
	    mod, SDP_SPI_MAJOR(LOADER_VERSION_MAX));
}

int sdp_module_load(const char *name, const char *path, const char *options,
		    struct sdp_module *m, char *err, size_t errlen)
{
	struct errbuf e = { err, errlen };
	struct sdp_startup_args args;
	sdp_provider_startup_fn startup;
	struct sdp_provider *prov = NULL;
	char note[200] = "";
	const char *dle;
	void *sym;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	memset(m, 0, sizeof(*m));
	m->ops = stub_ops;
	if (!name || !*name)
		name = "?";
	snprintf(m->name, sizeof(m->name), "%s", name);

	rc = resolve_path(name, path, m->path, sizeof(m->path));
	if (rc) {
		snprintf(m->path, sizeof(m->path), "%s", path ? path : "");
		say(&e, m, "module path too long (at most %d bytes)",
		    PATH_MAX - 1);
		return rc;
	}
	if (access(m->path, R_OK) != 0) {
		rc = -errno;
		say(&e, m,
		    "cannot read the module file: %s; build it, fix the path in the catalog, or set SDP_PROVIDER_DIR",
		    sdp_strerror(rc));
		return rc;
	}

	dlerror();
	m->dl = dlopen(m->path, RTLD_NOW | RTLD_LOCAL);
	if (!m->dl) {
		dle = dlerror();
		say(&e, m, "dlopen failed: %s", dle ? dle : "unknown reason");
		return -ENOEXEC;
	}

	dlerror();
	sym = dlsym(m->dl, SDP_PROVIDER_ENTRY_NAME);
	if (!sym) {
		say(&e, m,
		    "exports no entry point '%s'; this is not an sdp-switch provider module, or it was linked without provider/provider.map",
		    SDP_PROVIDER_ENTRY_NAME);
		rc = -SDP_ENOENTRY;
		goto out_dlclose;
	}
	/* POSIX guarantees that a dlsym result converts to a function. */
	*(void **)&startup = sym;

	memset(&args, 0, sizeof(args));
	args.size = sizeof(args);
	args.version_min = LOADER_VERSION_MIN;
	args.version_max = LOADER_VERSION_MAX;
	args.options = options && *options ? options : NULL;
	args.log = provider_log;
	m->info.size = sizeof(m->info);

	startup_note = note;
	startup_note_len = sizeof(note);
	rc = startup(&args, &m->info, &prov);
	startup_note = NULL;
	m->info.size = sizeof(m->info);
	m->info.name[sizeof(m->info.name) - 1] = '\0';
	m->info.description[sizeof(m->info.description) - 1] = '\0';
	if (rc == -SDP_EVERSION) {
		say_version(&e, m);
		goto out_dlclose;
	}
	if (rc == -SDP_ENODEVICE) {
		const char *why = note[0] ? note : m->info.description;

		m->status = -SDP_ENODEVICE;
		fmt_into(m->status_msg, sizeof(m->status_msg),
			 "provider '%s' (%s): no device to use%s%s; its connections stay on TCP",
			 m->name, m->path, why[0] ? ": " : "", why);
		return 0;
	}
	if (rc != 0) {
		say(&e, m, "startup failed: %s%s%s%s", sdp_strerror(rc),
		    note[0] ? " (module says: " : "", note, note[0] ? ")" : "");
		if (rc > 0)
			rc = -EPROTO;
		goto out_dlclose;
	}
	if (!prov || !prov->ops) {
		say(&e, m,
		    "startup returned 0 but no provider object or operations table; the module is broken");
		rc = -EPROTO;
		goto out_dlclose;
	}
	m->prov = prov;
	if (m->info.version < LOADER_VERSION_MIN ||
	    m->info.version > LOADER_VERSION_MAX) {
		char chosen[40], asked[40];

		format_version_range(chosen, sizeof(chosen), m->info.version,
				     m->info.version);
		format_version_range(asked, sizeof(asked), LOADER_VERSION_MIN,
				     LOADER_VERSION_MAX);
		say(&e, m,
		    "SPI version negotiation broken: the module chose %s, outside the %s the switch asked for; fix the module's startup",
		    chosen, asked);
		rc = -SDP_EVERSION;
		goto out_cleanup;
	}
	if (prov->ops->size < sizeof(size_t)) {
		say(&e, m,
		    "operations table has size %zu; set .size = sizeof(struct sdp_provider_ops)",
		    prov->ops->size);
		rc = -EPROTO;
		goto out_cleanup;
	}
	widen_ops(&m->ops, prov->ops);
	rc = fetch_extensions(m, &e);
	if (rc)
		goto out_cleanup;
	if (!m->info.name[0])
		snprintf(m->info.name, sizeof(m->info.name), "%s", m->name);
	return 0;

out_cleanup:
	/* Through the module's own table: m->ops may not be widened yet. */
	if (prov->ops->size >= offsetof(struct sdp_provider_ops, cleanup) +
				       sizeof(prov->ops->cleanup) &&
	    prov->ops->cleanup)
		prov->ops->cleanup(prov);
	m->prov = NULL;
out_dlclose:
	dlclose(m->dl);
	m->dl = NULL;
	/* Nothing may point into the unloaded module. */
	memset(&m->ext, 0, sizeof(m->ext));
	m->ops = stub_ops;
	return rc;
}

void sdp_module_unload(struct sdp_module *m)
{
	if (m->prov) {
		m->ops.cleanup(m->prov);
		m->prov = NULL;
	}
	if (m->dl) {
		dlclose(m->dl);
		m->dl = NULL;
	}
	memset(&m->ext, 0, sizeof(m->ext));
	m->ops = stub_ops;
}

/* ---- the provider directory ---------------------------------------------- */

static char provider_dir[PATH_MAX];
static pthread_once_t provider_dir_once = PTHREAD_ONCE_INIT;

struct find_obj {
	uintptr_t addr;
	char path[PATH_MAX];
	int found;
};

/* dl_iterate_phdr callback: the object whose PT_LOAD covers addr. The main
 * program comes with an empty name; /proc/self/exe names it. */
static int find_obj_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_obj *f = data;
	int i;

	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD)
			continue;
		if (f->addr < lo || f->addr >= lo + ph->p_memsz)
			continue;
		if (info->dlpi_name && info->dlpi_name[0]) {
			if (!realpath(info->dlpi_name, f->path))
				return 1;
		} else {
			ssize_t n = readlink("/proc/self/exe", f->path,
					     sizeof(f->path) - 1);

			if (n <= 0)
				return 1;
			f->path[n] = '\0';
		}
		f->found = 1;
		return 1;
	}
	return 0;
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void provider_dir_init(void)
{
	static const char *const rel[] = { "sdp", "../lib/sdp" };
	struct find_obj f = { .addr = (uintptr_t)provider_dir_init };
	char cand[PATH_MAX];
	char *slash;
	size_t i;

	snprintf(provider_dir, sizeof(provider_dir), "%s",
		 SDP_PROVIDER_DIR_DEFAULT);
	dl_iterate_phdr(find_obj_cb, &f);
	if (!f.found)
		return;
	slash = strrchr(f.path, '/');
	if (!slash)
		return;
	*slash = '\0';
	for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		int n = snprintf(cand, sizeof(cand), "%s/%s", f.path, rel[i]);

		if (n < 0 || (size_t)n >= sizeof(cand) || !is_dir(cand))
			continue;
		if (!realpath(cand, provider_dir))
			snprintf(provider_dir, sizeof(provider_dir), "%s",
				 cand);
		return;
	}
}

const char *sdp_provider_dir(void)
{
	const char *env = getenv("SDP_PROVIDER_DIR");

	if (env && *env)
		return env;
	pthread_once(&provider_dir_once, provider_dir_init);
	return provider_dir;
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cases_load.c - conformance cases for loading: the entry point's version
 * negotiation and info fields, the extension functions fetched by GUID, and
 * the address list.
 */
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

static int str_sane(const char *s, size_t room)
{
	return memchr(s, 0, room) && s[0];
}

int case_load_version(void)
{
	struct sdp_startup_args args = { .size = sizeof(args) };
	struct sdp_provider_info info;
	struct sdp_provider *prov = NULL;
	sdp_provider_startup_fn entry;
	struct sdp_module m;
	uint32_t v;
	int rc;

	TRY(conf_load(&m));
	v = m.info.version;
	CHECK(m.info.size > offsetof(struct sdp_provider_info, version),
	      "info.size %zu too small to hold the version", m.info.size);
	CHECK(SDP_SPI_MAJOR(v) == SDP_SPI_MAJOR(SDP_SPI_VERSION) &&
	      v <= SDP_SPI_VERSION, "chosen version %u.%u outside 1.0-%u.%u",
	      SDP_SPI_MAJOR(v), SDP_SPI_MINOR(v),
	      SDP_SPI_MAJOR(SDP_SPI_VERSION), SDP_SPI_MINOR(SDP_SPI_VERSION));
	CHECK(m.info.low_version <= v && v <= m.info.high_version,
	      "chosen version %#x outside the module's own range %#x-%#x", v,
	      m.info.low_version, m.info.high_version);
	CHECK(str_sane(m.info.name, sizeof(m.info.name)),
	      "info.name empty or not NUL-terminated");
	CHECK(str_sane(m.info.description, sizeof(m.info.description)),
	      "info.description empty or not NUL-terminated");
	CHECK(!!(m.info.caps & SDP_CAP_RDMA_READ) == !!m.ext.rdma_read,
	      "caps %s SDP_CAP_RDMA_READ but RdmaRead is %s",
	      m.info.caps & SDP_CAP_RDMA_READ ? "has" : "lacks",
	      m.ext.rdma_read ? "offered" : "not supported");
	CHECK(m.prov->ops == NULL || m.prov->ops->size >=
	      offsetof(struct sdp_provider_ops, query_address_list) +
	      sizeof(void *), "module ops table size %zu holds no operation",
	      m.prov->ops ? m.prov->ops->size : 0);

	/* Ask the entry point directly for a major version it cannot speak. */
	entry = (sdp_provider_startup_fn)dlsym(m.dl, SDP_PROVIDER_ENTRY_NAME);
	CHECK(entry, "dlsym(%s) failed on a loaded module",
	      SDP_PROVIDER_ENTRY_NAME);
	args.version_min = SDP_SPI_MKVER(2, 0);
	args.version_max = SDP_SPI_MKVER(2, 5);
	args.options = conf_options;
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	rc = entry(&args, &info, &prov);
	CHECK(rc == -SDP_EVERSION, "startup asked for SPI 2.0-2.5 answered %s,"
	      " expected -SDP_EVERSION", conf_err(rc));
	CHECK(prov == NULL, "startup refused the version but returned a "
	      "provider object");
	CHECK(info.low_version <= info.high_version && info.high_version &&
	      SDP_SPI_MAJOR(info.low_version) <= 1 &&
	      SDP_SPI_MAJOR(info.high_version) >= 1,
	      "refused startup filled range %#x-%#x, which should include 1.0",
	      info.low_version, info.high_version);

	/* And for the range the loader uses: a second, independent instance. */
	args.version_min = SDP_SPI_MKVER(1, 0);
	args.version_max = SDP_SPI_VERSION;
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	rc = entry(&args, &info, &prov);
	CHECK(rc == 0 && prov && prov->ops, "second startup with 1.0-%#x "
	      "answered %s", SDP_SPI_VERSION, conf_err(rc));
	CHECK(info.version >= args.version_min &&
	      info.version <= args.version_max,
	      "second startup chose %#x outside the asked range", info.version);
	CHECK(prov->ops->cleanup, "module ops table has no cleanup");
	prov->ops->cleanup(prov);
	sdp_module_unload(&m);
	return 0;
}

static const struct {
	const char *name;
	struct sdp_guid guid;
	int mandatory;
	size_t off;
} ext_guids[] = {
	{ "RegisterMemory", SDP_GUID_REGISTER_MEMORY, 1,
	  offsetof(struct sdp_ext, register_memory) },
	{ "DeregisterMemory", SDP_GUID_DEREGISTER_MEMORY, 1,
	  offsetof(struct sdp_ext, deregister_memory) },
	{ "RegisterRdmaMemory", SDP_GUID_REGISTER_RDMA_MEMORY, 1,
	  offsetof(struct sdp_ext, register_rdma_memory) },
	{ "DeregisterRdmaMemory", SDP_GUID_DEREGISTER_RDMA_MEMORY, 1,
	  offsetof(struct sdp_ext, deregister_rdma_memory) },
	{ "RdmaWrite", SDP_GUID_RDMA_WRITE, 1,
	  offsetof(struct sdp_ext, rdma_write) },
	{ "RdmaRead", SDP_GUID_RDMA_READ, 0,
	  offsetof(struct sdp_ext, rdma_read) },
	{ "MemoryRegistrationCacheCallback", SDP_GUID_MR_CACHE_CALLBACK, 0,
	  offsetof(struct sdp_ext, mr_cache_callback) },
};

int case_extensions(void)
{
	struct sdp_guid unknown = { 0x01234567, 0x89ab, 0xcdef,
				    { 1, 2, 3, 4, 5, 6, 7, 8 } };
	struct sdp_module m;
	struct sdp_mr *mr;
	void (*fn)(void);
	void *loaded;
	size_t i;
	char *buf;
	int rc;

	TRY(conf_load(&m));
	for (i = 0; i < sizeof(ext_guids) / sizeof(ext_guids[0]); i++) {
		fn = NULL;
		rc = m.ops.ioctl(m.prov,
				 SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER,
				 &ext_guids[i].guid, sizeof(struct sdp_guid),
				 &fn, sizeof(fn));
		memcpy(&loaded, (char *)&m.ext + ext_guids[i].off,
		       sizeof(loaded));
		if (ext_guids[i].mandatory)
			CHECK(rc == 0 && fn, "mandatory %s: ioctl answered %s",
			      ext_guids[i].name, conf_err(rc));
		else
			CHECK((rc == 0 && fn) || rc == -EOPNOTSUPP,
			      "optional %s: ioctl answered %s (function %s); "
			      "expected 0 with a function or -EOPNOTSUPP",
			      ext_guids[i].name, conf_err(rc),
			      fn ? "set" : "NULL");
		CHECK((rc == 0) == (loaded != NULL),
		      "%s: ioctl now answers %s but the loader saw it %s",
		      ext_guids[i].name, conf_err(rc),
		      loaded ? "present" : "absent");
		/* Two fetches agree: a function pointer, not a fresh stub. */
		CHECK(!loaded || (void *)fn == loaded,
		      "%s: ioctl returned %p, the loader fetched %p",
		      ext_guids[i].name, (void *)fn, loaded);
	}
	fn = NULL;
	rc = m.ops.ioctl(m.prov, SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER,
			 &unknown, sizeof(unknown), &fn, sizeof(fn));
	CHECK(rc == -EOPNOTSUPP, "unknown GUID answered %s, expected "
	      "-EOPNOTSUPP", conf_err(rc));
	rc = m.ops.ioctl(m.prov, SDP_IOCTL_GET_EXTENSION_FUNCTION_POINTER,
			 &ext_guids[0].guid, sizeof(struct sdp_guid), &fn, 2);
	CHECK(rc < 0, "GUID ioctl with a 2-byte output buffer answered %s, "
	      "expected an error", conf_err(rc));
	rc = m.ops.ioctl(m.prov, 0x53440fffu, NULL, 0, NULL, 0);
	CHECK(rc < 0, "unknown ioctl code answered %s, expected an error",
	      conf_err(rc));

	/* The optional cache callback, when offered, works on live memory. */
	if (m.ext.mr_cache_callback) {
		buf = malloc(65536);
		CHECK(buf, "out of memory");
		rc = m.ext.register_memory(m.prov, buf, 65536,
					   SDP_ACCESS_LOCAL_WRITE, &mr);
		CHECK(rc == 0, "RegisterMemory(64 KiB): %s", conf_err(rc));
		rc = m.ext.mr_cache_callback(m.prov, buf, 65536);
		CHECK(rc == 0, "MemoryRegistrationCacheCallback on a "
		      "registered range answered %s", conf_err(rc));
		rc = m.ext.deregister_memory(m.prov, mr);
		CHECK(rc == 0, "DeregisterMemory after the cache callback: %s",
		      conf_err(rc));
		rc = m.ext.mr_cache_callback(m.prov, buf, 65536);
		CHECK(rc == 0, "MemoryRegistrationCacheCallback on an "
		      "unregistered range answered %s", conf_err(rc));
		TRY(conf_reg_free(&m, buf, 65536));
	}
	sdp_module_unload(&m);
	return 0;
}

int case_addresses(void)
{
	struct sockaddr_storage *addrs;
	struct sdp_module m;
	size_t count = 0, need, i;
	int rc;

	TRY(conf_load(&m));
	rc = m.ops.query_address_list(m.prov, NULL, &count);
	CHECK(rc == -ENOBUFS || (rc == 0 && count == 0),
	      "query_address_list with no room answered %s (count %zu), "
	      "expected -ENOBUFS with the count needed", conf_err(rc), count);
	CHECK(count > 0, "the provider reports no address at all");
	need = count;
	addrs = calloc(need, sizeof(*addrs));
	CHECK(addrs, "out of memory");
	rc = m.ops.query_address_list(m.prov, addrs, &count);
	CHECK(rc == 0, "query_address_list with room for %zu answered %s",
	      need, conf_err(rc));
	CHECK(count <= need && count > 0, "query_address_list filled %zu of "
	      "room %zu", count, need);
	for (i = 0; i < count; i++)
		CHECK(addrs[i].ss_family == AF_INET ||
		      addrs[i].ss_family == AF_INET6,
		      "address %zu has family %u, not IPv4/IPv6", i,
		      addrs[i].ss_family);
	free(addrs);
	sdp_module_unload(&m);
	return 0;
}

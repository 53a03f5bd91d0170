/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sdp_loader.h - finding and loading provider modules: the catalog (config
 * file + environment), dlopen, version negotiation, and fetching the SAN
 * extension functions by GUID. Used by the switch and the conformance suite.
 */
#ifndef SDP_LOADER_H
#define SDP_LOADER_H

#include <limits.h>
#include "sdp_provider.h"

/* The extension functions of one module, fetched by GUID at load time.
 * rdma_read and mr_cache_callback are NULL when the module answered
 * -EOPNOTSUPP for them. */
struct sdp_ext {
	sdp_register_memory_fn register_memory;
	sdp_deregister_memory_fn deregister_memory;
	sdp_register_rdma_memory_fn register_rdma_memory;
	sdp_deregister_rdma_memory_fn deregister_rdma_memory;
	sdp_rdma_write_fn rdma_write;
	sdp_rdma_read_fn rdma_read;
	sdp_mr_cache_callback_fn mr_cache_callback;
};

/* One loaded module. */
struct sdp_module {
	char name[32];
	char path[PATH_MAX];
	void *dl;			/* dlopen handle */
	struct sdp_provider *prov;	/* NULL when status != 0 */
	/* The module's operations table, widened to this header's size: every
	 * operation the module lacks answers -EOPNOTSUPP. Call through this. */
	struct sdp_provider_ops ops;
	struct sdp_provider_info info;
	struct sdp_ext ext;
	/* 0 = usable; -SDP_ENODEVICE = loaded, reported no device (the
	 * switch falls back to TCP with that reason). */
	int status;
	char status_msg[256];
};

/* One catalog entry: a provider name, its module file, its options. */
struct sdp_catalog_entry {
	char name[32];
	char path[PATH_MAX];
	char options[256];
};

#define SDP_CATALOG_MAX 16

/*
 * Loads the module at path (a file name without '/' is looked up in the
 * provider directory, see sdp_provider_dir()), negotiates the SPI version
 * and fetches the extension functions. On failure returns < 0 and writes
 * into err a message naming the file and the reason (missing file, no entry
 * point, another SPI version, missing mandatory extension, startup error).
 * A module that loads but finds no device returns 0 with m->status set.
 */
int sdp_module_load(const char *name, const char *path, const char *options,
		    struct sdp_module *m, char *err, size_t errlen);
void sdp_module_unload(struct sdp_module *m);

/*
 * The catalog. Built from, in order:
 *   $SDP_PROVIDER_CATALOG (a file) or /etc/sdp-switch/providers.conf,
 *     lines "name path [options...]", '#' comments;
 *   built-in entries for "shm" and "verbs" (libsdp-<name>.so in the
 *     provider directory) when the file does not name them;
 * then $SDP_PROVIDERS ("shm,verbs") selects and orders the entries used.
 * Returns the number of entries (>= 0) or < 0 with err naming the file,
 * the line and the problem.
 */
int sdp_catalog_read(struct sdp_catalog_entry *ents, int max, char *err,
		     size_t errlen);

/* Parses one catalog file; exposed for tests. Same return as above. */
int sdp_catalog_parse_file(const char *file, struct sdp_catalog_entry *ents,
			   int max, char *err, size_t errlen);

/* Directory holding provider modules: $SDP_PROVIDER_DIR, else the "sdp"
 * directory beside the library or program that contains this code, else the
 * build-time default. */
const char *sdp_provider_dir(void);

/* Text for an error code from this project or errno (negative or positive). */
const char *sdp_strerror(int err);

/* GUID helpers. */
int sdp_guid_equal(const struct sdp_guid *a, const struct sdp_guid *b);
void sdp_guid_format(const struct sdp_guid *g, char out[37]);

#endif /* SDP_LOADER_H */

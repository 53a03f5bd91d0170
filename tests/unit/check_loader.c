// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * check_loader.c - unit tests of the provider loader (provider/loader.c),
 * the catalog (provider/catalog.c) and the error helpers (errors.c), using
 * the test modules built from tests/unit/modules/testprov.c.
 */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdp_loader.h"
#include "unit.h"

static char moddir[PATH_MAX];
static char errbuf[1024];

/* $(O)/tests/modules, beside this program. */
static void find_moddir(void)
{
	ssize_t n = readlink("/proc/self/exe", moddir, sizeof(moddir) - 1);
	char *slash;

	ck_assert_int_gt(n, 0);
	moddir[n] = '\0';
	slash = strrchr(moddir, '/');
	ck_assert_ptr_nonnull(slash);
	strcpy(slash, "/modules");
}

static const char *mod(const char *variant)
{
	static char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/tp-%s.so", moddir, variant);
	return path;
}

/* Writes text into a new temporary file and returns its name. */
static const char *tmpfile_with(const char *text)
{
	static char name[64];
	int fd;

	snprintf(name, sizeof(name), "/tmp/sdp-unit-XXXXXX");
	fd = mkstemp(name);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return name;
}

static void read_file(const char *name, char *buf, size_t len)
{
	FILE *f = fopen(name, "r");
	size_t n;

	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void setup(void)
{
	find_moddir();
	unsetenv("SDP_PROVIDER_DIR");
	unsetenv("SDP_PROVIDER_CATALOG");
	unsetenv("SDP_PROVIDERS");
	unsetenv("SDP_LOG_LEVEL");
	errbuf[0] = '\0';
}

/* ---- loading ------------------------------------------------------------- */

/* A module file that does not exist is refused with -ENOENT and a message
 * naming the file and what to do. */
START_TEST(load_missing_file)
{
	struct sdp_module m;
	char path[PATH_MAX + 32];
	int rc;

	snprintf(path, sizeof(path), "%s/tp-absent.so", moddir);
	rc = sdp_module_load("absent", path, NULL, &m, errbuf, sizeof(errbuf));
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_ptr_null(m.dl);
	ck_assert_ptr_nonnull(strstr(errbuf, "provider 'absent' ("));
	ck_assert_ptr_nonnull(strstr(errbuf, path));
	ck_assert_ptr_nonnull(strstr(errbuf, "No such file"));
	ck_assert_ptr_nonnull(strstr(errbuf, "SDP_PROVIDER_DIR"));
}
END_TEST

/* A file that is not a shared object is refused with dlopen's reason. */
START_TEST(load_not_an_object)
{
	const char *f = tmpfile_with("this is not an ELF file\n");
	struct sdp_module m;
	int rc;

	rc = sdp_module_load("text", f, NULL, &m, errbuf, sizeof(errbuf));
	ck_assert_int_eq(rc, -ENOEXEC);
	ck_assert_ptr_nonnull(strstr(errbuf, f));
	ck_assert_ptr_nonnull(strstr(errbuf, "dlopen failed: "));
	ck_assert_ptr_null(m.dl);
	unlink(f);
}
END_TEST

/* A shared object that does not export the entry point is refused with
 * -SDP_ENOENTRY, naming the symbol it lacks. */
START_TEST(load_no_entry_point)
{
	struct sdp_module m;
	int rc;

	rc = sdp_module_load("noentry", mod("noentry"), NULL, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_int_eq(rc, -SDP_ENOENTRY);
	ck_assert_ptr_null(m.dl);
	ck_assert_ptr_nonnull(strstr(errbuf, mod("noentry")));
	ck_assert_ptr_nonnull(strstr(errbuf, "'sdp_provider_startup'"));
}
END_TEST

/* A module that speaks only SPI 2.x is refused with -SDP_EVERSION and a
 * message giving both version ranges and the remedy. */
START_TEST(load_spi2_module)
{
	struct sdp_module m;
	char want[2 * PATH_MAX];
	int rc;

	rc = sdp_module_load("spi2", mod("spi2"), NULL, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_int_eq(rc, -SDP_EVERSION);
	snprintf(want, sizeof(want),
		 "provider 'spi2' (%s): SPI version mismatch: module speaks 2.0-2.3, switch needs 1.x; rebuild the module against this sdp_provider.h",
		 mod("spi2"));
	ck_assert_str_eq(errbuf, want);
	ck_assert_ptr_null(m.dl);
}
END_TEST

/* A module that starts but chooses a version outside what was asked is
 * refused, and its provider is cleaned up before the unload. */
START_TEST(load_chosen_version_out_of_range)
{
	const char *mark = tmpfile_with("");
	struct sdp_module m;
	char opts[128], got[64];
	int rc;

	snprintf(opts, sizeof(opts), "version=1.7 mark=%s", mark);
	rc = sdp_module_load("good", mod("good"), opts, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_int_eq(rc, -SDP_EVERSION);
	ck_assert_ptr_nonnull(strstr(
		errbuf,
		"the module chose 1.7, outside the 1.0-1.1 the switch asked for"));
	ck_assert_ptr_null(m.prov);
	read_file(mark, got, sizeof(got));
	ck_assert_str_eq(got, "cleanup");
	unlink(mark);
}
END_TEST

/* A startup error is passed back, with what the module logged about it. */
START_TEST(load_startup_error)
{
	struct sdp_module m;
	int rc;

	setenv("SDP_LOG_LEVEL", "2", 1); /* keep the test's output quiet */
	rc = sdp_module_load("good", mod("good"), "fail=5", &m, errbuf,
			     sizeof(errbuf));
	ck_assert_int_eq(rc, -EIO);
	ck_assert_ptr_nonnull(strstr(
		errbuf,
		"startup failed: Input/output error (module says: tp: failing as the options ask)"));
}
END_TEST

/* A module lacking a mandatory extension (RdmaWrite) is refused with
 * -SDP_ENOEXT, naming the function and its GUID. */
START_TEST(load_missing_mandatory_ext)
{
	struct sdp_module m;
	int rc;

	rc = sdp_module_load("nomand", mod("nomand"), NULL, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_int_eq(rc, -SDP_ENOEXT);
	ck_assert_ptr_nonnull(strstr(errbuf, mod("nomand")));
	ck_assert_ptr_nonnull(strstr(errbuf, "RdmaWrite "));
	ck_assert_ptr_nonnull(
		strstr(errbuf, "{f95add60-8a3b-4de9-9f04-7d7355bc384d}"));
	ck_assert_ptr_null(m.dl);
	/* The four fetched before the failure do not survive the unload. */
	ck_assert_ptr_null(m.ext.register_memory);
	ck_assert_ptr_null(m.ext.deregister_rdma_memory);
	ck_assert_int_eq(m.ops.ioctl(NULL, 0, NULL, 0, NULL, 0), -EOPNOTSUPP);
}
END_TEST

/* Optional extensions answering -EOPNOTSUPP still load: RdmaRead and the
 * cache callback are NULL, the mandatory five are there, and the RdmaRead
 * capability bit is cleared to match. */
START_TEST(load_optional_ext_unsupported)
{
	struct sdp_module m;
	int rc;

	rc = sdp_module_load("noopt", mod("noopt"), NULL, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_msg(rc == 0, "load failed: %s", errbuf);
	ck_assert_int_eq(m.status, 0);
	ck_assert_ptr_null(m.ext.rdma_read);
	ck_assert_ptr_null(m.ext.mr_cache_callback);
	ck_assert_ptr_nonnull(m.ext.register_memory);
	ck_assert_ptr_nonnull(m.ext.deregister_memory);
	ck_assert_ptr_nonnull(m.ext.register_rdma_memory);
	ck_assert_ptr_nonnull(m.ext.deregister_rdma_memory);
	ck_assert_ptr_nonnull(m.ext.rdma_write);
	ck_assert_uint_eq(m.info.caps & SDP_CAP_RDMA_READ, 0);
	sdp_module_unload(&m);
	ck_assert_ptr_null(m.dl);
}
END_TEST

/* A complete module loads: the module's own operations and all seven
 * extensions are reached through m, its NULL operations answer
 * -EOPNOTSUPP, and unload runs its cleanup. */
START_TEST(load_good_module)
{
	const char *mark = tmpfile_with("");
	struct sockaddr_storage addrs[2];
	const struct sockaddr_in *sin;
	struct sdp_completion c;
	struct sdp_module m;
	struct sdp_mr *mr = NULL;
	struct sdp_cq *cq = NULL;
	char opts[128], got[64], buf[64];
	size_t count = 2;
	int rc;

	snprintf(opts, sizeof(opts), "mark=%s", mark);
	rc = sdp_module_load("good", mod("good"), opts, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_msg(rc == 0, "load failed: %s", errbuf);
	ck_assert_int_eq(m.status, 0);
	ck_assert_str_eq(m.name, "good");
	ck_assert_str_eq(m.path, mod("good"));
	ck_assert_str_eq(m.info.name, "tp");
	ck_assert_uint_eq(m.info.version, SDP_SPI_MKVER(1, 0));
	ck_assert_uint_eq(m.ops.size, sizeof(struct sdp_provider_ops));
	ck_assert_ptr_nonnull(m.ext.rdma_read);
	ck_assert_ptr_nonnull(m.ext.mr_cache_callback);
	ck_assert_uint_ne(m.info.caps & SDP_CAP_RDMA_READ, 0);

	/* The module's own operations answer. */
	ck_assert_int_eq(m.ops.query_address_list(m.prov, addrs, &count), 0);
	ck_assert_uint_eq(count, 1);
	sin = (const struct sockaddr_in *)&addrs[0];
	ck_assert_int_eq(sin->sin_family, AF_INET);
	ck_assert_uint_eq(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);
	ck_assert_int_eq(m.ops.cq_create(m.prov, 8, &cq), 0);
	ck_assert_int_ge(m.ops.cq_notify_fd(cq), 0);
	ck_assert_int_eq(m.ops.cq_poll(cq, &c, 1), 0);
	ck_assert_int_eq(m.ops.cq_destroy(cq), 0);
	ck_assert_int_eq(m.ext.register_memory(m.prov, buf, sizeof(buf),
					       SDP_ACCESS_LOCAL_WRITE, &mr),
			 0);
	ck_assert_ptr_nonnull(mr);
	ck_assert_int_eq(m.ext.deregister_memory(m.prov, mr), 0);
	ck_assert_int_eq(m.ext.rdma_write(NULL, NULL, 0, NULL, 0, 0, 0),
			 -ENOTCONN);

	/* The operations it left NULL: one stub per signature. */
	ck_assert_int_eq(m.ops.probe(m.prov, NULL, 0), -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.listen(m.prov, NULL, 0, 1, NULL), -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.listener_fd(NULL), -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.get_request(NULL, NULL, NULL, NULL),
			 -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.accept(NULL, NULL, NULL, 0, NULL, NULL),
			 -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.reject(NULL), -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.listener_close(NULL), -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.connect(m.prov, NULL, NULL, 0, NULL, 0, NULL,
				       NULL),
			 -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.ep_query(NULL, NULL), -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.ep_close(NULL), -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.post_send(NULL, NULL, 0, 0, 0), -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.post_recv(NULL, NULL, 0, 0), -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.ioctl(m.prov, 0x1234, NULL, 0, NULL, 0),
			 -EOPNOTSUPP);

	read_file(mark, got, sizeof(got));
	ck_assert_str_eq(got, "");
	sdp_module_unload(&m);
	ck_assert_ptr_null(m.dl);
	ck_assert_ptr_null(m.prov);
	read_file(mark, got, sizeof(got));
	ck_assert_str_eq(got, "cleanup");
	unlink(mark);
}
END_TEST

/*
 * A table shorter than ours is read only up to its size (the byte after it
 * is an unreadable page, so reading further would crash this test); ioctl
 * comes first, so the module still hands out its extensions and loads, and
 * every operation beyond its table answers -EOPNOTSUPP.
 */
START_TEST(load_short_ops_table)
{
	struct sdp_module m;
	int rc;

	rc = sdp_module_load("shortops", mod("shortops"), NULL, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_msg(rc == 0, "short table refused: %s", errbuf);
	ck_assert_ptr_nonnull(m.ext.register_memory);
	ck_assert_int_eq(m.ops.probe(m.prov, NULL, 0), -EOPNOTSUPP);
	ck_assert_int_eq(m.ops.post_send(NULL, NULL, 0, 0, 0), -EOPNOTSUPP);
	sdp_module_unload(&m);
}
END_TEST

/* Without the switch's sink, the module's messages reach stderr through
 * args->log, filtered by $SDP_LOG (the test module logs its start at
 * level 7); with a sink set, every line goes to the sink instead. */
static char sink_got[256];
static int sink_level;

static void test_sink(int level, const char *line)
{
	sink_level = level;
	snprintf(sink_got, sizeof(sink_got), "%s", line);
}

START_TEST(load_log_sink)
{
	const char *f = tmpfile_with("");
	struct sdp_module m;
	char got[256];
	int rc;

	ck_assert_ptr_nonnull(freopen(f, "w", stderr));
	setenv("SDP_LOG", "info", 1);
	rc = sdp_module_load("good", mod("good"), NULL, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_int_eq(rc, 0);
	sdp_module_unload(&m);
	setenv("SDP_LOG", "7", 1);
	rc = sdp_module_load("good", mod("good"), NULL, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_int_eq(rc, 0);
	sdp_module_unload(&m);
	sdp_loader_set_log(test_sink);
	rc = sdp_module_load("good", mod("good"), NULL, &m, errbuf,
			     sizeof(errbuf));
	sdp_loader_set_log(NULL);
	unsetenv("SDP_LOG");
	ck_assert_int_eq(rc, 0);
	sdp_module_unload(&m);
	fflush(stderr);
	read_file(f, got, sizeof(got));
	ck_assert_str_eq(got, "sdp-switch: provider: tp: started, SPI 1.0\n");
	ck_assert_str_eq(sink_got, "tp: started, SPI 1.0");
	ck_assert_int_eq(sink_level, 7);
	unlink(f);
}
END_TEST

/* SDP_LOG's words and digits, as the switch and the loader read them. */
START_TEST(log_level_words)
{
	ck_assert_int_eq(sdp_log_level_parse("off"), 0);
	ck_assert_int_eq(sdp_log_level_parse("error"), 3);
	ck_assert_int_eq(sdp_log_level_parse("WARN"), 4);
	ck_assert_int_eq(sdp_log_level_parse("debug"), 7);
	ck_assert_int_eq(sdp_log_level_parse("5"), 5);
	ck_assert_int_eq(sdp_log_level_parse("9"), -1);
	ck_assert_int_eq(sdp_log_level_parse("verbose"), -1);
	ck_assert_int_eq(sdp_log_level_parse(""), -1);
}
END_TEST

/* A module that reports -SDP_ENODEVICE loads (0) with that status and an
 * explanation (its description, or better its last message while starting);
 * every operation on it answers -EOPNOTSUPP. */
START_TEST(load_no_device)
{
	struct sdp_module m;
	size_t count = 1;
	int rc;

	rc = sdp_module_load("nodev", mod("nodev"), NULL, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_msg(rc == 0, "load failed: %s", errbuf);
	ck_assert_int_eq(m.status, -SDP_ENODEVICE);
	ck_assert_ptr_null(m.prov);
	ck_assert_ptr_nonnull(m.dl);
	ck_assert_ptr_nonnull(strstr(m.status_msg, "provider 'nodev' ("));
	ck_assert_ptr_nonnull(strstr(
		m.status_msg,
		"no device to use: test provider: no adapter present; its connections stay on TCP"));
	ck_assert_int_eq(m.ops.query_address_list(m.prov, NULL, &count),
			 -EOPNOTSUPP);
	sdp_module_unload(&m);
	ck_assert_ptr_null(m.dl);

	/* What the module logged while starting is the better reason. */
	rc = sdp_module_load("nodev", mod("nodev"), "say=unplugged", &m, errbuf,
			     sizeof(errbuf));
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(
		strstr(m.status_msg, "no device to use: tp: unplugged;"));
	sdp_module_unload(&m);
}
END_TEST

/* A bare file name is looked up in $SDP_PROVIDER_DIR; no path at all means
 * libsdp-<name>.so there. */
START_TEST(load_from_provider_dir)
{
	char want[PATH_MAX + 32];
	struct sdp_module m;
	int rc;

	setenv("SDP_PROVIDER_DIR", moddir, 1);
	ck_assert_str_eq(sdp_provider_dir(), moddir);
	rc = sdp_module_load("good", "tp-good.so", NULL, &m, errbuf,
			     sizeof(errbuf));
	ck_assert_msg(rc == 0, "load failed: %s", errbuf);
	ck_assert_str_eq(m.path, mod("good"));
	sdp_module_unload(&m);

	rc = sdp_module_load("zzz", NULL, NULL, &m, errbuf, sizeof(errbuf));
	ck_assert_int_eq(rc, -ENOENT);
	snprintf(want, sizeof(want), "%s/libsdp-zzz.so", moddir);
	ck_assert_str_eq(m.path, want);
}
END_TEST

/* Without $SDP_PROVIDER_DIR the directory is found beside this program
 * ("sdp", then "../lib/sdp"), else the build-time default. */
START_TEST(provider_dir_beside_program)
{
	char exe[PATH_MAX], cand[PATH_MAX + 16], real[PATH_MAX];
	const char *want = SDP_PROVIDER_DIR_DEFAULT;
	struct stat st;
	ssize_t n;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ck_assert_int_gt(n, 0);
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(cand, sizeof(cand), "%s/sdp", exe);
	if (stat(cand, &st) != 0) {
		snprintf(cand, sizeof(cand), "%s/../lib/sdp", exe);
		if (stat(cand, &st) != 0)
			cand[0] = '\0';
	}
	if (cand[0]) {
		ck_assert_ptr_nonnull(realpath(cand, real));
		want = real;
	}
	ck_assert_str_eq(sdp_provider_dir(), want);
}
END_TEST

/* ---- the catalog --------------------------------------------------------- */

/* A good catalog: comments, blank lines, tabs, CRLF and options kept whole. */
START_TEST(catalog_parse_good)
{
	const char *f = tmpfile_with(
		"# providers\n"
		"\n"
		"shm  libsdp-shm.so\n"
		"\tverbs /opt/sdp/libsdp-verbs.so  dev=rxe0 port=1   # rxe\n"
		"my_prov-2 ./x.so a b\r\n"
		"last /l.so");
	struct sdp_catalog_entry e[SDP_CATALOG_MAX];
	int n;

	n = sdp_catalog_parse_file(f, e, SDP_CATALOG_MAX, errbuf,
				   sizeof(errbuf));
	ck_assert_msg(n == 4, "n=%d: %s", n, errbuf);
	ck_assert_str_eq(e[0].name, "shm");
	ck_assert_str_eq(e[0].path, "libsdp-shm.so");
	ck_assert_str_eq(e[0].options, "");
	ck_assert_str_eq(e[1].name, "verbs");
	ck_assert_str_eq(e[1].path, "/opt/sdp/libsdp-verbs.so");
	ck_assert_str_eq(e[1].options, "dev=rxe0 port=1");
	ck_assert_str_eq(e[2].name, "my_prov-2");
	ck_assert_str_eq(e[2].path, "./x.so");
	ck_assert_str_eq(e[2].options, "a b");
	ck_assert_str_eq(e[3].name, "last");
	ck_assert_str_eq(e[3].path, "/l.so");
	unlink(f);
}
END_TEST

static const struct {
	const char *text;
	int line;
	const char *problem;
} bad_catalogs[] = {
	{ "shm a.so\nfoo=bar\n", 2, "unknown syntax" },
	{ "# c\n\nlonely\n", 3, "has no module path" },
	{ "abcdefghijabcdefghijabcdefghijabc x.so\n", 1,
	  "name too long (33 characters, at most 31)" },
	{ "a x.so\nb y.so\n\na z.so\n", 4, "duplicate provider name 'a'" },
};

/* Each kind of bad line gives -SDP_ECATALOG naming the file, the line
 * number and the problem. */
START_TEST(catalog_parse_bad)
{
	struct sdp_catalog_entry e[SDP_CATALOG_MAX];
	const char *f = tmpfile_with(bad_catalogs[_i].text);
	char want[128];
	int n;

	n = sdp_catalog_parse_file(f, e, SDP_CATALOG_MAX, errbuf,
				   sizeof(errbuf));
	ck_assert_int_eq(n, -SDP_ECATALOG);
	snprintf(want, sizeof(want), "provider catalog %s:%d: ", f,
		 bad_catalogs[_i].line);
	ck_assert_msg(strncmp(errbuf, want, strlen(want)) == 0,
		      "'%s' does not start with '%s'", errbuf, want);
	ck_assert_msg(strstr(errbuf, bad_catalogs[_i].problem),
		      "'%s' lacks '%s'", errbuf, bad_catalogs[_i].problem);
	unlink(f);
}
END_TEST

/* Limits: a line longer than 4096 bytes, options over 255 bytes and more
 * entries than the caller has room for are errors naming the line. */
START_TEST(catalog_parse_limits)
{
	struct sdp_catalog_entry e[2];
	char text[6000];
	const char *f;
	int n;

	memset(text, 'a', sizeof(text));
	memcpy(text, "a x.so\nb y.so ", 14);
	text[sizeof(text) - 2] = '\n';
	text[sizeof(text) - 1] = '\0';
	f = tmpfile_with(text);
	n = sdp_catalog_parse_file(f, e, 2, errbuf, sizeof(errbuf));
	ck_assert_int_eq(n, -SDP_ECATALOG);
	ck_assert_ptr_nonnull(strstr(errbuf, ":2: line longer than 4096"));
	unlink(f);

	text[14 + 300] = '\n';
	text[14 + 301] = '\0';
	f = tmpfile_with(text);
	n = sdp_catalog_parse_file(f, e, 2, errbuf, sizeof(errbuf));
	ck_assert_int_eq(n, -SDP_ECATALOG);
	ck_assert_ptr_nonnull(strstr(errbuf, ":2: options too long"));
	unlink(f);

	f = tmpfile_with("a x.so\nb y.so\n# third:\nc z.so\n");
	n = sdp_catalog_parse_file(f, e, 2, errbuf, sizeof(errbuf));
	ck_assert_int_eq(n, -SDP_ECATALOG);
	ck_assert_ptr_nonnull(strstr(errbuf, ":4: too many providers"));
	unlink(f);
}
END_TEST

/* A catalog file named by $SDP_PROVIDER_CATALOG that is missing is an
 * error naming it; the built-in entries follow the file's own. */
START_TEST(catalog_read_file_and_builtins)
{
	struct sdp_catalog_entry e[SDP_CATALOG_MAX];
	const char *f;
	int n;

	setenv("SDP_PROVIDER_CATALOG", "/nonexistent/providers.conf", 1);
	n = sdp_catalog_read(e, SDP_CATALOG_MAX, errbuf, sizeof(errbuf));
	ck_assert_int_eq(n, -ENOENT);
	ck_assert_ptr_nonnull(strstr(errbuf, "/nonexistent/providers.conf"));

	f = tmpfile_with("tcpx /x/libx.so k=v\nshm /custom/shm.so\n");
	setenv("SDP_PROVIDER_CATALOG", f, 1);
	n = sdp_catalog_read(e, SDP_CATALOG_MAX, errbuf, sizeof(errbuf));
	ck_assert_msg(n == 3, "n=%d: %s", n, errbuf);
	ck_assert_str_eq(e[0].name, "tcpx");
	ck_assert_str_eq(e[0].options, "k=v");
	ck_assert_str_eq(e[1].name, "shm");
	ck_assert_str_eq(e[1].path, "/custom/shm.so");
	ck_assert_str_eq(e[2].name, "verbs");
	ck_assert_str_eq(e[2].path, "libsdp-verbs.so");
	unlink(f);
}
END_TEST

/* $SDP_PROVIDERS selects and orders entries; an unknown, repeated or empty
 * name is an error naming the variable, the item and the problem. */
START_TEST(catalog_read_selection)
{
	struct sdp_catalog_entry e[SDP_CATALOG_MAX];
	const char *f = tmpfile_with("tcpx /x/libx.so\n");
	int n;

	setenv("SDP_PROVIDER_CATALOG", f, 1);
	setenv("SDP_PROVIDERS", "verbs, tcpx", 1);
	n = sdp_catalog_read(e, SDP_CATALOG_MAX, errbuf, sizeof(errbuf));
	ck_assert_msg(n == 2, "n=%d: %s", n, errbuf);
	ck_assert_str_eq(e[0].name, "verbs");
	ck_assert_str_eq(e[1].name, "tcpx");

	setenv("SDP_PROVIDERS", "shm,foo", 1);
	n = sdp_catalog_read(e, SDP_CATALOG_MAX, errbuf, sizeof(errbuf));
	ck_assert_int_eq(n, -SDP_ECATALOG);
	ck_assert_ptr_nonnull(strstr(errbuf, "SDP_PROVIDERS='shm,foo'"));
	ck_assert_ptr_nonnull(strstr(errbuf, "item 2"));
	ck_assert_ptr_nonnull(strstr(errbuf, "unknown provider 'foo'"));
	ck_assert_ptr_nonnull(strstr(errbuf, "known: tcpx, shm, verbs"));

	setenv("SDP_PROVIDERS", "shm,shm", 1);
	n = sdp_catalog_read(e, SDP_CATALOG_MAX, errbuf, sizeof(errbuf));
	ck_assert_int_eq(n, -SDP_ECATALOG);
	ck_assert_ptr_nonnull(strstr(errbuf, "named twice"));

	setenv("SDP_PROVIDERS", "shm,,verbs", 1);
	n = sdp_catalog_read(e, SDP_CATALOG_MAX, errbuf, sizeof(errbuf));
	ck_assert_int_eq(n, -SDP_ECATALOG);
	ck_assert_ptr_nonnull(strstr(errbuf, "item 2 is empty"));
	unlink(f);
}
END_TEST

/* ---- errors and GUIDs ---------------------------------------------------- */

/* sdp_strerror knows project codes and errno values of either sign. */
START_TEST(strerror_codes)
{
	ck_assert_str_eq(sdp_strerror(-SDP_ENOEXT),
			 "provider module lacks a mandatory extension function");
	ck_assert_str_eq(sdp_strerror(SDP_EBOUNDS),
			 "RDMA access outside the registered region");
	ck_assert_str_eq(sdp_strerror(-EIO), "Input/output error");
	ck_assert_str_eq(sdp_strerror(EIO), "Input/output error");
	ck_assert_str_eq(sdp_strerror(0), "success");
	ck_assert_str_eq(sdp_strerror(-SDP_ERRNO_MAX), "unknown error code");
}
END_TEST

/* GUIDs format in registry form and compare field by field. */
START_TEST(guid_helpers)
{
	const struct sdp_guid w = SDP_GUID_RDMA_WRITE;
	const struct sdp_guid r = SDP_GUID_RDMA_READ;
	struct sdp_guid w2 = SDP_GUID_RDMA_WRITE;
	char s[37];

	sdp_guid_format(&w, s);
	ck_assert_str_eq(s, "f95add60-8a3b-4de9-9f04-7d7355bc384d");
	ck_assert(sdp_guid_equal(&w, &w2));
	ck_assert(!sdp_guid_equal(&w, &r));
	w2.data4[7] ^= 1;
	ck_assert(!sdp_guid_equal(&w, &w2));
}
END_TEST

Suite *loader_suite(void)
{
	Suite *s = suite_create("loader");
	TCase *tc;

	tc = unit_tcase(s, "load");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, load_missing_file);
	tcase_add_test(tc, load_not_an_object);
	tcase_add_test(tc, load_no_entry_point);
	tcase_add_test(tc, load_spi2_module);
	tcase_add_test(tc, load_chosen_version_out_of_range);
	tcase_add_test(tc, load_startup_error);
	tcase_add_test(tc, load_missing_mandatory_ext);
	tcase_add_test(tc, load_optional_ext_unsupported);
	tcase_add_test(tc, load_good_module);
	tcase_add_test(tc, load_short_ops_table);
	tcase_add_test(tc, load_log_sink);
	tcase_add_test(tc, log_level_words);
	tcase_add_test(tc, load_no_device);
	tcase_add_test(tc, load_from_provider_dir);
	tcase_add_test(tc, provider_dir_beside_program);

	tc = unit_tcase(s, "catalog");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, catalog_parse_good);
	tcase_add_loop_test(tc, catalog_parse_bad, 0,
			    sizeof(bad_catalogs) / sizeof(bad_catalogs[0]));
	tcase_add_test(tc, catalog_parse_limits);
	tcase_add_test(tc, catalog_read_file_and_builtins);
	tcase_add_test(tc, catalog_read_selection);

	tc = unit_tcase(s, "errors");
	tcase_add_test(tc, strerror_codes);
	tcase_add_test(tc, guid_helpers);
	return s;
}

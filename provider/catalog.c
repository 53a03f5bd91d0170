// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * catalog.c - the provider catalog: which provider modules exist, where
 * their files are and what options they get (a config file plus built-in
 * entries), and which of them $SDP_PROVIDERS selects, in what order.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdp_loader.h"

#define CATALOG_DEFAULT_FILE "/etc/sdp-switch/providers.conf"
#define CATALOG_LINE_MAX 4096

/* Providers the catalog knows without a file: libsdp-<name>.so. */
static const char *const builtin_names[] = { "shm", "verbs" };

static void __attribute__((format(printf, 3, 4)))
cat_error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int valid_name_char(int c)
{
	return isalnum(c) || c == '_' || c == '-';
}

static int find_entry(const struct sdp_catalog_entry *ents, int n,
		      const char *name, size_t len)
{
	int i;

	for (i = 0; i < n; i++)
		if (strlen(ents[i].name) == len &&
		    memcmp(ents[i].name, name, len) == 0)
			return i;
	return -1;
}

static char *skip_space(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

static char *skip_word(char *s)
{
	while (*s && *s != ' ' && *s != '\t')
		s++;
	return s;
}

/*
 * Parses one line (comment already cut, not empty) into e. Returns 0, or
 * < 0 with the problem (without file and line) in msg.
 */
static int parse_line(char *line, const struct sdp_catalog_entry *ents, int n,
		      struct sdp_catalog_entry *e, char *msg, size_t msglen)
{
	char *name, *name_end, *path, *path_end, *opts, *end;
	size_t len;

	name = skip_space(line);
	name_end = skip_word(name);
	for (end = name; end < name_end; end++) {
		if (!valid_name_char((unsigned char)*end)) {
			snprintf(msg, msglen,
				 "unknown syntax: provider names use letters, digits, '-' and '_' (got '%c'); lines read 'name path [options...]'",
				 *end);
			return -SDP_ECATALOG;
		}
	}
	len = name_end - name;
	if (len >= sizeof(e->name)) {
		snprintf(msg, msglen,
			 "provider name too long (%zu characters, at most %zu)",
			 len, sizeof(e->name) - 1);
		return -SDP_ECATALOG;
	}
	if (find_entry(ents, n, name, len) >= 0) {
		snprintf(msg, msglen,
			 "duplicate provider name '%.*s'; each name may appear once",
			 (int)len, name);
		return -SDP_ECATALOG;
	}
	path = skip_space(name_end);
	if (!*path) {
		snprintf(msg, msglen,
			 "unknown syntax: provider '%.*s' has no module path; lines read 'name path [options...]'",
			 (int)len, name);
		return -SDP_ECATALOG;
	}
	path_end = skip_word(path);
	if ((size_t)(path_end - path) >= sizeof(e->path)) {
		snprintf(msg, msglen,
			 "module path too long (at most %zu bytes)",
			 sizeof(e->path) - 1);
		return -SDP_ECATALOG;
	}
	opts = skip_space(path_end);
	end = opts + strlen(opts);
	while (end > opts && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if ((size_t)(end - opts) >= sizeof(e->options)) {
		snprintf(msg, msglen, "options too long (at most %zu bytes)",
			 sizeof(e->options) - 1);
		return -SDP_ECATALOG;
	}

	memset(e, 0, sizeof(*e));
	memcpy(e->name, name, len);
	memcpy(e->path, path, path_end - path);
	memcpy(e->options, opts, end - opts);
	return 0;
}

int sdp_catalog_parse_file(const char *file, struct sdp_catalog_entry *ents,
			   int max, char *err, size_t errlen)
{
	char line[CATALOG_LINE_MAX + 2];
	char msg[PATH_MAX + 256];
	int n = 0, lineno = 0, rc = 0;
	FILE *f;

	f = fopen(file, "re");
	if (!f) {
		rc = -errno;
		cat_error(err, errlen,
			  "provider catalog %s: cannot open: %s; fix SDP_PROVIDER_CATALOG or create the file",
			  file, sdp_strerror(rc));
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		char *p;

		lineno++;
		if (len && line[len - 1] == '\n') {
			line[--len] = '\0';
		} else if (len > CATALOG_LINE_MAX) {
			cat_error(err, errlen,
				  "provider catalog %s:%d: line longer than %d bytes",
				  file, lineno, CATALOG_LINE_MAX);
			rc = -SDP_ECATALOG;
			goto out_close;
		}
		if (len && line[len - 1] == '\r')
			line[--len] = '\0';
		p = strchr(line, '#');
		if (p)
			*p = '\0';
		p = skip_space(line);
		if (!*p)
			continue;
		if (n >= max) {
			cat_error(err, errlen,
				  "provider catalog %s:%d: too many providers (at most %d)",
				  file, lineno, max);
			rc = -SDP_ECATALOG;
			goto out_close;
		}
		rc = parse_line(p, ents, n, &ents[n], msg, sizeof(msg));
		if (rc) {
			cat_error(err, errlen, "provider catalog %s:%d: %s",
				  file, lineno, msg);
			goto out_close;
		}
		n++;
	}
	if (ferror(f)) {
		rc = -EIO;
		cat_error(err, errlen, "provider catalog %s: read error", file);
		goto out_close;
	}
	rc = n;
out_close:
	fclose(f);
	return rc;
}

/* Keeps, in the order $SDP_PROVIDERS gives, only the entries it names. */
static int select_entries(struct sdp_catalog_entry *all, int n, const char *sel,
			  char *err, size_t errlen)
{
	struct sdp_catalog_entry picked[SDP_CATALOG_MAX + 2];
	char known[(sizeof(all->name) + 2) * (SDP_CATALOG_MAX + 2)];
	const char *p = sel;
	int count = 0, item = 0, i;

	known[0] = '\0';
	for (i = 0; i < n; i++) {
		if (i)
			strcat(known, ", ");
		strcat(known, all[i].name);
	}
	while (1) {
		const char *end = strchr(p, ',');
		size_t len;
		int idx;

		if (!end)
			end = p + strlen(p);
		while (p < end && isspace((unsigned char)*p))
			p++;
		len = end - p;
		while (len && isspace((unsigned char)p[len - 1]))
			len--;
		item++;
		if (!len) {
			cat_error(err, errlen,
				  "SDP_PROVIDERS='%s': item %d is empty; give provider names separated by commas (known: %s)",
				  sel, item, known);
			return -SDP_ECATALOG;
		}
		idx = find_entry(all, n, p, len);
		if (idx < 0) {
			cat_error(err, errlen,
				  "SDP_PROVIDERS='%s': item %d: unknown provider '%.*s' (known: %s); fix the variable or add it to the catalog",
				  sel, item, (int)len, p, known);
			return -SDP_ECATALOG;
		}
		if (find_entry(picked, count, p, len) >= 0) {
			cat_error(err, errlen,
				  "SDP_PROVIDERS='%s': item %d: provider '%.*s' named twice",
				  sel, item, (int)len, p);
			return -SDP_ECATALOG;
		}
		picked[count++] = all[idx];
		if (!*end)
			break;
		p = end + 1;
	}
	memcpy(all, picked, count * sizeof(picked[0]));
	return count;
}

int sdp_catalog_read(struct sdp_catalog_entry *ents, int max, char *err,
		     size_t errlen)
{
	struct sdp_catalog_entry all[SDP_CATALOG_MAX + 2];
	const char *file = getenv("SDP_PROVIDER_CATALOG");
	const char *sel = getenv("SDP_PROVIDERS");
	int explicit_file = file && *file;
	size_t i;
	int n;

	if (err && errlen)
		err[0] = '\0';
	if (!explicit_file)
		file = CATALOG_DEFAULT_FILE;
	n = sdp_catalog_parse_file(file, all, SDP_CATALOG_MAX, err, errlen);
	if (n == -ENOENT && !explicit_file) {
		/* No system catalog: the built-in entries alone. */
		n = 0;
		if (err && errlen)
			err[0] = '\0';
	}
	if (n < 0)
		return n;

	for (i = 0; i < sizeof(builtin_names) / sizeof(builtin_names[0]); i++) {
		const char *name = builtin_names[i];

		if (find_entry(all, n, name, strlen(name)) >= 0)
			continue;
		memset(&all[n], 0, sizeof(all[n]));
		snprintf(all[n].name, sizeof(all[n].name), "%s", name);
		snprintf(all[n].path, sizeof(all[n].path), "libsdp-%s.so",
			 name);
		n++;
	}

	if (sel && *sel) {
		n = select_entries(all, n, sel, err, errlen);
		if (n < 0)
			return n;
	}
	if (n > max) {
		cat_error(err, errlen,
			  "provider catalog %s: %d providers, room for %d; select fewer with SDP_PROVIDERS",
			  file, n, max);
		return -SDP_ECATALOG;
	}
	memcpy(ents, all, n * sizeof(all[0]));
	return n;
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rules.c - parsing and matching of the rules language (rules.h). Pure
 * functions: no global state, so tests and tools can use them directly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"

int sdp_rule_action(const char *w)
{
	if (!strcmp(w, "san") || !strcmp(w, "use-san"))
		return SDP_RULE_SAN;
	if (!strcmp(w, "tcp") || !strcmp(w, "use-tcp"))
		return SDP_RULE_TCP;
	if (!strcmp(w, "both") || !strcmp(w, "use-both"))
		return SDP_RULE_BOTH;
	return -1;
}

static int parse_port(const char *s, uint16_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > 65535)
		return -1;
	*out = v;
	return 0;
}

/*
 * What is wrong with a program pattern, or NULL. fnmatch(3) takes nearly
 * anything, so mistakes would silently never match: an unclosed '[', a
 * trailing '\\', and a '/' (the short name has none: '~/^redis/' is a
 * regular expression, which this language does not have).
 */
static const char *pattern_problem(const char *p)
{
	size_t i, j;

	if (strchr(p, '/'))
		return "has a '/': it is matched against the program's short name (no directory), as a shell pattern, not a regular expression; write e.g. 'redis*'";
	for (i = 0; p[i]; i++) {
		if (p[i] == '\\') {
			if (!p[++i])
				return "ends with a lone '\\'";
			continue;
		}
		if (p[i] != '[')
			continue;
		j = i + 1;
		if (p[j] == '!' || p[j] == '^')
			j++;
		if (p[j] == ']')
			j++;
		while (p[j] && p[j] != ']') {
			/* a class such as [:digit:] inside the brackets */
			if (p[j] == '[' && p[j + 1] == ':') {
				const char *end = strstr(p + j + 2, ":]");

				if (end)
					j = end - p + 1;
			}
			j++;
		}
		if (!p[j])
			return "has a '[' without its ']'; to match a '[' itself write '\\['";
		i = j;
	}
	return NULL;
}

static int parse_line(char *line, int lineno, struct sdp_rule *r,
		      char *err, size_t errlen)
{
	char *f[6], *save = NULL, *tok, *slash;
	char ports[64], addr[80];
	const char *why;
	int n = 0;

	for (tok = strtok_r(line, " \t", &save); tok && n < 6;
	     tok = strtok_r(NULL, " \t", &save))
		f[n++] = tok;
	if (n != 5) {
		snprintf(err, errlen,
			 "expected 5 fields \"ACTION ROLE PROGRAM ADDRESS PORTS\", found %d%s",
			 n, n > 5 ? " or more" : "");
		return -1;
	}
	memset(r, 0, sizeof(*r));
	r->line = lineno;
	r->action = sdp_rule_action(f[0]);
	if (r->action < 0) {
		snprintf(err, errlen,
			 "unknown action '%s' (expected san, tcp or both)",
			 f[0]);
		return -1;
	}
	if (!strcmp(f[1], "connect") || !strcmp(f[1], "client"))
		r->role = 'c';
	else if (!strcmp(f[1], "listen") || !strcmp(f[1], "server"))
		r->role = 's';
	else if (!strcmp(f[1], "*") || !strcmp(f[1], "any"))
		r->role = '*';
	else {
		snprintf(err, errlen,
			 "unknown role '%s' (expected connect, listen or *)",
			 f[1]);
		return -1;
	}
	if (strlen(f[2]) >= sizeof(r->program)) {
		snprintf(err, errlen,
			 "program pattern '%.40s...' is longer than %zu bytes",
			 f[2], sizeof(r->program) - 1);
		return -1;
	}
	why = pattern_problem(f[2]);
	if (why) {
		snprintf(err, errlen, "program pattern '%s' %s", f[2], why);
		return -1;
	}
	strcpy(r->program, f[2]);
	snprintf(addr, sizeof(addr), "%s", f[3]);
	snprintf(ports, sizeof(ports), "%s", f[4]);

	if (strcmp(f[3], "*")) {
		slash = strchr(f[3], '/');
		if (slash)
			*slash++ = 0;
		if (inet_pton(AF_INET, f[3], r->addr) == 1) {
			r->family = AF_INET;
			r->prefix = 32;
		} else if (inet_pton(AF_INET6, f[3], r->addr) == 1) {
			r->family = AF_INET6;
			r->prefix = 128;
		} else {
			snprintf(err, errlen,
				 "bad address '%s' (expected *, an IPv4 or IPv6 address, optionally /PREFIX)",
				 addr);
			return -1;
		}
		if (slash) {
			char *end;
			long p = strtol(slash, &end, 10);

			if (*end || end == slash || p < 0 || p > r->prefix) {
				snprintf(err, errlen,
					 "bad prefix length in '%s' (expected /0../%d)",
					 addr, r->prefix);
				return -1;
			}
			r->prefix = p;
		}
	}

	if (!strcmp(f[4], "*")) {
		r->port_lo = 0;
		r->port_hi = 65535;
	} else {
		char *dash = strchr(f[4], '-');

		if (dash)
			*dash++ = 0;
		if (parse_port(f[4], &r->port_lo) ||
		    parse_port(dash ? dash : f[4], &r->port_hi) ||
		    r->port_lo > r->port_hi) {
			snprintf(err, errlen,
				 "bad ports '%s' (expected *, PORT or LOW-HIGH with LOW <= HIGH, within 0-65535)",
				 ports);
			return -1;
		}
	}
	return 0;
}

/* Adds "ORIGIN:LINE: problem" to err, one line per problem. */
static void add_error(char *err, size_t errlen, int *nerr, const char *origin,
		      int lineno, const char *why)
{
	size_t used = *nerr ? strlen(err) : 0;

	if (used < errlen)
		snprintf(err + used, errlen - used, "%s%s:%d: %s",
			 *nerr ? "\n" : "", origin, lineno, why);
	(*nerr)++;
}

/*
 * Parses every line; a bad one does not stop the others, so one run
 * reports every problem. Returns the number of rules, or -1 when any line
 * was bad, with err holding one line per problem.
 */
static int parse_text(const char *text, const char *origin, char sep,
		      struct sdp_rule *r, int max, char *err, size_t errlen)
{
	char *copy = strdup(text), *line, *next;
	char why[512];
	int n = 0, lineno = 0, nerr = 0;

	if (!copy) {
		snprintf(err, errlen, "%s: out of memory", origin);
		return -1;
	}
	for (line = copy; line; line = next) {
		char *p, *hash;

		next = strchr(line, sep);
		if (sep != '\n') {
			char *nl = strchr(line, '\n');

			if (nl && (!next || nl < next))
				next = nl;
		}
		if (next)
			*next++ = 0;
		lineno++;
		hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		for (p = line; *p == ' ' || *p == '\t' || *p == '\r'; p++)
			;
		if (!*p)
			continue;
		p[strcspn(p, "\r")] = 0;
		if (n == max) {
			snprintf(why, sizeof(why), "more than %d rules", max);
			add_error(err, errlen, &nerr, origin, lineno, why);
			break;
		}
		if (parse_line(p, lineno, &r[n], why, sizeof(why))) {
			add_error(err, errlen, &nerr, origin, lineno, why);
			continue;
		}
		n++;
	}
	free(copy);
	return nerr ? -1 : n;
}

int sdp_rules_parse_string(const char *text, const char *origin,
			   struct sdp_rule *r, int max, char *err,
			   size_t errlen)
{
	return parse_text(text, origin, ';', r, max, err, errlen);
}

int sdp_rules_parse_file(const char *file, struct sdp_rule *r, int max,
			 bool must_exist, char *err, size_t errlen)
{
	FILE *f = fopen(file, "re");
	char *buf = NULL;
	size_t cap = 0, len = 0;
	char chunk[4096];
	size_t got;
	int n;

	if (!f) {
		if (!must_exist && errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: cannot open rules file: %s", file,
			 strerror(errno));
		return -1;
	}
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (len + got + 1 > cap) {
			char *nb = realloc(buf, cap = (len + got + 1) * 2);

			if (!nb) {
				free(buf);
				fclose(f);
				snprintf(err, errlen, "%s: out of memory",
					 file);
				return -1;
			}
			buf = nb;
		}
		memcpy(buf + len, chunk, got);
		len += got;
	}
	fclose(f);
	if (!buf)
		return 0;
	buf[len] = 0;
	n = parse_text(buf, file, '\n', r, max, err, errlen);
	free(buf);
	return n;
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, int bits)
{
	int full = bits / 8, rest = bits % 8;

	if (memcmp(a, b, full))
		return false;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		return (a[full] & mask) == (b[full] & mask);
	}
	return true;
}

bool sdp_rule_match(const struct sdp_rule *r, const char *program, char role,
		    const struct sockaddr *addr)
{
	const uint8_t *ip = NULL;
	uint16_t port = 0;
	int fam = 0;
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					      0xff, 0xff };

	if (r->role != '*' && r->role != role)
		return false;
	if (fnmatch(r->program, program ? program : "", 0))
		return false;
	if (addr->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)addr;

		ip = (const uint8_t *)&in->sin_addr;
		port = ntohs(in->sin_port);
		fam = AF_INET;
	} else if (addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)addr;

		ip = in6->sin6_addr.s6_addr;
		port = ntohs(in6->sin6_port);
		fam = AF_INET6;
		if (r->family == AF_INET && !memcmp(ip, v4mapped, 12)) {
			ip += 12;
			fam = AF_INET;
		}
	}
	if (port < r->port_lo || port > r->port_hi)
		return false;
	if (r->family) {
		if (!ip || fam != r->family)
			return false;
		/* a wildcard listener address matches any rule address */
		if (role == 's') {
			static const uint8_t zero[16];

			if (!memcmp(ip, zero, fam == AF_INET ? 4 : 16))
				return true;
		}
		if (!prefix_match(ip, r->addr, r->prefix))
			return false;
	}
	return true;
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * check_rules.c - unit tests of the rules language (switch/rules.c): parsing
 * of good and bad lines with FILE:LINE errors, and matching by role,
 * program, address prefix (IPv4, IPv6, v4-mapped) and port; first match wins.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rules.h"
#include "unit.h"

static struct sdp_rule r[SDP_RULES_MAX];
static char err[512];

static struct sockaddr_storage sa4(const char *ip, int port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	in->sin_port = htons(port);
	ck_assert_int_eq(inet_pton(AF_INET, ip, &in->sin_addr), 1);
	return ss;
}

static struct sockaddr_storage sa6(const char *ip, int port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(port);
	ck_assert_int_eq(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
	return ss;
}

/* Parses one inline rule set, failing the test on a parse error. */
static int parse(const char *text)
{
	int n;

	err[0] = 0;
	n = sdp_rules_parse_string(text, "T", r, SDP_RULES_MAX, err,
				   sizeof(err));
	ck_assert_msg(n >= 0, "'%s' did not parse: %s", text, err);
	return n;
}

/* Parses text expecting an error, and checks the error text. */
static void parse_bad(const char *text, const char *want)
{
	int n;

	err[0] = 0;
	n = sdp_rules_parse_string(text, "T", r, SDP_RULES_MAX, err,
				   sizeof(err));
	ck_assert_msg(n == -1, "'%s' parsed (%d rules) but is bad", text, n);
	ck_assert_msg(strstr(err, want), "'%s': error '%s' lacks '%s'", text,
		      err, want);
}

/* The action of the first rule that matches, or -1 (as the switch uses). */
static int decide(int n, const char *prog, char role,
		  const struct sockaddr_storage *ss)
{
	int i;

	for (i = 0; i < n; i++)
		if (sdp_rule_match(&r[i], prog, role,
				   (const struct sockaddr *)ss))
			return r[i].action;
	return -1;
}

/* A full rule fills every field: action, role, program, address, ports. */
START_TEST(parse_fields)
{
	static const uint8_t net[4] = { 10, 1, 0, 0 };

	ck_assert_int_eq(parse("san connect iperf* 10.1.0.0/16 5201-5300"), 1);
	ck_assert_int_eq(r[0].action, SDP_RULE_SAN);
	ck_assert_int_eq(r[0].role, 'c');
	ck_assert_str_eq(r[0].program, "iperf*");
	ck_assert_int_eq(r[0].family, AF_INET);
	ck_assert_mem_eq(r[0].addr, net, 4);
	ck_assert_int_eq(r[0].prefix, 16);
	ck_assert_int_eq(r[0].port_lo, 5201);
	ck_assert_int_eq(r[0].port_hi, 5300);
	ck_assert_int_eq(r[0].line, 1);
}
END_TEST

/* Wildcards and synonyms: '*' address and ports, role aliases, use-*. */
START_TEST(parse_wildcards_synonyms)
{
	ck_assert_int_eq(parse("tcp * * * *;use-both server x ::1 22;"
			       "use-san client y 1.2.3.4 0;use-tcp any z * *;"
			       "both listen w fe80::/10 65535"), 5);
	ck_assert_int_eq(r[0].action, SDP_RULE_TCP);
	ck_assert_int_eq(r[0].role, '*');
	ck_assert_int_eq(r[0].family, 0);
	ck_assert_int_eq(r[0].port_lo, 0);
	ck_assert_int_eq(r[0].port_hi, 65535);
	ck_assert_int_eq(r[1].action, SDP_RULE_BOTH);
	ck_assert_int_eq(r[1].role, 's');
	ck_assert_int_eq(r[1].family, AF_INET6);
	ck_assert_int_eq(r[1].prefix, 128);
	ck_assert_int_eq(r[1].port_lo, 22);
	ck_assert_int_eq(r[1].port_hi, 22);
	ck_assert_int_eq(r[2].action, SDP_RULE_SAN);
	ck_assert_int_eq(r[2].role, 'c');
	ck_assert_int_eq(r[2].prefix, 32);
	ck_assert_int_eq(r[3].role, '*');
	ck_assert_int_eq(r[4].prefix, 10);
	ck_assert_int_eq(r[4].port_lo, 65535);
}
END_TEST

/* Comments, blank lines and CR/LF endings are skipped; lines still count. */
START_TEST(parse_comments_blank)
{
	ck_assert_int_eq(parse("# only a comment"), 0);
	ck_assert_int_eq(parse(""), 0);
	ck_assert_int_eq(parse("  \t ;; # x ;tcp * * * 80 # trailing\r\n"
			       "\n\tsan * * * 81\r"), 2);
	ck_assert_int_eq(r[0].port_lo, 80);
	ck_assert_int_eq(r[0].line, 4);
	ck_assert_int_eq(r[1].port_lo, 81);
	ck_assert_int_eq(r[1].line, 6);
}
END_TEST

/* Each kind of bad line is refused with ORIGIN:LINE and what is wrong. */
START_TEST(parse_bad_lines)
{
	parse_bad("tcp * * *", "T:1: expected 5 fields");
	parse_bad("tcp * * * * extra", "found 6");
	parse_bad("# c\nfast * * * *", "T:2: unknown action 'fast'");
	parse_bad("tcp both * * *", "unknown role 'both'");
	parse_bad("tcp * * 10.0.0.300 *", "bad address '10.0.0.300'");
	parse_bad("tcp * * host.example *", "bad address 'host.example'");
	parse_bad("tcp * * 10.0.0.0/33 *",
		  "bad prefix length in '10.0.0.0/33' (expected /0../32)");
	parse_bad("tcp * * ::/129 *", "(expected /0../128)");
	parse_bad("tcp * * 10.0.0.0/ *", "bad prefix length");
	parse_bad("tcp * * 10.0.0.0/8x *", "bad prefix length");
	parse_bad("tcp * * * 65536", "bad ports '65536'");
	parse_bad("tcp * * * 90-80", "bad ports '90-80'");
	parse_bad("tcp * * * -1", "bad ports '-1'");
	parse_bad("tcp * * * 80-", "bad ports '80-'");
	parse_bad("tcp * * * http", "bad ports 'http'");
	parse_bad("tcp * "
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  " * *", "is longer than 63 bytes");
	/* a good rule before a bad one does not hide the error */
	parse_bad("tcp * * * *;san * * * 1;oops", "T:3:");
}
END_TEST

/* Patterns fnmatch would take but that can never mean what was meant are
 * refused, the pattern quoted: an unclosed '[', a regular expression (a
 * '/'), a trailing backslash; classes and escaped brackets are fine. */
START_TEST(parse_bad_patterns)
{
	parse_bad("tcp * [abc * 22",
		  "T:1: program pattern '[abc' has a '[' without its ']'");
	parse_bad("tcp * ~/^redis/ * *",
		  "program pattern '~/^redis/' has a '/'");
	parse_bad("tcp * redis\\ * *", "ends with a lone");
	parse_bad("tcp * [!] * *", "without its ']'");
	ck_assert_int_eq(parse("tcp * [[:digit:]]x * *;tcp * \\[x * *;"
			       "tcp * []a]* * *;tcp * [!x]y * *"), 4);
	ck_assert(sdp_rule_match(&r[0], "7x", 'c',
				 (void *)&(struct sockaddr_storage){
					 .ss_family = AF_INET }));
}
END_TEST

/* Every bad line is reported, one line of the error each, and a file with
 * errors gives no rules at all. */
START_TEST(parse_reports_every_error)
{
	const char *e2, *e3;

	parse_bad("tcp * [abc * 22\nsan connect ~/^redis/ 10.0.0.0/8 6379\n"
		  "both * * * 70000\ntcp * ssh* * 22", "T:1: program pattern");
	e2 = strstr(err, "\nT:2: program pattern '~/^redis/'");
	e3 = strstr(err, "\nT:3: bad ports '70000'");
	ck_assert_msg(e2 && e3 && e2 < e3 && !strstr(err, "T:4"), "%s", err);
}
END_TEST

/* More rules than the table holds is an error naming the line. */
START_TEST(parse_too_many)
{
	size_t len = (SDP_RULES_MAX + 1) * 12 + 1;
	char *text = malloc(len), *p = text;
	int i, n;

	ck_assert_ptr_nonnull(text);
	for (i = 0; i <= SDP_RULES_MAX; i++)
		p += sprintf(p, "tcp * * * *;");
	n = sdp_rules_parse_string(text, "T", r, SDP_RULES_MAX, err,
				   sizeof(err));
	free(text);
	ck_assert_int_eq(n, -1);
	ck_assert_msg(strstr(err, "more than 128 rules"), "%s", err);
	ck_assert_msg(!strncmp(err, "T:129:", 6), "%s", err);
}
END_TEST

/* A file: errors name the file and line; a missing file is no error
 * unless it must exist, and then the error names it. */
START_TEST(parse_file)
{
	char path[] = "/tmp/sdp-rules-test.XXXXXX";
	FILE *f;
	int fd, n;

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fputs("# rules\n\nsan connect redis* 192.168.0.0/16 6379\n"
	      "tcp listen * * 22\n", f);
	fclose(f);
	n = sdp_rules_parse_file(path, r, SDP_RULES_MAX, true, err,
				 sizeof(err));
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(r[0].line, 3);
	ck_assert_int_eq(r[1].line, 4);

	f = fopen(path, "a");
	ck_assert_ptr_nonnull(f);
	fputs("san client * 1.2.3.4/40 *\n", f);
	fclose(f);
	n = sdp_rules_parse_file(path, r, SDP_RULES_MAX, true, err,
				 sizeof(err));
	ck_assert_int_eq(n, -1);
	{
		char want[128];

		snprintf(want, sizeof(want), "%s:5: bad prefix length in '1.2.3.4/40'",
			 path);
		ck_assert_msg(!strncmp(err, want, strlen(want)),
			      "error '%s', expected '%s...'", err, want);
	}
	unlink(path);

	ck_assert_int_eq(sdp_rules_parse_file(path, r, SDP_RULES_MAX, false,
					      err, sizeof(err)), 0);
	ck_assert_int_eq(sdp_rules_parse_file(path, r, SDP_RULES_MAX, true,
					      err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, path) && strstr(err, "cannot open"), "%s",
		      err);
}
END_TEST

/* Role: connect rules match only 'c', listen rules only 's', '*' both. */
START_TEST(match_role)
{
	struct sockaddr_storage a = sa4("10.0.0.1", 80);

	parse("san connect * * *;tcp listen * * *;both * * * *");
	ck_assert(sdp_rule_match(&r[0], "p", 'c', (void *)&a));
	ck_assert(!sdp_rule_match(&r[0], "p", 's', (void *)&a));
	ck_assert(sdp_rule_match(&r[1], "p", 's', (void *)&a));
	ck_assert(!sdp_rule_match(&r[1], "p", 'c', (void *)&a));
	ck_assert(sdp_rule_match(&r[2], "p", 'c', (void *)&a));
	ck_assert(sdp_rule_match(&r[2], "p", 's', (void *)&a));
	ck_assert_int_eq(decide(3, "p", 'c', &a), SDP_RULE_SAN);
	ck_assert_int_eq(decide(3, "p", 's', &a), SDP_RULE_TCP);
}
END_TEST

/* Program: an fnmatch pattern on the whole program name. */
START_TEST(match_program)
{
	struct sockaddr_storage a = sa4("10.0.0.1", 80);

	parse("tcp * iperf? * *;san * redis-* * *;both * [ab]x * *");
	ck_assert(sdp_rule_match(&r[0], "iperf3", 'c', (void *)&a));
	ck_assert(!sdp_rule_match(&r[0], "iperf", 'c', (void *)&a));
	ck_assert(!sdp_rule_match(&r[0], "iperf33", 'c', (void *)&a));
	ck_assert(!sdp_rule_match(&r[0], "xiperf3", 'c', (void *)&a));
	ck_assert(sdp_rule_match(&r[1], "redis-server", 'c', (void *)&a));
	ck_assert(!sdp_rule_match(&r[1], "redis", 'c', (void *)&a));
	ck_assert(sdp_rule_match(&r[2], "bx", 'c', (void *)&a));
	ck_assert(!sdp_rule_match(&r[2], "cx", 'c', (void *)&a));
	/* a process without a name matches only patterns that match "" */
	ck_assert(!sdp_rule_match(&r[1], NULL, 'c', (void *)&a));
	parse("tcp * * * *");
	ck_assert(sdp_rule_match(&r[0], NULL, 'c', (void *)&a));
}
END_TEST

/* IPv4 prefixes: /0, /8, /32, and a prefix not on a byte boundary. */
START_TEST(match_v4_prefix)
{
	struct sockaddr_storage a = sa4("192.168.77.5", 80);
	struct sockaddr_storage b = sa4("192.168.64.1", 80);
	struct sockaddr_storage c = sa4("192.168.128.1", 80);
	struct sockaddr_storage d = sa4("192.168.127.255", 80);
	struct sockaddr_storage e = sa4("192.168.63.255", 80);

	parse("tcp * * 192.168.64.0/18 *;tcp * * 192.168.77.5 *;"
	      "tcp * * 0.0.0.0/0 *;tcp * * 10.0.0.0/8 *");
	ck_assert(sdp_rule_match(&r[0], "p", 'c', (void *)&a));
	ck_assert(sdp_rule_match(&r[0], "p", 'c', (void *)&b));
	ck_assert(!sdp_rule_match(&r[0], "p", 'c', (void *)&c));
	ck_assert(sdp_rule_match(&r[0], "p", 'c', (void *)&d));
	ck_assert(!sdp_rule_match(&r[0], "p", 'c', (void *)&e));
	ck_assert(sdp_rule_match(&r[1], "p", 'c', (void *)&a));
	ck_assert(!sdp_rule_match(&r[1], "p", 'c', (void *)&b));
	ck_assert(sdp_rule_match(&r[2], "p", 'c', (void *)&c));
	ck_assert(!sdp_rule_match(&r[3], "p", 'c', (void *)&a));
}
END_TEST

/* IPv6 prefixes; an IPv6 rule never matches an IPv4 address and back. */
START_TEST(match_v6_prefix)
{
	struct sockaddr_storage a = sa6("2001:db8:1:2::7", 443);
	struct sockaddr_storage b = sa6("2001:db8:1:3::7", 443);
	struct sockaddr_storage v4 = sa4("10.0.0.1", 443);

	parse("tcp * * 2001:db8:1:2::/64 *;tcp * * 2001:db8::/32 *;"
	      "tcp * * ::1 *;tcp * * 0.0.0.0/0 *;tcp * * ::/0 *");
	ck_assert(sdp_rule_match(&r[0], "p", 'c', (void *)&a));
	ck_assert(!sdp_rule_match(&r[0], "p", 'c', (void *)&b));
	ck_assert(sdp_rule_match(&r[1], "p", 'c', (void *)&b));
	ck_assert(!sdp_rule_match(&r[2], "p", 'c', (void *)&a));
	ck_assert(!sdp_rule_match(&r[3], "p", 'c', (void *)&a));
	ck_assert(!sdp_rule_match(&r[4], "p", 'c', (void *)&v4));
	ck_assert(sdp_rule_match(&r[4], "p", 'c', (void *)&a));
}
END_TEST

/* A v4-mapped IPv6 address (::ffff:a.b.c.d) matches IPv4 rules by its
 * IPv4 part, as a dual-stack socket's peer would. */
START_TEST(match_v4_mapped)
{
	struct sockaddr_storage m = sa6("::ffff:10.1.2.3", 80);
	struct sockaddr_storage o = sa6("::ffff:11.1.2.3", 80);

	parse("san * * 10.0.0.0/8 80;tcp * * ::ffff:0:0/96 *");
	ck_assert(sdp_rule_match(&r[0], "p", 'c', (void *)&m));
	ck_assert(!sdp_rule_match(&r[0], "p", 'c', (void *)&o));
	/* an IPv6 rule still sees the mapped form as IPv6 */
	ck_assert(sdp_rule_match(&r[1], "p", 'c', (void *)&m));
	ck_assert_int_eq(decide(2, "p", 'c', &m), SDP_RULE_SAN);
	ck_assert_int_eq(decide(2, "p", 'c', &o), SDP_RULE_TCP);
}
END_TEST

/* Ports: single port, inclusive range bounds, '*'. */
START_TEST(match_ports)
{
	struct sockaddr_storage p79 = sa4("1.1.1.1", 79);
	struct sockaddr_storage p80 = sa4("1.1.1.1", 80);
	struct sockaddr_storage p90 = sa4("1.1.1.1", 90);
	struct sockaddr_storage p91 = sa4("1.1.1.1", 91);
	struct sockaddr_storage p6 = sa6("::1", 85);

	parse("tcp * * * 80-90;tcp * * * 79");
	ck_assert(!sdp_rule_match(&r[0], "p", 'c', (void *)&p79));
	ck_assert(sdp_rule_match(&r[0], "p", 'c', (void *)&p80));
	ck_assert(sdp_rule_match(&r[0], "p", 'c', (void *)&p90));
	ck_assert(!sdp_rule_match(&r[0], "p", 'c', (void *)&p91));
	ck_assert(sdp_rule_match(&r[0], "p", 'c', (void *)&p6));
	ck_assert(sdp_rule_match(&r[1], "p", 'c', (void *)&p79));
	ck_assert(!sdp_rule_match(&r[1], "p", 'c', (void *)&p80));
}
END_TEST

/* A listener bound to the wildcard address matches any address rule of
 * its family, so "tcp listen * 10.0.0.0/8 22" covers a 0.0.0.0:22 socket. */
START_TEST(match_listen_wildcard)
{
	struct sockaddr_storage any4 = sa4("0.0.0.0", 22);
	struct sockaddr_storage any6 = sa6("::", 22);

	parse("tcp listen * 10.0.0.0/8 22;tcp listen * fd00::/8 22");
	ck_assert(sdp_rule_match(&r[0], "sshd", 's', (void *)&any4));
	ck_assert(sdp_rule_match(&r[1], "sshd", 's', (void *)&any6));
	/* for a client, 0.0.0.0 is just an address outside 10/8 */
	parse("tcp * * 10.0.0.0/8 22");
	ck_assert(!sdp_rule_match(&r[0], "ssh", 'c', (void *)&any4));
}
END_TEST

/* First match wins: the same address gets what the earliest rule says,
 * and an address no rule covers gets no decision (the default applies). */
START_TEST(first_match_wins)
{
	struct sockaddr_storage a = sa4("10.0.0.5", 6379);
	struct sockaddr_storage b = sa4("10.0.0.5", 6380);
	struct sockaddr_storage c = sa4("172.16.0.1", 6380);
	int n;

	n = parse("tcp * * 10.0.0.5 6379;san * * 10.0.0.0/8 *;"
		  "both * * * 6379");
	ck_assert_int_eq(decide(n, "redis", 'c', &a), SDP_RULE_TCP);
	ck_assert_int_eq(decide(n, "redis", 'c', &b), SDP_RULE_SAN);
	ck_assert_int_eq(decide(n, "redis", 'c', &c), -1);
	n = parse("san * * 10.0.0.0/8 *;tcp * * 10.0.0.5 6379");
	ck_assert_int_eq(decide(n, "redis", 'c', &a), SDP_RULE_SAN);
}
END_TEST

/* sdp_rule_action knows the three actions and their use- forms only. */
START_TEST(action_words)
{
	ck_assert_int_eq(sdp_rule_action("san"), SDP_RULE_SAN);
	ck_assert_int_eq(sdp_rule_action("use-tcp"), SDP_RULE_TCP);
	ck_assert_int_eq(sdp_rule_action("both"), SDP_RULE_BOTH);
	ck_assert_int_eq(sdp_rule_action("SAN"), -1);
	ck_assert_int_eq(sdp_rule_action(""), -1);
}
END_TEST

Suite *rules_suite(void)
{
	Suite *s = suite_create("rules");
	TCase *tc;

	tc = unit_tcase(s, "parse");
	tcase_add_test(tc, parse_fields);
	tcase_add_test(tc, parse_wildcards_synonyms);
	tcase_add_test(tc, parse_comments_blank);
	tcase_add_test(tc, parse_bad_lines);
	tcase_add_test(tc, parse_bad_patterns);
	tcase_add_test(tc, parse_reports_every_error);
	tcase_add_test(tc, parse_too_many);
	tcase_add_test(tc, parse_file);
	tcase_add_test(tc, action_words);
	tc = unit_tcase(s, "match");
	tcase_add_test(tc, match_role);
	tcase_add_test(tc, match_program);
	tcase_add_test(tc, match_v4_prefix);
	tcase_add_test(tc, match_v6_prefix);
	tcase_add_test(tc, match_v4_mapped);
	tcase_add_test(tc, match_ports);
	tcase_add_test(tc, match_listen_wildcard);
	tcase_add_test(tc, first_match_wins);
	return s;
}

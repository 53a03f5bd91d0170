/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rules.h - the rules language: "ACTION ROLE PROGRAM ADDRESS PORTS" lines
 * choosing SAN, TCP or both per program, role, address and port.
 */
#ifndef SDP_RULES_H
#define SDP_RULES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>

#define SDP_RULES_MAX 128

enum sdp_rule_action {
	SDP_RULE_TCP = 0,	/* never upgrade */
	SDP_RULE_BOTH = 1,	/* upgrade when possible, else TCP (default) */
	SDP_RULE_SAN = 2,	/* upgrade or refuse the connection */
};

struct sdp_rule {
	int action;		/* enum sdp_rule_action */
	char role;		/* 'c' connect, 's' listen/accept, '*' any */
	char program[64];	/* fnmatch pattern */
	int family;		/* AF_INET, AF_INET6, or 0 = any address */
	uint8_t addr[16];
	int prefix;		/* prefix length in bits */
	uint16_t port_lo, port_hi;
	int line;
};

int sdp_rule_action(const char *word);
/* Parses a rules file. A missing file is no error when !must_exist.
 * Returns the number of rules or -1 with err = "FILE:LINE: problem". */
int sdp_rules_parse_file(const char *file, struct sdp_rule *r, int max,
			 bool must_exist, char *err, size_t errlen);
/* Rules separated by ';' or newlines; origin names the source in errors. */
int sdp_rules_parse_string(const char *text, const char *origin,
			   struct sdp_rule *r, int max, char *err,
			   size_t errlen);
bool sdp_rule_match(const struct sdp_rule *r, const char *program, char role,
		    const struct sockaddr *addr);

#endif /* SDP_RULES_H */

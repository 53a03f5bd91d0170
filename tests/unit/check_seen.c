// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * check_seen.c - unit tests of discovery's memory of peers across a wire
 * (switch/peer_seen.c): a sighting stands for its lifetime and no longer,
 * for its provider, family, address and port only, and a drop ends it.
 */
#include <arpa/inet.h>
#include <string.h>

#include "peer_seen.h"
#include "unit.h"

static struct sockaddr_in in4(const char *ip, int port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	ck_assert_int_eq(inet_pton(AF_INET, ip, &a.sin_addr), 1);
	return a;
}

static struct sockaddr_in6 in6(const char *ip, int port)
{
	struct sockaddr_in6 a;

	memset(&a, 0, sizeof(a));
	a.sin6_family = AF_INET6;
	a.sin6_port = htons(port);
	ck_assert_int_eq(inet_pton(AF_INET6, ip, &a.sin6_addr), 1);
	return a;
}

#define SA(a) ((const struct sockaddr *)&(a)), sizeof(a)
#define T0 5000000000ull

/* A sighting stands from when it was noted for SW_SEEN_TTL_NS, is renewed
 * by the next, and ends at a drop. */
START_TEST(seen_lifetime)
{
	struct sockaddr_in a = in4("192.0.2.7", 6379);

	ck_assert(!sw_seen_fresh(1, SA(a), T0));
	sw_seen_note(1, SA(a), T0);
	ck_assert(sw_seen_fresh(1, SA(a), T0));
	ck_assert(sw_seen_fresh(1, SA(a), T0 + SW_SEEN_TTL_NS - 1));
	ck_assert(!sw_seen_fresh(1, SA(a), T0 + SW_SEEN_TTL_NS));
	/* a clock that went back is no sighting either */
	ck_assert(!sw_seen_fresh(1, SA(a), T0 - 1));
	/* seen again: it stands from then */
	sw_seen_note(1, SA(a), T0 + SW_SEEN_TTL_NS);
	ck_assert(sw_seen_fresh(1, SA(a), T0 + SW_SEEN_TTL_NS + 5));
	sw_seen_drop(1, SA(a));
	ck_assert(!sw_seen_fresh(1, SA(a), T0 + SW_SEEN_TTL_NS + 5));
}
END_TEST

/* A sighting is of one provider, family, address and port; other bytes of
 * the address do not matter, and a short or absent address is never seen. */
START_TEST(seen_key)
{
	struct sockaddr_in a = in4("192.0.2.8", 80);
	struct sockaddr_in port = in4("192.0.2.8", 81);
	struct sockaddr_in host = in4("192.0.2.9", 80);
	struct sockaddr_in6 v6 = in6("2001:db8::8", 80);
	struct sockaddr_in6 v6b = in6("2001:db8::9", 80);
	struct sockaddr_in odd = a;

	sw_seen_note(0, SA(a), T0);
	ck_assert(sw_seen_fresh(0, SA(a), T0 + 1));
	ck_assert(!sw_seen_fresh(1, SA(a), T0 + 1));	/* other provider */
	ck_assert(!sw_seen_fresh(0, SA(port), T0 + 1));
	ck_assert(!sw_seen_fresh(0, SA(host), T0 + 1));
	/* the bytes beyond address and port do not matter */
	memset(odd.sin_zero, 0xa5, sizeof(odd.sin_zero));
	ck_assert(sw_seen_fresh(0, SA(odd), T0 + 1));
	sw_seen_note(0, SA(v6), T0);
	ck_assert(sw_seen_fresh(0, SA(v6), T0 + 1));
	ck_assert(!sw_seen_fresh(0, SA(v6b), T0 + 1));
	/* too short an address, or no address: never seen */
	ck_assert(!sw_seen_fresh(0, (const struct sockaddr *)&a, 4, T0 + 1));
	ck_assert(!sw_seen_fresh(0, NULL, 0, T0 + 1));
	sw_seen_drop(0, SA(a));
	ck_assert(!sw_seen_fresh(0, SA(a), T0 + 1));
	ck_assert(sw_seen_fresh(0, SA(v6), T0 + 1));
}
END_TEST

/* More peers than slots: the oldest go, the newest stand. */
START_TEST(seen_many)
{
	struct sockaddr_in a;
	int i;

	for (i = 0; i < 100; i++) {
		a = in4("198.51.100.1", 1000 + i);
		sw_seen_note(2, SA(a), T0 + i);
	}
	a = in4("198.51.100.1", 1099);
	ck_assert(sw_seen_fresh(2, SA(a), T0 + 100));
	a = in4("198.51.100.1", 1000);
	ck_assert(!sw_seen_fresh(2, SA(a), T0 + 100));
}
END_TEST

Suite *seen_suite(void)
{
	Suite *s = suite_create("seen");
	TCase *tc = unit_tcase(s, "seen");

	tcase_add_test(tc, seen_lifetime);
	tcase_add_test(tc, seen_key);
	tcase_add_test(tc, seen_many);
	return s;
}

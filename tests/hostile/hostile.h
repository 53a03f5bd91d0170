/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * hostile.h - what the hostile-peer test programs share: the magic an honest
 * client's stream starts with (the echo server refuses any other start, so
 * a stray byte from a switch is caught), and the test data generator.
 */
#ifndef SDP_HOSTILE_H
#define SDP_HOSTILE_H

#include <stdint.h>

/* The first 8 bytes of every stream sent to echo_server. */
#define HOSTILE_ECHO_MAGIC "HECHO01\n"
#define HOSTILE_ECHO_MAGIC_LEN 8
/* What echo_server says first when HOSTILE_BANNER is set. */
#define HOSTILE_BANNER "HBANNER\n"
#define HOSTILE_BANNER_LEN 8

/* xorshift64*: the byte stream an honest client sends and expects back. */
static inline uint8_t hostile_gen(uint64_t *st)
{
	uint64_t x = *st;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*st = x;
	return (uint8_t)((x * 2685821657736338717ull) >> 56);
}

/* FNV-1a over a stream, to print one hash per direction. */
static inline void hostile_fnv(uint64_t *h, const uint8_t *p, size_t n)
{
	while (n--) {
		*h ^= *p++;
		*h *= 1099511628211ull;
	}
}
#define HOSTILE_FNV_INIT 14695981039346656037ull

#endif /* SDP_HOSTILE_H */

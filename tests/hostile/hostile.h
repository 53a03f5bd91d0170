/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * hostile.h - what the hostile-peer test programs share: the magic an honest
 * client's stream starts with (the echo server refuses any other start, so
 * a stray byte from a switch is caught), the first bytes of a client
 * that speaks the session protocol itself, and the test data generator.
 */
#ifndef SDP_HOSTILE_H
#define SDP_HOSTILE_H

#include <stdint.h>
#include <string.h>

#include "wire.h"

/* The first 8 bytes of every stream sent to echo_server. */
#define HOSTILE_ECHO_MAGIC "HECHO01\n"
#define HOSTILE_ECHO_MAGIC_LEN 8
/* What echo_server says first when HOSTILE_BANNER is set. */
#define HOSTILE_BANNER "HBANNER\n"
#define HOSTILE_BANNER_LEN 8

/* A client's first bytes as an honest switch sends them: its CLIENT_HELLO
 * (shm only, key, msg_size, credits), then the echo server's magic. */
#define HOSTILE_FIRST_LEN (sizeof(struct sdp_hello) + HOSTILE_ECHO_MAGIC_LEN)
static inline void hostile_first(uint8_t first[HOSTILE_FIRST_LEN],
				 const uint8_t key[16], uint32_t msg_size,
				 uint32_t credits)
{
	struct sdp_hello h;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SDP_HELLO_MAGIC, SDP_MAGIC_LEN);
	h.type = SDP_HELLO_CLIENT;
	h.version = SDP_PROTO_VERSION;
	h.nproviders = 1;
	memcpy(h.providers[0], "shm", 3);
	memcpy(h.key, key, sizeof(h.key));
	h.msg_size = msg_size;
	h.recv_credits = credits;
	memcpy(first, &h, sizeof(h));
	memcpy(first + sizeof(h), HOSTILE_ECHO_MAGIC, HOSTILE_ECHO_MAGIC_LEN);
}

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

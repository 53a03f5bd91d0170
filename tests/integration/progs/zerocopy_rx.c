/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * zerocopy_rx.c - TCP_ZEROCOPY_RECEIVE on a carried connection: the
 * receiver maps its socket and asks the kernel to map, or copy into its
 * copybuf, what its receive queue holds, reading with recv what the
 * kernel says to skip. That queue held the switch's doorbells: a byte
 * 0x44 came where the stream's byte was due. The connection must leave
 * the SAN at the first such call, the bytes that came on the SAN before
 * must be handed out by recv first (the call says to skip them), and
 * every byte must be the sender's, in order. A second round makes the
 * call once and reads the rest by recv: the sender, which only writes and
 * then closes, must close with a FIN, not a reset (its switch takes the
 * receiver's downgrade marker off its TCP queue first; the reset dropped
 * 0.2 to 3 MB the receiver had not read yet, one run in three).
 */
#include <netinet/tcp.h>
#include <stddef.h>
#include "tp_stats.h"

#define TOTAL (16u << 20)
#define CHUNK (1u << 20)

/* linux/tcp.h's struct, which glibc's netinet/tcp.h has only the first
 * three fields of */
struct zc_recv {
	uint64_t address;
	uint32_t length, recv_skip_hint, inq;
	int32_t err;
	uint64_t copybuf_address;
	int32_t copybuf_len;
	uint32_t flags;
	uint64_t msg_control, msg_controllen;
	uint32_t msg_flags, reserved;
};

static void run(int family, bool once)
{
	static uint8_t buf[CHUNK], cb[65536];
	const struct sw_conn_stats *st;
	size_t got = 0, mapped = 0, copied = 0, by_recv = 0;
	void *map;
	int s;
	pid_t kid;

	kid = tp_fork_sender(family, &s, TOTAL, NULL, NULL);
	tp_wait_carried(s);
	/* some of the stream comes on the SAN before the first call */
	usleep(50 * 1000);
	map = mmap(NULL, CHUNK, PROT_READ, MAP_SHARED, s, 0);
	TP_CHECK(map != MAP_FAILED, "mmap of the socket");
	while (got < TOTAL) {
		struct zc_recv z = {
			.address = (uint64_t)(uintptr_t)map, .length = CHUNK,
			.copybuf_address = (uint64_t)(uintptr_t)cb,
			.copybuf_len = sizeof(cb),
		};
		socklen_t zl = sizeof(z);
		size_t want;
		ssize_t r;

		if (once && got) {
			z.length = 0;
			z.copybuf_len = 0;
			z.recv_skip_hint = 0;
		} else {
			TP_CHECK(!getsockopt(s, IPPROTO_TCP,
					     TCP_ZEROCOPY_RECEIVE, &z, &zl),
				 "TCP_ZEROCOPY_RECEIVE");
		}
		if (z.length) {
			tp_verify(1, got, map, z.length);
			got += z.length;
			mapped += z.length;
			madvise(map, CHUNK, MADV_DONTNEED);
		}
		if (zl >= offsetof(struct zc_recv, flags) && z.copybuf_len > 0) {
			tp_verify(1, got, cb, (size_t)z.copybuf_len);
			got += (size_t)z.copybuf_len;
			copied += (size_t)z.copybuf_len;
			continue;
		}
		want = z.recv_skip_hint ? z.recv_skip_hint : sizeof(buf);
		if (want > TOTAL - got)
			want = TOTAL - got;
		if (!want || z.length)
			continue;
		r = recv(s, buf, want < sizeof(buf) ? want : sizeof(buf), 0);
		TP_CHECK(r > 0, "recv after %zu of %u bytes", got, TOTAL);
		tp_verify(1, got, buf, (size_t)r);
		got += (size_t)r;
		by_recv += (size_t)r;
	}
	st = tp_conn_stats(s);
	TP_CHECK(st && st->state == SW_TCP, "the connection is not on TCP "
		 "after TCP_ZEROCOPY_RECEIVE (state %d)",
		 st ? (int)st->state : -1);
	printf("%zu bytes: %zu mapped, %zu copied, %zu by recv\n", got,
	       mapped, copied, by_recv);
	tp_reap(kid, "the sender failed");
	munmap(map, CHUNK);
	close(s);
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;

	tp_start("zerocopy_rx", 40);
	tp_name = "zerocopy_rx every read";
	run(family, false);
	tp_name = "zerocopy_rx once, then recv";
	run(family, true);
	tp_name = "zerocopy_rx";
	tp_pass();
	return 0;
}

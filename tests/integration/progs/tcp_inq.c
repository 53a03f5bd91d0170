/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tcp_inq.c - TCP_INQ: with the option on, each recvmsg that has room for
 * it returns a TCP_CM_INQ control message with the bytes left to read
 * (gRPC reads again or waits by it). The same steps on a TCP pair the
 * switch never sees and on a carried pair, every answer compared: the
 * option set on the connection and inherited from the listener; a read of
 * part of what came, of the rest, with no room for the message
 * (MSG_CTRUNC), and one without the option.
 */
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include "diff_pair.h"

#define PART 16384
#define PARTS 3

static int family;

/* recvmsg of at most n bytes on fd (raw: the kernel's own call), with
 * ctl_len bytes of room for control messages; returns the bytes, the INQ
 * message's value in *inq (-1 none) and msg_flags in *fl. */
static ssize_t read_inq(int fd, bool raw, size_t n, size_t ctl_len,
			int *inq, int *fl)
{
	static char buf[PART * PARTS];
	union {
		char b[CMSG_SPACE(sizeof(int)) * 2];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { buf, n };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl_len ? ctl.b : NULL,
			    .msg_controllen = ctl_len };
	struct cmsghdr *c;
	ssize_t r;

	memset(&ctl, 0xa5, sizeof(ctl));
	r = raw ? syscall(SYS_recvmsg, fd, &m, MSG_DONTWAIT) :
		  recvmsg(fd, &m, MSG_DONTWAIT);
	TP_CHECK(r >= 0, "recvmsg on the %s connection",
		 raw ? "plain" : "carried");
	*inq = -1;
	*fl = m.msg_flags;
	for (c = ctl_len ? CMSG_FIRSTHDR(&m) : NULL; c;
	     c = CMSG_NXTHDR(&m, c)) {
		TP_CHECK(c->cmsg_level == SOL_TCP &&
			 c->cmsg_type == TCP_CM_INQ &&
			 c->cmsg_len == CMSG_LEN(sizeof(int)),
			 "an unexpected control message (%d/%d, %zu bytes)",
			 c->cmsg_level, c->cmsg_type, (size_t)c->cmsg_len);
		memcpy(inq, CMSG_DATA(c), sizeof(int));
	}
	return r;
}

/* Sends PARTS * PART bytes on c and waits until s has them all. */
static void fill(int c, int s, bool raw, unsigned int id)
{
	static char buf[PART * PARTS];
	long end = tp_ms() + 5000;
	int q = 0;

	tp_fill(id, 0, buf, sizeof(buf));
	tp_write_all(c, buf, sizeof(buf));
	while ((raw ? syscall(SYS_ioctl, s, FIONREAD, &q) :
		      ioctl(s, FIONREAD, &q)) == 0 &&
	       q < (int)sizeof(buf)) {
		TP_CHECK(tp_ms() < end, "only %d bytes came", q);
		usleep(1000);
	}
}

/* One round on both pairs: PART with room for the message, PART with
 * none, then the rest in two reads (too little room, then enough);
 * compare each answer. */
static void round_on(int kc, int ks, int cc, int cs, bool on)
{
	static const size_t room[] = { 64, 0, 8, 64 };
	static const size_t want[] = { PART, PART, PART - 100, 100 };
	int ki, kf, ci, cf, i;

	fill(kc, ks, true, 7);
	fill(cc, cs, false, 7);
	for (i = 0; i < 4; i++) {
		ssize_t k = read_inq(ks, true, want[i], room[i], &ki, &kf);
		ssize_t c = read_inq(cs, false, want[i], room[i], &ci, &cf);

		same("bytes read", k, c);
		same(on ? "TCP_CM_INQ's count" : "no TCP_CM_INQ", ki, ci);
		same("MSG_CTRUNC", kf & MSG_CTRUNC, cf & MSG_CTRUNC);
	}
	TP_CHECK(!on || ki == 0, "the kernel said %d bytes were left", ki);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int kc, ks, cc, cs, l, one = 1;

	family = argc > 1 ? AF_INET6 : AF_INET;
	tp_start("tcp_inq", 30);

	/* without the option: no control message on either */
	tp_raw_pair(family, &kc, &ks);
	tp_pair(family, &cc, &cs);
	tp_carry_both(cc, cs);
	round_on(kc, ks, cc, cs, false);

	/* set on the accepted end */
	TP_CHECK(!syscall(SYS_setsockopt, ks, IPPROTO_TCP, TCP_INQ, &one,
			  sizeof(one)) &&
		 !setsockopt(cs, IPPROTO_TCP, TCP_INQ, &one, sizeof(one)),
		 "setsockopt TCP_INQ");
	round_on(kc, ks, cc, cs, true);
	/* the other direction too: the client's end with it on */
	TP_CHECK(!syscall(SYS_setsockopt, kc, IPPROTO_TCP, TCP_INQ, &one,
			  sizeof(one)) &&
		 !setsockopt(cc, IPPROTO_TCP, TCP_INQ, &one, sizeof(one)),
		 "setsockopt TCP_INQ");
	round_on(ks, kc, cs, cc, true);
	close(kc);
	close(ks);
	close(cc);
	close(cs);

	/* inherited from the listener (only the carried pair's accept is
	 * the switch's; the kernel's answer was compared above) */
	l = tp_listener(family, 4, &ss, &len);
	TP_CHECK(!setsockopt(l, IPPROTO_TCP, TCP_INQ, &one, sizeof(one)),
		 "setsockopt TCP_INQ on the listener");
	cc = tp_connect(&ss, len);
	cs = accept(l, NULL, NULL);
	TP_CHECK(cs >= 0, "accept");
	close(l);
	tp_carry_both(cc, cs);
	tp_raw_pair(family, &kc, &ks);
	TP_CHECK(!syscall(SYS_setsockopt, ks, IPPROTO_TCP, TCP_INQ, &one,
			  sizeof(one)), "setsockopt TCP_INQ");
	round_on(kc, ks, cc, cs, true);
	tp_pass();
}

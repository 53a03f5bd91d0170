/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * recv_outparams.c - the receive calls answer on a carried connection as
 * the kernel answers on a plain one, call by call: the same calls run on a
 * TCP pair the switch never sees (made with raw system calls) and on a
 * carried pair, and every return value, errno and out-parameter is
 * compared: msg_namelen, msg_controllen (a 10 KiB control buffer, nothing
 * in it), msg_flags, recvfrom's address length, recvmmsg's msg_len, and
 * the bytes, with MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL, MSG_TRUNC and
 * MSG_CMSG_CLOEXEC.
 */
#include "tp_stats.h"

#define RO_CTL 10240

struct ro_out {
	ssize_t r;
	int err;
	socklen_t namelen;
	size_t controllen;
	int flags;
	unsigned int mlen[2];	/* recvmmsg */
	unsigned char buf[256];
	bool ctl_same;		/* the control buffer was not written */
};

static unsigned char ctl[RO_CTL], ctl_orig[RO_CTL];

static void ctl_reset(void)
{
	size_t i;

	/* old contents that look like control messages */
	for (i = 0; i < RO_CTL; i++)
		ctl_orig[i] = (unsigned char)(i * 7 + 1);
	memcpy(ctl, ctl_orig, RO_CTL);
}

/* recvmsg with a name buffer, the control buffer and garbage flags. */
static void do_recvmsg(int fd, int flags, size_t len, struct ro_out *o)
{
	struct sockaddr_storage name;
	struct iovec iov = { .iov_base = o->buf, .iov_len = len };
	struct msghdr m = {
		.msg_name = &name, .msg_namelen = sizeof(name),
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl, .msg_controllen = RO_CTL,
		.msg_flags = 0x5a5a5a5a,
	};

	memset(o, 0, sizeof(*o));
	memset(o->buf, 0xee, sizeof(o->buf));
	ctl_reset();
	o->r = recvmsg(fd, &m, flags);
	o->err = o->r < 0 ? errno : 0;
	o->namelen = m.msg_namelen;
	o->controllen = m.msg_controllen;
	o->flags = m.msg_flags;
	o->ctl_same = !memcmp(ctl, ctl_orig, RO_CTL);
}

static void do_recvfrom(int fd, int flags, size_t len, struct ro_out *o)
{
	struct sockaddr_storage name;
	socklen_t alen = sizeof(name);

	memset(o, 0, sizeof(*o));
	memset(o->buf, 0xee, sizeof(o->buf));
	o->r = recvfrom(fd, o->buf, len, flags, (struct sockaddr *)&name,
			&alen);
	o->err = o->r < 0 ? errno : 0;
	o->namelen = alen;
}

static void do_recvmmsg(int fd, int flags, size_t len, struct ro_out *o)
{
	struct sockaddr_storage name[2];
	struct iovec iov[2] = { { o->buf, len }, { o->buf + 128, len } };
	struct mmsghdr mm[2];
	int i;

	memset(o, 0, sizeof(*o));
	memset(o->buf, 0xee, sizeof(o->buf));
	ctl_reset();
	memset(mm, 0, sizeof(mm));
	for (i = 0; i < 2; i++) {
		mm[i].msg_hdr.msg_name = &name[i];
		mm[i].msg_hdr.msg_namelen = sizeof(name[i]);
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
		mm[i].msg_hdr.msg_control = i ? ctl + RO_CTL / 2 : ctl;
		mm[i].msg_hdr.msg_controllen = RO_CTL / 2;
		mm[i].msg_hdr.msg_flags = 0x5a5a5a5a;
		mm[i].msg_len = 0xdeadbeef;
	}
	o->r = recvmmsg(fd, mm, 2, flags, NULL);
	o->err = o->r < 0 ? errno : 0;
	o->namelen = mm[0].msg_hdr.msg_namelen;
	o->controllen = mm[0].msg_hdr.msg_controllen;
	o->flags = mm[0].msg_hdr.msg_flags;
	o->mlen[0] = mm[0].msg_len;
	o->mlen[1] = mm[1].msg_len;
	o->ctl_same = !memcmp(ctl, ctl_orig, RO_CTL);
}

static void compare(const char *what, const struct ro_out *k,
		    const struct ro_out *c)
{
	TP_CHECK(k->r == c->r && k->err == c->err,
		 "%s: returned %zd (%s) on the carried connection, the kernel "
		 "%zd (%s)", what, c->r, strerror(c->err), k->r,
		 strerror(k->err));
	TP_CHECK(k->namelen == c->namelen,
		 "%s: msg_namelen/address length %u, the kernel's %u", what,
		 (unsigned int)c->namelen, (unsigned int)k->namelen);
	TP_CHECK(k->controllen == c->controllen,
		 "%s: msg_controllen %zu, the kernel's %zu", what,
		 c->controllen, k->controllen);
	TP_CHECK(k->flags == c->flags,
		 "%s: msg_flags 0x%x, the kernel's 0x%x", what,
		 (unsigned int)c->flags, (unsigned int)k->flags);
	TP_CHECK(k->mlen[0] == c->mlen[0] && k->mlen[1] == c->mlen[1],
		 "%s: msg_len %u,%u, the kernel's %u,%u", what, c->mlen[0],
		 c->mlen[1], k->mlen[0], k->mlen[1]);
	TP_CHECK(k->ctl_same == c->ctl_same,
		 "%s: the control buffer was %s, by the kernel %s", what,
		 c->ctl_same ? "left" : "written", k->ctl_same ? "left" :
		 "written");
	TP_CHECK(!memcmp(k->buf, c->buf, sizeof(k->buf)),
		 "%s: the bytes in the buffer differ from the kernel's", what);
}

/* Writes n bytes of a known pattern on both pairs' client ends and waits
 * until both servers can read them all. */
static void feed(const int *fds, size_t n)
{
	unsigned char b[256];
	int i, avail;
	long end = tp_ms() + 5000;

	for (i = 0; i < (int)n; i++)
		b[i] = (unsigned char)(i * 3 + 11);
	TP_CHECK(send(fds[0], b, n, 0) == (ssize_t)n, "send (plain)");
	TP_CHECK(send(fds[2], b, n, 0) == (ssize_t)n, "send (carried)");
	for (i = 1; i < 4; i += 2) {
		struct pollfd p = { .fd = fds[i], .events = POLLIN };

		do {
			char pk[256];

			TP_CHECK(poll(&p, 1, 100) >= 0, "poll");
			avail = (int)recv(fds[i], pk, sizeof(pk),
					  MSG_PEEK | MSG_DONTWAIT);
		} while (avail < (int)n && tp_ms() < end);
		TP_CHECK(avail >= (int)n, "the bytes did not arrive");
	}
}

typedef void (*ro_call)(int, int, size_t, struct ro_out *);

static void both(const int *fds, const char *what, ro_call fn, int flags,
		 size_t len)
{
	struct ro_out k, c;

	fn(fds[1], flags, len, &k);
	fn(fds[3], flags, len, &c);
	compare(what, &k, &c);
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	int fds[4];	/* plain client, plain server, carried ... */
	int i;

	tp_start("recv_outparams", 30);
	tp_raw_pair(family, &fds[0], &fds[1]);
	tp_pair(family, &fds[2], &fds[3]);
	tp_carry_both(fds[2], fds[3]);

	both(fds, "recvmsg on an empty socket (MSG_DONTWAIT)", do_recvmsg,
	     MSG_DONTWAIT, 100);
	feed(fds, 100);
	both(fds, "recvmsg MSG_PEEK", do_recvmsg, MSG_PEEK, 40);
	both(fds, "recvmsg", do_recvmsg, 0, 40);
	both(fds, "recvmsg MSG_CMSG_CLOEXEC", do_recvmsg, MSG_CMSG_CLOEXEC,
	     20);
	both(fds, "recvfrom with an address buffer", do_recvfrom, 0, 20);
	both(fds, "recvmmsg of two", do_recvmmsg, MSG_DONTWAIT, 10);
	feed(fds, 20);
	both(fds, "recvmsg MSG_TRUNC", do_recvmsg, MSG_TRUNC, 5);
	both(fds, "recvmsg MSG_WAITALL", do_recvmsg, MSG_WAITALL, 5);
	both(fds, "recvmsg, empty again", do_recvmsg, MSG_DONTWAIT, 100);
	feed(fds, 200);
	both(fds, "recvmsg MSG_WAITALL of all", do_recvmsg, MSG_WAITALL, 200);
	feed(fds, 30);
	both(fds, "recvmsg MSG_TRUNC|MSG_DONTWAIT", do_recvmsg,
	     MSG_TRUNC | MSG_DONTWAIT, 100);
	/* the end of the stream */
	shutdown(fds[0], SHUT_WR);
	shutdown(fds[2], SHUT_WR);
	usleep(50 * 1000);
	both(fds, "recvmsg at EOF", do_recvmsg, 0, 100);
	both(fds, "recvfrom at EOF", do_recvfrom, 0, 100);
	{
		const struct sw_conn_stats *st = tp_conn_stats(fds[3]);

		TP_CHECK(st && st->state == TP_STATE_SAN,
			 "the carried pair left the provider");
	}
	for (i = 0; i < 4; i++)
		close(fds[i]);
	tp_pass();
	return 0;
}

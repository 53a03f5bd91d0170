/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sendfile_lend.c - sendfile from a regular file to a carried connection
 * lends the file's pages: the call returns, the receiver copies them when
 * its program reads. Every byte must arrive in order whatever follows the
 * call: more sendfile pieces, small writes, close and exit or _exit
 * while the receiver sleeps, fork, a truncated file. The receiver reads in small pieces (pulled ahead) or in
 * large ones, and its statistics must show the bytes came by its own pull
 * (rdma-read), not through its staging ring.
 */
#include <grp.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "tp_stats.h"

#define FILE_LEN ((12u << 20) + 4321)
#define TRAILER 3000

static int family;
static int file_fd;
static const uint8_t *file_map;	/* the file, to check bytes against */

/* Stream 1's bytes [0, FILE_LEN) in an unlinked file: byte i of the
 * file is byte i of the stream. */
static int make_file(void)
{
	char path[] = "/tmp/sdp-sendfile-XXXXXX";
	uint8_t *buf = malloc(1 << 20);
	size_t off = 0, n;
	int fd = mkstemp(path);

	TP_CHECK(fd >= 0 && buf, "mkstemp in /tmp");
	unlink(path);
	while (off < FILE_LEN) {
		n = FILE_LEN - off < (1u << 20) ? FILE_LEN - off : 1u << 20;
		tp_fill(1, off, buf, n);
		TP_CHECK(pwrite(fd, buf, n, (off_t)off) == (ssize_t)n,
			 "write the file");
		off += n;
	}
	free(buf);
	file_map = mmap(NULL, FILE_LEN, PROT_READ, MAP_SHARED, fd, 0);
	TP_CHECK(file_map != MAP_FAILED, "mmap the file");
	return fd;
}

/* Checks n received bytes at stream offset off (a fast compare with the
 * file; the pattern itself past its end and to name a wrong byte). */
static void verify(size_t off, const uint8_t *p, size_t n)
{
	size_t k = off < FILE_LEN ? FILE_LEN - off : 0;

	if (k > n)
		k = n;
	if (k && memcmp(p, file_map + off, k))
		tp_verify(1, off, p, k);
	if (n > k)
		tp_verify(1, off + k, p + k, n - k);
}

/* sendfile of [off, end) of the file, in calls of at most chunk bytes
 * (0: one call for all), waiting in poll on EAGAIN; small writes of the
 * stream's own bytes between the calls when mixed (from the file's
 * pattern: the stream stays stream 1). With pos_null the file position is
 * used and must move exactly as far. */
static void send_file(int c, size_t off, size_t end, size_t chunk, bool mixed,
		      bool pos_null)
{
	struct pollfd pf = { .fd = c, .events = POLLOUT };
	uint8_t small[700];
	unsigned int i = 0;

	if (pos_null)
		TP_CHECK(lseek(file_fd, (off_t)off, SEEK_SET) == (off_t)off,
			 "lseek");
	while (off < end) {
		size_t want = chunk && end - off > chunk ? chunk : end - off;
		off_t o = (off_t)off;
		ssize_t r;

		if (mixed && (i++ % 3) == 1) {
			size_t k = (i * 97) % sizeof(small) + 1;

			if (k > end - off)
				k = end - off;
			tp_fill(1, off, small, k);
			tp_write_all(c, small, k);
			off += k;
			continue;
		}
		r = sendfile(c, file_fd, pos_null ? NULL : &o, want);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			TP_CHECK(poll(&pf, 1, 10000) == 1,
				 "never writable again (10 s)");
			continue;
		}
		TP_CHECK(r > 0, "sendfile of %zu bytes at %zu", want, off);
		if (pos_null)
			TP_CHECK(lseek(file_fd, 0, SEEK_CUR) ==
				 (off_t)(off + (size_t)r),
				 "the file position is %lld after %zd bytes "
				 "from %zu", (long long)lseek(file_fd, 0,
							     SEEK_CUR),
				 r, off);
		else
			TP_CHECK(o == (off_t)(off + (size_t)r),
				 "the offset is %lld after %zd bytes from %zu",
				 (long long)o, r, off);
		off += (size_t)r;
	}
}

/* The trailer after the file: stream 1 goes on past FILE_LEN. */
static void send_trailer(int c)
{
	uint8_t t[TRAILER];

	tp_fill(1, FILE_LEN, t, sizeof(t));
	tp_write_all(c, t, sizeof(t));
}

enum mode {
	M_BLOCKING,	/* one blocking call, then the trailer, close */
	M_NB_MIXED,	/* non-blocking calls of 1 MiB + 7, small writes */
	M_CLOSE_EXIT,	/* the last call, then close and _exit at once */
	M_FORK,		/* a call, then fork: the child sends the trailer */
	M_POS_NULL,	/* the file position, calls of 3 MiB */
	M_UNREAD,	/* one call the receiver reads nothing of until it
			 * returned; close and exit() */
	M_UEXIT,	/* one non-blocking call (a lend) while the receiver
			 * sleeps, then close and _exit at once */
	M_REFUSED,	/* as M_UNREAD, but the receiver then becomes
			 * nobody: it may no longer read the sender, whose
			 * program makes no call until it has every byte */
};

#define UNREAD_LEN ((2u << 20) + 123)
#define UEXIT_LEN ((3u << 20) + 77)
static int unread_pipe[2], read_pipe[2], count_pipe[2];

static void sender(int c, enum mode m)
{
	pid_t kid;

	tp_wait_carried(c);
	switch (m) {
	case M_BLOCKING:
		send_file(c, 0, FILE_LEN, 0, false, false);
		send_trailer(c);
		break;
	case M_NB_MIXED:
		tp_nonblock(c);
		send_file(c, 0, FILE_LEN, (1u << 20) + 7, true, false);
		send_trailer(c);
		break;
	case M_CLOSE_EXIT:
		/* the last call's lend is out at close: close waits while
		 * the receiver takes it, and exit for what is left */
		send_file(c, 0, FILE_LEN - (3u << 20), 0, false, false);
		send_file(c, FILE_LEN - (3u << 20), FILE_LEN, 0, false,
			  false);
		close(c);
		exit(0);
	case M_FORK:
		send_file(c, 0, FILE_LEN, 0, false, false);
		kid = fork();
		TP_CHECK(kid >= 0, "fork");
		if (!kid) {
			send_trailer(c);
			close(c);
			_exit(0);
		}
		close(c);
		tp_reap(kid, "the sender's child failed");
		_exit(0);
	case M_UEXIT: {
		/* more than the receiver's staging ring can take: the rest
		 * of the lend lives in this process when close() returns,
		 * and _exit runs no exit handler */
		off_t o = 0;
		ssize_t r;

		tp_nonblock(c);
		r = sendfile(c, file_fd, &o, UEXIT_LEN);
		TP_CHECK(r >= (ssize_t)(2u << 20), "one non-blocking sendfile "
			 "of %u bytes returned %zd: a lend takes them all",
			 UEXIT_LEN, r);
		TP_CHECK(write(count_pipe[1], &r, sizeof(r)) == sizeof(r),
			 "pipe");
		close(c);
		_exit(0);
	}
	case M_POS_NULL:
		send_file(c, 0, FILE_LEN, 3u << 20, false, true);
		send_trailer(c);
		break;
	case M_UNREAD:
	case M_REFUSED: {
		/* a copy of the bytes would wait for the reader, who waits
		 * for this call to return: only a lend returns */
		off_t o = 0;
		char b;

		TP_CHECK(sendfile(c, file_fd, &o, UNREAD_LEN) == UNREAD_LEN,
			 "one sendfile of %u bytes", UNREAD_LEN);
		TP_CHECK(write(unread_pipe[1], "r", 1) == 1, "pipe");
		/* no call on c until the reader has every byte: nobody
		 * can take the lend back, the reader must pull it all */
		TP_CHECK(read(read_pipe[0], &b, 1) == 1, "pipe back");
		close(c);
		_exit(0);
	}
	}
	close(c);
	_exit(0);
}

/* Reads stream 1 to EOF in pieces of rd bytes, after sleeping nap ms;
 * returns the byte count. */
static size_t receiver(int s, size_t rd, unsigned int nap_ms)
{
	uint8_t *buf = malloc(rd);
	size_t got = 0;
	ssize_t r;

	TP_CHECK(buf != NULL, "malloc");
	if (nap_ms)
		usleep(nap_ms * 1000);
	while ((r = recv(s, buf, rd, 0)) > 0) {
		verify(got, buf, (size_t)r);
		got += (size_t)r;
	}
	TP_CHECK(r == 0, "recv after %zu bytes", got);
	free(buf);
	return got;
}

static void run(enum mode m, size_t rd, unsigned int nap_ms)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const struct sw_conn_stats *st;
	ssize_t uexit_sent = 0;
	size_t got, want;
	pid_t kid;
	int l, s, c;

	l = tp_listener(family, 4, &ss, &len);
	TP_CHECK(!pipe(unread_pipe) && !pipe(read_pipe) && !pipe(count_pipe),
		 "pipe");
	kid = fork();
	TP_CHECK(kid >= 0, "fork");
	if (!kid) {
		close(l);
		c = tp_connect(&ss, len);
		sender(c, m);
	}
	close(unread_pipe[1]);
	close(read_pipe[0]);
	close(count_pipe[1]);
	s = accept(l, NULL, NULL);
	TP_CHECK(s >= 0, "accept");
	close(l);
	tp_wait_carried(s);
	if (m == M_UNREAD || m == M_REFUSED) {
		/* not a byte read, but the socket looked at (poll), as a
		 * program would: the sender's upgrade needs this side's
		 * calls to finish */
		struct pollfd pf[2] = { { .fd = unread_pipe[0],
					  .events = POLLIN },
					{ .fd = s, .events = POLLIN } };
		char b;

		while (poll(pf, 2, 10000) > 0 && !pf[0].revents)
			usleep(1000);
		TP_CHECK(read(unread_pipe[0], &b, 1) == 1,
			 "the sender's sendfile did not return before its "
			 "bytes were read");
	}
	close(unread_pipe[0]);
	if (m == M_REFUSED)
		TP_CHECK(!setgroups(0, NULL) && !setgid(65534) &&
			 !setuid(65534), "become nobody");
	if (m == M_UNREAD || m == M_REFUSED) {
		/* every byte of the lend, pulled by this side while the
		 * sender makes no call: the statistics must say so */
		uint8_t *buf = malloc(rd);
		ssize_t r;

		TP_CHECK(buf != NULL, "malloc");
		for (got = 0; got < UNREAD_LEN; got += (size_t)r) {
			r = recv(s, buf, rd < UNREAD_LEN - got ? rd :
				 UNREAD_LEN - got, 0);
			TP_CHECK(r > 0, "recv after %zu bytes", got);
			verify(got, buf, (size_t)r);
		}
		free(buf);
		st = tp_conn_stats(s);
		TP_CHECK(st && (m == M_REFUSED ||
				st->rx_rdma_read == UNREAD_LEN),
			 "%llu of the %u lent bytes came by this side's pull "
			 "(staging %llu, copy %llu)",
			 st ? (unsigned long long)st->rx_rdma_read : 0ull,
			 UNREAD_LEN,
			 st ? (unsigned long long)st->rx_rdma_write : 0ull,
			 st ? (unsigned long long)st->rx_copy : 0ull);
		TP_CHECK(write(read_pipe[1], "d", 1) == 1, "pipe back");
		got += receiver(s, rd, 0);
	} else {
		/* _exit: the nap starts once the sendfile returned, so the
		 * sender closes and ends while nothing is read */
		if (m == M_UEXIT) {
			struct pollfd pf[2] = { { .fd = count_pipe[0],
						  .events = POLLIN },
						{ .fd = s, .events = POLLIN } };

			/* the socket looked at meanwhile (M_UNREAD) */
			while (poll(pf, 2, 10000) > 0 && !pf[0].revents)
				usleep(1000);
			TP_CHECK(read(count_pipe[0], &uexit_sent,
				      sizeof(uexit_sent)) ==
				 sizeof(uexit_sent), "the sender's count");
		}
		got = receiver(s, rd, nap_ms);
	}
	close(count_pipe[0]);
	close(read_pipe[1]);
	tp_reap(kid, "the sender failed");
	want = m == M_CLOSE_EXIT ? FILE_LEN :
	       m == M_UNREAD || m == M_REFUSED ? UNREAD_LEN :
	       m == M_UEXIT ? (size_t)uexit_sent : FILE_LEN + TRAILER;
	TP_CHECK(got == want, "%zu bytes sent, %zu arrived before EOF", want,
		 got);
	/* How much of the rest came by this side's pull depends on how
	 * soon it read: a sender takes a lend back after SDP_XSLOT_NB_US or
	 * SDP_XSLOT_BLOCK_US without progress, so on a loaded machine it may
	 * be none; M_UNREAD proves the path, the others the bytes. */
	close(s);
}

/* A file truncated while its pages are lent: the receiver gets the bytes
 * it read before and then an error or the end, never a wrong byte; the
 * sender never dies of SIGBUS. */
static void run_truncated(void)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint8_t buf[16384];
	size_t got = 0;
	ssize_t r;
	pid_t kid;
	int l, s, c, st;

	l = tp_listener(family, 4, &ss, &len);
	kid = fork();
	TP_CHECK(kid >= 0, "fork");
	if (!kid) {
		int f;
		char path[] = "/tmp/sdp-sendfile-trunc-XXXXXX";
		uint8_t *b = malloc(4 << 20);
		off_t o = 0;

		close(l);
		f = mkstemp(path);
		TP_CHECK(f >= 0 && b, "mkstemp");
		unlink(path);
		tp_fill(1, 0, b, 4 << 20);
		TP_CHECK(write(f, b, 4 << 20) == 4 << 20, "write");
		c = tp_connect(&ss, len);
		tp_wait_carried(c);
		TP_CHECK(sendfile(c, f, &o, 4 << 20) > 0, "sendfile");
		TP_CHECK(!ftruncate(f, 0), "ftruncate");
		/* the next write takes the lend back and cannot: it
		 * fails, and the program is not killed */
		r = send(c, b, 1000, MSG_NOSIGNAL);
		TP_CHECK(r < 0 && (errno == EPIPE || errno == ECONNRESET),
			 "the send after the file shrank returned %zd", r);
		close(c);
		_exit(0);
	}
	s = accept(l, NULL, NULL);
	TP_CHECK(s >= 0, "accept");
	close(l);
	usleep(200 * 1000);
	while ((r = recv(s, buf, sizeof(buf), 0)) > 0) {
		tp_verify(1, got, buf, (size_t)r);
		got += (size_t)r;
	}
	TP_CHECK(r < 0 && errno == ECONNRESET, "recv after %zu bytes "
		 "returned %zd: the stream broke, ECONNRESET is due", got, r);
	TP_CHECK(waitpid(kid, &st, 0) == kid, "waitpid");
	TP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		 "the sender died (status 0x%x): a truncated file's lend "
		 "must not kill it", st);
	close(s);
}

int main(int argc, char **argv)
{
	static const struct {
		enum mode m;
		size_t rd;
		unsigned int nap_ms;
	} cases[] = {
		{ M_BLOCKING, 8192, 0 },
		{ M_BLOCKING, 1 << 20, 0 },
		{ M_NB_MIXED, 16384, 0 },
		{ M_NB_MIXED, 300000, 0 },
		{ M_CLOSE_EXIT, 8192, 0 },
		{ M_FORK, 65536, 50 },
		{ M_POS_NULL, 4096, 0 },
		{ M_UNREAD, 8192, 0 },
		{ M_UEXIT, 65536, 300 },
	};
	unsigned int i;
	pid_t kid;

	family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	tp_start("sendfile_lend", 60);
	file_fd = make_file();
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		static char name[64];

		snprintf(name, sizeof(name), "sendfile_lend case %u", i);
		tp_name = name;
		run(cases[i].m, cases[i].rd, cases[i].nap_ms);
	}
	tp_name = "sendfile_lend";
	run_truncated();
	/* the receiver's setuid (as root: the suite runs as root in CI)
	 * in a process of its own */
	if (!geteuid()) {
		tp_name = "sendfile_lend refused";
		kid = fork();
		TP_CHECK(kid >= 0, "fork");
		if (!kid) {
			run(M_REFUSED, 8192, 0);
			_exit(0);
		}
		tp_reap(kid, "the case whose receiver becomes nobody failed");
		tp_name = "sendfile_lend";
	}
	tp_pass();
}

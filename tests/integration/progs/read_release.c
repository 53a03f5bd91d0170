/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * read_release.c - the RDMA-read path with every send buffer in flight: the
 * receiver of a long transfer acknowledges each pull (XFER_DONE) while the
 * idle sender keeps asking buffers back (SDP_IDLE_MS=1), so the receiver
 * sends its CREDIT_RELEASEs with two send buffers and a two-slot ring, and
 * waits for a send buffer inside those sends. Two processes (RdmaRead is
 * between them). Every byte must arrive, in order, through RdmaRead, with
 * no protocol error and no crash.
 */
#include "tp_stats.h"

#define RR_CHUNK (1u << 20)
#define RR_CHUNKS 48

/* The sending process: its own connection to the listener at ss. */
static void sender(const struct sockaddr_storage *ss, socklen_t len)
{
	char *buf = malloc(RR_CHUNK);
	size_t off, done;
	ssize_t r;
	int c = tp_connect(ss, len);

	TP_CHECK(buf, "malloc");
	/* writes of 1 MiB: each one large enough for RDATA */
	for (off = 0; off < (size_t)RR_CHUNKS * RR_CHUNK; off += RR_CHUNK) {
		tp_fill(7, off, buf, RR_CHUNK);
		for (done = 0; done < RR_CHUNK; done += (size_t)r) {
			r = send(c, buf + done, RR_CHUNK - done, MSG_NOSIGNAL);
			TP_CHECK(r > 0, "send at byte %zu", off + done);
		}
	}
	free(buf);
	close(c);
}

/* Receives the whole stream on fd into reads of up to 1 MiB. */
static void receiver(int fd)
{
	char *buf = malloc(RR_CHUNK);
	size_t off = 0, total = (size_t)RR_CHUNKS * RR_CHUNK;
	ssize_t r;

	TP_CHECK(buf, "malloc");
	while (off < total) {
		r = recv(fd, buf, RR_CHUNK, 0);
		TP_CHECK(r > 0, "recv after %zu of %zu bytes (%zd)", off,
			 total, r);
		tp_verify(7, off, buf, (size_t)r);
		off += (size_t)r;
	}
	free(buf);
}

int main(int argc, char **argv)
{
	int family = argc > 1 && !strcmp(argv[1], "6") ? AF_INET6 : AF_INET;
	const struct sw_conn_stats *st;
	static char cat[] = "/tmp/sdp-read-release.XXXXXX";
	struct sockaddr_storage ss;
	socklen_t len;
	pid_t pid;
	FILE *f;
	int fd, l;

	if (!getenv("SDP_PATH")) {
		/* the switch reads its settings at start: run again */
		fd = mkstemp(cat);
		if (fd < 0 || !(f = fdopen(fd, "w")))
			tp_fail("catalog %s: %s", cat, strerror(errno));
		fprintf(f, "shm libsdp-shm.so ring_slots=2\n");
		fclose(f);
		setenv("SDP_PROVIDER_CATALOG", cat, 1);
		setenv("SDP_PROVIDERS", "shm", 1);
		setenv("SDP_PATH", "read", 1);
		setenv("SDP_SEND_BUFS", "2", 1);
		setenv("SDP_IDLE_MS", "1", 1);
		execv("/proc/self/exe", argv);
		tp_fail("execv: %s", strerror(errno));
	}
	tp_start("read_release", 50);
	l = tp_listener(family, 4, &ss, &len);
	pid = fork();
	TP_CHECK(pid >= 0, "fork");
	if (!pid) {
		close(l);
		sender(&ss, len);
		_exit(0);
	}
	fd = accept(l, NULL, NULL);
	TP_CHECK(fd >= 0, "accept");
	close(l);
	/* read once at start: the file has served */
	unlink(getenv("SDP_PROVIDER_CATALOG"));
	receiver(fd);
	st = tp_conn_stats(fd);
	TP_CHECK(st, "no statistics record of the receiving end");
	TP_CHECK(st->rx_rdma_read >= (uint64_t)RR_CHUNKS * RR_CHUNK / 2,
		 "only %llu of %u bytes came by RdmaRead (copy %llu, "
		 "write %llu)", (unsigned long long)st->rx_rdma_read,
		 RR_CHUNKS * RR_CHUNK, (unsigned long long)st->rx_copy,
		 (unsigned long long)st->rx_rdma_write);
	close(fd);
	tp_reap(pid, "the sending process");
	tp_pass();
	return 0;
}

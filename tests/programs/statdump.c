/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * statdump.c - prints the statistics files that preloaded processes publish
 * (switch/stats.h) as one JSON object per file, so the program tests can
 * prove which path carried the bytes. Reads files kept after their process
 * ended too: every slot that ever held a connection is printed.
 *   statdump FILE...
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stats.h"

static void put_str(const char *key, const char *s, size_t max)
{
	size_t i;

	printf("\"%s\":\"", key);
	for (i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c > 0x7e)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void put_conn(const struct sw_conn_stats *c, unsigned int slot)
{
	printf("{\"slot\":%u,\"in_use\":%u,\"fd\":%d,\"state\":%u,"
	       "\"fb_reason\":%u,", slot, c->in_use, c->fd, c->state,
	       c->fb_reason);
	put_str("provider", c->provider, sizeof(c->provider));
	putchar(',');
	put_str("peer", c->peer, sizeof(c->peer));
	printf(",\"local_port\":%u,\"is_client\":%u", c->local_port,
	       c->is_client);
#define U64(f) printf(",\"" #f "\":%llu", (unsigned long long)c->f)
	U64(tx_copy);
	U64(rx_copy);
	U64(tx_rdma_read);
	U64(rx_rdma_read);
	U64(tx_rdma_write);
	U64(rx_rdma_write);
	U64(tx_tcp);
	U64(rx_tcp);
	U64(msgs_tx);
	U64(msgs_rx);
	U64(credit_stalls);
	U64(wakeups);
	U64(doorbells);
	U64(reg_failures);
#undef U64
	putchar('}');
}

/* A slot was used if it was ever handed out: in use now, or it kept the
 * counters of a connection that closed (slots are cleared on reuse). */
static int slot_used(const struct sw_conn_stats *c)
{
	return c->in_use || c->provider[0] || c->peer[0] || c->msgs_tx ||
	       c->msgs_rx || c->tx_tcp || c->rx_tcp;
}

static int dump(const char *path)
{
	struct sw_proc_stats *p;
	unsigned int i, first = 1;
	ssize_t n;
	int fd, ret = -1;

	p = malloc(sizeof(*p));
	if (!p) {
		fprintf(stderr, "statdump: out of memory\n");
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "statdump: %s: %s\n", path, strerror(errno));
		goto free_p;
	}
	n = read(fd, p, sizeof(*p));
	if (n != (ssize_t)sizeof(*p)) {
		fprintf(stderr,
			"statdump: %s: %zd bytes, expected %zu: not a stats file of this build (switch/stats.h)\n",
			path, n, sizeof(*p));
		goto close_fd;
	}
	if (p->magic != SW_STATS_MAGIC || p->version != SW_STATS_VERSION) {
		fprintf(stderr,
			"statdump: %s: magic %#x version %u, expected %#x version %u\n",
			path, p->magic, p->version, SW_STATS_MAGIC,
			SW_STATS_VERSION);
		goto close_fd;
	}
	printf("{");
	put_str("file", path, strlen(path));
	printf(",\"pid\":%d,", p->pid);
	put_str("program", p->program, sizeof(p->program));
	printf(",\"conns_san\":%llu,\"conns_tcp\":%llu,",
	       (unsigned long long)p->conns_san,
	       (unsigned long long)p->conns_tcp);
	put_str("providers", p->providers, sizeof(p->providers));
	printf(",\"fallbacks\":[");
	for (i = 0; i < SW_STATS_FB_MAX; i++)
		printf("%s%llu", i ? "," : "",
		       (unsigned long long)p->fallbacks[i]);
	printf("],\"conns\":[");
	for (i = 0; i < SW_STATS_SLOTS && i < p->nslots; i++) {
		if (!slot_used(&p->conn[i]))
			continue;
		if (!first)
			putchar(',');
		first = 0;
		put_conn(&p->conn[i], i);
	}
	printf("]}\n");
	ret = 0;
close_fd:
	close(fd);
free_p:
	free(p);
	return ret;
}

int main(int argc, char **argv)
{
	int i, ret = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: statdump FILE...  (files sdp-stat.<pid>)\n");
		return 2;
	}
	for (i = 1; i < argc; i++)
		if (dump(argv[i]) < 0)
			ret = 1;
	return ret;
}

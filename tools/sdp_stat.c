// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * sdp_stat.c - sdp-stat, the reader of the statistics every process running
 * the switch publishes ($SDP_STAT_DIR/sdp-stat.<pid>, layout switch/stats.h):
 * per process and per connection, as text or JSON, once or every N seconds.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"
#include "fallback.h"

/*
 * Names of enum sw_state (switch/sw_internal.h); tools/check-stat.sh compares
 * the table with that source. Fallback reasons are named by
 * sdp_fallback_name() (switch/fallback_names.c, linked in).
 */
static const char *const state_names[] = {
	"LISTENER", "TCP", "CONNECTING", "HELLO_SENT", "UPGRADING", "SAN",
	"HELLO_PENDING", "HELLO_WAIT",
};

#define N_STATES (sizeof(state_names) / sizeof(state_names[0]))

struct opts {
	const char *dir;
	int pid;		/* 0 = every process */
	double wait_s;		/* 0 = once */
	long count;		/* refreshes with -w; 0 = until interrupted */
	int json;
	int all;		/* also connections in setup, listeners */
	int prune;
};

/* A consistent copy of one process's file, taken with one read. */
struct snapshot {
	char path[300];
	struct sw_proc_stats *ps;	/* malloc'd, nslots valid slots */
	uint32_t nslots;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static const char *state_name(uint32_t s)
{
	return s < N_STATES ? state_names[s] : "UNKNOWN";
}

static const char *fb_name(uint32_t r)
{
	return sdp_fallback_name(r < SDP_FB_MAX ? (int)r : -1);
}

/* A fixed-size field from the file, which a writer may not have ended. */
static void field(char *out, size_t outlen, const char *in, size_t inlen)
{
	size_t n = strnlen(in, inlen);

	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, in, n);
	out[n] = 0;
}

static int pid_alive(int pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/*
 * Reads path into a snapshot. 0 on success; -ESRCH when the file is a dead
 * process's leftover; another negative errno after printing what is wrong.
 */
static int snap_read(const char *path, int pid, struct snapshot *sn)
{
	const size_t hdr = offsetof(struct sw_proc_stats, conn);
	struct sw_proc_stats *ps;
	struct stat st;
	size_t need;
	ssize_t got;
	int fd, err;

	memset(sn, 0, sizeof(*sn));
	snprintf(sn->path, sizeof(sn->path), "%s", path);
	if (!pid_alive(pid))
		return -ESRCH;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		if (err == -ENOENT)	/* the process just exited */
			return -ESRCH;
		fprintf(stderr, "sdp-stat: %s: cannot open: %s\n", path,
			strerror(-err));
		return err;
	}
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < hdr) {
		fprintf(stderr,
			"sdp-stat: %s: %lld bytes, too short for a statistics file (header is %zu bytes); not written by the switch, or truncated\n",
			path, (long long)st.st_size, hdr);
		err = -EPROTO;
		goto close_fd;
	}
	ps = malloc(sizeof(*ps));
	if (!ps) {
		err = -ENOMEM;
		fprintf(stderr, "sdp-stat: out of memory\n");
		goto close_fd;
	}
	got = pread(fd, ps, hdr, 0);
	if (got != (ssize_t)hdr) {
		fprintf(stderr, "sdp-stat: %s: short read of the header\n",
			path);
		err = -EIO;
		goto free_ps;
	}
	if (ps->magic != SW_STATS_MAGIC) {
		fprintf(stderr,
			"sdp-stat: %s: bad magic 0x%08" PRIx32 " (expected 0x%08x); not a statistics file of the switch, remove it\n",
			path, ps->magic, SW_STATS_MAGIC);
		err = -EPROTO;
		goto free_ps;
	}
	if (ps->version != SW_STATS_VERSION) {
		fprintf(stderr,
			"sdp-stat: %s: layout version %" PRIu32 ", this sdp-stat reads version %d; use the sdp-stat that comes with that process's switch\n",
			path, ps->version, SW_STATS_VERSION);
		err = -EPROTO;
		goto free_ps;
	}
	if (ps->nslots > SW_STATS_SLOTS) {
		fprintf(stderr,
			"sdp-stat: %s: %" PRIu32 " connection slots, at most %d expected; the file is damaged\n",
			path, ps->nslots, SW_STATS_SLOTS);
		err = -EPROTO;
		goto free_ps;
	}
	need = hdr + (size_t)ps->nslots * sizeof(struct sw_conn_stats);
	if ((size_t)st.st_size < need) {
		fprintf(stderr,
			"sdp-stat: %s: %lld bytes, %zu expected for %" PRIu32 " slots; the file is truncated\n",
			path, (long long)st.st_size, need, ps->nslots);
		err = -EPROTO;
		goto free_ps;
	}
	got = pread(fd, ps->conn, need - hdr, hdr);
	if (got != (ssize_t)(need - hdr)) {
		fprintf(stderr, "sdp-stat: %s: short read of the slots\n",
			path);
		err = -EIO;
		goto free_ps;
	}
	close(fd);
	/* a recycled pid with another process's leftover file */
	if (ps->pid != pid) {
		free(ps);
		return -ESRCH;
	}
	sn->ps = ps;
	sn->nslots = ps->nslots;
	return 0;

free_ps:
	free(ps);
close_fd:
	close(fd);
	return err;
}

/* The pid in a name "sdp-stat.<pid>", or 0. */
static int name_pid(const char *name)
{
	char *end;
	long v;

	if (strncmp(name, "sdp-stat.", 9))
		return 0;
	errno = 0;
	v = strtol(name + 9, &end, 10);
	if (errno || end == name + 9 || *end || v <= 0 || v > 0x7fffffff)
		return 0;
	return (int)v;
}

static int cmp_snap(const void *a, const void *b)
{
	const struct snapshot *x = a, *y = b;

	return (x->ps->pid > y->ps->pid) - (x->ps->pid < y->ps->pid);
}

/*
 * Collects the snapshots of every live process (or of o->pid). Returns
 * their number, and sets *bad when some file could not be read.
 */
static int collect(const struct opts *o, struct snapshot **out, int *bad)
{
	struct snapshot *v = NULL, sn;
	struct dirent *de;
	char path[300];
	size_t n = 0, cap = 0;
	DIR *d;
	int pid, rc;

	*bad = 0;
	*out = NULL;
	if (o->pid) {
		snprintf(path, sizeof(path), "%s/sdp-stat.%d", o->dir, o->pid);
		rc = snap_read(path, o->pid, &sn);
		if (rc == -ESRCH) {
			fprintf(stderr,
				"sdp-stat: process %d does not run the switch (no live %s); check the pid, or SDP_STAT_DIR/-d if the process set it\n",
				o->pid, path);
			*bad = 1;
			return 0;
		}
		if (rc < 0) {
			*bad = 1;
			return 0;
		}
		*out = malloc(sizeof(sn));
		if (!*out) {
			free(sn.ps);
			return -ENOMEM;
		}
		**out = sn;
		return 1;
	}
	d = opendir(o->dir);
	if (!d) {
		fprintf(stderr,
			"sdp-stat: cannot read directory %s: %s; set SDP_STAT_DIR or -d to where the switch publishes\n",
			o->dir, strerror(errno));
		*bad = 1;
		return 0;
	}
	while ((de = readdir(d))) {
		pid = name_pid(de->d_name);
		if (!pid)
			continue;
		snprintf(path, sizeof(path), "%s/%s", o->dir, de->d_name);
		rc = snap_read(path, pid, &sn);
		if (rc == -ESRCH) {
			if (o->prune && !pid_alive(pid) && unlink(path) == 0)
				fprintf(stderr, "sdp-stat: removed %s (process %d is gone)\n",
					path, pid);
			continue;
		}
		if (rc < 0) {
			*bad = 1;
			continue;
		}
		if (n == cap) {
			struct snapshot *nv;

			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(sn.ps);
				break;
			}
			v = nv;
		}
		v[n++] = sn;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), cmp_snap);
	*out = v;
	return (int)n;
}

static void free_snaps(struct snapshot *v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		free(v[i].ps);
	free(v);
}

/* Whether a slot is shown: live, and (unless -a) past the listener. */
static int slot_shown(const struct sw_conn_stats *c, const struct opts *o)
{
	if (!c->in_use)
		return 0;
	return o->all || c->state != 0 /* LISTENER */;
}

/* The process's lifetime bytes by path: closed connections plus live ones. */
struct proc_bytes {
	uint64_t san_tx, san_rx, tcp_tx, tcp_rx;
};

static struct proc_bytes proc_bytes(const struct snapshot *sn)
{
	const struct sw_proc_stats *ps = sn->ps;
	struct proc_bytes b = {
		.san_tx = ps->closed_tx_san, .san_rx = ps->closed_rx_san,
		.tcp_tx = ps->closed_tx_tcp, .tcp_rx = ps->closed_rx_tcp,
	};
	uint32_t i;

	for (i = 0; i < sn->nslots; i++) {
		const struct sw_conn_stats *c = &ps->conn[i];

		if (!c->in_use)
			continue;
		b.san_tx += sw_stats_tx_san(c);
		b.san_rx += sw_stats_rx_san(c);
		b.tcp_tx += c->tx_tcp;
		b.tcp_rx += c->rx_tcp;
	}
	return b;
}

static const char *role_name(const struct sw_conn_stats *c)
{
	if (c->state == 0)
		return "listener";
	return c->is_client ? "client" : "server";
}

/* ---- text ------------------------------------------------------------- */

static void text_conn(const struct sw_conn_stats *c)
{
	char prov[sizeof(c->provider) + 1], peer[sizeof(c->peer) + 1];

	field(prov, sizeof(prov), c->provider, sizeof(c->provider));
	field(peer, sizeof(peer), c->peer, sizeof(c->peer));
	printf("  fd %-5" PRId32 " %-8s peer %-24s local-port %-5u provider %-6s state %s",
	       c->fd, role_name(c), peer[0] ? peer : "-", c->local_port,
	       prov[0] ? prov : "-", state_name(c->state));
	if (c->fb_reason)
		printf("  fallback %s", fb_name(c->fb_reason));
	printf("\n");
	printf("      tx bytes: copy %" PRIu64 "  rdma-read %" PRIu64
	       "  rdma-write %" PRIu64 "  tcp %" PRIu64 "\n",
	       c->tx_copy, c->tx_rdma_read, c->tx_rdma_write, c->tx_tcp);
	printf("      rx bytes: copy %" PRIu64 "  rdma-read %" PRIu64
	       "  rdma-write %" PRIu64 "  tcp %" PRIu64 "\n",
	       c->rx_copy, c->rx_rdma_read, c->rx_rdma_write, c->rx_tcp);
	printf("      messages tx %" PRIu64 " rx %" PRIu64
	       "  credit-stalls %" PRIu64 "  wake-ups %" PRIu64
	       "  doorbells %" PRIu64 "  reg-failures %" PRIu64 "\n",
	       c->msgs_tx, c->msgs_rx, c->credit_stalls, c->wakeups,
	       c->doorbells, c->reg_failures);
	printf("      registered %" PRIu64 " bytes  receive buffers %" PRIu32
	       "\n", c->reg_bytes, c->recv_bufs);
}

static void text_proc(const struct snapshot *sn, const struct opts *o)
{
	const struct sw_proc_stats *ps = sn->ps;
	char prog[sizeof(ps->program) + 1], provs[sizeof(ps->providers) + 1];
	struct timespec now;
	uint64_t now_ns, up = 0;
	struct proc_bytes b;
	uint32_t i;
	int any = 0, shown = 0;

	field(prog, sizeof(prog), ps->program, sizeof(ps->program));
	field(provs, sizeof(provs), ps->providers, sizeof(ps->providers));
	clock_gettime(CLOCK_MONOTONIC, &now);
	now_ns = (uint64_t)now.tv_sec * 1000000000ull + now.tv_nsec;
	if (ps->start_ns && now_ns > ps->start_ns)
		up = (now_ns - ps->start_ns) / 1000000000ull;
	printf("pid %" PRId32 " (%s)  parent %" PRId32 "  up %" PRIu64
	       "s  providers: %s\n",
	       ps->pid, prog, ps->ppid, up, provs[0] ? provs : "none");
	printf("  connections: SAN %" PRIu64 "  TCP %" PRIu64
	       "  fallbacks:", ps->conns_san, ps->conns_tcp);
	for (i = 1; i < SW_STATS_FB_MAX; i++) {
		if (!ps->fallbacks[i])
			continue;
		printf(" %s %" PRIu64, fb_name(i), ps->fallbacks[i]);
		any = 1;
	}
	printf("%s\n", any ? "" : " none");
	b = proc_bytes(sn);
	printf("  bytes, closed connections included: SAN tx %" PRIu64
	       " rx %" PRIu64 "  TCP tx %" PRIu64 " rx %" PRIu64 "\n",
	       b.san_tx, b.san_rx, b.tcp_tx, b.tcp_rx);
	for (i = 0; i < sn->nslots; i++) {
		if (!slot_shown(&ps->conn[i], o))
			continue;
		text_conn(&ps->conn[i]);
		shown++;
	}
	if (!shown)
		printf("  (no open connection)\n");
}

/* ---- JSON ------------------------------------------------------------- */

static void json_str(const char *in, size_t inlen)
{
	size_t i, n = strnlen(in, inlen);

	putchar('"');
	for (i = 0; i < n; i++) {
		unsigned char ch = in[i];

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void json_paths(const char *name, uint64_t copy, uint64_t rd,
		       uint64_t wr, uint64_t tcp)
{
	printf("\"%s\": {\"copy\": %" PRIu64 ", \"rdma_read\": %" PRIu64
	       ", \"rdma_write\": %" PRIu64 ", \"tcp\": %" PRIu64 "}",
	       name, copy, rd, wr, tcp);
}

static void json_conn(const struct sw_conn_stats *c)
{
	printf("      {\"fd\": %" PRId32 ", \"role\": \"%s\", \"peer\": ", c->fd,
	       role_name(c));
	json_str(c->peer, sizeof(c->peer));
	printf(", \"local_port\": %u, \"provider\": ", c->local_port);
	json_str(c->provider, sizeof(c->provider));
	printf(", \"state\": \"%s\", \"fallback\": \"%s\",\n       ",
	       state_name(c->state), fb_name(c->fb_reason));
	json_paths("tx", c->tx_copy, c->tx_rdma_read, c->tx_rdma_write,
		   c->tx_tcp);
	printf(",\n       ");
	json_paths("rx", c->rx_copy, c->rx_rdma_read, c->rx_rdma_write,
		   c->rx_tcp);
	printf(",\n       \"msgs_tx\": %" PRIu64 ", \"msgs_rx\": %" PRIu64
	       ", \"credit_stalls\": %" PRIu64 ", \"wakeups\": %" PRIu64
	       ", \"doorbells\": %" PRIu64 ", \"reg_failures\": %" PRIu64
	       ",\n       \"reg_bytes\": %" PRIu64 ", \"recv_bufs\": %" PRIu32
	       "}",
	       c->msgs_tx, c->msgs_rx, c->credit_stalls, c->wakeups,
	       c->doorbells, c->reg_failures, c->reg_bytes, c->recv_bufs);
}

static void json_proc(const struct snapshot *sn, const struct opts *o)
{
	const struct sw_proc_stats *ps = sn->ps;
	struct proc_bytes b = proc_bytes(sn);
	uint32_t i;
	int first = 1;

	printf("  {\"pid\": %" PRId32 ", \"ppid\": %" PRId32
	       ", \"program\": ", ps->pid, ps->ppid);
	json_str(ps->program, sizeof(ps->program));
	printf(", \"providers\": ");
	json_str(ps->providers, sizeof(ps->providers));
	printf(",\n   \"bytes\": {\"san_tx\": %" PRIu64 ", \"san_rx\": %" PRIu64
	       ", \"tcp_tx\": %" PRIu64 ", \"tcp_rx\": %" PRIu64 "}",
	       b.san_tx, b.san_rx, b.tcp_tx, b.tcp_rx);
	printf(",\n   \"conns_san\": %" PRIu64 ", \"conns_tcp\": %" PRIu64
	       ", \"fallbacks\": {", ps->conns_san, ps->conns_tcp);
	for (i = 1; i < SW_STATS_FB_MAX; i++) {
		if (!ps->fallbacks[i])
			continue;
		printf("%s\"%s\": %" PRIu64, first ? "" : ", ", fb_name(i),
		       ps->fallbacks[i]);
		first = 0;
	}
	printf("},\n   \"connections\": [");
	first = 1;
	for (i = 0; i < sn->nslots; i++) {
		if (!slot_shown(&ps->conn[i], o))
			continue;
		printf("%s\n", first ? "" : ",");
		json_conn(&ps->conn[i]);
		first = 0;
	}
	printf("%s]}", first ? "" : "\n   ");
}

/* One report; returns 0, or 1 when some file was bad or -p found nothing. */
static int report(const struct opts *o)
{
	struct snapshot *v;
	int n, i, bad;

	n = collect(o, &v, &bad);
	if (n < 0) {
		fprintf(stderr, "sdp-stat: %s\n", strerror(-n));
		return 1;
	}
	if (o->json) {
		printf("{\"version\": %d, \"processes\": [", SW_STATS_VERSION);
		for (i = 0; i < n; i++) {
			printf("%s\n", i ? "," : "");
			json_proc(&v[i], o);
		}
		printf("%s]}\n", n ? "\n" : "");
	} else {
		if (!n && !o->pid && !bad)
			printf("no process running the switch publishes statistics in %s\n",
			       o->dir);
		for (i = 0; i < n; i++) {
			text_proc(&v[i], o);
			if (i + 1 < n)
				printf("\n");
		}
	}
	fflush(stdout);
	free_snaps(v, n);
	return bad;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sdp-stat [-p PID] [-w SECONDS [-n COUNT]] [--json] [-a]\n"
		"                [-d DIR] [--prune] [--list-reasons|--list-states]\n"
		"  -p, --pid PID        only this process\n"
		"  -w, --wait SECONDS   print again every SECONDS until interrupted\n"
		"  -n, --count COUNT    with -w: stop after COUNT reports\n"
		"  -j, --json           JSON instead of text\n"
		"  -a, --all            also listeners\n"
		"  -d, --dir DIR        where the files are (default $SDP_STAT_DIR,\n"
		"                       else /dev/shm)\n"
		"      --prune          remove files left by processes that are gone\n"
		"      --list-reasons   print the fallback reason codes and names\n"
		"      --list-states    print the connection state codes and names\n"
		"See sdp-stat(1).\n");
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "wait", required_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "all", no_argument, NULL, 'a' },
		{ "dir", required_argument, NULL, 'd' },
		{ "prune", no_argument, NULL, 'P' },
		{ "list-reasons", no_argument, NULL, 'R' },
		{ "list-states", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env = getenv("SDP_STAT_DIR");
	char *end;
	unsigned i;
	int c;

	o->dir = env && *env ? env : "/dev/shm";
	while ((c = getopt_long(argc, argv, "p:w:n:jad:h", lo, NULL)) != -1) {
		switch (c) {
		case 'p':
			errno = 0;
			o->pid = (int)strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || o->pid <= 0) {
				fprintf(stderr, "sdp-stat: -p %s: expected a process id (a positive number)\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'w':
			errno = 0;
			o->wait_s = strtod(optarg, &end);
			if (errno || *end || end == optarg || o->wait_s < 0.1 ||
			    o->wait_s > 86400) {
				fprintf(stderr, "sdp-stat: -w %s: expected seconds between 0.1 and 86400\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'n':
			errno = 0;
			o->count = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || o->count <= 0) {
				fprintf(stderr, "sdp-stat: -n %s: expected a positive count\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'j':
			o->json = 1;
			break;
		case 'a':
			o->all = 1;
			break;
		case 'd':
			o->dir = optarg;
			break;
		case 'P':
			o->prune = 1;
			break;
		case 'R':
			for (i = 0; i < SDP_FB_MAX; i++)
				printf("%u %s\n", i, fb_name(i));
			exit(0);
		case 'S':
			for (i = 0; i < N_STATES; i++)
				printf("%u %s\n", i, state_names[i]);
			exit(0);
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sdp-stat: unexpected argument '%s'; see 'sdp-stat --help'\n",
			argv[optind]);
		return -EINVAL;
	}
	if (o->count && !o->wait_s) {
		fprintf(stderr, "sdp-stat: -n needs -w SECONDS\n");
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct timespec ts;
	long done = 0;
	int rc;

	if (parse_opts(argc, argv, &o) < 0)
		return 2;
	if (!o.wait_s)
		return report(&o);

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	ts.tv_sec = (time_t)o.wait_s;
	ts.tv_nsec = (long)((o.wait_s - (double)ts.tv_sec) * 1e9);
	for (;;) {
		if (!o.json && isatty(STDOUT_FILENO))
			printf("\033[H\033[2J");
		rc = report(&o);
		done++;
		if (stop || (o.count && done >= o.count))
			break;
		if (!o.json && !isatty(STDOUT_FILENO))
			printf("\n");
		nanosleep(&ts, NULL);
		if (stop)
			break;
	}
	return rc;
}

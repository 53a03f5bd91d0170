// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * sdp_stat.c - sdp-stat, the reader of the statistics every process running
 * the switch publishes (layout and places in switch/stats.h): per process
 * and per connection, as text, JSON or OpenMetrics, once or every N seconds
 * with rates, filtered by port, peer address or program.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"
#include "fallback.h"

/*
 * States are named by sw_state_name() (stats.h), fallback reasons by
 * sdp_fallback_name() (switch/fallback_names.c, linked in).
 */

enum out_format { OUT_TEXT, OUT_JSON, OUT_OPENMETRICS, OUT_PROMETHEUS };

struct opts {
	const char *dir;	/* NULL: the per-user directories */
	int pid;		/* 0 = every process */
	double wait_s;		/* 0 = once */
	long count;		/* reports with -w; 0 = until interrupted */
	enum out_format fmt;
	int all;		/* also listeners */
	int closed;		/* also slots of closed connections */
	int prune;
	int raw;		/* bytes as plain numbers */
	int details;		/* messages, credits, wake-ups, memory */
	int port;		/* filter: local or peer port, -1 = any */
	const char *program;	/* filter: fnmatch pattern */
	int peer_family;	/* filter: peer address (0 = any) */
	uint8_t peer_addr[16];
	int peer_prefix;
	char **files;		/* files named on the command line */
	int nfiles;
};

/* A consistent copy of one process's file, taken with one read. */
struct snapshot {
	char path[300];
	struct sw_proc_stats *ps;	/* malloc'd, nslots valid slots */
	uint32_t nslots;
	double taken;		/* monotonic seconds */
};

/* The previous report's bytes, for rates with -w. */
struct prev_conn {
	int32_t pid, fd;
	uint32_t slot;
	uint64_t tx, rx;
};

static struct prev_conn *prev, *cur;
static size_t nprev, ncur, capcur;
static double prev_taken, cur_taken;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static const char *state_name(uint32_t s)
{
	return sw_state_name(s);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Bytes for people: 1023 B, 1.5 KiB, 12.0 MiB; raw digits with --raw. */
static const char *human(char *buf, size_t len, uint64_t v, int raw,
			 const char *suffix)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB",
					    "PiB", "EiB" };
	double d = (double)v;
	int u = 0;

	if (raw) {
		snprintf(buf, len, "%" PRIu64 "%s", v, suffix);
		return buf;
	}
	while (d >= 1024 && u < 6) {
		d /= 1024;
		u++;
	}
	if (!u)
		snprintf(buf, len, "%" PRIu64 " B%s", v, suffix);
	else
		snprintf(buf, len, "%.1f %s%s", d, unit[u], suffix);
	return buf;
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

/* Does a live process map the file? The switch holds a shared flock on
 * its file for as long as it maps it: from inside a pid namespace a pid
 * alone makes every process outside look gone. */
static int file_held(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), held;

	if (fd < 0)
		return errno != ENOENT;
	held = flock(fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK;
	close(fd);
	return held;
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
	sn->taken = mono_s();
	/* pid 0: a file named on the command line, its process maybe gone */
	if (pid && !pid_alive(pid))
		return -ESRCH;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		if (err == -ENOENT && pid)	/* the process just exited */
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
	if (pid && ps->pid != pid) {
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

struct snaps {
	struct snapshot *v;
	size_t n, cap;
	int bad;
};

static int snaps_add(struct snaps *ss, struct snapshot *sn)
{
	if (ss->n == ss->cap) {
		struct snapshot *nv;
		size_t cap = ss->cap ? ss->cap * 2 : 16;

		nv = realloc(ss->v, cap * sizeof(*nv));
		if (!nv) {
			free(sn->ps);
			return -ENOMEM;
		}
		ss->v = nv;
		ss->cap = cap;
	}
	ss->v[ss->n++] = *sn;
	return 0;
}

/* The live processes' files in one directory. */
static void collect_dir(const struct opts *o, const char *dir,
			struct snaps *ss, int quiet_missing)
{
	struct snapshot sn;
	struct dirent *de;
	char path[600];
	DIR *d;
	int pid, rc;

	d = opendir(dir);
	if (!d) {
		if (quiet_missing && errno == ENOENT)
			return;
		fprintf(stderr,
			"sdp-stat: cannot read directory %s: %s; set SDP_STAT_DIR or -d to where the switch publishes\n",
			dir, strerror(errno));
		ss->bad = 1;
		return;
	}
	while ((de = readdir(d))) {
		pid = name_pid(de->d_name);
		if (!pid || (o->pid && pid != o->pid))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		rc = snap_read(path, pid, &sn);
		if (rc == -ESRCH) {
			if (o->prune && !pid_alive(pid) && !file_held(path) &&
			    unlink(path) == 0)
				fprintf(stderr, "sdp-stat: removed %s (process %d is gone)\n",
					path, pid);
			continue;
		}
		if (rc < 0) {
			ss->bad = 1;
			continue;
		}
		if (snaps_add(ss, &sn))
			break;
	}
	closedir(d);
}

/*
 * Without -d or SDP_STAT_DIR: the caller's own directory, or, for root,
 * every user's (each checked to be a real directory of the uid it names).
 */
static void collect_users(const struct opts *o, struct snaps *ss)
{
	const size_t plen = strlen(SW_STATS_USER_DIR);
	char dir[512];
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (geteuid() != 0) {
		sw_stats_dir(dir, sizeof(dir));
		collect_dir(o, dir, ss, 1);
		return;
	}
	d = opendir(SW_STATS_ROOT);
	if (!d) {
		fprintf(stderr, "sdp-stat: cannot read %s: %s\n",
			SW_STATS_ROOT, strerror(errno));
		ss->bad = 1;
		return;
	}
	while ((de = readdir(d))) {
		char *end;
		unsigned long uid;

		if (strncmp(de->d_name, SW_STATS_USER_DIR, plen))
			continue;
		errno = 0;
		uid = strtoul(de->d_name + plen, &end, 10);
		if (errno || *end || end == de->d_name + plen)
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", SW_STATS_ROOT, de->d_name);
		if (lstat(dir, &st) || !S_ISDIR(st.st_mode) ||
		    st.st_uid != uid) {
			fprintf(stderr,
				"sdp-stat: %s is not a directory of uid %lu; skipped (the switch of that user does not use it either)\n",
				dir, uid);
			continue;
		}
		collect_dir(o, dir, ss, 1);
	}
	closedir(d);
}

/*
 * Collects the snapshots to report: the files named on the command line,
 * else every live process's (or o->pid's). Returns their number, and sets
 * *bad when some file could not be read.
 */
static int collect(const struct opts *o, struct snapshot **out, int *bad)
{
	struct snaps ss = { 0 };
	struct snapshot sn;
	int i;

	if (o->nfiles) {
		for (i = 0; i < o->nfiles; i++) {
			if (snap_read(o->files[i], 0, &sn) < 0) {
				ss.bad = 1;
				continue;
			}
			if (snaps_add(&ss, &sn))
				break;
		}
	} else if (o->dir) {
		collect_dir(o, o->dir, &ss, 0);
	} else {
		collect_users(o, &ss);
	}
	if (o->pid && !ss.n && !ss.bad) {
		char path[600];

		if (o->dir)
			snprintf(path, sizeof(path), "%s/sdp-stat.%d", o->dir,
				 o->pid);
		else
			sw_stats_path(path, sizeof(path), o->pid);
		fprintf(stderr,
			"sdp-stat: process %d does not run the switch (no live %s%s); check the pid, or SDP_STAT_DIR/-d if the process set it\n",
			o->pid, path, geteuid() ? ", or it belongs to another user" : "");
		ss.bad = 1;
	}
	if (ss.n)
		qsort(ss.v, ss.n, sizeof(*ss.v), cmp_snap);
	*out = ss.v;
	*bad = ss.bad;
	return (int)ss.n;
}

static void free_snaps(struct snapshot *v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		free(v[i].ps);
	free(v);
}

/* A slot held a connection: open now, or (slots are cleared on reuse) it
 * kept the counters of one that closed. */
static int slot_used(const struct sw_conn_stats *c)
{
	return c->in_use || c->provider[0] || c->peer[0] || c->msgs_tx ||
	       c->msgs_rx || c->tx_tcp || c->rx_tcp;
}

/* The peer's address and port from "ip:port" ("[ip6]:port" or "ip6:port"). */
static int peer_split(const struct sw_conn_stats *c, char *ip, size_t iplen,
		      int *port)
{
	char peer[sizeof(c->peer) + 1], *colon;

	field(peer, sizeof(peer), c->peer, sizeof(c->peer));
	colon = strrchr(peer, ':');
	if (!colon)
		return -1;
	*colon = 0;
	*port = atoi(colon + 1);
	if (peer[0] == '[') {
		size_t n = strlen(peer);

		if (n >= 2 && peer[n - 1] == ']')
			peer[n - 1] = 0;
		snprintf(ip, iplen, "%s", peer + 1);
	} else {
		snprintf(ip, iplen, "%s", peer);
	}
	return 0;
}

static int prefix_match(const uint8_t *a, const uint8_t *b, int bits)
{
	int full = bits / 8, rest = bits % 8;

	if (memcmp(a, b, full))
		return 0;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		return (a[full] & mask) == (b[full] & mask);
	}
	return 1;
}

/* Whether a slot is shown: used, past the listener (unless -a), open
 * (unless --closed) and through the filters. */
static int slot_shown(const struct sw_conn_stats *c, const struct opts *o)
{
	char ip[64];
	uint8_t a[16];
	int port = -1;

	if (!c->in_use && !(o->closed && slot_used(c)))
		return 0;
	if (!o->all && c->state == SW_LISTENER)
		return 0;
	if (o->port >= 0 || o->peer_family) {
		if (peer_split(c, ip, sizeof(ip), &port))
			port = -1;
		if (o->port >= 0 && c->local_port != o->port &&
		    port != o->port)
			return 0;
		if (o->peer_family) {
			if (port < 0 || inet_pton(o->peer_family, ip, a) != 1)
				return 0;
			if (!prefix_match(a, o->peer_addr, o->peer_prefix))
				return 0;
		}
	}
	return 1;
}

static int conn_filtered(const struct opts *o)
{
	return o->port >= 0 || o->peer_family;
}

/* Whether a process is reported at all. */
static int proc_shown(const struct snapshot *sn, const struct opts *o)
{
	char prog[sizeof(sn->ps->program) + 1];
	uint32_t i;

	field(prog, sizeof(prog), sn->ps->program, sizeof(sn->ps->program));
	if (o->program && fnmatch(o->program, prog, 0))
		return 0;
	if (!conn_filtered(o))
		return 1;
	for (i = 0; i < sn->nslots; i++)
		if (slot_shown(&sn->ps->conn[i], o))
			return 1;
	return 0;
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
	if (c->state == SW_LISTENER)
		return "listener";
	return c->is_client ? "client" : "server";
}

static uint64_t conn_tx(const struct sw_conn_stats *c)
{
	return sw_stats_tx_san(c) + c->tx_tcp;
}

static uint64_t conn_rx(const struct sw_conn_stats *c)
{
	return sw_stats_rx_san(c) + c->rx_tcp;
}

/* ---- connections the switch left on TCP ------------------------------- */

/*
 * Their bytes never pass through the switch: the kernel's count is asked
 * for by socket inode (sock_diag, as ss(8) does): bytes the peer
 * acknowledged, and bytes received. A socket not found is gone.
 */
struct diag_sock {
	uint64_t ino, acked, received;
};

static struct diag_sock *diag;
static size_t ndiag, capdiag;

static void diag_add(const struct inet_diag_msg *m, int len)
{
	const struct tcp_info *ti = NULL;
	struct rtattr *a;
	int alen = len - NLMSG_ALIGN(sizeof(*m));

	if (!m->idiag_inode)
		return;
	for (a = (struct rtattr *)((char *)m + NLMSG_ALIGN(sizeof(*m)));
	     RTA_OK(a, alen); a = RTA_NEXT(a, alen))
		if (a->rta_type == INET_DIAG_INFO &&
		    RTA_PAYLOAD(a) >= offsetof(struct tcp_info,
					       tcpi_bytes_received) +
				      sizeof(ti->tcpi_bytes_received))
			ti = RTA_DATA(a);
	if (ndiag == capdiag) {
		size_t cap = capdiag ? capdiag * 2 : 256;
		struct diag_sock *nv = realloc(diag, cap * sizeof(*nv));

		if (!nv)
			return;
		diag = nv;
		capdiag = cap;
	}
	/* the kernel counts the SYN as one byte acknowledged, and (once
	 * it came) the peer's FIN as one byte received: not the program's */
	diag[ndiag++] = (struct diag_sock){
		.ino = m->idiag_inode,
		.acked = ti && ti->tcpi_bytes_acked ?
				 ti->tcpi_bytes_acked - 1 : 0,
		.received = ti ? ti->tcpi_bytes_received : 0,
	};
}

/* Every TCP socket of the network namespace, one family. */
static int diag_dump(int family)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req),
			 .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.r = { .sdiag_family = family, .sdiag_protocol = IPPROTO_TCP,
		       .idiag_ext = 1 << (INET_DIAG_INFO - 1),
		       .idiag_states = ~0u },
	};
	static char buf[65536];
	int fd, done = 0, rc = 0;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	if (send(fd, &req, sizeof(req), 0) < 0) {
		rc = -errno;
		goto out;
	}
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				rc = -EIO;
				done = 1;
				break;
			}
			diag_add(NLMSG_DATA(h), h->nlmsg_len - NLMSG_HDRLEN);
		}
	}
out:
	close(fd);
	return rc;
}

/*
 * For each TCP-only slot: the kernel's bytes, or closed when its socket is
 * gone. Without sock_diag (another namespace, no netlink) the slots stay
 * as they are, with no bytes.
 */
static void tcp_only_fill(struct snapshot *v, int n)
{
	int i, need = 0;
	uint32_t k;
	size_t j;

	for (i = 0; i < n && !need; i++)
		for (k = 0; k < v[i].nslots; k++)
			if (v[i].ps->conn[k].in_use &&
			    (v[i].ps->conn[k].flags & SW_CONN_TCP_ONLY))
				need = 1;
	if (!need)
		return;
	ndiag = 0;
	if (diag_dump(AF_INET) || diag_dump(AF_INET6))
		return;
	for (i = 0; i < n; i++)
		for (k = 0; k < v[i].nslots; k++) {
			struct sw_conn_stats *c = &v[i].ps->conn[k];

			if (!c->in_use || !(c->flags & SW_CONN_TCP_ONLY))
				continue;
			for (j = 0; j < ndiag; j++)
				if (diag[j].ino == c->sock_ino)
					break;
			if (j == ndiag) {
				c->in_use = 0;
				continue;
			}
			c->tx_tcp = diag[j].acked;
			c->rx_tcp = diag[j].received;
		}
}

/* ---- rates (-w) -------------------------------------------------------- */

static void rate_note(const struct snapshot *sn, uint32_t slot,
		      const struct sw_conn_stats *c)
{
	if (ncur == capcur) {
		size_t cap = capcur ? capcur * 2 : 64;
		struct prev_conn *nv = realloc(cur, cap * sizeof(*nv));

		if (!nv)
			return;
		cur = nv;
		capcur = cap;
	}
	cur[ncur++] = (struct prev_conn){ .pid = sn->ps->pid, .fd = c->fd,
					  .slot = slot, .tx = conn_tx(c),
					  .rx = conn_rx(c) };
}

/* Bytes per second since the previous report; -1 when unknown. */
static int rate_of(const struct snapshot *sn, uint32_t slot,
		   const struct sw_conn_stats *c, double *tx, double *rx)
{
	double dt = sn->taken - prev_taken;
	size_t i;

	if (!prev || dt <= 0)
		return -1;
	for (i = 0; i < nprev; i++) {
		const struct prev_conn *p = &prev[i];

		if (p->pid != sn->ps->pid || p->slot != slot || p->fd != c->fd)
			continue;
		if (conn_tx(c) < p->tx || conn_rx(c) < p->rx)
			return -1;	/* the slot was reused */
		*tx = (double)(conn_tx(c) - p->tx) / dt;
		*rx = (double)(conn_rx(c) - p->rx) / dt;
		return 0;
	}
	return -1;
}

static void rate_rotate(void)
{
	free(prev);
	prev = cur;
	nprev = ncur;
	prev_taken = cur_taken;
	cur = NULL;
	ncur = capcur = 0;
}

/* ---- text ------------------------------------------------------------- */

static void text_conn(const struct snapshot *sn, uint32_t slot,
		      const struct opts *o)
{
	const struct sw_conn_stats *c = &sn->ps->conn[slot];
	char prov[sizeof(c->provider) + 1], peer[sizeof(c->peer) + 1];
	char b[4][32], r[2][40];
	double tx, rx;

	field(prov, sizeof(prov), c->provider, sizeof(c->provider));
	field(peer, sizeof(peer), c->peer, sizeof(c->peer));
	printf("  %-5" PRId32 " %-8s %-22s %-5u %-10s %-6s %-16s %11s %11s %11s %11s",
	       c->fd, c->in_use ? role_name(c) : "closed",
	       peer[0] ? peer : "-", c->local_port, state_name(c->state),
	       prov[0] ? prov : "-",
	       c->fb_reason ? fb_name(c->fb_reason) : "-",
	       human(b[0], sizeof(b[0]), sw_stats_tx_san(c), o->raw, ""),
	       human(b[1], sizeof(b[1]), sw_stats_rx_san(c), o->raw, ""),
	       human(b[2], sizeof(b[2]), c->tx_tcp, o->raw, ""),
	       human(b[3], sizeof(b[3]), c->rx_tcp, o->raw, ""));
	if (o->wait_s) {
		if (rate_of(sn, slot, c, &tx, &rx) == 0)
			printf(" %13s %13s",
			       human(r[0], sizeof(r[0]), (uint64_t)tx, o->raw,
				     "/s"),
			       human(r[1], sizeof(r[1]), (uint64_t)rx, o->raw,
				     "/s"));
		else
			printf(" %13s %13s", "-", "-");
		rate_note(sn, slot, c);
	}
	printf("\n");
	if (!o->details)
		return;
	printf("        tx: copy %s  rdma-read %s  rdma-write %s  tcp %s\n",
	       human(b[0], sizeof(b[0]), c->tx_copy, o->raw, ""),
	       human(b[1], sizeof(b[1]), c->tx_rdma_read, o->raw, ""),
	       human(b[2], sizeof(b[2]), c->tx_rdma_write, o->raw, ""),
	       human(b[3], sizeof(b[3]), c->tx_tcp, o->raw, ""));
	printf("        rx: copy %s  rdma-read %s  rdma-write %s  tcp %s%s\n",
	       human(b[0], sizeof(b[0]), c->rx_copy, o->raw, ""),
	       human(b[1], sizeof(b[1]), c->rx_rdma_read, o->raw, ""),
	       human(b[2], sizeof(b[2]), c->rx_rdma_write, o->raw, ""),
	       human(b[3], sizeof(b[3]), c->rx_tcp, o->raw, ""),
	       c->flags & SW_CONN_RX_PUSHED ? "  (offers pushed whole)" :
	       c->flags & SW_CONN_RX_ALONE ? "  (offers pulled alone)" : "");
	printf("        messages tx %" PRIu64 " rx %" PRIu64
	       "  credit-stalls %" PRIu64 "  wake-ups %" PRIu64
	       "  doorbells %" PRIu64 "  reg-failures %" PRIu64 "\n",
	       c->msgs_tx, c->msgs_rx, c->credit_stalls, c->wakeups,
	       c->doorbells, c->reg_failures);
	printf("        registered %s  receive buffers %" PRIu32 "\n",
	       human(b[0], sizeof(b[0]), c->reg_bytes, o->raw, ""),
	       c->recv_bufs);
}

static void text_proc(const struct snapshot *sn, const struct opts *o)
{
	const struct sw_proc_stats *ps = sn->ps;
	char prog[sizeof(ps->program) + 1], provs[sizeof(ps->providers) + 1];
	char b[4][32];
	struct timespec now;
	uint64_t now_ns, up = 0;
	struct proc_bytes pb;
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
	pb = proc_bytes(sn);
	printf("  bytes, closed connections included: SAN tx %s rx %s  TCP tx %s rx %s\n",
	       human(b[0], sizeof(b[0]), pb.san_tx, o->raw, ""),
	       human(b[1], sizeof(b[1]), pb.san_rx, o->raw, ""),
	       human(b[2], sizeof(b[2]), pb.tcp_tx, o->raw, ""),
	       human(b[3], sizeof(b[3]), pb.tcp_rx, o->raw, ""));
	for (i = 0; i < sn->nslots; i++) {
		if (!slot_shown(&ps->conn[i], o))
			continue;
		if (!shown++)
			printf("  %-5s %-8s %-22s %-5s %-10s %-6s %-16s %11s %11s %11s %11s%s\n",
			       "FD", "ROLE", "PEER", "LPORT", "STATE", "PROV",
			       "FALLBACK", "SAN-TX", "SAN-RX", "TCP-TX",
			       "TCP-RX",
			       o->wait_s ? "       TX-RATE       RX-RATE" :
					   "");
		text_conn(sn, i, o);
	}
	if (!shown)
		printf("  (no %sconnection)\n",
		       conn_filtered(o) ? "matching " : "open ");
}

/* ---- JSON ------------------------------------------------------------- */

/* A quoted string as JSON (om 0) or an OpenMetrics label value (om 1)
 * wants it: backslash and double quote escaped; other bytes outside
 * printable ASCII as \u00XX in JSON; in a label, a newline as \n and
 * the rest left out. */
static void quoted_str(const char *in, size_t inlen, int om)
{
	size_t i, n = strnlen(in, inlen);

	putchar('"');
	for (i = 0; i < n; i++) {
		unsigned char ch = in[i];

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch >= 0x20 && ch < 0x7f)
			putchar(ch);
		else if (!om)
			printf("\\u%04x", ch);
		else if (ch == '\n')
			printf("\\n");
	}
	putchar('"');
}

static void json_str(const char *in, size_t inlen)
{
	quoted_str(in, inlen, 0);
}

static void json_paths(const char *name, uint64_t copy, uint64_t rd,
		       uint64_t wr, uint64_t tcp)
{
	printf("\"%s\": {\"copy\": %" PRIu64 ", \"rdma_read\": %" PRIu64
	       ", \"rdma_write\": %" PRIu64 ", \"tcp\": %" PRIu64 "}",
	       name, copy, rd, wr, tcp);
}

static void json_conn(const struct sw_conn_stats *c, uint32_t slot)
{
	printf("      {\"slot\": %" PRIu32 ", \"open\": %s, \"fd\": %" PRId32
	       ", \"role\": \"%s\", \"peer\": ", slot,
	       c->in_use ? "true" : "false", c->fd, role_name(c));
	json_str(c->peer, sizeof(c->peer));
	printf(", \"local_port\": %u, \"provider\": ", c->local_port);
	json_str(c->provider, sizeof(c->provider));
	printf(", \"state\": \"%s\", \"fallback\": \"%s\", \"tcp_only\": %s,\n       ",
	       state_name(c->state), fb_name(c->fb_reason),
	       c->flags & SW_CONN_TCP_ONLY ? "true" : "false");
	json_paths("tx", c->tx_copy, c->tx_rdma_read, c->tx_rdma_write,
		   c->tx_tcp);
	printf(",\n       ");
	json_paths("rx", c->rx_copy, c->rx_rdma_read, c->rx_rdma_write,
		   c->rx_tcp);
	printf(", \"rx_pushed\": %s, \"rx_alone\": %s",
	       c->flags & SW_CONN_RX_PUSHED ? "true" : "false",
	       c->flags & SW_CONN_RX_ALONE ? "true" : "false");
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
	printf(", \"file\": ");
	json_str(sn->path, sizeof(sn->path));
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
		json_conn(&ps->conn[i], i);
		first = 0;
	}
	printf("%s]}", first ? "" : "\n   ");
}

/* ---- OpenMetrics / Prometheus text ------------------------------------ */

/* A label value: backslash, double quote and newline escaped. */
static void om_str(const char *in, size_t inlen)
{
	quoted_str(in, inlen, 1);
}

static void om_proc_labels(const struct sw_proc_stats *ps)
{
	printf("pid=\"%" PRId32 "\",program=", ps->pid);
	om_str(ps->program, sizeof(ps->program));
}

/* "# TYPE" (and "# HELP") of a family; counters' samples end in _total. */
static void om_family(const struct opts *o, const char *name,
		      const char *type, const char *help)
{
	int counter = !strcmp(type, "counter");

	printf("# HELP %s%s %s\n", name,
	       counter && o->fmt == OUT_PROMETHEUS ? "_total" : "", help);
	printf("# TYPE %s%s %s\n", name,
	       counter && o->fmt == OUT_PROMETHEUS ? "_total" : "", type);
}

static void om_report(struct snapshot *v, int n, const struct opts *o)
{
	static const char *const path_name[4] = { "copy", "rdma_read",
						  "rdma_write", "tcp" };
	int i;
	uint32_t k;

	om_family(o, "sdp_process", "gauge",
		  "A process running the switch (value 1), with its providers.");
	for (i = 0; i < n; i++) {
		printf("sdp_process{");
		om_proc_labels(v[i].ps);
		printf(",ppid=\"%" PRId32 "\",providers=", v[i].ps->ppid);
		om_str(v[i].ps->providers, sizeof(v[i].ps->providers));
		printf("} 1\n");
	}
	om_family(o, "sdp_connections", "counter",
		  "Connections since the process started, by the path they took (san or tcp).");
	for (i = 0; i < n; i++) {
		printf("sdp_connections_total{");
		om_proc_labels(v[i].ps);
		printf(",path=\"san\"} %" PRIu64 "\n", v[i].ps->conns_san);
		printf("sdp_connections_total{");
		om_proc_labels(v[i].ps);
		printf(",path=\"tcp\"} %" PRIu64 "\n", v[i].ps->conns_tcp);
	}
	om_family(o, "sdp_fallbacks", "counter",
		  "Connections that stayed on or returned to TCP, by reason.");
	for (i = 0; i < n; i++)
		for (k = 1; k < SW_STATS_FB_MAX && k < SDP_FB_MAX; k++) {
			printf("sdp_fallbacks_total{");
			om_proc_labels(v[i].ps);
			printf(",reason=\"%s\"} %" PRIu64 "\n", fb_name(k),
			       v[i].ps->fallbacks[k]);
		}
	om_family(o, "sdp_bytes", "counter",
		  "Bytes the process moved, closed connections included, by path (san or tcp) and direction.");
	for (i = 0; i < n; i++) {
		struct proc_bytes b = proc_bytes(&v[i]);
		const uint64_t val[4] = { b.san_tx, b.san_rx, b.tcp_tx,
					  b.tcp_rx };

		for (k = 0; k < 4; k++) {
			printf("sdp_bytes_total{");
			om_proc_labels(v[i].ps);
			printf(",path=\"%s\",direction=\"%s\"} %" PRIu64 "\n",
			       k < 2 ? "san" : "tcp", k % 2 ? "rx" : "tx",
			       val[k]);
		}
	}
	om_family(o, "sdp_connection", "gauge",
		  "An open connection (value 1) with its state, provider and fallback reason.");
	for (i = 0; i < n; i++)
		for (k = 0; k < v[i].nslots; k++) {
			const struct sw_conn_stats *c = &v[i].ps->conn[k];

			if (!slot_shown(c, o))
				continue;
			printf("sdp_connection{");
			om_proc_labels(v[i].ps);
			printf(",fd=\"%" PRId32 "\",role=\"%s\",peer=", c->fd,
			       role_name(c));
			om_str(c->peer, sizeof(c->peer));
			printf(",local_port=\"%u\",state=\"%s\",provider=",
			       c->local_port, state_name(c->state));
			om_str(c->provider, sizeof(c->provider));
			printf(",fallback=\"%s\"} 1\n", fb_name(c->fb_reason));
		}
	om_family(o, "sdp_connection_bytes", "counter",
		  "Bytes of an open connection by path (copy, rdma_read, rdma_write, tcp) and direction.");
	for (i = 0; i < n; i++)
		for (k = 0; k < v[i].nslots; k++) {
			const struct sw_conn_stats *c = &v[i].ps->conn[k];
			const uint64_t tx[4] = { c->tx_copy, c->tx_rdma_read,
						 c->tx_rdma_write, c->tx_tcp };
			const uint64_t rx[4] = { c->rx_copy, c->rx_rdma_read,
						 c->rx_rdma_write, c->rx_tcp };
			int p, d;

			if (!slot_shown(c, o))
				continue;
			for (d = 0; d < 2; d++)
				for (p = 0; p < 4; p++) {
					printf("sdp_connection_bytes_total{");
					om_proc_labels(v[i].ps);
					printf(",fd=\"%" PRId32 "\",peer=", c->fd);
					om_str(c->peer, sizeof(c->peer));
					printf(",path=\"%s\",direction=\"%s\"} %" PRIu64 "\n",
					       path_name[p], d ? "rx" : "tx",
					       d ? rx[p] : tx[p]);
				}
		}
	if (o->fmt == OUT_OPENMETRICS)
		printf("# EOF\n");
}

/* One report; returns 0, or 1 when some file was bad or -p found nothing. */
static int report(const struct opts *o)
{
	struct snapshot *v;
	int n, i, k, bad, first = 1;

	n = collect(o, &v, &bad);
	if (n < 0) {
		fprintf(stderr, "sdp-stat: %s\n", strerror(-n));
		return 1;
	}
	/* the filters on processes */
	for (i = k = 0; i < n; i++) {
		if (proc_shown(&v[i], o))
			v[k++] = v[i];
		else
			free(v[i].ps);
	}
	n = k;
	tcp_only_fill(v, n);
	cur_taken = mono_s();
	if (o->fmt == OUT_JSON) {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		printf("{\"version\": %d, \"time\": %lld.%03ld, \"processes\": [",
		       SW_STATS_VERSION, (long long)now.tv_sec,
		       now.tv_nsec / 1000000);
		for (i = 0; i < n; i++) {
			printf("%s\n", i ? "," : "");
			json_proc(&v[i], o);
		}
		printf("%s]}\n", n ? "\n" : "");
	} else if (o->fmt != OUT_TEXT) {
		om_report(v, n, o);
	} else {
		if (o->wait_s) {
			char when[32];
			time_t t = time(NULL);

			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S",
				 localtime(&t));
			printf("%s\n", when);
		}
		if (!n && !o->pid && !bad)
			printf("no process running the switch publishes statistics%s%s%s\n",
			       o->program || conn_filtered(o) ?
				       " (that matches the filters)" : "",
			       o->dir ? " in " : "", o->dir ? o->dir : "");
		for (i = 0; i < n; i++) {
			if (!first)
				printf("\n");
			first = 0;
			text_proc(&v[i], o);
		}
		if (o->wait_s)
			rate_rotate();
	}
	fflush(stdout);
	free_snaps(v, n);
	return bad;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sdp-stat [-p PID] [-w SECONDS [-n COUNT]] [--json|--openmetrics|--prometheus]\n"
		"                [-a] [-v] [--raw] [--port PORT] [--peer ADDR[/PREFIX]]\n"
		"                [--program PATTERN] [-d DIR] [--prune] [--closed] [FILE...]\n"
		"       sdp-stat --list-reasons | --list-states\n"
		"  -p, --pid PID        only this process\n"
		"  -w, --wait SECONDS   print again every SECONDS, with rates, until interrupted\n"
		"  -n, --count COUNT    with -w: stop after COUNT reports\n"
		"  -j, --json           JSON instead of text (bytes always raw)\n"
		"      --openmetrics    OpenMetrics text (for a scrape)\n"
		"      --prometheus     Prometheus text format 0.0.4 (node_exporter's\n"
		"                       textfile collector)\n"
		"  -a, --all            also listeners\n"
		"  -v, --verbose        bytes by path, messages, credits, wake-ups, memory\n"
		"      --raw            bytes as plain numbers, not KiB/MiB/GiB\n"
		"      --port PORT      only connections with this local or peer port\n"
		"      --peer ADDR      only connections to this peer address (or prefix)\n"
		"      --program PAT    only processes whose name matches (shell pattern)\n"
		"  -d, --dir DIR        where the files are (default $SDP_STAT_DIR, else\n"
		"                       " SW_STATS_ROOT "/" SW_STATS_USER_DIR "UID; root reads every user's)\n"
		"      --prune          remove files left by processes that are gone\n"
		"      --closed         also connections that closed (their slot's last counts)\n"
		"  FILE...              read these files, whether their process lives or not\n"
		"      --list-reasons   print the fallback reason codes and names\n"
		"      --list-states    print the connection state codes and names\n"
		"See sdp-stat(1).\n");
}

static int parse_peer(const char *arg, struct opts *o)
{
	char buf[80], *slash, *end;
	long p;

	snprintf(buf, sizeof(buf), "%s", arg);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = 0;
	if (inet_pton(AF_INET, buf, o->peer_addr) == 1) {
		o->peer_family = AF_INET;
		o->peer_prefix = 32;
	} else if (inet_pton(AF_INET6, buf, o->peer_addr) == 1) {
		o->peer_family = AF_INET6;
		o->peer_prefix = 128;
	} else {
		fprintf(stderr, "sdp-stat: --peer %s: expected an IPv4 or IPv6 address, optionally /PREFIX\n",
			arg);
		return -EINVAL;
	}
	if (slash) {
		p = strtol(slash, &end, 10);
		if (*end || end == slash || p < 0 || p > o->peer_prefix) {
			fprintf(stderr, "sdp-stat: --peer %s: prefix length must be 0..%d\n",
				arg, o->peer_prefix);
			return -EINVAL;
		}
		o->peer_prefix = (int)p;
	}
	return 0;
}

enum {
	OPT_PRUNE = 256, OPT_REASONS, OPT_STATES, OPT_OM, OPT_PROM, OPT_RAW,
	OPT_PORT, OPT_PEER, OPT_PROGRAM, OPT_CLOSED,
};

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "wait", required_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "openmetrics", no_argument, NULL, OPT_OM },
		{ "prometheus", no_argument, NULL, OPT_PROM },
		{ "all", no_argument, NULL, 'a' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "raw", no_argument, NULL, OPT_RAW },
		{ "port", required_argument, NULL, OPT_PORT },
		{ "peer", required_argument, NULL, OPT_PEER },
		{ "program", required_argument, NULL, OPT_PROGRAM },
		{ "closed", no_argument, NULL, OPT_CLOSED },
		{ "dir", required_argument, NULL, 'd' },
		{ "prune", no_argument, NULL, OPT_PRUNE },
		{ "list-reasons", no_argument, NULL, OPT_REASONS },
		{ "list-states", no_argument, NULL, OPT_STATES },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env = getenv("SDP_STAT_DIR");
	char *end;
	unsigned i;
	long v;
	int c;

	o->dir = env && *env ? env : NULL;
	o->port = -1;
	while ((c = getopt_long(argc, argv, "p:w:n:javd:h", lo, NULL)) != -1) {
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
			o->fmt = OUT_JSON;
			break;
		case OPT_OM:
			o->fmt = OUT_OPENMETRICS;
			break;
		case OPT_PROM:
			o->fmt = OUT_PROMETHEUS;
			break;
		case 'a':
			o->all = 1;
			break;
		case 'v':
			o->details = 1;
			break;
		case OPT_RAW:
			o->raw = 1;
			break;
		case OPT_PORT:
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 1 ||
			    v > 65535) {
				fprintf(stderr, "sdp-stat: --port %s: expected a port number 1..65535\n",
					optarg);
				return -EINVAL;
			}
			o->port = (int)v;
			break;
		case OPT_PEER:
			if (parse_peer(optarg, o))
				return -EINVAL;
			break;
		case OPT_PROGRAM:
			o->program = optarg;
			break;
		case OPT_CLOSED:
			o->closed = 1;
			break;
		case 'd':
			o->dir = optarg;
			break;
		case OPT_PRUNE:
			o->prune = 1;
			break;
		case OPT_REASONS:
			for (i = 0; i < SDP_FB_MAX; i++)
				printf("%u %s\n", i, fb_name(i));
			exit(0);
		case OPT_STATES:
			for (i = 0; i < SW_NSTATES; i++)
				printf("%u %s\n", i, sw_state_name(i));
			exit(0);
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	o->files = argv + optind;
	o->nfiles = argc - optind;
	if (o->nfiles && (o->pid || o->wait_s || o->prune)) {
		fprintf(stderr, "sdp-stat: FILE arguments do not go with -p, -w or --prune; see 'sdp-stat --help'\n");
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
		if (o.fmt == OUT_TEXT && isatty(STDOUT_FILENO))
			printf("\033[H\033[2J");
		rc = report(&o);
		done++;
		if (stop || (o.count && done >= o.count))
			break;
		if (o.fmt == OUT_TEXT && !isatty(STDOUT_FILENO))
			printf("\n");
		nanosleep(&ts, NULL);
		if (stop)
			break;
	}
	return rc;
}

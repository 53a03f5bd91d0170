// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mallory.c - a third local user without the switch, attacking with nothing
 * but the shm provider's published layout (provider/shm/shm.h): names
 * squatted for other users' ports (to intercept and relay their provider
 * connections), WATCH floods, and, as a hostile peer that speaks the shm
 * handshake itself, truncation of shared memfds and arbitrary values in
 * every shared field (a fuzzer). Prints what she obtained; the runner
 * checks it obtained nothing and harmed nobody.
 *   mallory squat SERVER_PORT PORT_LO PORT_HI SECONDS [exact]
 *   mallory watch PORT COUNT SECONDS
 *   mallory peer SERVER_PORT SECONDS [unsealed]   (MALLORY_SEED=hex: replay)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hostile.h"
#include "shm/shm.h"
#include "wire.h"

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rnd_state;

static uint64_t rnd(void)
{
	uint64_t x = rnd_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rnd_state = x;
	return x * 2685821657736338717ull;
}

static int hs_send(int fd, uint16_t type, const void *priv, size_t plen,
		   const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct shm_hs hs = { .magic = SHM_MAGIC,
			     .version = SHM_LAYOUT_VERSION, .type = type,
			     .priv_len = (uint32_t)plen, .bell_id = rnd() | 1 };
	struct iovec iov = { &hs, sizeof(hs) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (plen)
		memcpy(hs.priv, priv, plen);
	shm_hs_put_fds(&m, u.buf, sizeof(u), fds, nfds);
	return sendmsg(fd, &m, MSG_NOSIGNAL) == sizeof(hs) ? 0 : -1;
}

/* One handshake message; its fds into fds[] (up to 4). Returns the number
 * of fds (>= 0) or -1 when nothing (more) came within ms. */
static int hs_recv(int fd, struct shm_hs *hs, int fds[4], int ms)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { hs, sizeof(*hs) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	struct cmsghdr *c;
	int n = 0;

	if (poll(&pf, 1, ms) != 1)
		return -1;
	if (recvmsg(fd, &m, MSG_DONTWAIT) <= 0)
		return -1;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET &&
		    c->cmsg_type == SCM_RIGHTS) {
			n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			if (n > 4)
				n = 4;
			memcpy(fds, CMSG_DATA(c), sizeof(int) * n);
		}
	return n;
}

static int tcp_to(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- squatting and relaying --------------------------------------------- */

struct stolen {
	unsigned conns, hellos, keys, fds, relays, region_bytes;
};

/* What a connection to one of our names brought: anything at all of the
 * victims' handshake (a HELLO, a key, an fd) is a theft. We speak first
 * with a proof of our own (a TCP socket of ours), as a real listener does,
 * to make the connector go on. */
static void squat_conn(int c, int bait, struct stolen *st, unsigned port)
{
	struct shm_hs hs;
	int fds[4], n, i;
	struct sockaddr_un sun;
	socklen_t len;

	struct ucred cr;
	socklen_t crl = sizeof(cr);

	/* her own knocks (below) do not count */
	if (!getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &crl) &&
	    cr.pid == getpid()) {
		close(c);
		return;
	}
	st->conns++;
	hs_send(c, SHM_PROVE, NULL, 0, &bait, 1);
	while ((n = hs_recv(c, &hs, fds, 200)) >= 0) {
		st->fds += n;
		if (hs.type == SHM_HELLO) {
			st->hellos++;
			if (hs.priv_len)
				st->keys++;
		}
		if (n >= 1) {
			struct stat sb;

			if (!fstat(fds[0], &sb) && S_ISREG(sb.st_mode)) {
				void *m = mmap(NULL, 4096, PROT_READ,
					       MAP_SHARED, fds[0], 0);

				if (m != MAP_FAILED) {
					st->region_bytes += 4096;
					munmap(m, 4096);
				}
			}
		}
		/* relay: present what we got to the victim's real listener */
		if (hs.type == SHM_HELLO && n >= 2) {
			int r = socket(AF_UNIX, SOCK_SEQPACKET, 0);
			struct shm_hs a;
			int afds[4], k;

			len = shm_sockname(&sun, "127.0.0.1", port);
			if (r >= 0 &&
			    !connect(r, (struct sockaddr *)&sun, len) &&
			    !hs_send(r, SHM_HELLO, hs.priv, hs.priv_len, fds,
				     n)) {
				k = hs_recv(r, &a, afds, 1000);
				if (k >= 0 && a.type == SHM_ACCEPT)
					st->relays++;
				for (i = 0; i < k; i++)
					close(afds[i]);
			}
			if (r >= 0)
				close(r);
		}
		for (i = 0; i < n; i++)
			close(fds[i]);
	}
	close(c);
}

/* Also knocks at the victims' own listeners (the exact names), asking for
 * their proof: their TCP socket would be a theft too. */
static void knock(unsigned lo, unsigned hi, struct stolen *st)
{
	struct sockaddr_un sun;
	struct shm_hs hs;
	unsigned p;
	int fds[4], n, i;

	for (p = lo; p <= hi; p++) {
		socklen_t len = shm_sockname(&sun, "127.0.0.1", p);
		int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);

		if (c < 0)
			continue;
		if (!connect(c, (struct sockaddr *)&sun, len)) {
			n = hs_recv(c, &hs, fds, 5);
			if (n > 0) {
				st->fds += n;
				for (i = 0; i < n; i++)
					close(fds[i]);
			}
		}
		close(c);
	}
}

static int run_squat(int argc, char **argv)
{
	unsigned sport = atoi(argv[2]), lo = atoi(argv[3]), hi = atoi(argv[4]);
	uint64_t end = now_ms() + (uint64_t)atoi(argv[5]) * 1000;
	bool exact = argc > 6 && !strcmp(argv[6], "exact");
	struct pollfd pf[2 * 256];
	unsigned ports[2 * 256], nl = 0, p;
	struct stolen st = { 0 };
	int bait = tcp_to(sport);

	if (hi < lo || hi - lo >= 256 || bait < 0) {
		fprintf(stderr, "mallory: bad port range or no server\n");
		return 2;
	}
	for (p = lo; p <= hi; p++) {
		const char *hosts[2] = { "*", "127.0.0.1" };
		int h;

		for (h = 0; h < (exact ? 2 : 1); h++) {
			struct sockaddr_un sun;
			socklen_t len = shm_sockname(&sun, hosts[h], p);
			int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK,
					0);

			if (fd < 0 || bind(fd, (struct sockaddr *)&sun, len) ||
			    listen(fd, 64)) {
				if (fd >= 0)
					close(fd);
				continue;
			}
			pf[nl].fd = fd;
			pf[nl].events = POLLIN;
			ports[nl++] = p;
		}
	}
	printf("squatting %u names\n", nl);
	fflush(stdout);
	while (now_ms() < end) {
		unsigned i;

		if (poll(pf, nl, 2) > 0)
			for (i = 0; i < nl; i++) {
				int c;

				if (!(pf[i].revents & POLLIN))
					continue;
				while ((c = accept4(pf[i].fd, NULL, NULL,
						    SOCK_CLOEXEC)) >= 0)
					squat_conn(c, bait, &st, ports[i]);
			}
		knock(lo, hi, &st);
	}
	printf("%s squat: %u connections to her names, %u hellos, %u keys, %u descriptors, %u bytes of regions, %u relays accepted\n",
	       st.hellos || st.keys || st.fds || st.relays ? "FAIL" : "PASS",
	       st.conns, st.hellos, st.keys, st.fds, st.region_bytes,
	       st.relays);
	return 0;
}

/* ---- WATCH flood --------------------------------------------------------- */

static int run_watch(char **argv)
{
	unsigned port = atoi(argv[2]), count = atoi(argv[3]), sent = 0, i;
	uint64_t end = now_ms() + (uint64_t)atoi(argv[4]) * 1000;
	int *fds = calloc(count, sizeof(int));

	for (i = 0; i < count && fds; i++) {
		struct sockaddr_un sun;
		socklen_t len = shm_sockname(&sun, "127.0.0.1", port);

		fds[i] = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (fds[i] < 0 ||
		    connect(fds[i], (struct sockaddr *)&sun, len) ||
		    hs_send(fds[i], SHM_WATCH, NULL, 0, NULL, 0))
			continue;
		sent++;
	}
	printf("watch flood: %u WATCH messages sent\n", sent);
	fflush(stdout);
	while (now_ms() < end)
		usleep(100000);
	return 0;
}

/* ---- a hostile peer: truncation and the shared-field fuzzer ------------- */

struct fuzz_stats {
	unsigned rounds, handshakes, writes, trunc_tried, trunc_done,
		 refused_unsealed;
	const char *fail;
};

/* Arbitrary, but often near the values that pass a first check. */
static uint64_t fuzz_value(uint64_t near)
{
	switch (rnd() % 8) {
	case 0: return 0;
	case 1: return ~0ull;
	case 2: return near + rnd() % 64;
	case 3: return near - rnd() % 64;
	case 4: return 1ull << (rnd() % 64);
	case 5: return rnd() % 4096;
	default: return rnd();
	}
}

/* One write of an arbitrary value into a field of a region we may write:
 * the indices, flags, results, area, slot headers and table entries. */
static void fuzz_write(uint8_t *base, const struct shm_geom *g, size_t len)
{
	static const size_t fields[] = {
		offsetof(struct shm_hdr, ring_prod),
		offsetof(struct shm_hdr, ring_cons),
		offsetof(struct shm_hdr, armed),
		offsetof(struct shm_hdr, stage_prod),
		offsetof(struct shm_hdr, stage_cons),
		offsetof(struct shm_hdr, stage_result),
		offsetof(struct shm_hdr, closed),
		offsetof(struct shm_hdr, area),
		0, 8, 16, 24, 48, 56, 60, 64,	/* the geometry */
	};
	size_t off, k = rnd() % (sizeof(fields) / sizeof(fields[0]) + 3);
	uint64_t v;

	if (k < sizeof(fields) / sizeof(fields[0])) {
		off = fields[k];
		if (fields[k] == offsetof(struct shm_hdr, area) ||
		    fields[k] == offsetof(struct shm_hdr, stage_result))
			off += (rnd() % 32) * 8;
	} else if (k == sizeof(fields) / sizeof(fields[0])) {
		/* a control ring slot's length */
		off = g->ring_off + (rnd() % (g->ring_slots ? g->ring_slots :
					      1)) * g->slot_stride;
	} else if (k == sizeof(fields) / sizeof(fields[0]) + 1) {
		/* a staging slot's header */
		off = g->stage_off + (rnd() % (g->stage_slots ?
					       g->stage_slots : 1)) *
					     g->stage_stride + (rnd() % 4) * 8;
	} else {
		/* a registration table entry */
		off = g->table_off + (rnd() % (g->table_ents ?
					       g->table_ents : 1)) * 32 +
		      (rnd() % 4) * 8;
	}
	if (off + 8 > len)
		return;
	memcpy(&v, base + off, 8);
	v = fuzz_value(v);
	memcpy(base + off, &v, 8);
}

/* A region of ours for the handshake: the server's geometry (so that it
 * passes the first look), sealed against shrinking unless unsealed. */
static int make_region(const struct shm_geom *sg, bool unsealed,
		       uint8_t **map)
{
	struct shm_geom g = *sg;
	int fd = memfd_create("sdp-shm", MFD_CLOEXEC |
				  (unsealed ? 0 : MFD_ALLOW_SEALING));

	if (fd < 0 || ftruncate(fd, g.size))
		return -1;
	g.owner_pid = getpid();
	if (pwrite(fd, &g, sizeof(g), 0) != sizeof(g))
		return -1;
	if (!unsealed && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW))
		return -1;
	*map = mmap(NULL, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return *map == MAP_FAILED ? -1 : fd;
}

/* One connection: the client's half of an upgrade by hand, then attacks
 * until the server drops us or time is up. */
static void peer_round(unsigned sport, uint64_t end, bool unsealed,
		       struct fuzz_stats *fs)
{
	uint8_t first[HOSTILE_FIRST_LEN], key[16];
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	struct sockaddr_un sun;
	struct shm_hs hs;
	struct shm_geom sg;
	struct pollfd pf;
	uint8_t *smap = MAP_FAILED, *omap = NULL;
	int tcp, lfd = -1, c = -1, fds[4] = { -1, -1, -1, -1 }, n, i;
	int own = -1, bell = -1, burst;
	uint64_t stop;

	fs->rounds++;
	tcp = tcp_to(sport);
	if (tcp < 0 || getsockname(tcp, (struct sockaddr *)&me, &ml))
		goto out;
	memset(key, 0, sizeof(key));
	getrandom(key, sizeof(key), 0);
	hostile_first(first, key, 16384, 16);
	/* our listener first: the server connects after our hello came */
	lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	ml = shm_sockname(&sun, "127.0.0.1", ntohs(me.sin_port));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sun, ml) ||
	    listen(lfd, 4) ||
	    send(tcp, first, sizeof(first), MSG_NOSIGNAL) != sizeof(first))
		goto out;
	/* the program's bytes go on TCP meanwhile; keep writing some so the
	 * upgrade is due, and wait for the server's provider connect */
	stop = now_ms() + 3000;
	while (c < 0 && now_ms() < stop) {
		pf.fd = lfd;
		pf.events = POLLIN;
		if (poll(&pf, 1, 20) == 0) {
			if (send(tcp, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
			    errno != EAGAIN)
				goto out;
			continue;
		}
		c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			goto out;
		/* the server probes the name first (probe_bound: connect,
		 * look at who made it, close): an end with nothing sent is
		 * that probe, not the provider connection, which waits for
		 * our proof */
		pf.fd = c;
		if (poll(&pf, 1, 20) == 1 &&
		    recv(c, &hs, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
			close(c);
			c = -1;
		}
	}
	if (c < 0)
		goto out;
	/* our proof is genuine: we are this connection's peer */
	if (hs_send(c, SHM_PROVE, NULL, 0, &tcp, 1))
		goto out;
	n = hs_recv(c, &hs, fds, 2000);
	if (n < 2 || hs.type != SHM_HELLO ||
	    pread(fds[0], &sg, sizeof(sg), 0) != sizeof(sg))
		goto out;
	fs->handshakes++;
	bell = fds[1];
	own = make_region(&sg, unsealed, &omap);
	if (own < 0) {
		fs->fail = "cannot make a region";
		goto out;
	}
	{
		int afds[2] = { own, eventfd(0, EFD_CLOEXEC) };

		if (hs_send(c, SHM_ACCEPT, NULL, 0, afds, 2))
			goto out;
		close(afds[1]);
	}
	/* the server's region, all of it read-write here: nothing of it is
	 * write-sealed, so a hostile peer can do this */
	smap = mmap(NULL, sg.size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0],
		    0);
	/* the server maps our region and checks its geometry first: the
	 * chaos starts once it is in (its SETUP lands in our ring) */
	stop = now_ms() + 500;
	while (now_ms() < stop &&
	       !atomic_load(&((struct shm_hdr *)omap)->ring_prod))
		usleep(200);
	/* an unsealed region is refused at once: a short round */
	/* rounds of 0.5 to 1.5 s, each with its own intensity: a few subtle
	 * values get further than a storm of them */
	stop = now_ms() + (unsealed ? 1000 : 500 + rnd() % 1000);
	if (stop > end)
		stop = end;
	burst = 1 + rnd() % 64;
	while (now_ms() < stop) {
		char b[256];
		ssize_t k;

		/* truncation of the server's region and of ours */
		fs->trunc_tried++;
		if (!ftruncate(fds[0], 0)) {
			fs->trunc_done++;
			fs->fail = "the server's region could be truncated";
		}
		if (!unsealed && !ftruncate(own, 0)) {
			fs->fail = "our sealed region could be truncated";
		}
		if (!ftruncate(fds[0], sg.size * 2)) {
			fs->trunc_done++;
			fs->fail = "the server's region could be grown";
		}
		/* ours, unsealed: shrunk and grown back at will */
		if (unsealed && (ftruncate(own, 0) || ftruncate(own, sg.size)))
			fs->fail = "cannot resize our unsealed region";
		fallocate(fds[0], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  rnd() % sg.size & ~4095ull, 4096);
		for (i = 0; i < burst; i++) {
			if (smap != MAP_FAILED && rnd() % 2)
				fuzz_write(smap, &sg, sg.size);
			else if (!unsealed)
				fuzz_write(omap, &sg, sg.size);
			fs->writes++;
		}
		if (rnd() % 4 == 0) {
			uint64_t one = 1;

			if (write(bell, &one, 8) < 0)
				break;
		}
		if (rnd() % 8 == 0) {
			uint8_t junk = (uint8_t)rnd();

			send(tcp, &junk, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		/* the server dropped us: the next round */
		k = recv(tcp, b, sizeof(b), MSG_DONTWAIT);
		if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
			break;
		usleep(100 + rnd() % 2000);
	}
	if (unsealed)
		fs->refused_unsealed++;
out:
	if (smap != MAP_FAILED)
		munmap(smap, sg.size);
	for (i = 0; i < 4; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (own >= 0)
		close(own);
	if (c >= 0)
		close(c);
	if (lfd >= 0)
		close(lfd);
	if (tcp >= 0)
		close(tcp);
}

static int run_peer(int argc, char **argv)
{
	unsigned sport = atoi(argv[2]);
	uint64_t end = now_ms() + (uint64_t)atoi(argv[3]) * 1000;
	bool unsealed = argc > 4 && !strcmp(argv[4], "unsealed");
	struct fuzz_stats fs = { 0 };

	/* a run is reproducible from the seed it prints */
	if (getenv("MALLORY_SEED"))
		rnd_state = strtoull(getenv("MALLORY_SEED"), NULL, 16);
	else
		getrandom(&rnd_state, sizeof(rnd_state), 0);
	rnd_state |= 1;
	printf("peer: seed %llx\n", (unsigned long long)rnd_state);
	while (now_ms() < end && !fs.fail)
		peer_round(sport, end, unsealed, &fs);
	printf("%s peer%s: %u connections, %u handshakes, %u shared writes, %u truncations tried, %u done%s%s\n",
	       fs.fail || (!unsealed && !fs.handshakes) ? "FAIL" : "PASS",
	       unsealed ? " (unsealed region)" : "", fs.rounds, fs.handshakes,
	       fs.writes, fs.trunc_tried, fs.trunc_done,
	       fs.fail ? ": " : "", fs.fail ? fs.fail : "");
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	rnd_state = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;
	if (argc >= 6 && !strcmp(argv[1], "squat"))
		return run_squat(argc, argv);
	if (argc >= 5 && !strcmp(argv[1], "watch"))
		return run_watch(argv);
	if (argc >= 4 && !strcmp(argv[1], "peer"))
		return run_peer(argc, argv);
	fprintf(stderr, "usage: mallory squat SERVER_PORT PORT_LO PORT_HI SECONDS [exact]\n"
			"       mallory watch PORT COUNT SECONDS\n"
			"       mallory peer SERVER_PORT SECONDS [unsealed]\n");
	return 2;
}

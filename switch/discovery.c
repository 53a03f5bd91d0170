/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * discovery.c - is a switch listening at the peer? The providers' probes,
 * the check through /proc that a same-host provider listener belongs to the
 * owner of the TCP listener.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "discovery.h"
#include "log.h"
#include "peer_seen.h"
#include "providers.h"
#include "util.h"

/*
 * The TCP listener on port in this network namespace (/proc/net/tcp{,6}):
 * its owner's user id and its socket inode. Returns 0, or -ENOENT if none.
 */
static int tcp_listener(uint16_t port, unsigned long *uid,
			unsigned long *inode)
{
	static const char *const files[] = { "/proc/net/tcp",
					     "/proc/net/tcp6" };
	char line[512];
	unsigned i;

	for (i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "re");

		if (!f)
			continue;
		if (!fgets(line, sizeof(line), f)) {
			fclose(f);
			continue;
		}
		while (fgets(line, sizeof(line), f)) {
			char local[64], *colon;
			unsigned st, lport;

			if (sscanf(line, "%*s %63s %*s %x %*s %*s %*s %lu %*s %lu",
				   local, &st, uid, inode) != 4)
				continue;
			colon = strrchr(local, ':');
			if (!colon || st != 0x0a ||
			    sscanf(colon + 1, "%x", &lport) != 1 ||
			    lport != port)
				continue;
			fclose(f);
			return 0;
		}
		fclose(f);
	}
	return -ENOENT;
}

/* Does process pid hold the socket with this inode? 1 or 0, or -errno:
 * cannot tell. */
static int pid_holds_socket(int pid, unsigned long inode)
{
	char dir[64], path[320], link[64], want[64];
	struct dirent *e;
	DIR *d;
	int found = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	d = opendir(dir);
	if (!d)
		return -errno;
	while (!found && (e = readdir(d))) {
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		found = !strcmp(link, want);
	}
	closedir(d);
	return found;
}

/*
 * Does a child of pid hold the socket with this inode? A pre-forking
 * server listens, forks the processes that accept, and often closes its
 * own copy of the TCP listener: the provider listener (made by the
 * parent, inherited by the children) still speaks for the same program.
 * 1 or 0, or -errno: cannot tell.
 */
static int pid_child_holds_socket(int pid, unsigned long inode)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int found = 0, any = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while (!found && (e = readdir(d))) {
		char cpath[320];
		FILE *f;
		int kid;

		if (e->d_name[0] == '.')
			continue;
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children",
			 pid, e->d_name);
		f = fopen(cpath, "re");
		if (!f)
			continue;
		any = 1;
		while (!found && fscanf(f, "%d", &kid) == 1)
			found = pid_holds_socket(kid, inode) == 1;
		fclose(f);
	}
	closedir(d);
	return found ? 1 : (any ? 0 : -ENOENT);
}

/*
 * Listeners proven genuine (below), remembered for a short time by the
 * identity the kernel gives for the provider listener (its creator's pid and
 * uid) and the port, so that a client making many connections to one server
 * reads /proc once, not once per connection. Only proofs are remembered: a
 * refusal is checked again every time. Within the lifetime the only way to a
 * different answer is a new process with the same pid holding the provider
 * listener while another holds the TCP listener, which takes a pid wrap.
 * The lock is only tried: a busy (or, after fork, orphaned) lock means a
 * miss, and the full check.
 */
#define GENUINE_SLOTS 16
#define GENUINE_TTL_NS 1000000000ull

struct genuine_entry {
	uint64_t expires;	/* sw_now_ns() after which it is stale */
	int32_t pid;		/* creator of the provider listener */
	uint32_t uid;
	uint16_t port;		/* TCP and provider port */
	uint8_t prov;		/* index in sw_providers */
};

static struct genuine_entry genuine_cache[GENUINE_SLOTS];
static unsigned int genuine_next;
static pthread_mutex_t genuine_lock = PTHREAD_MUTEX_INITIALIZER;

static bool genuine_cached(int prov, uint16_t port,
			   const struct sdp_listener_owner *o)
{
	uint64_t now = sw_now_ns();
	bool hit = false;
	int i;

	if (pthread_mutex_trylock(&genuine_lock))
		return false;
	for (i = 0; i < GENUINE_SLOTS && !hit; i++) {
		struct genuine_entry *e = &genuine_cache[i];

		hit = e->expires > now && e->pid == o->pid &&
		      e->uid == o->uid && e->port == port && e->prov == prov;
	}
	pthread_mutex_unlock(&genuine_lock);
	return hit;
}

static void genuine_remember(int prov, uint16_t port,
			     const struct sdp_listener_owner *o)
{
	struct genuine_entry *e;

	if (pthread_mutex_trylock(&genuine_lock))
		return;
	e = &genuine_cache[genuine_next++ % GENUINE_SLOTS];
	e->expires = sw_now_ns() + GENUINE_TTL_NS;
	e->pid = o->pid;
	e->uid = o->uid;
	e->port = port;
	e->prov = (uint8_t)prov;
	pthread_mutex_unlock(&genuine_lock);
}

/*
 * A probe of a provider that cannot name the listener's owner (across a
 * wire). A probe that the server's program does not answer at once costs
 * the provider's whole wait (verbs: probe_ms, a second) in connect(), so
 * a switch seen at addr lately stands for another connection
 * (peer_seen.c); a refusal is asked again every time.
 */
static bool probe_across(struct sw_provider *p, const struct sockaddr *addr,
			 socklen_t len)
{
	bool wire = !(p->mod.info.caps & SDP_CAP_LOCAL_ONLY);
	int r;

	if (wire && sw_seen_fresh(p->index, addr, len, sw_now_ns()))
		return true;
	r = p->mod.ops.probe(p->mod.prov, addr, len);
	if (!wire)
		return !r;
	if (r)
		sw_seen_drop(p->index, addr, len);
	else
		sw_seen_note(p->index, addr, len, sw_now_ns());
	return !r;
}

/*
 * Discovery through provider p: does a switch listen at addr? Same host: a
 * provider listener answers at addr; does it belong to the process that
 * owns the TCP listener the connection goes to? Another process that took
 * the provider's name first (squatting) must not make this switch send its
 * hello to a program that runs no switch. The owner query reaches the
 * listener exactly as a probe does, so it is the probe; providers that
 * cannot tell the owner (across hosts) are probed and trusted.
 */
bool sw_switch_listens_at(struct sw_provider *p,
			  const struct sockaddr *addr, socklen_t len)
{
	struct sdp_listener_owner o;
	unsigned long uid, inode;
	uint16_t port;
	int r;

	r = p->mod.ops.ioctl(p->mod.prov, SDP_IOCTL_LISTENER_OWNER, addr, len,
			     &o, sizeof(o));
	if (r == -EOPNOTSUPP)
		return probe_across(p, addr, len);
	if (r)
		return false;	/* nothing listens there */
	sw_addr_port((const struct sockaddr_storage *)addr, &port);
	if (genuine_cached(p->index, port, &o))
		return true;
	if (tcp_listener(port, &uid, &inode) || uid != o.uid) {
		SW_WARN("provider %s: the listener for port %u is not the TCP listener's (uid %u): not upgrading",
			p->mod.name, port, o.uid);
		return false;
	}
	r = pid_holds_socket(o.pid, inode);
	if (r == 0)
		r = pid_child_holds_socket(o.pid, inode);
	if (r == 0) {
		SW_WARN("provider %s: the listener for port %u belongs to pid %d, which does not hold the TCP listener: not upgrading",
			p->mod.name, port, o.pid);
		return false;
	}
	if (r > 0)
		genuine_remember(p->index, port, &o);
	return true;	/* same user, and either proven or not visible */
}

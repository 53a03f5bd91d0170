/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * stats.c - publishing statistics for sdp-stat: one shared file per process
 * ($SDP_STAT_DIR/sdp-stat.<pid>), removed at exit. Slots are handed out
 * under a lock; counters are written by the connection's owner only.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fork_exec.h"
#include "stats.h"
#include "sys.h"
#include "util.h"

static struct sw_proc_stats *proc;
static struct sw_proc_stats proc_private; /* when the file cannot be made */
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static char stat_path[300];
static pid_t stat_pid;

static bool sandboxed;

/* A seccomp filter may kill the process for an unlink: the file then
 * stays, and the next process that starts the switch collects it
 * (stats_collect_stale), as it does the files of killed processes. */
void sw_sandboxed(void)
{
	sandboxed = true;
}

static void stats_unlink(void)
{
	if (stat_path[0] && getpid() == stat_pid && !sandboxed)
		unlink(stat_path);
}

/* Files of processes that died without running their exit handlers
 * (killed) would pile up: remove those whose process is gone. */
static void stats_collect_stale(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[512];
		char *end;
		long pid;

		if (strncmp(e->d_name, "sdp-stat.", 9))
			continue;
		pid = strtol(e->d_name + 9, &end, 10);
		if (*end || pid <= 0 || pid == getpid())
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
}

static void stats_map(void)
{
	const char *dir = getenv("SDP_STAT_DIR");
	int fd;
	void *p;

	if (!dir || !*dir)
		dir = "/dev/shm";
	stats_collect_stale(dir);
	stat_pid = getpid();
	snprintf(stat_path, sizeof(stat_path), "%s/sdp-stat.%d", dir,
		 (int)stat_pid);
	fd = open(stat_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto private;
	if (ftruncate(fd, sizeof(*proc)) < 0) {
		sdp_sys.close(fd);
		unlink(stat_path);
		goto private;
	}
	p = mmap(NULL, sizeof(*proc), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	sdp_sys.close(fd);
	if (p == MAP_FAILED) {
		unlink(stat_path);
		goto private;
	}
	proc = p;
	return;
private:
	stat_path[0] = 0;
	proc = &proc_private;
}

void sw_stats_init(void)
{
	static bool registered;

	if (getenv("SDP_STAT_OFF"))
		proc = &proc_private;
	else
		stats_map();
	memset(proc, 0, offsetof(struct sw_proc_stats, conn));
	proc->magic = SW_STATS_MAGIC;
	proc->version = SW_STATS_VERSION;
	proc->pid = getpid();
	proc->ppid = getppid();
	proc->nslots = SW_STATS_SLOTS;
	proc->start_ns = sw_now_ns();
	snprintf(proc->program, sizeof(proc->program), "%s",
		 program_invocation_short_name);
	if (!registered) {
		registered = true;
		atexit(stats_unlink);
	}
}

/* After fork the child publishes its own file (its connections too). The
 * new file is mapped over the old address, so every pointer into the
 * statistics stays valid. */
void sw_stats_after_fork_child(void);
void sw_stats_after_fork_child(void)
{
	const char *dir = getenv("SDP_STAT_DIR");
	int fd;

	if (!proc || proc == &proc_private)
		return;
	if (!dir || !*dir)
		dir = "/dev/shm";
	stat_pid = getpid();
	if (sandboxed)
		goto keep;
	snprintf(stat_path, sizeof(stat_path), "%s/sdp-stat.%d", dir,
		 (int)stat_pid);
	fd = open(stat_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto keep;
	/* the mapping is still the parent's file: write a copy */
	{
		struct sw_proc_stats *copy = malloc(sizeof(*copy));
		bool ok;

		if (!copy) {
			sdp_sys.close(fd);
			unlink(stat_path);
			goto keep;
		}
		memcpy(copy, proc, sizeof(*copy));
		copy->pid = stat_pid;
		copy->ppid = getppid();
		copy->closed_tx_san = copy->closed_rx_san = 0;
		copy->closed_tx_tcp = copy->closed_rx_tcp = 0;
		ok = sdp_sys.write(fd, copy, sizeof(*copy)) ==
		     (ssize_t)sizeof(*copy);
		free(copy);
		if (!ok || mmap(proc, sizeof(*proc), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
			sdp_sys.close(fd);
			unlink(stat_path);
			goto keep;
		}
	}
	sdp_sys.close(fd);
	return;
keep:
	/* no file of its own: stop writing into the parent's (the private
	 * copy starts empty: the counters restart) */
	stat_path[0] = 0;
	if (mmap(proc, sizeof(*proc), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		return;
}

struct sw_proc_stats *sw_stats_proc(void)
{
	return proc;
}

struct sw_conn_stats *sw_stats_conn_new(void)
{
	static uint32_t hint;	/* where the last free slot was found */
	uint32_t i, k;

	if (!proc)
		return NULL;
	pthread_mutex_lock(&slot_lock);
	for (k = 0; k < SW_STATS_SLOTS; k++) {
		i = (hint + k) % SW_STATS_SLOTS;
		if (!proc->conn[i].in_use) {
			memset(&proc->conn[i], 0, sizeof(proc->conn[i]));
			proc->conn[i].in_use = 1;
			hint = i + 1;
			pthread_mutex_unlock(&slot_lock);
			return &proc->conn[i];
		}
	}
	pthread_mutex_unlock(&slot_lock);
	/* more connections than slots: count nothing per connection */
	return NULL;
}

void sw_stats_conn_free(struct sw_conn_stats *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&slot_lock);
	if (proc) {
		proc->closed_tx_san += sw_stats_tx_san(c);
		proc->closed_rx_san += sw_stats_rx_san(c);
		proc->closed_tx_tcp += c->tx_tcp;
		proc->closed_rx_tcp += c->rx_tcp;
	}
	c->in_use = 0;
	pthread_mutex_unlock(&slot_lock);
}

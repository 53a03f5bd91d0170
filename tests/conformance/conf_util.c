// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * conf_util.c - the conformance suite's plumbing: loading the provider under
 * test, failure and skip reporting across threads and forked peers, random
 * ports, data patterns and the process/thread launcher for two-sided cases.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conf.h"

struct conf_shared *conf_sh;
const char *conf_provider;
const char *conf_options;

int conf_failf(const char *file, int line, const char *fmt, ...)
{
	int expected = 0;
	va_list ap;
	int n;

	if (!atomic_compare_exchange_strong(&conf_sh->failed, &expected, 1))
		return -1;
	n = snprintf(conf_sh->fail, sizeof(conf_sh->fail), "%s:%d: ",
		     strrchr(file, '/') ? strrchr(file, '/') + 1 : file, line);
	va_start(ap, fmt);
	vsnprintf(conf_sh->fail + n, sizeof(conf_sh->fail) - n, fmt, ap);
	va_end(ap);
	return -1;
}

void conf_skip(const char *fmt, ...)
{
	int expected = 0;
	va_list ap;

	if (atomic_compare_exchange_strong(&conf_sh->skipped, &expected, 1)) {
		va_start(ap, fmt);
		vsnprintf(conf_sh->skip, sizeof(conf_sh->skip), fmt, ap);
		va_end(ap);
	}
	fflush(stdout);
	exit(0);
}

bool conf_aborted(void)
{
	return atomic_load(&conf_sh->failed) != 0;
}

const char *conf_err(int rc)
{
	static __thread char buf[160];

	if (rc == SDP_PENDING)
		return "SDP_PENDING";
	snprintf(buf, sizeof(buf), "%d (%s)", rc, sdp_strerror(rc));
	return buf;
}

int conf_load(struct sdp_module *m)
{
	char err[512], name[32], path[PATH_MAX];
	const char *base;
	int rc;

	if (strchr(conf_provider, '/')) {
		base = strrchr(conf_provider, '/') + 1;
		if (!strncmp(base, "libsdp-", 7))
			base += 7;
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(base, "."),
			 base);
		snprintf(path, sizeof(path), "%s", conf_provider);
	} else {
		snprintf(name, sizeof(name), "%s", conf_provider);
		snprintf(path, sizeof(path), "libsdp-%s.so", conf_provider);
	}
	memset(m, 0, sizeof(*m));
	err[0] = 0;
	rc = sdp_module_load(name, path, conf_options, m, err, sizeof(err));
	if (rc < 0)
		return FAIL("cannot load provider '%s': %s (%s)", conf_provider,
			    err, conf_err(rc));
	if (m->status == -SDP_ENODEVICE)
		conf_skip("provider reports no device: %s",
			  m->status_msg[0] ? m->status_msg : "-SDP_ENODEVICE");
	if (m->status != 0)
		return FAIL("provider '%s' loaded with status %s: %s", name,
			    conf_err(m->status), m->status_msg);
	if (!m->prov)
		return FAIL("loader returned status 0 but no provider object");
	return 0;
}

uint16_t conf_port(void)
{
	static unsigned int state;

	if (!state)
		state = (unsigned int)getpid() * 2654435761u ^
			(unsigned int)conf_now_us();
	state = state * 1103515245u + 12345u;
	return (uint16_t)(20000 + (state >> 8) % 40000);
}

void conf_addr(struct sockaddr_in *sin, uint16_t port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

uint64_t conf_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

void conf_raise_nofile(unsigned int want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur >= want)
		return;
	if (rl.rlim_max < want)
		/* raising the hard limit works as root only */
		rl.rlim_max = want;
	rl.rlim_cur = want;
	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int reg_forget(struct sdp_module *m, void *p, size_t len)
{
	int rc;

	if (!p || !len || !m->prov || !m->ext.mr_cache_callback)
		return 0;
	rc = m->ext.mr_cache_callback(m->prov, p, len);
	if (rc < 0 && rc != -EOPNOTSUPP)
		return FAIL("MemoryRegistrationCacheCallback(%p, %zu) before "
			    "freeing answered %s", p, len, conf_err(rc));
	return 0;
}

int conf_reg_free(struct sdp_module *m, void *p, size_t len)
{
	int rc = reg_forget(m, p, len);

	free(p);
	return rc;
}

int conf_reg_unmap(struct sdp_module *m, void *p, size_t len)
{
	int rc = reg_forget(m, p, len);

	munmap(p, len);
	return rc;
}

/* ---- patterns ------------------------------------------------------------ */

void pat_fill(void *buf, size_t len, uint32_t seed, uint64_t off)
{
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pat_byte(seed, off + i);
}

int64_t pat_check(const void *buf, size_t len, uint32_t seed, uint64_t off)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pat_byte(seed, off + i))
			return (int64_t)i;
	return -1;
}

uint32_t conf_fnv(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* ---- processes ----------------------------------------------------------- */

pid_t conf_fork(void)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
	}
	return pid;
}

int conf_reap(pid_t pid, int ms, const char *what)
{
	uint64_t end = conf_now_us() + (uint64_t)ms * 1000;
	int status;
	pid_t r;

	for (;;) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (r < 0)
			return FAIL("waitpid(%s): %s", what, strerror(errno));
		if (conf_now_us() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return FAIL("%s did not finish within %d ms (killed)",
				    what, ms);
		}
		usleep(2000);
	}
	if (WIFSIGNALED(status))
		return FAIL("%s died of signal %d (%s)", what, WTERMSIG(status),
			    strsignal(WTERMSIG(status)));
	if (WEXITSTATUS(status) != 0)
		return FAIL("%s exited with status %d", what,
			    WEXITSTATUS(status));
	return 0;
}

/* ---- two sides ----------------------------------------------------------- */

struct pair_half {
	enum pair_mode mode;
	struct sdp_module *m;	/* threads: shared; fork: NULL (own) */
	uint16_t port;
	int ready[2];		/* server -> client: listening */
	role_fn fn;
	void *arg;
	int rc;
};

static int pair_server(struct pair_half *h)
{
	struct sdp_listener *l = NULL;
	struct side *s;
	char one = 1;
	int rc = -1;

	s = calloc(1, sizeof(*s));
	if (!s)
		return FAIL("out of memory");
	if (side_init(s, h->m, "server") < 0)
		goto free_side;
	if (side_listen(s, h->port, &l) < 0)
		goto fini_side;
	if (write(h->ready[1], &one, 1) != 1) {
		FAIL("pipe write: %s", strerror(errno));
		goto close_listener;
	}
	if (side_accept(s, l, NULL, 0, NULL, NULL, 10000) < 0)
		goto close_listener;
	if (side_ctl_init(s) < 0)
		goto close_ep;
	rc = h->fn(s, h->arg);
close_ep:
	side_close(s);
close_listener:
	h->m->ops.listener_close(l);
fini_side:
	side_fini(s);
free_side:
	free(s);
	return rc;
}

static int pair_client(struct pair_half *h)
{
	struct pollfd pfd = { .fd = h->ready[0], .events = POLLIN };
	struct side *s;
	char one;
	int rc = -1;

	if (poll(&pfd, 1, 10000) != 1 || read(h->ready[0], &one, 1) != 1)
		return FAIL("client: server never started listening");
	s = calloc(1, sizeof(*s));
	if (!s)
		return FAIL("out of memory");
	if (side_init(s, h->m, "client") < 0)
		goto free_side;
	if (side_connect(s, h->port, NULL, 0, 10000) < 0)
		goto fini_side;
	if (side_ctl_init(s) < 0)
		goto close_ep;
	rc = h->fn(s, h->arg);
close_ep:
	side_close(s);
fini_side:
	side_fini(s);
free_side:
	free(s);
	return rc;
}

static void *server_thread(void *arg)
{
	struct pair_half *h = arg;

	h->rc = pair_server(h);
	return NULL;
}

static void *client_thread(void *arg)
{
	struct pair_half *h = arg;

	h->rc = pair_client(h);
	return NULL;
}

/* Runs the n halves of one kind, each in a thread; -1 if any failed. */
static int run_halves(struct pair_half *h, int n, void *(*fn)(void *))
{
	pthread_t th[n];
	int i, started, rc = 0;

	for (started = 0; started < n; started++)
		if (pthread_create(&th[started], NULL, fn, &h[started])) {
			rc = FAIL("pthread_create failed");
			break;
		}
	for (i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		if (h[i].rc < 0)
			rc = -1;
	}
	return rc;
}

int conf_run_pairs(enum pair_mode mode, int n, role_fn server, void *sarg,
		   role_fn client, void *carg)
{
	struct pair_half *sh, *ch;
	struct sdp_module *m;
	int i, rc = -1, npipes = 0, started;
	uint16_t port = conf_port();
	pthread_t cth[n];
	pid_t pid;

	m = calloc(1, sizeof(*m));
	sh = calloc((size_t)n, sizeof(*sh));
	ch = calloc((size_t)n, sizeof(*ch));
	if (!m || !sh || !ch) {
		rc = FAIL("out of memory");
		goto free_all;
	}
	for (npipes = 0; npipes < n; npipes++) {
		if (pipe(sh[npipes].ready)) {
			rc = FAIL("pipe: %s", strerror(errno));
			goto close_pipes;
		}
		i = npipes;
		sh[i].mode = ch[i].mode = mode;
		sh[i].fn = server;
		sh[i].arg = sarg;
		ch[i].fn = client;
		ch[i].arg = carg;
		ch[i].ready[0] = sh[i].ready[0];
		ch[i].ready[1] = sh[i].ready[1];
		sh[i].port = ch[i].port = (uint16_t)(port + i);
		sh[i].m = ch[i].m = m;
	}

	if (mode == PAIR_FORK) {
		pid = conf_fork();
		if (pid < 0) {
			rc = FAIL("fork: %s", strerror(errno));
			goto close_pipes;
		}
		if (pid == 0) {
			if (conf_load(m) < 0)
				_exit(1);
			rc = run_halves(ch, n, client_thread);
			sdp_module_unload(m);
			fflush(stdout);
			_exit(rc < 0 ? 1 : 0);
		}
		rc = conf_load(m);
		if (rc == 0)
			rc = run_halves(sh, n, server_thread);
		if (rc < 0)
			kill(pid, SIGKILL);
		if (conf_reap(pid, 30000, "client process") < 0)
			rc = -1;
		if (m->prov)
			sdp_module_unload(m);
		goto close_pipes;
	}

	if (conf_load(m) < 0)
		goto close_pipes;
	rc = 0;
	for (started = 0; started < n; started++)
		if (pthread_create(&cth[started], NULL, client_thread,
				   &ch[started])) {
			rc = FAIL("pthread_create failed");
			break;
		}
	if (rc == 0)
		rc = run_halves(sh, n, server_thread);
	for (i = 0; i < started; i++) {
		pthread_join(cth[i], NULL);
		if (ch[i].rc < 0)
			rc = -1;
	}
	sdp_module_unload(m);
close_pipes:
	for (i = 0; i < npipes; i++) {
		close(sh[i].ready[0]);
		close(sh[i].ready[1]);
	}
free_all:
	free(sh);
	free(ch);
	free(m);
	return rc;
}

int conf_run_pair(enum pair_mode mode, role_fn server, void *sarg,
		  role_fn client, void *carg)
{
	return conf_run_pairs(mode, 1, server, sarg, client, carg);
}

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * exec_reup.c - a connection back on TCP that may be upgraded again keeps
 * that chance across exec: its key, the kernel's counts at the downgrade
 * markers and the bytes not yet read go to the new program's switch in a
 * memory file, and its holders' record by its descriptor; that switch
 * checks them and adopts the connection as it was (docs/protocol.md 2.8).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blind.h"
#include "config.h"
#include "exec_reup.h"
#include "fork_exec.h"
#include "hello_token.h"
#include "holders.h"
#include "log.h"
#include "ownfd.h"
#include "providers.h"
#include "reupgrade.h"
#include "sdp_switch.h"
#include "session.h"
#include "sock.h"
#include "sys.h"
#include "upgrade.h"
#include "upgrade_turns.h"
#include "util.h"

_Static_assert(sizeof(((struct sw_exec_rec *)0)->hello) ==
	       sizeof(((struct sw_sock *)0)->hello_buf), "hello size");
_Static_assert(sizeof(((struct sw_exec_rec *)0)->peer) ==
	       sizeof(struct sockaddr_storage), "peer size");

static size_t rec_buf_off(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (sizeof(struct sw_exec_rec) + pg - 1) / pg * pg;
}

/* s may keep its chance of an upgrade again across this exec. */
static bool exec_keeps(struct sw_sock *s)
{
	return s->state == SW_TCP && !s->closed && s->reup &&
	       !s->reup_never && !sw_stepped_aside() && !s->dg_marker &&
	       s->dg_rx_based &&
	       !s->skip_hello && s->prefix_off >= s->prefix_len &&
	       !s->ptx_len && (s->is_client || s->up_prov) &&
	       (!s->holders ||
		__atomic_load_n(&s->holders_fd, __ATOMIC_RELAXED) >= 0);
}

/*
 * The socket stays on a standard stream of the new program (fd 0, 1 or 2
 * kept across the exec): inetd's and sshd's shape. The new program may
 * read and write it through stdio, whose calls reach the kernel by the C
 * library's internal read and write, which no preloaded library sees.
 * When it cannot be told, it counts as on one.
 */
static bool on_std_stream(struct sw_sock *s)
{
	struct stat sb, ob;
	int fd, fl;

	if (fstat(s->fd, &sb))
		return true;
	for (fd = 0; fd <= 2; fd++) {
		if (fstat(fd, &ob) || ob.st_ino != sb.st_ino ||
		    ob.st_dev != sb.st_dev)
			continue;
		fl = sdp_sys.fcntl(fd, F_GETFD);
		if (fl < 0 || !(fl & FD_CLOEXEC))
			return true;
	}
	return false;
}

/* An upgrade under way that the new program may take on (s locked):
 * uncommitted, nothing of the provider's made (as for a fork, holders.c),
 * no byte kept back or taken while looking for a hello, and the socket
 * inherited. */
static bool keeps_pending(struct sw_sock *s)
{
	if (!sw_cfg.reupgrade || !sw_pending(s) || s->closed || s->ss.ep ||
	    s->ptx_len || s->prefix_off < s->prefix_len ||
	    sw_blind() || sw_stepped_aside() ||
	    (s->holders &&
	     __atomic_load_n(&s->holders_fd, __ATOMIC_RELAXED) < 0))
		return false;
	/* a socket that goes with the old program (every fd of it
	 * close-on-exec) is not this exec's: its hello is the other
	 * holders' to take */
	if (!sw_fd_survives_exec(s->fd))
		return false;
	/* a server: the client's hello that is here is taken now (a new
	 * program without the switch must not read it); one partly here
	 * (or the program's bytes) is left to the exec's usual course
	 * (dropped before it, or no hello) */
	if (!s->is_client && s->state == SW_HELLO_WAIT) {
		uint8_t b;

		if (s->hello_got)
			return false;
		sw_upgrade_server_hello_in(s, false);
		if (s->state == SW_HELLO_WAIT &&
		    sdp_sys.recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0)
			return false;
		if (!sw_pending(s))
			return false;
	}
	return s->is_client || s->state != SW_UPGRADING || s->up_prov;
}

static void rec_fill(struct sw_exec_rec *r, struct sw_sock *s,
		     unsigned long long ino, size_t buf_off, bool pending)
{
	int i;

	memset(r, 0, sizeof(*r));
	r->version = SW_EXEC_REC_VERSION;
	r->rec_size = sizeof(*r);
	r->ino = ino;
	r->buf_off = buf_off;
	r->buf_hdr = sizeof(struct sw_fork_buf);
	r->flags = s->is_client ? SW_EXEC_F_CLIENT : 0;
	r->family = s->family;
	r->up_prov = s->up_prov ? s->up_prov->index : -1;
	r->lsn_provs = s->lsn_provs;
	r->cand_provs = s->cand_provs;
	r->local_port = s->local_port;
	r->peerlen = s->peerlen <= sizeof(r->peer) ? s->peerlen : 0;
	r->reup_n = s->reup_n;
	r->dg_tx_base = s->dg_tx_base;
	r->dg_rx_base = s->dg_rx_base;
	memcpy(r->key, s->key, sizeof(r->key));
	memcpy(r->hello, s->hello_buf, sizeof(r->hello));
	memcpy(r->peer, &s->peer, r->peerlen);
	r->nprov = sw_nproviders;
	for (i = 0; i < sw_nproviders; i++)
		memcpy(r->prov[i], sw_providers[i].mod.name,
		       strnlen(sw_providers[i].mod.name,
			       sizeof(r->prov[i]) - 1));
	r->state = SW_TCP;
	if (pending) {
		r->flags |= SW_EXEC_F_PENDING;
		r->state = s->state;
		r->pflags = (s->skip_hello ? SW_EXEC_P_SKIP_HELLO : 0) |
			    (s->key_refused ? SW_EXEC_P_KEY_REFUSED : 0) |
			    (s->spoke_first ? SW_EXEC_P_SPOKE_FIRST : 0);
		r->connect_tries = s->connect_tries;
		r->hello_got = s->hello_got;
		r->tcp_tx = s->tcp_tx;
		r->tcp_rx = s->tcp_rx;
		r->born_ns = s->born_ns;
		r->upgrade_at_ns = s->upgrade_at_ns;
		r->deadline_ns = s->deadline_ns;
		r->spoke_first_ns = s->spoke_first_ns;
	}
	r->magic = SW_EXEC_REC_MAGIC;
}

static int make_item(struct sw_sock *s, char *item, size_t len,
		     const char *prefix, bool pending)
{
	size_t off = rec_buf_off(), left = 0, map_len;
	struct sw_fork_buf *old = s->fork_buf, *nb;
	int fd, hfd, k, err;
	struct sw_exec_rec *r;
	struct stat sb, mb, hb;

	if (pending ? !keeps_pending(s) : !exec_keeps(s))
		return 0;
	if (fstat(s->fd, &sb))
		return -errno;
	hfd = s->holders ? __atomic_load_n(&s->holders_fd, __ATOMIC_RELAXED) :
			   -1;
	if (hfd >= 0 && fstat(hfd, &hb))
		return -errno;
	if (old) {
		pthread_mutex_lock(&old->lock);
		left = old->len - old->off;
	}
	map_len = sizeof(*nb) + left;
	if (!sw_fsize_room(off + map_len)) {
		err = -EFBIG;
		goto err_unlock;
	}
	fd = memfd_create("sdp-exec-state", MFD_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		goto err_unlock;
	}
	if (ftruncate(fd, (off_t)(off + map_len)) || fstat(fd, &mb)) {
		err = -errno;
		goto err_close;
	}
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		err = -errno;
		goto err_close;
	}
	nb = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
	if (nb == MAP_FAILED) {
		err = -errno;
		munmap(r, sizeof(*r));
		goto err_close;
	}
	/* the switch's until the exec: the program cannot take its number */
	fd = sw_fd_own(fd, NULL);
	k = snprintf(item, len, hfd >= 0 ? "%s%d:%llu:r%d:%llu:%d:%llu" :
					   "%s%d:%llu:r%d:%llu",
		     prefix, s->fd, (unsigned long long)sb.st_ino,
		     fd, (unsigned long long)mb.st_ino, hfd,
		     hfd >= 0 ? (unsigned long long)hb.st_ino : 0ull);
	if (k < 0 || (size_t)k >= len) {
		err = -ENAMETOOLONG;
		goto err_forget;
	}
	if (sdp_sys.fcntl(fd, F_SETFD, 0) ||
	    (hfd >= 0 && sdp_sys.fcntl(hfd, F_SETFD, 0))) {
		err = -errno;
		goto err_forget;
	}
	rec_fill(r, s, (unsigned long long)sb.st_ino, off, pending);
	munmap(r, sizeof(*r));
	sw_fork_buf_init(nb, map_len, left);
	/* the new program's (and ours, should the exec fail) */
	sw_fork_buf_move(s, nb);
	if (s->exec_buf_fd >= 0) {
		sw_fd_forget(s->exec_buf_fd);
		sdp_sys.close(s->exec_buf_fd);
	}
	s->exec_buf_fd = fd;
	SW_DBG("fd %d: goes to the program exec'd, which may %s (%zu byte(s) read on the SAN with it%s)",
	       s->fd, pending ? "finish its upgrade" : "upgrade it again", left,
	       hfd >= 0 ? ", and its holders' record" : "");
	return k;

err_forget:
	sw_fd_forget(fd);
	munmap(r, sizeof(*r));
	munmap(nb, map_len);
err_close:
	sdp_sys.close(fd);
err_unlock:
	if (old)
		pthread_mutex_unlock(&old->lock);
	return err;
}

int sw_exec_reup_item(struct sw_sock *s, char *item, size_t len,
		      const char *prefix)
{
	return make_item(s, item, len, prefix, false);
}

void sw_exec_keep_pending(struct sw_sock *s)
{
	int k;

	s->exec_item[0] = 0;
	if (!sw_cfg.reupgrade || s->closed)
		return;
	/* on a standard stream, the new program holds it until it moves it
	 * off them (blind.c); but stdio there must neither read a client's
	 * hello still to come nor write before a client's hello: only an
	 * upgrade past its hellos (UPGRADING) goes on there */
	if (sw_pending(s) && s->state != SW_UPGRADING && on_std_stream(s)) {
		SW_DBG("fd %d: on a standard stream of the program exec'd before its hellos were through: it stays on TCP there",
		       s->fd);
		s->reup_never = true;
		return;
	}
	k = make_item(s, s->exec_item, sizeof(s->exec_item), "", true);
	if (k <= 0) {
		s->exec_item[0] = 0;
		return;	/* given up before the exec, as ever */
	}
	/* the new program drives it from here: this copy (should the exec
	 * fail, sw_exec_failed) is plain TCP, and the client's hello, if
	 * it was still to come, is dropped */
	s->exec_hello_wait = s->state == SW_HELLO_WAIT ||
			     (!s->is_client && s->hello_got <
					       sizeof(s->hello_buf));
	sw_listeners_close(s);
	if (s->is_client)
		sw_hello_token_drop(s);
	sw_session_free(s);
	sw_turn_give(s);
	s->state = SW_TCP;
	s->fb_reason = SDP_FB_HANDED;
	s->skip_hello = false;
	s->reup_never = true;
	if (s->st) {
		s->st->state = SW_TCP;
		s->st->fb_reason = SDP_FB_HANDED;
	}
	sw_event(s);
}

/* The head r (of a file of size bytes) as this switch would write it for
 * the socket ino; NULL, or what is wrong with it. */
static const char *rec_check(const struct sw_exec_rec *r, off_t size,
			     unsigned long long ino)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	if (r->magic != SW_EXEC_REC_MAGIC ||
	    r->version != SW_EXEC_REC_VERSION || r->rec_size != sizeof(*r))
		return "not a state this switch writes (another version?)";
	if (r->ino != ino)
		return "it names another socket";
	if (r->buf_hdr != sizeof(struct sw_fork_buf) ||
	    r->buf_off < sizeof(*r) || r->buf_off % pg ||
	    r->buf_off > (uint64_t)size ||
	    (uint64_t)size - r->buf_off < sizeof(struct sw_fork_buf))
		return "its buffer is not where it should be (a program of another word size?)";
	return NULL;
}

/* The fields of an upgrade again; NULL, or what is wrong with them. */
static const char *rec_state_check(const struct sw_exec_rec *r)
{
	uint32_t all = (1u << sw_nproviders) - 1;
	int i;

	bool client = r->flags & SW_EXEC_F_CLIENT;
	bool pending = r->flags & SW_EXEC_F_PENDING;

	if ((r->family != AF_INET && r->family != AF_INET6) ||
	    r->peerlen > sizeof(r->peer) ||
	    (r->flags & ~(SW_EXEC_F_CLIENT | SW_EXEC_F_PENDING)))
		return "its fields are out of range";
	if (pending &&
	    ((r->pflags & ~(SW_EXEC_P_SKIP_HELLO | SW_EXEC_P_KEY_REFUSED |
			    SW_EXEC_P_SPOKE_FIRST)) ||
	     r->hello_got > sizeof(r->hello) || r->prefix_len ||
	     r->prefix_off ||
	     (client ? r->state != SW_CONNECTING &&
			       r->state != SW_HELLO_PENDING &&
			       r->state != SW_HELLO_SENT &&
			       r->state != SW_UPGRADING :
		       r->state != SW_HELLO_WAIT &&
			       r->state != SW_UPGRADING)))
		return "its upgrade's fields are out of range";
	if (!pending && r->state != SW_TCP)
		return "its fields are out of range";
	if (r->nprov != (uint32_t)sw_nproviders)
		return "this program has other providers";
	for (i = 0; i < sw_nproviders; i++)
		if (strncmp(r->prov[i], sw_providers[i].mod.name,
			    sizeof(r->prov[i])))
			return "this program has other providers";
	if (r->up_prov < -1 || r->up_prov >= sw_nproviders ||
	    (r->lsn_provs & ~all) || (r->cand_provs & ~all) ||
	    (!client && r->up_prov < 0 &&
	     (!pending || r->state == SW_UPGRADING)))
		return "its providers are out of range";
	return NULL;
}

struct sw_sock *sw_sock_inherit_reup(int fd, unsigned long long ino,
				     int mfd, unsigned long long mino,
				     int hfd, unsigned long long hino)
{
	const struct sw_exec_rec *r;
	const char *why = NULL;
	pthread_mutexattr_t a;
	struct sw_fork_buf *fb;
	struct sw_sock *s;
	struct stat sb, mb;
	size_t map_len;
	bool pending;

	if (fstat(fd, &sb) || !S_ISSOCK(sb.st_mode) ||
	    (unsigned long long)sb.st_ino != ino)
		return NULL;
	if (fstat(mfd, &mb) || !S_ISREG(mb.st_mode) ||
	    (unsigned long long)mb.st_ino != mino ||
	    mb.st_uid != geteuid() ||
	    mb.st_size < (off_t)sizeof(struct sw_exec_rec)) {
		why = "the memory file named is not there";
		goto err;
	}
	r = mmap(NULL, sizeof(*r), PROT_READ, MAP_SHARED, mfd, 0);
	if (r == MAP_FAILED) {
		why = "its memory file cannot be mapped";
		goto err;
	}
	why = rec_check(r, mb.st_size, ino);
	if (why)
		goto err_rec;
	map_len = (size_t)mb.st_size - r->buf_off;
	fb = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd,
		  (off_t)r->buf_off);
	if (fb == MAP_FAILED) {
		why = "its buffer cannot be mapped";
		goto err_rec;
	}
	if (fb->map_len != map_len || fb->len > map_len - sizeof(*fb) ||
	    fb->off > fb->len) {
		why = "its buffer's sizes do not hold";
		munmap(fb, map_len);
		goto err_rec;
	}
	s = sw_sock_new(fd, SW_TCP);
	if (!s) {
		why = "no memory";
		munmap(fb, map_len);
		goto err_rec;
	}
	/* it may be on 0, 1 or 2, and the old program's I/O on it may have
	 * gone past its switch */
	s->std_seen = true;
	s->io_unseen = true;
	/* the buffer moved into this file for this process alone (a forked
	 * sibling's is another): its lock is made anew, whatever the file
	 * says it is */
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&fb->lock, &a);
	pthread_mutexattr_destroy(&a);
	/* the bytes first, whatever comes of the rest */
	s->fork_buf = fb;
	why = rec_state_check(r);
	if (why) {
		/* only the bytes are of use: let go once they are read; an
		 * upgrade under way is given up, and a hello that may still
		 * come is dropped (sw_hello_skip) */
		s->exec_skip = true;
		s->reup_never = true;
		if (r->flags & SW_EXEC_F_PENDING)
			s->skip_hello = true;
		goto warn;
	}
	s->family = r->family;
	s->nonblock = sdp_sys.fcntl(fd, F_GETFL) & O_NONBLOCK;
	s->is_client = r->flags & SW_EXEC_F_CLIENT;
	s->local_port = r->local_port;
	s->peerlen = r->peerlen;
	memcpy(&s->peer, r->peer, r->peerlen);
	memcpy(s->key, r->key, sizeof(s->key));
	memcpy(s->hello_buf, r->hello, sizeof(s->hello_buf));
	s->hello_got = sizeof(s->hello_buf);
	s->up_prov = r->up_prov >= 0 ? &sw_providers[r->up_prov] : NULL;
	s->lsn_provs = r->lsn_provs;
	s->cand_provs = r->cand_provs;
	s->dg_tx_base = r->dg_tx_base;
	s->dg_rx_base = r->dg_rx_base;
	s->dg_rx_based = true;
	s->reup_n = r->reup_n;
	pending = r->flags & SW_EXEC_F_PENDING;
	if (pending) {
		/* the upgrade goes on as the old program left it: hellos,
		 * counts and due times (monotonic: the same boot) */
		s->state = r->state;
		s->skip_hello = r->pflags & SW_EXEC_P_SKIP_HELLO;
		s->key_refused = r->pflags & SW_EXEC_P_KEY_REFUSED;
		s->spoke_first = r->pflags & SW_EXEC_P_SPOKE_FIRST;
		s->connect_tries = r->connect_tries;
		s->hello_got = r->hello_got;
		s->tcp_tx = r->tcp_tx;
		s->tcp_rx = r->tcp_rx;
		s->born_ns = r->born_ns;
		s->upgrade_at_ns = r->upgrade_at_ns;
		s->deadline_ns = r->deadline_ns;
		s->spoke_first_ns = r->spoke_first_ns;
	}
	if (s->st) {
		s->st->state = s->state;
		s->st->local_port = s->local_port;
		s->st->is_client = s->is_client;
	}
	if (s->peerlen)
		sw_peer_known(s);
	if (hfd >= 0 && sw_holders_adopt(s, hfd, hino, &why)) {
		if (pending) {
			/* nothing committed: TCP, the hello dropped if it
			 * is still to come (sw_fallback) */
			sw_fallback(s, SDP_FB_CUT, why);
			munmap((void *)r, sizeof(*r));
			return s;
		}
		s->exec_skip = true;
		s->reup_never = true;
		goto warn;
	}
	if (pending) {
		munmap((void *)r, sizeof(*r));
		SW_DBG("fd %d: inherited across exec with its upgrade under way (%s%s)",
		       fd, sw_state_name(s->state),
		       s->holders ? "; held by others too" : "");
		return s;
	}
	sw_reup_arm(s);
	munmap((void *)r, sizeof(*r));
	SW_DBG("fd %d: inherited across exec, back on TCP, may be upgraded again (%zu byte(s) read on the SAN before it%s)",
	       fd, fb->len - fb->off, s->holders ? "; held by others too" : "");
	return s;

warn:
	munmap((void *)r, sizeof(*r));
	if (hfd >= 0 && !s->holders)
		sw_holders_exec_drop(hfd, hino, true);
	SW_WARN("fd %d: inherited across exec with the state to upgrade it again, but %s: it stays on plain TCP",
		fd, why);
	return s;
err_rec:
	munmap((void *)r, sizeof(*r));
err:
	if (hfd >= 0)
		sw_holders_exec_drop(hfd, hino, true);
	SW_WARN("fd %d: inherited across exec with the state to upgrade it again, but %s: it stays on plain TCP, and bytes read on the SAN before the exec, if any, are lost to this program",
		fd, why);
	return NULL;
}

void sw_exec_failed(void)
{
	struct sw_sock **v;
	int n = sw_sock_list(&v), i, fd;

	/* what sw_exec_reup_item made inheritable goes back to the switch */
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&v[i]->lock);
		if (v[i]->exec_item[0]) {
			/* its upgrade kept for the new program: given up
			 * here, as before any exec (fallback.c) */
			v[i]->exec_item[0] = 0;
			sw_holders_cut(v[i]);
			v[i]->fb_reason = SDP_FB_CUT;
			if (v[i]->st)
				v[i]->st->fb_reason = SDP_FB_CUT;
			if (v[i]->exec_hello_wait)
				v[i]->skip_hello = true;
		}
		if (v[i]->exec_buf_fd >= 0)
			sdp_sys.fcntl(v[i]->exec_buf_fd, F_SETFD, FD_CLOEXEC);
		fd = __atomic_load_n(&v[i]->holders_fd, __ATOMIC_RELAXED);
		if (fd >= 0)
			sdp_sys.fcntl(fd, F_SETFD, FD_CLOEXEC);
		/* a hello's name kept for the new program (hello_token.c) */
		if (v[i]->tok_fd >= 0)
			sdp_sys.fcntl(v[i]->tok_fd, F_SETFD, FD_CLOEXEC);
		pthread_mutex_unlock(&v[i]->lock);
		sw_sock_unref(v[i]);
	}
	free(v);
}

void sw_exec_record_left(int hfd, unsigned long long hino)
{
	sw_holders_exec_drop(hfd, hino, false);
}

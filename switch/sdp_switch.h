/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sdp_switch.h - what the shim calls: the switch engine's entry points for
 * the socket calls it takes over. Every function here follows POSIX at this
 * boundary: -1 with errno set on failure, errno untouched on success.
 * The shim owns fd numbers and the fd table; the switch owns struct sw_sock.
 */
#ifndef SDP_SWITCH_H
#define SDP_SWITCH_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

/* One socket the switch manages: a TCP listener with provider listeners
 * beside it, or a TCP connection that is (or may become) carried by a SAN
 * provider. Reference counted: the fd table holds one reference per fd that
 * names it (dup), callers hold one for the length of a call. */
struct sw_sock;

/* Once per process, lazily, from the shim's init; reads configuration and
 * loads providers. Returns true when the switch is active (at least one
 * provider usable); when false, the shim passes everything to libc. */
bool sw_init(void);

void sw_sock_ref(struct sw_sock *s);
/* The switch has a part in s's byte stream (not plain TCP); read without
 * the lock, for a signal handler's call (shim/sock_data.c). */
bool sw_sock_taken(struct sw_sock *s);
/* The fd the switch uses for s was closed while other fds still name the
 * socket: use fd from now on. */
void sw_sock_set_fd(struct sw_sock *s, int fd);
/* Drops a reference; the last one releases the object (the fd must have
 * been closed through sw_close before). */
void sw_sock_unref(struct sw_sock *s);

/* ---- set-up. Each does the real call itself. ---------------------------- */

/* connect(2) for a TCP socket fd (of family AF_INET or AF_INET6) the switch
 * does not manage yet. When the connection is (or may become) carried by a
 * provider, *out receives a new sw_sock with one reference for the fd
 * table. Returns like connect(2), including -1/EINPROGRESS for non-blocking
 * sockets (*out is set then too: the upgrade continues when the connection
 * completes). *plain is set when the kernel took the connection (done or in
 * progress) and the switch leaves it to TCP for good: a later connect(2) on
 * fd (a non-blocking connect's completion) is the kernel's alone. */
int sw_connect(int fd, int family, const struct sockaddr *addr, socklen_t len,
	       struct sw_sock **out, bool *plain);
/* connect(2) again on a managed socket (non-blocking connect polling). */
int sw_connect_again(struct sw_sock *s, const struct sockaddr *addr,
		     socklen_t len);

/* listen(2) for a TCP socket fd; *out as for sw_connect (NULL when the
 * switch does not take the listener, e.g. by rule). */
int sw_listen(int fd, int family, int backlog, struct sw_sock **out);

/* accept4(2) on a managed listener; returns the new fd or -1. *out receives
 * the new connection's sw_sock when the switch manages it, else NULL. */
int sw_accept(struct sw_sock *ls, struct sockaddr *addr, socklen_t *addrlen,
	      int flags, struct sw_sock **out);

/* The program's call failed for want of descriptors (EMFILE, ENFILE): the
 * switch gives back what it holds and can do without (provider listeners
 * beside TCP listeners, pending upgrades' listeners). Returns how many
 * things it gave back: when > 0, the call is worth one more try. */
int sw_fd_shed(void);

/* ---- data ----------------------------------------------------------------- */

/* All receive calls (read, readv, recv, recvfrom, recvmsg, recvmmsg...) end
 * here; all send calls (write, writev, send, sendto, sendmsg, sendmmsg...)
 * end in sw_sendmsg. flags are MSG_* as given by the program. */
ssize_t sw_recvmsg(struct sw_sock *s, struct msghdr *msg, int flags);
ssize_t sw_sendmsg(struct sw_sock *s, const struct msghdr *msg, int flags);
/* sendfile(2) with a managed socket as out_fd. */
ssize_t sw_sendfile(struct sw_sock *s, int in_fd, off_t *offset,
		    size_t count);
/* splice(2) between a managed socket and a pipe: socket to pipe (read),
 * pipe to socket (write). flags are SPLICE_F_*. */
ssize_t sw_splice_read(struct sw_sock *s, int pipe_fd, size_t len,
		       unsigned int flags);
ssize_t sw_splice_write(struct sw_sock *s, int pipe_fd, size_t len,
			unsigned int flags);
/* In a fork's child: the pipes sw_splice_write keeps are the parent's
 * (the same pipe in both processes); the child closes its copies. */
void sw_splice_atfork_child(void);
/* A send on s found no room (EAGAIN): the room that comes later is an
 * edge for edge-triggered EPOLLOUT (shim/epoll.c). */
void sw_note_nospace(struct sw_sock *s);

int sw_shutdown(struct sw_sock *s, int how);
/* May the program's close of s leave the switch holding its file (a
 * connection on the SAN that still sends what was left, which no other
 * process holds)? Then the shim takes the fd out of the program's epoll
 * sets at the close; the kernel would keep it there while the switch holds
 * the file. */
bool sw_close_may_keep(struct sw_sock *s);
/* The program closed the last fd naming s (the shim has already removed it
 * from the table, and dropped its epoll registrations: the switch may keep
 * the connection open after this, to send what is left). Does the real
 * close of fd; waits only while the peer takes the bytes kept (briefly),
 * or as long as SO_LINGER asks. */
int sw_close(struct sw_sock *s, int fd);
/* The program's last fd of s was closed where no wrapper saw it (fclose of
 * a stdio stream): the switch lets go of s without touching the number,
 * which may name something else already. */
void sw_close_gone(struct sw_sock *s);

/* ioctl(2) requests the switch answers itself (FIONREAD, SIOCATMARK);
 * returns 1 when handled (result in *ret), 0 to pass to the kernel. */
int sw_ioctl(struct sw_sock *s, unsigned long req, void *arg, int *ret);
/* getsockopt/setsockopt: the switch notes what it must (SO_LINGER,
 * SO_RCVLOWAT, O_NONBLOCK via sw_set_nonblock) and answers SO_ERROR for a
 * pending upgrade; everything else is the kernel's. Same return as above. */
int sw_getsockopt(struct sw_sock *s, int level, int name, void *val,
		  socklen_t *len, int *ret);
int sw_setsockopt(struct sw_sock *s, int level, int name, const void *val,
		  socklen_t len, int *ret);
/* After a read the switch answered: TCP_INQ's control message (the bytes
 * left to read, as FIONREAD counts them) when the program set the option
 * and gave room for it; msg_controllen is what was written. */
void sw_inq_cmsg(struct sw_sock *s, struct msghdr *msg);
/* O_NONBLOCK changed through fcntl(F_SETFL) or ioctl(FIONBIO). */
void sw_set_nonblock(struct sw_sock *s, bool on);

/* ---- readiness (poll, select, epoll) -------------------------------------- */

/*
 * The readiness the switch adds to the kernel's view of the TCP fd.
 * kernel_revents is what the kernel reported for the fd (0 when it was not
 * asked); the result is what the program must see. It consumes doorbells.
 */
short sw_poll_revents(struct sw_sock *s, short events, short kernel_revents);
/*
 * The program found nothing ready and is about to wait for s (a poll, then
 * a sleep): sends what the switch kept back for it.
 */
void sw_poll_idle(struct sw_sock *s);
/*
 * Takes what the provider holds for s (its completions), so that the
 * arrival counter (sw_event_seq) tells of it; no readiness is computed.
 * For edge-triggered waits, which look at the counter first.
 */
void sw_poll_progress(struct sw_sock *s);
/*
 * Called before the program would sleep on s: announces "wake me" to the
 * peer for the events asked. Returns the revents already true (then the
 * caller must not sleep) or 0 (sleep on the kernel fd is now safe).
 */
short sw_poll_arm(struct sw_sock *s, short events);
/* The same for the rest of an edge-triggered registration whose other
 * events were reported and stay (EPOLLOUT): asks for the wake-up only
 * where that leaves s writable, so that the report holds; -1 when nothing
 * is ready and the wake-up could not be asked for (the caller naps). */
short sw_poll_arm_quiet(struct sw_sock *s, short events);
/*
 * After sw_poll_arm found s not ready: the longest the coming sleep may
 * last in milliseconds, 0 for no bound. A program that waits to write on
 * s while the peer holds its buffers (no credit for data, or the staging
 * ring full) waits for the peer's return of them; when no doorbell is sure
 * to announce it (one credit left cannot ask for a wake-up), the sleep
 * looks again after SW_NAP_MS, as a blocking send's wait does.
 */
int sw_poll_nap_ms(struct sw_sock *s, short events);
/* the longest sleep of a wait no doorbell is sure to end */
#define SW_NAP_MS 10
/* the longest sleep on a socket that other threads of the program may
 * take news for, when this thread's eventfd is not listed there (none
 * could be made, or SW_SIB_MAX others are) */
#define SW_UNLISTED_NAP_MS 2
/*
 * Brackets a sleep on s's TCP fd (begin before sw_poll_arm, end once the
 * kernel's sleep returned, before sw_poll_revents): while one thread
 * sleeps there, another leaves the doorbells in place, which would
 * otherwise take the wake-up the sleeper waits for. At begin, returns the
 * thread's eventfd for the sleep to watch too (another thread that takes
 * news for s writes it), or -1; sw_poll_woken empties it after the sleep.
 */
int sw_poll_sleep(struct sw_sock *s, bool begin);
void sw_poll_woken(int fd, short revents);
/*
 * While the upgrade of s is pending: the fds besides the TCP fd whose
 * events move it on (up to max into fds); *tcp_in says the TCP fd must be
 * watched for POLLIN whatever the program asked, *nap_ms bounds the sleep
 * (0: no bound) when a step can only be seen by looking. Returns -1 when s
 * is not pending, -2 when the upgrade moved on here (do not sleep), else
 * their number. After a sleep that watched them, sw_poll_upgrade_woken
 * moves the upgrade on.
 */
int sw_poll_upgrade_fds(struct sw_sock *s, int *fds, int max, bool *tcp_in,
			int *nap_ms);
void sw_poll_upgrade_woken(struct sw_sock *s);
/*
 * True while every byte of s, both ways, goes by the provider: its TCP fd
 * then carries nothing but the switch's doorbells (and the peer's end), so
 * a sleep needs it watched for POLLIN alone, whatever the program asks;
 * readiness comes from sw_poll_revents/sw_poll_arm.
 */
bool sw_poll_carried(struct sw_sock *s);
/*
 * True once s is on TCP for good with nothing of the switch's left in its
 * stream (no bytes held back, no marker or hello still to drop): its
 * readiness is the kernel's alone, and a wait on it needs no busy-poll.
 */
bool sw_poll_plain(struct sw_sock *s);
/* Longest a wait over switch sockets should sleep before re-arming (so
 * idle connections can give buffers back), or -1 for no limit. */
int sw_idle_sleep_ms(void);
/* An arrival counter for edge-triggered emulation: changes whenever new
 * data, a credit return or a state change arrives for s. */
uint64_t sw_event_seq(struct sw_sock *s);
/* Counts the program's sends on s that found no room (EAGAIN). */
uint64_t sw_nospace_seq(struct sw_sock *s);

/* ---- process events -------------------------------------------------------- */

/* fork(2) around: the switch keeps its connections usable in both parent
 * and child, or returns them to TCP first (DESIGN.md section 4). */
void sw_atfork_prepare(void);
void sw_atfork_parent(void);
void sw_atfork_child(void);
/* exec(2) is about to replace the program: return every SAN connection to
 * TCP so the new program inherits plain TCP fds. Returns NULL, or (malloc'd)
 * the environment entry SW_EXEC_ENV=... that tells the new program's
 * switch which inherited fds still have the peer's hello to drop, or hold
 * bytes read on the SAN before the exec; the exec wrappers add it to the
 * new program's environment. */
/* The program entered a seccomp sandbox (prctl PR_SET_SECCOMP): from here
 * on the switch makes no system call it can do without (the statistics
 * file stays at exit, and later processes collect it). */
void sw_sandboxed(void);
#define SW_EXEC_ENV "SDP_EXEC_HELLO_SKIP"
char *sw_before_exec(void);
/* _exit(2) is about to end the process without its exit handlers: what
 * the switch keeps of the connections (closed ones too) is sent first, as
 * at exit (bounded). */
void sw_before_exit(void);
/* At start, after exec: a TCP socket named in SW_EXEC_ENV (by its inode
 * ino; fd is one of the fds naming it here) whose peer's hello may still
 * come (sw_before_exec), got bytes of it dropped already: the socket to
 * install for fd and every other fd naming it, or NULL when fd is not
 * that socket. */
struct sw_sock *sw_sock_inherit(int fd, unsigned long long ino,
				size_t got);
/* The same for a socket that was carried until the exec: the peer's bytes
 * that came before it and were not read yet wait in the memory file mfd
 * (its inode mino), to be read first. The caller closes mfd. */
struct sw_sock *sw_sock_inherit_bytes(int fd, unsigned long long ino,
				      int mfd, unsigned long long mino);
/* The same for a socket back on TCP that may be upgraded again: the memory
 * file mfd (inode mino) holds what that needs and the bytes to read first;
 * hfd (inode hino), or -1, its holders' record, which the socket keeps
 * or (not usable) closes, called once per entry (switch/exec_reup.c). The
 * caller closes mfd. */
struct sw_sock *sw_sock_inherit_reup(int fd, unsigned long long ino,
				     int mfd, unsigned long long mino,
				     int hfd, unsigned long long hino);
/* The record fd of sw_sock_inherit_reup, for a socket no inherited fd
 * names (the exec'd program does not hold it): this process leaves it,
 * and hfd is closed when it is that record. */
void sw_exec_record_left(int hfd, unsigned long long hino);
/* exec failed: what went to the new program is the switch's again. */
void sw_exec_failed(void);
/* An inherited socket whose hello is dropped and whose bytes taken while
 * looking for it were delivered, or any plain TCP socket with nothing of
 * the switch's left once the process stepped aside for a sandbox: the
 * switch has nothing more to do with it, and the shim lets it go (the
 * program's calls on it then go to the kernel as they are, which a
 * seccomp sandbox may require). */
bool sw_sock_inherit_done(struct sw_sock *s);
/* Once the process stepped aside for a sandbox, a socket still managed
 * only for the bytes the switch keeps for it to read (sw_sock_inherit_done
 * says false until they are read) sends with the program's own call: its
 * send side is plain TCP, and the filter may allow only that call. */
bool sw_send_by_kernel(struct sw_sock *s);
/* The process is about to enter a seccomp sandbox (prctl PR_SET_SECCOMP),
 * whose filter may kill it for calls the switch makes (sendmsg, kill,
 * the providers'): every connection returns to plain TCP, kept upgrades
 * are given up in every process that holds them, and the shim lets the
 * sockets go (sw_sock_inherit_done). */
void sw_before_sandbox(void);
/* SCM_RIGHTS (switch/holders.c): s is about to be sent to another
 * process through the UNIX socket via; a socket this process did not know
 * arrived, with the upgrade its sender kept for it (the socket to
 * install), or NULL. */
void sw_pass(struct sw_sock *s, int via);
struct sw_sock *sw_received(int fd);

#endif /* SDP_SWITCH_H */

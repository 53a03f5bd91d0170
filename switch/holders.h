/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * holders.h - which processes hold a connection whose upgrade was pending
 * at a fork: a record the processes of the fork tree share, so that the
 * one left holding it alone finishes the upgrade (holders.c).
 */
#ifndef SW_HOLDERS_H
#define SW_HOLDERS_H

#include <stdbool.h>

#include "sock.h"

/* Before fork (s locked): keeps the pending upgrade of s for the process
 * that will hold the connection alone, reserving a place for the child.
 * false: s cannot be kept (it is given up as before a fork). */
bool sw_holders_park(struct sw_sock *s);

/* In the child after fork (s locked): takes the place reserved for it. */
void sw_holders_child(struct sw_sock *s);

/* Any call of the program on s (s locked): the first process to use a
 * kept connection drives its upgrade; one that comes after it leaves the
 * connection to it (plain TCP here, and the upgrade is given up). */
void sw_holders_settle(struct sw_sock *s);

/* The driver, before a step that commits to the provider: true when no
 * other process holds the connection any more (the record is dropped). A
 * connection shared longer than SDP_UPGRADE_TIMEOUT_MS, or used by
 * another process, falls back (reason cut). */
bool sw_holders_alone(struct sw_sock *s);

/* Another live process holds the connection too (nothing changes). */
bool sw_holders_others(struct sw_sock *s);

/* A connection back on TCP that may be upgraded again (s locked, in a
 * data call): 1 when this process holds it alone (the record is dropped),
 * 0 while others hold it too, -1 when another process used it. */
int sw_holders_reup(struct sw_sock *s);

/* close (s locked): this process holds the connection no more. */
void sw_holders_leave(struct sw_sock *s);

/* Before exec (s locked): the connection stays with the new program (its
 * fd is inherited) or goes with the old one (close-on-exec). */
void sw_holders_exec(struct sw_sock *s);

/* Some fd naming the same socket as fd stays open across exec (or that
 * cannot be told). */
bool sw_fd_survives_exec(int fd);

/* After exec: hfd, inherited, is the record (a file of ours, its inode
 * hino) of the connection s that this process held before: s joins it
 * (hfd becomes the switch's). 0, or -errno with why set (a record that
 * does not list this process is marked CUT: TCP in every holder). */
int sw_holders_adopt(struct sw_sock *s, int hfd, unsigned long long hino,
		     const char **why);

/* After exec: the record in hfd (inode hino) is of a connection this
 * process holds no more (no fd of it came across), or (cut) one it cannot
 * follow: this process leaves it, and with cut it is TCP everywhere; hfd
 * is closed (only when it is that record: else it is the program's). */
void sw_holders_exec_drop(int hfd, unsigned long long hino, bool cut);

/* This process enters a seccomp sandbox (s locked) and may use the
 * connection by the kernel's calls alone: it stays a holder (the others
 * wait for it to close its copy or exit) without ever driving the
 * upgrade, which is then committed with the kernel's count of the bytes
 * on TCP (blind.c). */
void sw_holders_stand_by(struct sw_sock *s);

/* The connection stays TCP in every process of the record (s locked),
 * and this one leaves it. */
void sw_holders_cut(struct sw_sock *s);

/* recvmsg with SCM_RIGHTS: fd, a socket this process did not know, with
 * the upgrade its sender kept for it; NULL when there is none. */
struct sw_sock *sw_holders_received(int fd);

/* The record's mapping, when the socket object goes. */
void sw_holders_unmap(struct sw_sock *s);

#endif /* SW_HOLDERS_H */

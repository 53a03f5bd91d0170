#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# idle_conns.py - N connections between two separate processes, both under
# the switch: each connection echoes a few bytes (checked), then all are
# held idle; reports set-up time, how long until both processes carry
# every connection (their upgrades take turns, with no call of the program),
# fds, memory mappings and RSS of both processes, and what sdp-stat says
# each connection holds (registered bytes, provider) after --idle seconds
# idle. Fails when a connection is not carried by the SAN within
# --carry-timeout, when a process exceeds --max-fds-per-conn, or when an
# exchange is wrong.
#   PYTHONPATH=tests/lib idle_conns.py [-n N] [--lib PATH] [--stat PATH]
#       [--max-fds-per-conn F] [--max-reg-per-conn BYTES] [--timeout S]
#       [--carry-timeout S] [--idle S]
import argparse
import json
import select
import signal
import os
import socket
import subprocess
import sys
import time

from sdptest import free_port, sdp_stat_json  # tests/lib

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def word(i, salt):
    return ((i * 2654435761 + salt) & 0xffffffff).to_bytes(4, "little")


def idle(conns):
    """Sleeps in epoll over every connection until stdin has a line: the
    switch's wrapper wakes every SDP_IDLE_MS and idle connections give
    their buffers back. No connection may become readable meanwhile."""
    ep = select.epoll()
    for c in conns:
        ep.register(c.fileno(), select.EPOLLIN)
    ep.register(sys.stdin.fileno(), select.EPOLLIN)
    while True:
        evs = ep.poll(1.0)
        fds = [fd for fd, _ in evs]
        if sys.stdin.fileno() in fds:
            break
        if fds:
            what = []
            for fd in fds[:4]:
                try:
                    with socket.socket(fileno=os.dup(fd)) as d:
                        b = d.recv(16, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                    what.append("fd %d: %s" % (fd, "EOF" if not b else
                                                 "%d bytes" % len(b)))
                except BlockingIOError:
                    what.append("fd %d: nothing (EAGAIN)" % fd)
            sys.exit("%d idle connections became readable (%s)"
                     % (len(fds), "; ".join(what)))
    ep.close()
    sys.stdin.readline()
    print("awake", flush=True)


def server(port, n):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(4096)
    print("listening", flush=True)
    acc = []
    for _ in range(n):
        s, _ = ls.accept()
        q = b""
        while len(q) < 8:
            b = s.recv(8 - len(q))
            if not b:
                sys.exit("server: a client closed before its 8 bytes")
            q += b
        i = int.from_bytes(q[:4], "little")
        if q[4:] != word(i, 1):
            sys.exit("server: connection %d sent %r" % (i, q))
        s.sendall(q[:4] + word(i, 2))
        acc.append(s)
    print("accepted %d" % len(acc), flush=True)
    # idle until told to check every connection again, then to go
    idle(acc)
    for s in acc:
        q = s.recv(8)
        i = int.from_bytes(q[:4], "little")
        if len(q) != 8 or q[4:] != word(i, 3):
            sys.exit("server: second exchange on %d got %r" % (i, q))
        s.sendall(q[:4] + word(i, 4))
    print("rechecked", flush=True)
    sys.stdin.readline()


def client(port, n):
    conns = []
    for i in range(n):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(i.to_bytes(4, "little") + word(i, 1))
        q = b""
        while len(q) < 8:
            b = c.recv(8 - len(q))
            if not b:
                sys.exit("client: connection %d closed early" % i)
            q += b
        if q != i.to_bytes(4, "little") + word(i, 2):
            sys.exit("client: connection %d got %r" % (i, q))
        conns.append(c)
    print("connected %d" % len(conns), flush=True)
    idle(conns)
    for i, c in enumerate(conns):
        c.sendall(i.to_bytes(4, "little") + word(i, 3))
        q = c.recv(8)
        if q != i.to_bytes(4, "little") + word(i, 4):
            sys.exit("client: second exchange on %d got %r" % (i, q))
    print("rechecked", flush=True)
    sys.stdin.readline()


def proc_info(pid):
    fds = len(os.listdir("/proc/%d/fd" % pid))
    with open("/proc/%d/maps" % pid) as f:
        maps = sum(1 for _ in f)
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS"):
                rss = int(line.split()[1])
    return fds, maps, rss


def stat_of(statbin, pid):
    """The process's counters and its open connections, as sdp-stat
    --json gives them (the one schema every reader uses)."""
    if os.environ.get("SDP_STAT_OFF"):
        return {"conns_san": None, "conns_tcp": None}, []
    try:
        procs = sdp_stat_json(statbin, ["-p", str(pid), "-a"])["processes"]
    except RuntimeError as e:
        sys.exit(str(e))
    if len(procs) != 1:
        sys.exit("sdp-stat -p %d: %d processes" % (pid, len(procs)))
    return procs[0], procs[0].get("connections", [])


def wait_carried(statbin, procs, n, limit):
    """Waits (limit seconds at most) until every process in procs carries
    all n connections, or has none left pending (fallbacks are reported by
    the checks after); returns the seconds it took."""
    t0 = time.time()
    while time.time() - t0 < limit:
        done = True
        for p in procs:
            ps, _ = stat_of(statbin, p.pid)
            if ps["conns_san"] is None:
                return 0
            if ps["conns_san"] + ps["conns_tcp"] < n:
                done = False
                break
        if done:
            break
        time.sleep(1.0)
    return time.time() - t0


def expect(p, line, what, deadline):
    while True:
        if time.time() > deadline:
            sys.exit("timed out waiting for %s" % what)
        got = p.stdout.readline()
        if not got:
            sys.exit("%s exited (%s) before %s"
                     % (p.args[-3], p.wait(), what))
        if got.startswith(line):
            return got.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--lib", default=os.path.join(
        TOP, "build/lib/libsdp_switch.so"))
    ap.add_argument("--stat", default=os.path.join(TOP, "build/bin/sdp-stat"))
    ap.add_argument("--max-fds-per-conn", type=float, default=1.5)
    ap.add_argument("--max-reg-per-conn", type=int, default=65536)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--idle", type=float, default=2.0,
                    help="seconds idle, once all are carried, before "
                    "measuring")
    ap.add_argument("--carry-timeout", type=float, default=60.0,
                    help="seconds the upgrades may take once set up")
    ap.add_argument("--role", choices=["server", "client"])
    a = ap.parse_args()
    if a.role == "server":
        return server(a.port, a.n)
    if a.role == "client":
        return client(a.port, a.n)

    if not a.port:
        a.port = free_port()
    env = dict(os.environ)
    env["LD_PRELOAD"] = os.path.abspath(a.lib)
    env.setdefault("SDP_PROVIDERS", "shm")
    env.setdefault("SDP_IDLE_MS", "300")
    # Each side upgrades its 10,000 connections in line, SDP_UPGRADE_MAX
    # at a time, and a connection's two ends reach it at different
    # moments. On a 2-vCPU host whose hypervisor took up to half the CPU,
    # the default 2 s between the server's first look for a client's
    # listener and its giving up left 8-17 of 10,000 on TCP (exact, but
    # not what this test measures), with the previous library as with
    # this one; 10 s covers the line (all carried, in 12 s).
    env.setdefault("SDP_UPGRADE_TIMEOUT_MS", "10000")
    me = [sys.executable, os.path.abspath(__file__), "-n", str(a.n),
          "--port", str(a.port)]
    deadline = time.time() + a.timeout
    # both children in one process group, killed at once: a peer killed
    # first would make the other report its connections readable (EOF)
    srv = subprocess.Popen(me + ["--role", "server"], env=env, text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           process_group=0)
    cli = None
    try:
        expect(srv, "listening", "the server to listen", deadline)
        t0 = time.time()
        cli = subprocess.Popen(me + ["--role", "client"], env=env,
                               text=True, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE,
                               process_group=srv.pid)
        expect(cli, "connected", "the client's connections", deadline)
        expect(srv, "accepted", "the server's connections", deadline)
        dt = time.time() - t0
        carry = wait_carried(a.stat, (srv, cli), a.n, a.carry_timeout)
        time.sleep(a.idle)
        res = {"connections": a.n, "setup_s": round(dt, 2),
               "rate_per_s": round(a.n / dt), "carried_s": round(carry, 1)}
        ok = True
        for name, p in (("server", srv), ("client", cli)):
            fds, maps, rss = proc_info(p.pid)
            ps, slots = stat_of(a.stat, p.pid)
            res[name] = {"fds": fds, "maps": maps, "rss_kib": rss,
                         "san_conns": ps["conns_san"],
                         "tcp_conns": ps["conns_tcp"],
                         "fallbacks": ps.get("fallbacks")}
            regs = [r["reg_bytes"] for r in slots if r["provider"] == "shm"]
            if regs:
                res[name]["reg_bytes_max"] = max(regs)
                res[name]["reg_bytes_avg"] = sum(regs) // len(regs)
                res[name]["reg_slots"] = len(regs)
                if max(regs) > a.max_reg_per_conn:
                    ok = False
                    big = [r for r in slots if r["provider"] == "shm" and
                           r["reg_bytes"] > a.max_reg_per_conn]
                    print("FAIL: %s: %d connection(s) hold more than %d "
                          "registered bytes (at most %d); the first, as "
                          "sdp-stat gives it: %s"
                          % (name, len(big), a.max_reg_per_conn, max(regs),
                             json.dumps(big[0], sort_keys=True)))
            res[name]["fds_per_conn"] = round(fds / a.n, 3)
            res[name]["maps_per_conn"] = round(maps / a.n, 3)
            if ps["conns_san"] is not None and ps["conns_san"] != a.n:
                ok = False
                print("FAIL: %s: %d of %d connections on shm"
                      % (name, ps["conns_san"], a.n))
            if fds / a.n > a.max_fds_per_conn:
                ok = False
                print("FAIL: %s: %.2f fds per connection (limit %.2f)"
                      % (name, fds / a.n, a.max_fds_per_conn))
        # every idle connection still carries data. The server leaves its
        # idle loop first: the client's next bytes may arrive before the
        # server's epoll reports its stdin, which it would count as an
        # idle connection turned readable.
        srv.stdin.write("\n")
        srv.stdin.flush()
        expect(srv, "awake", "the server to leave its idle loop", deadline)
        cli.stdin.write("\n")
        cli.stdin.flush()
        expect(cli, "rechecked", "the client's second exchange", deadline)
        expect(srv, "rechecked", "the server's second exchange", deadline)
        print(json.dumps(res))
        return 0 if ok else 1
    finally:
        try:
            os.killpg(srv.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for p in (cli, srv):
            if p:
                p.wait()


if __name__ == "__main__":
    sys.exit(main())

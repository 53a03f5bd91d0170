#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# check-stat-ops.sh - sdp-stat for operators: a process with a carried
# connection and two left on TCP (no switch at the peer; a rule) lists all
# three with state, provider, reason and bytes by path, TCP included (the
# kernel's count for the ones the switch never managed); a TCP-only one
# that closes disappears; human units and --raw; the filters by port, peer
# and program; OpenMetrics and Prometheus text that parse; rates with -w.
#   check-stat-ops.sh SDP-STAT LIBSDP_SWITCH.so PROVIDER_DIR
set -uo pipefail

stat_bin=$1
lib=$2
provdir=$3
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/lib/lib.sh"
sdp_abs stat_bin lib provdir
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
sdp_preload "$lib"
sdp_workdir sdp-check-stat-ops
fail=0
pass() { echo "PASS $*"; }
failed() { echo "FAIL $*"; fail=1; }
export SDP_STAT_DIR=$work SDP_PROVIDERS=shm SDP_PROVIDER_DIR=$provdir

# sink PORT [READY-FILE]: accepts one connection, reads it to its end
cat >"$work/sink.py" <<'PY'
import socket, sys
ls = socket.create_server(("127.0.0.1", int(sys.argv[1])))
c, _ = ls.accept()
while c.recv(1 << 20):
    pass
PY
# the client: one connection per port, 10 MiB on each, then it waits;
# "close2" in the work dir makes it close its second connection. The two
# left on TCP connect without blocking and call connect() again once
# writable, as event loops (APR, libuv, nginx's upstreams) check it: that
# second call is the kernel's, and lists nothing twice.
cat >"$work/client.py" <<'PY'
import os, select, socket, sys, time
work = sys.argv[1]

def nb_connect(port):
    c = socket.socket()
    c.setblocking(False)
    try:
        c.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    select.select([], [c], [], 10)
    c.connect(("127.0.0.1", port))  # 0 once done (EISCONN after)
    c.setblocking(True)
    return c

ports = [int(p) for p in sys.argv[2:]]
cs = [socket.create_connection(("127.0.0.1", ports[0]))]
cs += [nb_connect(p) for p in ports[1:]]
blk = b"x" * 65536
for _ in range(160):
    for c in cs:
        c.sendall(blk)
    time.sleep(0.002)
open(os.path.join(work, "sent"), "w").close()
end = time.time() + 20
while time.time() < end and not os.path.exists(os.path.join(work, "close2")):
    time.sleep(0.05)
cs[1].close()
open(os.path.join(work, "closed2"), "w").close()
while time.time() < end and not os.path.exists(os.path.join(work, "done")):
    time.sleep(0.05)
PY
p_san=$(sdp_free_port)
p_plain=$(sdp_free_port)
p_rule=$(sdp_free_port)
LD_PRELOAD=$preload python3 "$work/sink.py" $p_san &
pids+=($!)
python3 "$work/sink.py" $p_plain &
pids+=($!)
LD_PRELOAD=$preload python3 "$work/sink.py" $p_rule &
pids+=($!)
for p in $p_san $p_plain $p_rule; do
	sdp_wait_listen $p
done
SDP_RULE="tcp connect * * $p_rule" LD_PRELOAD=$preload \
	python3 "$work/client.py" "$work" $p_san $p_plain $p_rule &
cli=$!
pids+=($cli)
for _ in $(seq 100); do
	[ -e "$work/sent" ] && break
	sleep 0.1
done
sleep 0.3

# 1. Every connection, with its reason and bytes, TCP ones included.
"$stat_bin" -p $cli --json >"$work/mixed.json" 2>&1
"$stat_bin" -p $cli >"$work/mixed.txt" 2>&1
"$stat_bin" -p $cli --raw >"$work/mixed.raw" 2>&1
if python3 - "$work/mixed.json" $p_san $p_plain $p_rule <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
san, plain, rule = (int(x) for x in sys.argv[2:5])
by = {int(c["peer"].rsplit(":", 1)[1]): c for c in p["connections"]}
assert set(by) == {san, plain, rule}, by.keys()
n = 160 * 65536
c = by[san]
assert c["state"] == "SAN" and c["provider"] == "shm" and not c["tcp_only"], c
assert sum(c["tx"].values()) == n and c["tx"]["tcp"] < n // 2, c
for port, why in ((plain, "no-peer-switch"), (rule, "rule")):
    c = by[port]
    assert c["state"] == "TCP" and c["fallback"] == why and c["tcp_only"], c
    assert c["tx"] == {"copy": 0, "rdma_read": 0, "rdma_write": 0,
                       "tcp": n}, c
assert p["conns_san"] == 1 and p["conns_tcp"] == 2, p
assert p["fallbacks"] == {"rule": 1, "no-peer-switch": 1}, p["fallbacks"]
b = p["bytes"]
assert b["san_tx"] + b["tcp_tx"] == 3 * n, b
PY
then
	pass "a carried and two TCP-only connections: state, reason, bytes by path (TCP ones from the kernel)"
else
	failed "mixed process:"; cat "$work/mixed.json"
fi
if grep -qE "^  [0-9]+ +client +127\.0\.0\.1:$p_plain +[0-9]+ +TCP +- +no-peer-switch +0 B +0 B +10\.0 MiB +0 B$" "$work/mixed.txt" &&
   grep -qE "^  [0-9]+ +client +127\.0\.0\.1:$p_rule +[0-9]+ +TCP +- +rule +0 B +0 B +10\.0 MiB +0 B$" "$work/mixed.txt" &&
   grep -qE "127\.0\.0\.1:$p_plain .* 0 +0 +10485760 +0$" "$work/mixed.raw"; then
	pass "text: human units by default, digits with --raw"
else
	failed "text output:"; cat "$work/mixed.txt" "$work/mixed.raw"
fi

# 2. Filters.
"$stat_bin" -p $cli --json --port $p_rule >"$work/f1.json"
"$stat_bin" --json --peer 127.0.0.0/8 --program 'python*' >"$work/f2.json"
"$stat_bin" --json --peer 10.0.0.0/8 >"$work/f3.json"
"$stat_bin" --json --program 'nomatch*' >"$work/f4.json"
"$stat_bin" --peer 10.0.0.0/8 >"$work/f5.txt"
if python3 - "$work" $cli $p_rule <<'PY'
import json, sys
w, cli, rule = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ld = lambda f: json.load(open("%s/%s" % (w, f)))["processes"]
f1 = ld("f1.json")
assert len(f1) == 1 and [c["peer"] for c in f1[0]["connections"]] == \
    ["127.0.0.1:%d" % rule], f1
f2 = ld("f2.json")
assert cli in [p["pid"] for p in f2], f2
assert len([c for p in f2 if p["pid"] == cli for c in p["connections"]]) == 3
assert ld("f3.json") == [] and ld("f4.json") == []
PY
   grep -q "that matches the filters" "$work/f5.txt"; then
	pass "filters: --port, --peer ADDR/PREFIX, --program"
else
	failed "filters: $(cat "$work"/f*.json "$work/f5.txt")"
fi

# 3. OpenMetrics (and Prometheus text) that a parser takes.
"$stat_bin" -p $cli --openmetrics >"$work/om.txt"
"$stat_bin" -p $cli --prometheus >"$work/prom.txt"
if python3 - "$work/om.txt" "$work/prom.txt" $p_plain <<'PY'
import re, sys
lab = r'[a-z_]+="(?:[^"\\\n]|\\.)*"'
sample = re.compile(r'^([a-z_]+)\{(%s(?:,%s)*)\} (\d+)$' % (lab, lab))
def check(path, om):
    lines = open(path).read().split("\n")
    assert lines[-1] == "", "no final newline"
    lines = lines[:-1]
    if om:
        assert lines[-1] == "# EOF", lines[-1]
        lines = lines[:-1]
    else:
        assert "# EOF" not in lines
    types, samples = {}, []
    for l in lines:
        if l.startswith("# HELP "):
            continue
        m = re.match(r"^# TYPE ([a-z_]+) (counter|gauge)$", l)
        if m:
            assert m.group(1) not in types, "family twice: " + l
            types[m.group(1)] = m.group(2)
            continue
        m = sample.match(l)
        assert m, "bad line: %r" % l
        name = m.group(1)
        fam = name
        if om and name.endswith("_total"):
            fam = name[:-6]
        assert fam in types, "sample before its TYPE: " + l
        if types[fam] == "counter":
            assert name.endswith("_total"), l
        samples.append(l)
    return samples
s = check(sys.argv[1], True)
check(sys.argv[2], False)
want = 'sdp_connection_bytes_total{pid="'
hit = [l for l in s if l.startswith(want) and
       'peer="127.0.0.1:%s"' % sys.argv[3] in l and 'path="tcp"' in l and
       'direction="tx"' in l]
assert hit and hit[0].endswith(" %d" % (160 * 65536)), hit
assert any('fallback="no-peer-switch"' in l for l in s)
PY
then
	pass "OpenMetrics and Prometheus text parse; TCP-only bytes are in them"
else
	failed "OpenMetrics:"; cat "$work/om.txt"
fi

# 4. A TCP-only connection that closes leaves the list (the switch never
#    sees it close: sdp-stat finds its socket gone).
touch "$work/close2"
for _ in $(seq 50); do
	[ -e "$work/closed2" ] && break
	sleep 0.1
done
sleep 0.2
"$stat_bin" -p $cli --json >"$work/after.json"
if python3 - "$work/after.json" $p_plain <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
peers = [c["peer"] for c in p["connections"]]
assert "127.0.0.1:%s" % sys.argv[2] not in peers and len(peers) == 2, peers
assert p["conns_tcp"] == 2, p
PY
then
	pass "a TCP-only connection that closed is no longer listed"
else
	failed "after close: $(cat "$work/after.json")"
fi

# 5. -w: rates per interval (nothing moves now: 0 B/s on every row).
"$stat_bin" -p $cli -w 0.3 -n 2 >"$work/w.txt"
if [ "$(grep -cE ' 0 B/s +0 B/s$' "$work/w.txt")" = 2 ] &&
   grep -q "TX-RATE" "$work/w.txt"; then
	pass "-w prints rates per interval"
else
	failed "-w:"; cat "$work/w.txt"
fi
touch "$work/done"
wait $cli
exit $fail

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# check-stat.sh - the checks of sdp-stat: its state and fallback-reason names
# against the switch's sources, its handling of bad and stale files, and the
# counters it shows for a live transfer between two preloaded socat.
#   check-stat.sh SDP-STAT LIBSDP_SWITCH.so PROVIDER_DIR
set -uo pipefail

stat_bin=$1
lib=$2
provdir=$3
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/lib/lib.sh"
sdp_abs stat_bin lib provdir
# the statistics layout version this tree writes
ver=$(sed -n 's/^#define SW_STATS_VERSION \([0-9]*\).*/\1/p' "$top/switch/stats.h")
# socat's own leaks are not ours to report (sdp_preload); ASan runs slower
sdp_preload "$lib"
slow=1
[ "${SANITIZE:-0}" = 1 ] && slow=4
sdp_workdir sdp-check-stat

# wait_bounded PID SECONDS: waits for a child, kills it when it overstays
wait_bounded() {
	local i
	for i in $(seq $(($2 * 10))); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$1" 2>/dev/null; then
		echo "check-stat.sh: process $1 still runs after $2 s; killing it" >&2
		kill -9 "$1" 2>/dev/null
		wait "$1" 2>/dev/null
		return 124
	fi
	wait "$1"
}

fail=0
pass() { echo "PASS $*"; }
failed() { echo "FAIL $*"; fail=1; }

# 1. Fallback names: enum order from switch/fallback.h, strings from
#    sdp_fallback_name() in switch/fallback_names.c.
i=0
: >"$work/reasons.want"
for sym in $(sed -n '/^enum sdp_fallback_reason/,/^};/p' \
		"$top/switch/fallback.h" | grep -o 'SDP_FB_[A-Z_]*' |
	     grep -v '^SDP_FB_MAX$'); do
	name=$(grep -o "\[$sym\] = \"[^\"]*\"" "$top/switch/fallback_names.c" |
	       sed 's/.*= "\(.*\)"/\1/')
	echo "$i ${name:-MISSING-IN-fallback_names.c}" >>"$work/reasons.want"
	i=$((i + 1))
done
"$stat_bin" --list-reasons >"$work/reasons.got"
if [ "$i" -gt 10 ] && diff -u "$work/reasons.want" "$work/reasons.got"; then
	pass "fallback reason names match switch/fallback_names.c ($i reasons)"
else
	failed "fallback reason names differ from switch/fallback_names.c (diff above)"
fi
# ... and docs/fallback-reasons.md: its table and its section headings
sed -n 's/^| \([0-9]*\) | \([a-z-]*\) |.*/\1 \2/p' \
	"$top/docs/fallback-reasons.md" >"$work/reasons.table"
sed -n 's/^## \([a-z-]*\) (\([0-9]*\))$/\2 \1/p' \
	"$top/docs/fallback-reasons.md" >"$work/reasons.heads"
if diff -u "$work/reasons.want" "$work/reasons.table" &&
   diff -u <(grep -v '^0 ' "$work/reasons.want") "$work/reasons.heads"; then
	pass "docs/fallback-reasons.md lists every reason under its number"
else
	failed "docs/fallback-reasons.md's table or headings differ from the reasons (diff above)"
fi

# 2. State names: enum sw_state in switch/stats.h, without SW_.
sed -n '/^enum sw_state {/,/^};/p' "$top/switch/stats.h" |
	grep -o '^[[:space:]]*SW_[A-Z_]*' | sed 's/^[[:space:]]*SW_//' |
	grep -vx NSTATES |
	awk '{ print NR - 1, $0 }' >"$work/states.want"
"$stat_bin" --list-states >"$work/states.got"
if [ -s "$work/states.want" ] &&
   diff -u "$work/states.want" "$work/states.got"; then
	pass "state names match enum sw_state"
else
	failed "state names differ from enum sw_state (diff above)"
fi

# 3. Bad files: wrong magic and wrong version are refused with a reason;
#    a dead process's file is skipped.
mkdir "$work/bad" "$work/stale"
head -c 4096 /dev/zero >"$work/bad/sdp-stat.$$"
out=$("$stat_bin" -d "$work/bad" 2>&1)
rc=$?
if [ $rc = 1 ] && grep -q "bad magic" <<<"$out"; then
	pass "a file with a wrong magic is refused with exit 1"
else
	failed "wrong magic: rc=$rc, output: $out"
fi
{ printf 'SPDS'"\\$(printf %03o $((ver + 1)))"'\000\000\000'
  head -c 4088 /dev/zero; } >"$work/bad/sdp-stat.$$"
out=$("$stat_bin" -p $$ -d "$work/bad" 2>&1)
rc=$?
if [ $rc = 1 ] && grep -q "layout version $((ver + 1))" <<<"$out"; then
	pass "a file of another layout version is refused with exit 1"
else
	failed "wrong version: rc=$rc, output: $out"
fi
true & dead=$!
wait $dead
{ printf 'SPDS'"\\$(printf %03o $ver)"'\000\000\000'
  head -c 4088 /dev/zero; } >"$work/stale/sdp-stat.$dead"
out=$("$stat_bin" -d "$work/stale" --json 2>&1)
rc=$?
if [ $rc = 0 ] && grep -qx "{\"version\": $ver, \"time\": [0-9]*\.[0-9]*, \"processes\": \[\]}" <<<"$out"; then
	pass "the file of a dead process is skipped"
else
	failed "stale file: rc=$rc, output: $out"
fi
"$stat_bin" -d "$work/stale" --prune >/dev/null 2>&1
if [ ! -e "$work/stale/sdp-stat.$dead" ]; then
	pass "--prune removes the file of a dead process"
else
	failed "--prune left $work/stale/sdp-stat.$dead"
fi

# 3b. A process in a pid namespace of its own, sharing the directory, sees
#    every process outside as gone by its pid: it must not remove their
#    files (the switch looks at the lock a live file's process holds).
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	mkdir -m 700 "$work/pidns"
	SDP_STAT_DIR="$work/pidns" LD_PRELOAD="$preload" sleep 30 &
	live=$!
	for i in $(seq 50); do
		[ -e "$work/pidns/sdp-stat.$live" ] && break
		sleep 0.1
	done
	# a preloaded shell (its switch looks for stale files as its own
	# file is made), then sdp-stat --prune, both inside
	SDP_STAT_DIR="$work/pidns" LD_PRELOAD="$preload" \
		unshare --pid --fork sh -c '"$1" -d "$2" --prune' sh \
		"$stat_bin" "$work/pidns" >"$work/pidns.err" 2>&1
	if [ -e "$work/pidns/sdp-stat.$live" ]; then
		pass "a process in another pid namespace, and --prune, leave a live process's file"
	else
		failed "the file of live process $live was removed (ls: $(ls "$work/pidns"); $(cat "$work/pidns.err"))"
	fi
	kill "$live" 2>/dev/null
	wait "$live" 2>/dev/null
else
	echo "SKIP pid namespace: needs root and unshare"
fi

# 4. A live transfer: 16 MiB from a preloaded client to a preloaded server,
#    read while both still hold the connection. (Its first blocks go on TCP
#    while the upgrade runs, which a client blocked in 1 MiB writes moves on
#    only between them: a few ms, several blocks on a loaded machine.)
size=$((16 * 1024 * 1024))
port=$(sdp_free_port)
head -c $size /dev/urandom >"$work/in"
export SDP_STAT_DIR=$work SDP_PROVIDERS=shm SDP_PROVIDER_DIR=$provdir
LD_PRELOAD=$preload socat -u TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr \
	OPEN:"$work/out",creat,trunc 2>"$work/srv.log" &
srv=$!
pids+=("$srv")
for _ in $(seq 50); do
	[ -e "$work/sdp-stat.$srv" ] && ss -ltn 2>/dev/null |
		grep -q "127.0.0.1:$port " && break
	sleep 0.1
done
{ cat "$work/in"; sleep 4; } |
	LD_PRELOAD=$preload socat -u -b 1048576 - TCP:127.0.0.1:$port \
	2>"$work/cli.log" &
cli=$!
pids+=("$cli")
# until the client has sent everything (or 3 s)
for _ in $(seq 30); do
	sleep 0.1
	"$stat_bin" -p "$cli" --json >"$work/cli.json" 2>"$work/cli.err" ||
		continue
	"$stat_bin" -p "$srv" --json >"$work/srv.json" 2>"$work/srv.err" ||
		continue
	python3 - "$work/srv.json" $size <<'PY' && break
import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
rx = sum(sum(c["rx"].values()) for c in p["connections"])
sys.exit(0 if rx >= int(sys.argv[2]) else 1)
PY
done
# the client's view again, now that the server has every byte: the copy
# taken in the loop came before the server's and may lag it
"$stat_bin" -p "$cli" --json >"$work/cli.json" 2>"$work/cli.err"
"$stat_bin" -p "$cli" -w 0.2 -n 2 >"$work/cli.txt" 2>&1
python3 - "$work/cli.json" "$work/srv.json" $size "$cli" "$srv" "$ver" $$ <<'PY'
import json, sys
size = int(sys.argv[3])
def conn(path, pid, role):
    doc = json.load(open(path))
    assert doc["version"] == int(sys.argv[6]), doc
    procs = doc["processes"]
    assert len(procs) == 1 and procs[0]["pid"] == pid, procs
    p = procs[0]
    assert p["program"] == "socat", p["program"]
    assert p["providers"].startswith("shm"), p["providers"]
    assert p["conns_san"] == 1 and p["conns_tcp"] == 0, p
    cs = [c for c in p["connections"] if c["role"] == role]
    assert len(cs) == 1, p["connections"]
    c = cs[0]
    assert c["state"] == "SAN" and c["provider"] == "shm", c
    assert c["fallback"] == "none", c
    assert c["peer"].startswith("127.0.0.1:"), c
    assert p["ppid"] == int(sys.argv[7]), ("parent", p["ppid"])
    # the process's totals: its one live connection, by SAN and TCP
    b = p["bytes"]
    assert b["san_tx"] == sum(c["tx"].values()) - c["tx"]["tcp"], (b, c)
    assert b["san_rx"] == sum(c["rx"].values()) - c["rx"]["tcp"], (b, c)
    assert (b["tcp_tx"], b["tcp_rx"]) == (c["tx"]["tcp"], c["rx"]["tcp"]), b
    return c
c = conn(sys.argv[1], int(sys.argv[4]), "client")
s = conn(sys.argv[2], int(sys.argv[5]), "server")
tx = c["tx"]; rx = s["rx"]
assert sum(tx.values()) == size, ("client sent", tx, size)
assert sum(rx.values()) == size, ("server received", rx, size)
# The first bytes travel on TCP while the upgrade runs (the client's writes
# until its switch point: at least what the server saw before it made the
# provider connection, SDP_UPGRADE_AFTER_BYTES, and at most a few of
# socat's 1 MiB blocks more); the rest on the SAN paths. How many go
# which way is timing; the two ends count alike, byte for byte.
assert 0 < tx["tcp"] <= size // 2, ("TCP before the switch", tx)
assert tx["copy"] + tx["rdma_read"] + tx["rdma_write"] == size - tx["tcp"], tx
assert tx == rx, ("paths differ", tx, rx)
assert c["msgs_tx"] > 0 and s["msgs_rx"] == c["msgs_tx"], (c, s)
print("client tx", tx)
PY
if [ $? = 0 ]; then
	pass "live transfer: $size bytes on the SAN path, by path, both ends"
else
	failed "live transfer counters (JSON in $work kept below)"
	cat "$work/cli.json" "$work/srv.json" "$work/cli.err" "$work/srv.err"
fi
if [ "$(grep -c '^pid '"$cli"' (socat)' "$work/cli.txt")" = 2 ] &&
   grep -qE '^  [0-9]+ +client +127\.0\.0\.1:[0-9]+ +[0-9]+ +SAN +shm ' "$work/cli.txt" &&
   grep -qE '/s +[0-9.]+ [KMG]?i?B/s$' "$work/cli.txt"; then
	pass "-w 0.2 -n 2 prints two text reports, the second with rates"
else
	failed "-w/-n text output:"
	cat "$work/cli.txt"
fi
wait_bounded "$cli" $((10 * slow)) || failed "the client did not finish in time"
wait_bounded "$srv" $((5 * slow)) || failed "the server did not finish in time"
if [ -s "$work/srv.log" ] || [ -s "$work/cli.log" ]; then
	echo "---- server log"; cat "$work/srv.log"
	echo "---- client log"; cat "$work/cli.log"
fi
if cmp -s "$work/in" "$work/out"; then
	pass "the bytes arrived intact"
else
	failed "the received file differs from the sent one"
fi
if [ ! -e "$work/sdp-stat.$cli" ] && [ ! -e "$work/sdp-stat.$srv" ]; then
	pass "the files are removed when the processes exit"
else
	failed "statistics files left after exit: $(ls "$work")"
fi

# 5. Lifetime totals: a server that has closed its connection still counts
#    the bytes it received (SAN and TCP), and a child it forks afterwards
#    names it as parent and starts from zero.
port=$(sdp_free_port)
LD_PRELOAD=$preload python3 - "$port" "$work/srv5.ready" <<'PY' &
import os, socket, sys, time
ls = socket.create_server(("127.0.0.1", int(sys.argv[1])))
c, _ = ls.accept()
n = 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    n += len(b)
c.close()
if os.fork() == 0:
    time.sleep(6)
    os._exit(0)
open(sys.argv[2], "w").write(str(n))
time.sleep(6)
PY
srv=$!
pids+=("$srv")
sdp_wait_listen $port
LD_PRELOAD=$preload python3 - "$port" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
blk = bytes(range(256)) * 256
# 64 KiB every 2 ms: both programs call the switch often while the
# upgrade runs (from 1 ms on), so most of the 4 MiB goes by the SAN
for _ in range(64):
    s.sendall(blk)
    time.sleep(0.002)
s.close()
PY
for _ in $(seq 50); do
	[ -s "$work/srv5.ready" ] && break
	sleep 0.1
done
# the forked child writes its own file as it starts: look until it is there
for _ in $(seq 30); do
	"$stat_bin" --json >"$work/all5.json" 2>"$work/all5.err"
	python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["processes"]
sys.exit(0 if any(x["ppid"] == int(sys.argv[2]) for x in p) else 1)' \
		"$work/all5.json" "$srv" 2>/dev/null && break
	sleep 0.1
done
python3 - "$work/all5.json" "$srv" "$((4 << 20))" "$(cat "$work/srv5.ready" 2>/dev/null)" <<'PY'
import json, sys
procs = json.load(open(sys.argv[1]))["processes"]
srv, size = int(sys.argv[2]), int(sys.argv[3])
assert sys.argv[4] == str(size), ("server read", sys.argv[4])
p = [x for x in procs if x["pid"] == srv]
assert len(p) == 1, procs
p = p[0]
assert p["connections"] == [], ("no live connection", p["connections"])
b = p["bytes"]
assert b["san_rx"] + b["tcp_rx"] == size, b
assert b["san_rx"] >= size // 2, ("most bytes by the SAN", b)
assert b["san_tx"] + b["tcp_tx"] == 0, b
kids = [x for x in procs if x["ppid"] == srv]
assert len(kids) == 1, ("one forked child", kids)
k = kids[0]["bytes"]
assert not any(k.values()), ("the child starts from zero", k)
print("closed totals", b)
PY
if [ $? = 0 ]; then
	pass "closed connections stay in the totals; a forked child starts at zero"
else
	failed "lifetime totals (JSON below)"
	cat "$work/all5.json" "$work/all5.err"
fi
exit $fail

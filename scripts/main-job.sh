#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# main-job.sh - the README's first command: installs what is missing, builds
# the switch, the shm provider and sdp-stat, then runs iperf3 over plain TCP
# and through the switch (shm provider) and shows both throughputs and the
# sdp-stat counters that prove the SAN path carried the bytes.
#   bash scripts/main-job.sh    (SECONDS_PER_RUN=5 by default)
set -euo pipefail

cd "$(dirname "$0")/.."
top=$PWD
secs=${SECONDS_PER_RUN:-5}
case $secs in
[1-9] | [1-9][0-9]) ;;
*) echo "main-job.sh: SECONDS_PER_RUN=$secs: give 1 to 99" >&2; exit 2 ;;
esac

step() { printf '\n==== %s\n' "$*"; }

# ---- 1. packages ---------------------------------------------------------
step "packages"
pkgs="build-essential pkg-config check libsubunit-dev libibverbs-dev
librdmacm-dev iperf3 python3 procps iproute2"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	sudo=
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null || {
			echo "main-job.sh: need root (or sudo) to install:$missing" >&2
			exit 1
		}
		sudo=sudo
	fi
	echo "installing:$missing"
	$sudo apt-get update
	# iperf3 asks whether to start a daemon; the answer is no
	echo "iperf3 iperf3/start_daemon boolean false" |
		$sudo debconf-set-selections 2>/dev/null || true
	# shellcheck disable=SC2086 # one word per package
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y \
		--no-install-recommends $missing
else
	echo "all present:" $pkgs
fi

# ---- 2. build --------------------------------------------------------------
step "build"
lib=build/lib/libsdp_switch.so
stat=build/bin/sdp-stat
make -j2 "$lib" build/lib/sdp/libsdp-shm.so "$stat"

# ---- 3. iperf3, plain TCP and through the switch ---------------------------
work=$(mktemp -d /tmp/sdp-main-job.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# free ports, waiting for a listener: shared with the tests
. "$top/tests/lib/lib.sh"

wait_listen() {
	sdp_wait_listen "$1" && return 0
	echo "main-job.sh: iperf3 server did not listen on port $1" >&2
	return 1
}

gbits() {
	python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
if "error" in d:
    sys.exit("iperf3: " + d["error"])
print("%.2f" % (d["end"]["sum_received"]["bits_per_second"] / 1e9))' "$1"
}

# run_iperf NAME PRELOAD: one server, one client (1 MiB writes), JSON result
run_iperf() {
	local name=$1 pre=$2 port srv cli
	port=$(sdp_free_port)
	env ${pre:+LD_PRELOAD=$pre} iperf3 -s -1 -B 127.0.0.1 -p $port \
		>"$work/$name-server.log" 2>&1 &
	srv=$!
	pids+=("$srv")
	wait_listen $port
	env ${pre:+LD_PRELOAD=$pre} iperf3 -c 127.0.0.1 -p $port -t "$secs" \
		-l 1M -J >"$work/$name.json" 2>"$work/$name-client.err" &
	cli=$!
	pids+=("$cli")
	if [ -n "$pre" ]; then
		# read the counters of both ends near the end of the run
		sleep $((secs - 1)).5
		"$stat" -p "$cli" >"$work/stat-client.txt" 2>&1 || true
		"$stat" -p "$cli" --json >"$work/stat-client.json" 2>&1 || true
		"$stat" -p "$srv" >"$work/stat-server.txt" 2>&1 || true
		"$stat" -p "$srv" --json >"$work/stat-server.json" 2>&1 || true
	fi
	wait "$cli" || {
		echo "main-job.sh: iperf3 client ($name) failed:" >&2
		cat "$work/$name-client.err" "$work/$name.json" >&2
		return 1
	}
	wait "$srv" || true
}

step "iperf3 over plain TCP (127.0.0.1, ${secs}s, 1 MiB writes)"
run_iperf tcp ""
tcp=$(gbits "$work/tcp.json")
echo "plain TCP: $tcp Gbit/s"

step "iperf3 through the switch, shm provider (both ends preloaded)"
export SDP_PROVIDERS=shm SDP_STAT_DIR=$work
run_iperf san "$top/$lib"
san=$(gbits "$work/san.json")
echo "through the switch: $san Gbit/s"

step "sdp-stat of the iperf3 client, ${secs}s into the run"
cat "$work/stat-client.txt"
step "sdp-stat of the iperf3 server"
cat "$work/stat-server.txt"

# ---- 4. the proof ------------------------------------------------------------
step "result"
python3 - "$work/stat-client.json" "$work/stat-server.json" \
	"$work/san.json" "$tcp" "$san" <<'PY'
import json, sys

def load(path, role):
    try:
        doc = json.load(open(path))
    except ValueError:
        sys.exit("no sdp-stat JSON for the %s: %s" % (role, open(path).read()))
    procs = doc["processes"]
    if len(procs) != 1:
        sys.exit("sdp-stat found no process for the %s" % role)
    return procs[0]

cli = load(sys.argv[1], "client")
srv = load(sys.argv[2], "server")
sent = json.load(open(sys.argv[3]))["end"]["sum_sent"]["bytes"]
tcp, san = float(sys.argv[4]), float(sys.argv[5])
ok = True
for p, role, d in ((cli, "client", "tx"), (srv, "server", "rx")):
    conns = p["connections"]
    san_conns = [c for c in conns if c["state"] == "SAN"]
    by_path = {k: sum(c[d][k] for c in conns)
               for k in ("copy", "rdma_read", "rdma_write", "tcp")}
    print("%s (pid %d): %d of %d connections on the SAN (provider %s), "
          "%s bytes by path: %s" %
          (role, p["pid"], len(san_conns), len(conns),
           ",".join(sorted({c["provider"] for c in san_conns})) or "-",
           d, ", ".join("%s %d" % kv for kv in by_path.items())))
    if not san_conns or any(c["state"] != "SAN" for c in conns):
        print("  FAIL: a connection of the %s is not on the SAN" % role)
        ok = False
    moved = sum(v for k, v in by_path.items() if k != "tcp")
    # a connection's first bytes go on TCP while its upgrade runs (from
    # 1 ms or 64 KiB on, docs/protocol.md 2.1); after that, none may
    share = moved / float(moved + by_path["tcp"]) if moved else 0.0
    print("  %.3f%% of the bytes on the SAN path, %d on TCP before the "
          "switch point" % (100.0 * share, by_path["tcp"]))
    if share < 0.99:
        print("  FAIL: %d bytes went over TCP (%.1f%%)" %
              (by_path["tcp"], 100.0 * (1 - share)))
        ok = False
    # read near the end: at least half of what iperf3 reports at the end
    if moved < sent // 2:
        print("  FAIL: only %d bytes on the SAN path; iperf3 sent %d" %
              (moved, sent))
        ok = False
print("")
print("plain TCP          %8.2f Gbit/s" % tcp)
print("through the switch %8.2f Gbit/s  (%.2fx)" % (san, san / tcp if tcp else 0))
if not ok:
    sys.exit("main job FAILED: the SAN path did not carry the bytes")
print("main job passed: the SAN path (shm provider) carried the bytes")
PY

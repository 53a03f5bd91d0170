# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/install/transfer.sh - sourced by the install and package checks: a
# transfer between two socat started by an installed sdp-run with no SDP_*
# variable set, proven carried by shm through the installed sdp-stat.
# Needs $work, $pids, pass() and failed() from the caller.

# clean_env_set: $clean_env, a command prefix with only PATH (and, for a
# sanitizer build, its runtime first in LD_PRELOAD)
clean_env_set() {
	clean_env=(env -i PATH=/usr/bin:/bin)
	if [ "${SANITIZE:-0}" = 1 ]; then
		clean_env+=(LD_PRELOAD="$(${CC:-gcc} -print-file-name=libasan.so)"
			    ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0)
	fi
}

# installed_transfer SDP-RUN SDP-STAT: 128 MiB from a client to a server,
# both started by SDP-RUN; the server's statistics, read by SDP-STAT while
# the connection is open, must show it carried by shm: every byte after the
# switch point on shm, and at most 64 MiB on TCP before it. The client
# floods TCP while the upgrade runs; how much reaches TCP first depends on
# the scheduler (0.2-1.8 MB on an idle machine, 4.4 MB seen in CI), the
# same bound as the program tests' (tests/programs/run.py, HEAD_MAX).
installed_transfer() {
	local run=$1 stat=$2 size=$((128 * 1024 * 1024)) port srv cli ok=0
	clean_env_set
	head -c $size /dev/urandom >"$work/in"
	rm -f "$work/out"
	port=$(sdp_free_port)
	"${clean_env[@]}" "$run" socat -u \
		TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr \
		OPEN:"$work/out",creat,trunc 2>"$work/srv.log" &
	srv=$!
	pids+=("$srv")
	sdp_wait_listen $port
	{ cat "$work/in"; sleep 3; } |
		"${clean_env[@]}" "$run" socat -u -b 262144 - \
		TCP:127.0.0.1:$port 2>"$work/cli.log" &
	cli=$!
	pids+=("$cli")
	for _ in $(seq 40); do
		sleep 0.1
		"${clean_env[@]}" "$stat" -p "$srv" --json \
			>"$work/srv.json" 2>"$work/stat.err" || continue
		python3 - "$work/srv.json" $size <<'PY' && { ok=1; break; }
import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
c = [c for c in p["connections"] if c["role"] == "server"]
sys.exit(0 if c and sum(c[0]["rx"].values()) >= int(sys.argv[2]) else 1)
PY
	done
	wait "$cli"
	wait "$srv"
	if [ $ok = 1 ] && python3 - "$work/srv.json" $size <<'PY'
import json, sys
size = int(sys.argv[2])
p = json.load(open(sys.argv[1]))["processes"][0]
assert p["program"] == "socat" and p["providers"].startswith("shm"), p
c = [c for c in p["connections"] if c["role"] == "server"][0]
assert c["state"] == "SAN" and c["provider"] == "shm", c
rx = c["rx"]
san = rx["copy"] + rx["rdma_read"] + rx["rdma_write"]
assert san + rx["tcp"] == size and rx["tcp"] <= 64 << 20, rx
print("server received", rx)
PY
	then
		pass "a transfer through $run is carried by shm"
	else
		failed "$run did not carry the transfer by shm"
		cat "$work/srv.json" "$work/stat.err" "$work/srv.log" \
			"$work/cli.log"
	fi
	if cmp -s "$work/in" "$work/out"; then
		pass "the $size bytes arrived intact"
	else
		failed "the bytes that arrived differ from those sent"
	fi
	if [ -s "$work/srv.log" ] || [ -s "$work/cli.log" ]; then
		failed "the programs printed something (nothing expected):"
		cat "$work/srv.log" "$work/cli.log"
	fi
}

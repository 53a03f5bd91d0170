#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# run-hostile.sh - the hostile-peer tests: a preloaded echo server attacked
# by hostile_peer (one malformed sequence per connection, then attacks on
# the transfer slots in the shared area) while an honest
# preloaded client streams hashed data beside it; a forged provider
# connection racing a real client; squatters on a server's provider address.
#   tests/hostile/run-hostile.sh [BUILD_DIR]     (SANITIZE=1: ASan runtime)
set -u
. "$(dirname "$0")/common.sh" sdp-hostile "${1:-build}"
port=$(sdp_free_port)

# start_server NAME PORT PRELOAD(0|1) [DELAY_MS]: sets $srv to its pid
start_server() {
	local name=$1 p=$2 pre=$3 delay=${4:-0}
	if [ "$pre" = 1 ]; then
		SDP_LOG_FILE=$work/$name.log LD_PRELOAD="$preload" \
			timeout 120 "$bin/echo_server" "$p" "$delay" \
			>"$work/$name.out" 2>"$work/$name.err" &
	else
		timeout 120 "$bin/echo_server" "$p" "$delay" \
			>"$work/$name.out" 2>"$work/$name.err" &
	fi
	srv=$!
	pids+=("$srv")
	server_ready "$name" || return 1
	# the pid of echo_server itself, not of timeout
	srvpid=$(pgrep -P "$srv" echo_server || echo "$srv")
}

# honest NAME PORT SECONDS [san] LOG: a preloaded honest client
honest() {
	local name=$1 p=$2 secs=$3 mode=$4 log=$5
	SDP_LOG_FILE=$log LD_PRELOAD="$preload" timeout $((secs + 20)) \
		"$bin/honest_client" "$p" "$secs" $mode \
		>"$work/$name.out" 2>&1
	outcome "$name" "$work/$name.out" $?
}

# cases_run NAME OUT RC: reads hostile_peer's PASS/FAIL/SKIP lines from OUT;
# a peer that exited non-zero or reported no case at all (it crashed, or a
# sanitizer stopped it) is a failure, not a silent pass
cases_run() {
	local n=0 st rest
	while read -r st rest; do
		case $st in
		PASS|FAIL|SKIP) result "$st" "$rest"; n=$((n + 1)) ;;
		esac
	done <"$2"
	if [ "$3" != 0 ] || [ $n = 0 ]; then
		result FAIL "$1: hostile_peer exited $3 after $n case(s): $(tail -3 "$2" | tr '\n' ' ')"
	fi
}

# attacks PREFIX SERVER PORT PID SECS MODE: an honest preloaded client
# streams for SECS while hostile_peer runs its MODE cases against SERVER;
# then the honest connection, one more after it, the server's life and
# its input are checked
attacks() {
	local pre=$1 name=$2 p=$3 pid=$4 secs=$5 mode=$6 during rc=0
	SDP_LOG_FILE=$work/client.log LD_PRELOAD="$preload" timeout 80 \
		"$bin/honest_client" "$p" "$secs" san \
		>"$work/${pre}during.out" 2>&1 &
	during=$!
	pids+=("$during")
	timeout 200 "$bin/hostile_peer" "$mode" "$p" "$work/$name.log" "$pid" \
		>"$work/$mode.out" 2>&1 || rc=$?
	cases_run "${pre}cases" "$work/$mode.out" $rc
	wait $during
	outcome "${pre}honest_during" "$work/${pre}during.out" $?
	honest "${pre}honest_after" "$p" 1 san "$work/client.log"
	alive "${pre}server_after_cases" "$pid"
	no_stray "${name}_no_stray" "$name"
}

echo "== hostile session peer against a preloaded echo server (port $port)"
start_server main $port 1 || exit 1
mainpid=$srvpid
honest honest_before $port 1 san "$work/client.log"
attacks "" main $port $mainpid 20 cases
kill "$srv" 2>/dev/null

echo "== transfer slot attacks against a preloaded echo server"
# short bounds and wide windows: a claim or a push may stand 500 ms; a
# push request waits 20 ms for the sender to start, an offer 200 ms for a
# claim, so each attack lands however the machine schedules us
xport=$(sdp_free_port)
SDP_XSLOT_CLAIM_MS=500 SDP_SPIN_US=20000 SDP_XSLOT_BLOCK_US=200000 \
	start_server slot $xport 1 || exit 1
slotpid=$srvpid
attacks slot_ slot $xport $slotpid 15 slot
kill "$srv" 2>/dev/null

echo "== forged upgrade: a third process races to the client's provider listener"
fport=$(sdp_free_port)
start_server forge $fport 1 800 || exit 1
"$bin/hostile_peer" forge $fport 10 >"$work/forger.out" 2>&1 &
forger=$!
pids+=("$forger")
# the client opens its provider listener at connect (SDP_UPGRADE_AFTER_US=0;
# by default only once its connection is due for the upgrade), so the
# forger has the server's whole accept delay to race it
SDP_UPGRADE_AFTER_US=0 honest forge_real_connection $fport 2 san \
	"$work/forge.log"
wait $forger
fst=$(grep -m1 -o '^\(PASS\|FAIL\)' "$work/forger.out" || echo FAIL)
result "$fst" "forge_refused: $(sed -n 1p "$work/forger.out" | sed 's/^[A-Z]* //')"
# the forger runs as the client's own user here, so the client's listener
# answers it and then drops its HELLO, which carries no proof of holding
# the server's end of the TCP connection (run-trust.sh has other users)
if grep -q 'without the key of this TCP connection\|without proof that it holds the other end' \
	"$work/forge.log"; then
	result PASS "forge_logged: the client's switch logged the refusal"
else
	result FAIL "forge_logged: no refusal in the client's log"
fi
alive server_after_forge "$srvpid"
kill "$srv" 2>/dev/null

echo "== squatting: another process holds the server's provider address"
for kind in plain preloaded; do
	sport=$(sdp_free_port)
	"$bin/hostile_peer" squat $sport 8 >"$work/squat-$kind.out" \
		2>"$work/squat-$kind.err" &
	pids+=("$!")
	for i in $(seq 30); do
		grep -q squatting "$work/squat-$kind.out" && break
		sleep 0.1
	done
	start_server "squat-$kind" $sport $([ $kind = plain ] && echo 0 ||
					   echo 1) || exit 1
	honest "squat_${kind}_server_client" $sport 1 "" "$work/squat.log"
	no_stray "squat_${kind}_server_no_stray" "squat-$kind"
	kill "$srv" 2>/dev/null
done

finish

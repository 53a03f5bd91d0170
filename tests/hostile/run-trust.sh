#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# run-trust.sh - the local trust boundary (docs/security.md, section 1): a
# preloaded server of one user (alice: root here), preloaded clients of
# another (bob), and a third user (mallory) without the switch who squats
# provider names, relays, floods watches, truncates shared memfds and writes
# arbitrary values into every shared field. Each attack must obtain nothing
# and crash nothing; bob's connections are carried or fall back with their
# reason, every byte checked. Also a low RLIMIT_NOFILE and a full /dev/shm.
#   tests/hostile/run-trust.sh [BUILD_DIR]     (as root: it makes the users)
set -u
. "$(dirname "$0")/common.sh" sdp-trust "${1:-build}"
# below the ephemeral range, so that no other connection takes them
port=$((10000 + ($$ * 13) % 20000))

# free_range N: the first of N consecutive ports, from $1 on, that no
# socket holds now (bob binds his clients to them)
free_range() {
	/usr/bin/python3 - "$1" "$2" <<'PY'
import socket, sys
start, n = int(sys.argv[1]), int(sys.argv[2])
p = start
while p + n < 32768:
    ok = True
    for q in range(p, p + n):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", q))
        except OSError:
            ok = False
        s.close()
        if not ok:
            p = q + 1
            break
    if ok:
        print(p)
        sys.exit(0)
sys.exit(1)
PY
}
FUZZ_SECS=${SDP_TRUST_FUZZ_SECS:-20}

if [ "$(id -u)" != 0 ]; then
	echo "SKIP trust: the attacks need real users; run as root (CI does)"
	exit 0
fi
for u in sdpbob sdpmallory; do
	id -u $u >/dev/null 2>&1 ||
		useradd --system --no-create-home --no-user-group \
			--shell /usr/sbin/nologin $u || exit 1
done
chmod 1777 "$work"

as() {		# USER COMMAND...: as that user, the environment kept
	local u=$1
	shift
	setpriv --reuid="$(id -u "$u")" --regid="$(id -g "$u")" \
		--clear-groups "$@"
}

# start_server NAME PORT [ULIMIT_N [ENV...]]: alice's preloaded echo server;
# sets $srv (its pid: no wrapper process in between)
start_server() {
	local name=$1 p=$2 lim=${3:-}
	shift 3 2>/dev/null || shift $#
	bash -c "${lim:+ulimit -n $lim;} exec \"\$@\"" - env "$@" \
		SDP_LOG=info SDP_LOG_FILE="$work/$name.log" \
		LD_PRELOAD="$preload" "$bin/echo_server" "$p" 0 \
		>"$work/$name.out" 2>"$work/$name.err" &
	srv=$!
	pids+=("$srv")
	server_ready "$name"
}

# bob NAME PORT SECONDS MODE [ENV...]: bob's preloaded honest client
bob() {
	local name=$1 p=$2 secs=$3 mode=$4
	shift 4
	as sdpbob env "$@" SDP_LOG=info SDP_LOG_FILE="$work/bob.log" \
		LD_PRELOAD="$preload" timeout $((${secs%.*} + 20)) \
		"$bin/honest_client" "$p" "$secs" $mode \
		>"$work/$name.out" 2>&1
	outcome "$name" "$work/$name.out" $?
}

mallory_result() {	# NAME OUT
	local line
	line=$(grep -m1 '^\(PASS\|FAIL\) ' "$2")
	if [ -z "$line" ]; then
		result FAIL "$1: mallory reported nothing: $(tail -2 "$2" |
			tr '\n' ' ')"
		# the whole of what it wrote (a sanitizer's report, say)
		sed 's/^/    mallory: /' "$2" | tail -60
	else
		result "${line%% *}" "$1: ${line#* }"
	fi
}

wait_for() {	# FILE TEXT
	for i in $(seq 50); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

echo "== a relay on wildcard names: mallory takes sdp-shm/*:P for bob's ports"
sport=$port lo=$(free_range $((port + 100)) 8) hi=$((lo + 7))
start_server relay $sport || exit 1
relaypid=$srv
as sdpmallory "$bin/mallory" squat $sport $lo $hi 12 >"$work/m-relay.out" \
	2>&1 &
m=$!
pids+=("$m")
wait_for "$work/m-relay.out" squatting
for p in $(seq $lo $hi); do
	bob "relay_bob_$p" $sport 0.3 san HOSTILE_LOCAL_PORT=$p
done
wait $m
mallory_result relay_mallory_got_nothing "$work/m-relay.out"
alive relay_server_lives $relaypid
no_stray relay_no_stray relay

echo "== a squatter on bob's exact names too: his listener cannot open"
lo=$(free_range $((hi + 1)) 4) hi=$((lo + 3))
as sdpmallory "$bin/mallory" squat $sport $lo $hi 8 exact \
	>"$work/m-exact.out" 2>&1 &
m=$!
pids+=("$m")
wait_for "$work/m-exact.out" squatting
: >"$work/bob.log"
for p in $(seq $lo $hi); do
	bob "exact_bob_$p" $sport 0.3 "" HOSTILE_LOCAL_PORT=$p
done
wait $m
mallory_result exact_mallory_got_nothing "$work/m-exact.out"
if grep -q 'plain TCP: .*provider listener' "$work/bob.log"; then
	result PASS "exact_fallback_reason: bob's switch says why: $(grep -m1 -o 'plain TCP: .*' "$work/bob.log")"
else
	result FAIL "exact_fallback_reason: no fallback reason in bob's log"
fi
alive exact_server_lives $relaypid
kill $relaypid 2>/dev/null

echo "== a squatter in front of a client without the switch (the server speaks first)"
bport=$((port + 1)) lo=$(free_range $((hi + 1)) 4) hi=$((lo + 3))
HOSTILE_BANNER=1 start_server banner $bport "" HOSTILE_BANNER=1 || exit 1
bannerpid=$srv
as sdpmallory "$bin/mallory" squat $bport $lo $hi 6 exact \
	>"$work/m-banner.out" 2>&1 &
m=$!
pids+=("$m")
wait_for "$work/m-banner.out" squatting
for p in $(seq $lo $hi); do
	# bob without the switch: the first bytes he reads must be the banner
	first=$(as sdpbob /usr/bin/python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[2])))
s.connect(("127.0.0.1", int(sys.argv[1])))
s.settimeout(5)
b = b""
while len(b) < 8:
    k = s.recv(8 - len(b))
    if not k:
        break
    b += k
print(b.hex())' $bport $p 2>&1)
	if [ "$first" = "$(printf 'HBANNER\n' | od -An -tx1 | tr -d ' \n')" ]; then
		result PASS "banner_plain_client_$p: the client read the server's banner first"
	else
		result FAIL "banner_plain_client_$p: the client read $first"
	fi
done
wait $m
mallory_result banner_mallory_got_nothing "$work/m-banner.out"
alive banner_server_lives $bannerpid
kill $bannerpid 2>/dev/null

echo "== a hostile peer: truncation of both memfds, then arbitrary values in every shared field (${FUZZ_SECS} s)"
fport=$((port + 2))
start_server fuzz $fport || exit 1
fuzzpid=$srv
as sdpbob env SDP_LOG=info SDP_LOG_FILE="$work/bob-fuzz.log" \
	LD_PRELOAD="$preload" \
	timeout $((FUZZ_SECS + 30)) "$bin/honest_client" $fport $FUZZ_SECS san \
	>"$work/fuzz-bob.out" 2>&1 &
b=$!
pids+=("$b")
as sdpmallory timeout $((FUZZ_SECS + 30)) "$bin/mallory" peer $fport \
	$FUZZ_SECS >"$work/m-fuzz.out" 2>&1
mallory_result fuzz_peer "$work/m-fuzz.out"
wait $b
outcome fuzz_bob_beside "$work/fuzz-bob.out" $?
alive fuzz_server_lives $fuzzpid
n=$(grep -c 'closing the connection\|broke the shared ring\|plain TCP' \
	"$work/fuzz.log")
if [ "$n" -gt 0 ]; then
	result PASS "fuzz_reasons_logged: $n connection(s) closed or kept on TCP with a reason in SDP_LOG_FILE"
else
	result FAIL "fuzz_reasons_logged: no reason in the server's log"
fi
as sdpmallory timeout 30 "$bin/mallory" peer $fport 3 unsealed \
	>"$work/m-unsealed.out" 2>&1
mallory_result fuzz_unsealed_peer "$work/m-unsealed.out"
if grep -q 'not sealed against shrinking' "$work/fuzz.log"; then
	result PASS "fuzz_unsealed_refused: the server refused a region that can shrink"
else
	result FAIL "fuzz_unsealed_refused: no refusal of the unsealed region in the server's log"
fi
alive fuzz_server_lives_after_unsealed $fuzzpid
bob fuzz_bob_after $fport 1 san
kill $fuzzpid 2>/dev/null

echo "== credits at their lowest: a 2-slot control ring, each pool shrunk after 1 ms idle"
# bob's sends wait for ring room and his pool and alice's shrink and grow
# all the time: releases and credit returns meet data both ways while
# alice's one-thread echo is in a send with bob's bytes unread (a release
# that took a side's last credit left both waiting for ever)
qport=$((port + 4))
printf 'shm libsdp-shm.so ring_slots=2\n' >"$work/squeeze.conf"
chmod 644 "$work/squeeze.conf"
start_server squeeze $qport "" SDP_PROVIDER_CATALOG="$work/squeeze.conf" \
	SDP_IDLE_MS=1 || exit 1
squeezepid=$srv
bob squeeze_bob $qport 5 san SDP_PROVIDER_CATALOG="$work/squeeze.conf" \
	SDP_IDLE_MS=1
alive squeeze_server_lives $squeezepid
kill $squeezepid 2>/dev/null

echo "== a WATCH flood: 300 watches from mallory while bob makes 150 connections (RLIMIT_NOFILE 400)"
wport=$((port + 3))
start_server watch $wport 400 || exit 1
watchpid=$srv
before=$(ls /proc/$watchpid/fd | wc -l)
as sdpmallory "$bin/mallory" watch $wport 300 30 >"$work/m-watch.out" 2>&1 &
m=$!
pids+=("$m")
# her connections wait in the server's backlog until its program accepts
# (the switch takes them in then): bob's connections make it accept
as sdpbob env SDP_LOG=info SDP_LOG_FILE="$work/bob-watch.log" \
	LD_PRELOAD="$preload" timeout 60 "$bin/many_client" $wport 150 4096 \
	>"$work/watch-bob.out" 2>&1
outcome watch_bob_150 "$work/watch-bob.out" $?
wait_for "$work/m-watch.out" "WATCH messages sent"
as sdpbob env LD_PRELOAD="$preload" timeout 20 "$bin/many_client" $wport 2 \
	4096 >/dev/null 2>&1
# what mallory may hold, by the provider's caps: 32 watches and 8 silent
# connections per user and listener (provider-shm.md), where 300 would
# be unbounded; and bob's last connections and his processes' bells and
# pidfds may not all be gone yet (up to 16). bob's connections that the
# server closed with bytes or its end still to send finish in the
# background (docs/semantics.md, "close"), each holding its descriptors
# until its peer is seen gone: the count is taken once those are done
# (5 s at most), mallory's holdings staying
end=$((SECONDS + 5))
while :; do
	after=$(ls /proc/$watchpid/fd | wc -l)
	[ $((after - before)) -le $((32 + 8 + 16)) ] && break
	[ $SECONDS -ge $end ] && break
	sleep 0.2
done
if [ $((after - before)) -le $((32 + 8 + 16)) ]; then
	result PASS "watch_fds_bounded: $(head -1 "$work/m-watch.out"); the server went from $before to $after descriptors"
else
	result FAIL "watch_fds_bounded: $(head -1 "$work/m-watch.out"); the server went from $before to $after descriptors"
fi
alive watch_server_lives $watchpid
kill $m $watchpid 2>/dev/null

echo "== RLIMIT_NOFILE 64: the preloaded server accepts what plain TCP accepts"
lport=$((port + 5))
start_server rlimit $lport 64 || exit 1
rlpid=$srv
as sdpbob env SDP_LOG=info SDP_LOG_FILE="$work/bob-rlimit.log" \
	LD_PRELOAD="$preload" timeout 60 "$bin/many_client" $lport 40 65536 \
	>"$work/rlimit-bob.out" 2>&1
outcome rlimit_40_connections "$work/rlimit-bob.out" $?
alive rlimit_server_lives $rlpid
if grep -q 'accept: ' "$work/rlimit.err"; then
	result FAIL "rlimit_no_emfile: $(grep -m1 'accept: ' "$work/rlimit.err")"
else
	result PASS "rlimit_no_emfile: the program never saw EMFILE"
fi
kill $rlpid 2>/dev/null

echo "== /dev/shm full (a private mount namespace with a 64 KiB tmpfs on it)"
# the regions are memfds, which live on the kernel's own tmpfs, not in
# /dev/shm; the statistics files (SDP_STAT_DIR) have their own tests
mkdir -p "$work/stat"
export SDP_STAT_DIR=$work/stat
dport=$((port + 6))
if unshare -m true 2>/dev/null; then
	unshare -m bash -c '
		mount -t tmpfs -o size=64k tmpfs /dev/shm || exit 3
		chmod 1777 /dev/shm
		dd if=/dev/zero of=/dev/shm/fill bs=4k count=64 2>/dev/null
		SDP_LOG=info SDP_LOG_FILE="$1/shmfull.log" LD_PRELOAD="$2" \
			"$3/echo_server" "$4" 0 >"$1/shmfull.out" \
			2>"$1/shmfull.err" &
		s=$!
		for i in $(seq 50); do
			grep -q ready "$1/shmfull.out" && break
			sleep 0.1
		done
		SDP_LOG=info SDP_LOG_FILE="$1/shmfull-bob.log" LD_PRELOAD="$2" \
			timeout 30 "$3/honest_client" "$4" 2 \
			>"$1/shmfull-bob.out" 2>&1
		rc=$?
		kill -0 $s || rc=4
		kill $s
		exit $rc' - "$work" "$preload" "$bin" $dport
	rc=$?
	if [ $rc = 0 ]; then
		result PASS "shm_full_carried: $(tail -1 "$work/shmfull-bob.out")"
	else
		result FAIL "shm_full_carried: exit $rc: $(tail -3 "$work/shmfull-bob.out" "$work/shmfull.err" 2>/dev/null | tr '\n' ' ')"
	fi
else
	result SKIP "shm_full: unshare -m is not allowed here"
fi

finish trust

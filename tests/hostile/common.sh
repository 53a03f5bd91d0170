# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/hostile/common.sh - sourced by run-hostile.sh and run-trust.sh: the
# build's paths and the shm provider's environment, the PASS/FAIL/SKIP
# tally and a client's verdict, the checks both make of an attacked echo server (it started, it
# lives, it read only its clients' bytes) and the closing summary.
#   . tests/hostile/common.sh WORKDIR_NAME [BUILD_DIR]

O=${2:-build}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$top/$O/tests/hostile
lib=$top/$O/lib/libsdp_switch.so
export SDP_PROVIDER_DIR=$top/$O/lib/sdp SDP_PROVIDERS=shm
unset SDP_RULE SDP_RULES SDP_DEFAULT SDP_PATH
. "$top/tests/lib/lib.sh"
sdp_preload "$lib"
sdp_workdir "$1"
pass=0 failn=0 skip=0

result() {	# STATUS NAME TEXT...
	case $1 in
	PASS) pass=$((pass + 1)) ;;
	FAIL) failn=$((failn + 1)) ;;
	SKIP) skip=$((skip + 1)) ;;
	esac
	echo "$*"
}

# server_ready NAME: waits up to 5 s for echo_server NAME to print "ready";
# if it does not, shows its stderr and returns 1
server_ready() {
	local i
	for i in $(seq 50); do
		grep -q ready "$work/$1.out" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "echo_server $1 did not start:" >&2
	cat "$work/$1.err" >&2
	return 1
}

alive() {	# NAME PID
	if kill -0 "$2" 2>/dev/null &&
	   ! grep -q '^State:.*Z' "/proc/$2/status" 2>/dev/null; then
		result PASS "$1: the server process lives"
	else
		result FAIL "$1: the server process is gone ($(tail -2 \
			"$work"/*.err 2>/dev/null | tr '\n' ' '))"
	fi
}

# outcome NAME OUT RC: a client's verdict from its exit status RC: PASS
# with the last line of its output OUT, or FAIL with its exit status and
# the last three lines; then the last lines the switch logged in $work
# (which connection closed, and why)
outcome() {
	local how="exit $3"

	if [ "$3" = 0 ]; then
		result PASS "$1: $(tail -1 "$2")"
		return
	fi
	[ "$3" = 124 ] && how="timed out (exit 124): a transfer stalled"
	result FAIL "$1: $how: $(tail -3 "$2" | tr '\n' ' ')"
	grep -H -i 'error\|warn\|closing\|reset\|stalled' "$work"/*.log \
		"$work"/*.err 2>/dev/null | tail -8 | sed 's/^/    /'
}

no_stray() {	# NAME SERVER
	if grep -q 'STRAY BYTES' "$work/$2.err"; then
		result FAIL "$1: $(grep -m1 'STRAY BYTES' "$work/$2.err")"
	else
		result PASS "$1: the server read only its clients' bytes"
	fi
}

# finish [PREFIX]: prints the tally and exits 0 when nothing failed; else
# keeps $work for its logs and exits 1
finish() {
	local sum="${1:+$1: }$pass passed, $failn failed, $skip skipped"
	if [ $failn = 0 ]; then
		echo "$sum"
		exit 0
	fi
	echo "$sum (logs in $work)"
	keep_work=1
	exit 1
}

# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/lib/lib.sh - sourced by the shell test drivers (bash): the LD_PRELOAD
# value for the switch (with the ASan runtime first in a SANITIZE=1 build),
# absolute paths of a driver's arguments, free ports and waiting for a
# listener, and a work directory whose background processes are killed
# and reaped on exit. tests/lib/sdptest.py gives Python the same.

sdp_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# sdp_preload LIB [ours]: sets $preload; under SANITIZE=1 also ASAN_OPTIONS
# unless the caller set it: leak checking off (the programs driven are not
# ours), or on when the second argument says the programs are the
# project's own (tests/integration).
sdp_preload() {
	preload=$1
	if [ "${SANITIZE:-0}" = 1 ]; then
		preload="$(${CC:-gcc} -print-file-name=libasan.so) $1"
		local leaks=detect_leaks=0:
		[ "${2:-}" = ours ] && leaks=
		export ASAN_OPTIONS=${ASAN_OPTIONS:-${leaks}abort_on_error=1}
	fi
}

# sdp_abs VAR...: makes the path in each named variable absolute (a
# relative one is taken from $PWD)
sdp_abs() {
	local v
	for v; do
		case ${!v} in
		/*) ;;
		*) printf -v "$v" %s "$PWD/${!v}" ;;
		esac
	done
}

# sdp_free_port: prints a TCP port of 127.0.0.1 that nothing uses now.
sdp_free_port() {
	PYTHONPATH=$sdp_lib_dir python3 -c \
		'import sdptest; print(sdptest.free_port())'
}

# sdp_wait_listen PORT: waits up to 5 s until a socket listens on
# 127.0.0.1:PORT; returns 1 if none did
sdp_wait_listen() {
	local i
	for i in $(seq 50); do
		ss -ltn 2>/dev/null | grep -q "127.0.0.1:$1 " && return 0
		sleep 0.1
	done
	return 1
}

# sdp_workdir NAME: sets $work (a fresh directory under /tmp) and $pids (add
# every background process to it); on exit they are killed and reaped and
# $work is removed, unless the script set keep_work=1 (its logs are named
# in a failure report).
sdp_workdir() {
	work=$(mktemp -d "/tmp/$1.XXXXXX")
	pids=()
	trap sdp_cleanup EXIT
}

sdp_cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	[ "${keep_work:-0}" = 1 ] || rm -rf "$work"
}

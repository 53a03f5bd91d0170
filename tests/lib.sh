# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/lib.sh - sourced by the shell test drivers: the LD_PRELOAD value for
# the switch (with the ASan runtime first in a SANITIZE=1 build), and a work
# directory whose background processes are killed and reaped on exit.

# sdp_preload LIB: sets $preload; under SANITIZE=1 also ASAN_OPTIONS (leak
# checking off: the programs driven are not ours) unless the caller set it.
sdp_preload() {
	preload=$1
	if [ "${SANITIZE:-0}" = 1 ]; then
		preload="$(${CC:-gcc} -print-file-name=libasan.so) $1"
		export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
	fi
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

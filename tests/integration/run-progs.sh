#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# run-progs.sh - runs each integration test program under LD_PRELOAD of the
# switch, over IPv4 and IPv6, each bounded in time; prints PASS/FAIL lines
# and exits non-zero when any failed.
#   run-progs.sh LIBSDP_SWITCH.so PROG...
set -u
lib=$1
shift
. "$(dirname "$0")/../lib/lib.sh"
sdp_abs lib
[ -f "$lib" ] || { echo "run-progs.sh: $lib not found; build it first" >&2; exit 2; }
# the programs are ours: under SANITIZE=1 their leaks are reported
sdp_preload "$lib" ours
fail=0
for prog in "$@"; do
	for fam in "" 6; do
		name="$(basename "$prog")${fam:+ (IPv6)}"
		if LD_PRELOAD="$preload" timeout 60 "$prog" $fam >/tmp/sdp-itest.$$ 2>&1; then
			echo "PASS $name"
		else
			echo "FAIL $name:"
			sed 's/^/    /' /tmp/sdp-itest.$$
			fail=1
		fi
	done
done
rm -f /tmp/sdp-itest.$$
exit $fail

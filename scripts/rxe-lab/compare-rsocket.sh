#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Side by side in one lab run: the same hashed 256 MiB (sdp-xfer, every byte
# checked) between two processes of one VM over plain kernel TCP, through
# rdma-core's rsocket preload (librspreload.so) and through the switch on
# verbs; prints the three throughputs and their ratios as a table.
#   scripts/rxe-lab/compare-rsocket.sh [BYTES]     (host: boots the VM)
# In the guest it runs itself with --guest. Under TCG the absolute figures
# are far below real hardware; compare the ratios within one run.
# SDP_TUNED="VAR=VALUE ..." adds a row: the switch with those settings
# (default: the RDMA-write path into an 8 MiB staging ring, which keeps the
# sender going while the receiver checks; "" leaves the row out).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" != --guest ]; then
	. "$here/common.sh"
	lab_image_ready || "$here/build-image.sh" || exit 2
	exec env LAB_TIMEOUT=${LAB_TIMEOUT:-900} "$here/run.sh" -c \
		"SDP_TUNED='${SDP_TUNED-SDP_PATH=write SDP_STAGING_SIZE=8388608}' bash scripts/rxe-lab/compare-rsocket.sh --guest ${1:-268435456}"
fi
tuned=${SDP_TUNED-SDP_PATH=write SDP_STAGING_SIZE=8388608}

bytes=${2:-268435456}
O=build-lab
RS=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
make -s O=$O $O/lib/libsdp_switch.so $O/lib/sdp/libsdp-verbs.so \
	$O/tests/sdp-xfer || exit 1
[ -f $RS ] || { echo "no $RS in the guest (package librdmacm1)"; exit 1; }
export SDP_PROVIDER_DIR=$PWD/$O/lib/sdp
export SDP_HELLO_TIMEOUT_MS=${SDP_HELLO_TIMEOUT_MS:-10000}
export SDP_UPGRADE_TIMEOUT_MS=${SDP_UPGRADE_TIMEOUT_MS:-10000}
ip=${LAB_IP:?}
port=$((20000 + RANDOM % 20000))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# one NAME EXPECT PRELOAD-ENV...: a transfer; prints the receiver's MB/s.
one()
{
	local name=$1 expect=$2
	shift 2
	port=$((port + 1))
	env "$@" timeout 600 $O/tests/sdp-xfer listen $port recv $bytes \
		$expect > "$out/$name.r" 2>&1 &
	local rpid=$!
	sleep 2
	env "$@" timeout 600 $O/tests/sdp-xfer connect $ip $port send $bytes \
		$expect > "$out/$name.s" 2>&1
	local src=$?
	wait $rpid
	local rrc=$?
	sed "s/^/  $name| /" "$out/$name.s" "$out/$name.r" >&2
	if [ $src != 0 ] || [ $rrc != 0 ]; then
		echo "FAIL"
		return 1
	fi
	sed -n 's/^RESULT receiver .*MBps=\([0-9.]*\).*/\1/p' "$out/$name.r"
}

echo "hashed transfer of $bytes bytes, one VM (TCG, 2 vCPUs), $ip, $(date -u +%F)"
tcp=$(one tcp "" X=1)
rs=$(one rsocket "" LD_PRELOAD=$RS)
sw=$(one switch verbs LD_PRELOAD=$PWD/$O/lib/libsdp_switch.so SDP_PROVIDERS=verbs)
tu=""
[ -z "$tuned" ] || tu=$(one tuned verbs LD_PRELOAD=$PWD/$O/lib/libsdp_switch.so \
	SDP_PROVIDERS=verbs $tuned)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'; }
echo
echo "| path | MB/s | vs TCP | vs rsocket |"
echo "|---|---|---|---|"
echo "| kernel TCP | $tcp | 1.00 | $(ratio "$tcp" "$rs") |"
echo "| rsocket preload (librspreload.so) | $rs | $(ratio "$rs" "$tcp") | 1.00 |"
echo "| sdp-switch on verbs | $sw | $(ratio "$sw" "$tcp") | $(ratio "$sw" "$rs") |"
[ -z "$tuned" ] ||
	echo "| sdp-switch on verbs, $tuned | $tu | $(ratio "$tu" "$tcp") | $(ratio "$tu" "$rs") |"
case "$tcp$rs$sw$tu" in *FAIL*) exit 1 ;; esac
exit 0

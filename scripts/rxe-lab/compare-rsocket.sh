#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Side by side in one lab run: the same hashed 256 MiB (sdp-xfer, every byte
# checked) between two processes of one VM over plain kernel TCP, through
# rdma-core's rsocket preload (librspreload.so) and through the switch on
# verbs; prints the three throughputs and their ratios as a table.
#   scripts/rxe-lab/compare-rsocket.sh [BYTES]     (host: boots the VM)
# In the guest it runs itself with --guest. Under TCG the absolute figures
# are far below real hardware; compare the ratios within one run.
# SDP_TUNED="VAR=VALUE ...[;VAR=VALUE ...]" adds rows: the switch with those
# settings, one row per ';'-separated group ("" or unset: no extra row).
# ROUNDS=N repeats the whole sequence N times, interleaved (TCP, rsocket,
# switch, tuned..., TCP, rsocket, ...), and prints every round's figures
# and a table of the medians.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" != --guest ]; then
	. "$here/common.sh"
	lab_image_ready || "$here/build-image.sh" || exit 2
	exec env LAB_TIMEOUT=${LAB_TIMEOUT:-1500} "$here/run.sh" -c \
		"ROUNDS=${ROUNDS:-1} SDP_TUNED='${SDP_TUNED:-}' bash scripts/rxe-lab/compare-rsocket.sh --guest ${1:-268435456}"
fi
tuned=${SDP_TUNED:-}
rounds=${ROUNDS:-1}

bytes=${2:-268435456}
O=build-lab
RS=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
make -s O=$O $O/lib/libsdp_switch.so $O/lib/sdp/libsdp-verbs.so \
	$O/tests/sdp-xfer || exit 1
[ -f $RS ] || { echo "no $RS in the guest (package librdmacm1)"; exit 1; }
export SDP_PROVIDER_DIR=$PWD/$O/lib/sdp
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

SW="LD_PRELOAD=$PWD/$O/lib/libsdp_switch.so SDP_PROVIDERS=verbs"
labels=("kernel TCP" "rsocket preload (librspreload.so)"
	"sdp-switch on verbs (defaults)")
envs=("X=1" "LD_PRELOAD=$RS" "$SW")
expects=("" "" verbs)
IFS=';' read -ra groups <<< "$tuned"
for g in "${groups[@]}"; do
	[ -n "${g// /}" ] || continue
	labels+=("sdp-switch on verbs, $g")
	envs+=("$SW $g")
	expects+=(verbs)
done
n=${#labels[@]}
declare -A res
failed=0

echo "hashed transfer of $bytes bytes, one VM (TCG, 2 vCPUs), $ip, $(date -u +%F), $rounds round(s)"
for ((r = 1; r <= rounds; r++)); do
	for ((i = 0; i < n; i++)); do
		# shellcheck disable=SC2086
		v=$(one "r$r.$i" "${expects[$i]}" ${envs[$i]})
		[ "$v" != FAIL ] || failed=1
		res[$i]="${res[$i]:-} $v"
		echo "round $r: ${labels[$i]}: $v MB/s"
	done
done

# median of the numbers given (FAIL entries ignored)
median()
{
	printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g |
		awk '{ v[NR] = $1 } END { if (!NR) print "FAIL"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'; }
for ((i = 0; i < n; i++)); do
	# shellcheck disable=SC2086
	med[$i]=$(median ${res[$i]})
done
echo
echo "| path | MB/s (median) | each round | vs TCP | vs rsocket |"
echo "|---|---|---|---|---|"
for ((i = 0; i < n; i++)); do
	echo "| ${labels[$i]} | ${med[$i]} |${res[$i]} | $(ratio "${med[$i]}" "${med[0]}") | $(ratio "${med[$i]}" "${med[1]}") |"
done
exit $failed

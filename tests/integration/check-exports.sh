#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# check-exports.sh - libsdp_switch.so must export exactly the functions its
# version script names (the interposed libc calls), nothing more or less.
#   check-exports.sh LIBSDP_SWITCH.so shim/libsdp_switch.map
set -eu
lib=$1
map=$2
want=$(sed -n '/global:/,/local:/p' "$map" | grep -v 'global:\|local:' |
	tr ' \t;' '\n\n\n' | grep -v '^$' | sort)
have=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWiV]$/ {print $3}' |
	sed 's/@.*//' | sort -u)
if [ "$want" = "$have" ]; then
	echo "PASS exports: $(echo "$have" | wc -l) symbols, as $map lists"
	exit 0
fi
echo "FAIL exports of $lib differ from $map (< missing, > unexpected):"
echo "$want" >/tmp/sdp-want.$$
echo "$have" >/tmp/sdp-have.$$
diff /tmp/sdp-want.$$ /tmp/sdp-have.$$ || true
rm -f /tmp/sdp-want.$$ /tmp/sdp-have.$$
exit 1

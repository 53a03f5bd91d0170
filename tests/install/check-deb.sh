#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# check-deb.sh - builds the Debian packages from a copy of the tree
# (dpkg-buildpackage -b -us -uc), lists them, installs them with dpkg -i,
# carries a transfer through the installed /usr/bin/sdp-run with no SDP_*
# variable set, and purges them. Needs root (dpkg -i); refuses to run where
# the packages are installed already (they are not ours to remove).
#   check-deb.sh [OUTDIR]    (the .deb files are copied there when given)
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
outdir=${1:-}
. "$top/tests/lib/lib.sh"
. "$top/tests/install/transfer.sh"
fail=0
pass() { echo "PASS $*"; }
failed() { echo "FAIL $*"; fail=1; }

if [ "$(id -u)" != 0 ]; then
	echo "check-deb.sh: needs root for dpkg -i (CI runs it as root)" >&2
	exit 2
fi
pkgs="libsdp-switch sdp-switch-provider-verbs sdp-switch-tools libsdp-switch-dev"
for p in $pkgs; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
		echo "check-deb.sh: $p is installed already; remove it first" >&2
		exit 2
	fi
done
sdp_workdir sdp-check-deb
installed=0
purge() {
	# shellcheck disable=SC2086
	[ $installed = 1 ] && dpkg --purge $pkgs >"$work/purge.log" 2>&1
	installed=0
}
trap 'purge; sdp_cleanup' EXIT

# 1. Build from a copy, so the tree keeps no debian/build or debian/tmp.
mkdir "$work/src"
tar -C "$top" --exclude=./build --exclude=./build-san --exclude=./.git \
	--exclude=./debian/build --exclude=./debian/tmp -cf - . |
	tar -C "$work/src" -xf -
if (cd "$work/src" && dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1; then
	pass "dpkg-buildpackage -b -us -uc"
else
	tail -40 "$work/build.log"
	failed "dpkg-buildpackage -b -us -uc (log above)"
	exit 1
fi
debs=()
for p in $pkgs; do
	f=$(ls "$work"/${p}_*.deb 2>/dev/null | head -1)
	if [ -z "$f" ]; then
		failed "package $p was not built"
		continue
	fi
	debs+=("$f")
	echo "---- dpkg -c $(basename "$f")"
	dpkg -c "$f"
done
[ -n "$outdir" ] && cp "${debs[@]}" "$outdir"/
[ $fail = 0 ] || exit 1

# 2. Install, use, remove.
if dpkg -i "${debs[@]}" >"$work/install.log" 2>&1; then
	installed=1
	pass "dpkg -i of the four packages"
else
	cat "$work/install.log"
	installed=1
	failed "dpkg -i"
	exit 1
fi
[ "$(command -v sdp-run)" = /usr/bin/sdp-run ] ||
	failed "sdp-run is not /usr/bin/sdp-run after dpkg -i"
installed_transfer /usr/bin/sdp-run /usr/bin/sdp-stat
if pkg-config --exists sdp-switch-provider &&
   [ -f "$(pkg-config --variable=versionscript sdp-switch-provider)" ]; then
	pass "pkg-config finds sdp-switch-provider and its version script"
else
	failed "pkg-config sdp-switch-provider after dpkg -i"
fi
purge
left=$(ls /etc/sdp-switch /usr/lib/*/sdp-switch /usr/bin/sdp-run 2>/dev/null)
if [ -z "$left" ]; then
	pass "dpkg --purge leaves nothing behind"
else
	failed "left after dpkg --purge: $left"
fi
exit $fail

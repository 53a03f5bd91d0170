#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# check-install.sh - installs the tree into a temporary DESTDIR and proves
# the installed tree works with no SDP_* variable set: a transfer through
# the installed sdp-run is carried by the shm provider (installed sdp-stat
# says so, the bytes arrive intact), the configuration files, manual pages
# and provider SDK are there, and a module built with the SDK's pkg-config
# file exports one symbol and loads in the installed sdp-conformance.
#   check-install.sh MAKE-ARGS...    (e.g. O=build SANITIZE=0)
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/lib/lib.sh"
. "$top/tests/install/transfer.sh"
sdp_workdir sdp-check-install
dest=$work/root
prefix=/usr/local
fail=0
pass() { echo "PASS $*"; }
failed() { echo "FAIL $*"; fail=1; }

if ! make -s -C "$top" "$@" install DESTDIR="$dest" PREFIX=$prefix \
	>"$work/install.log" 2>&1; then
	cat "$work/install.log"
	failed "make install DESTDIR=$dest PREFIX=$prefix"
	exit 1
fi
root=$dest$prefix

# 1. Every part is where the documentation says.
missing=
for f in lib/libsdp_switch.so lib/sdp-switch/libsdp-shm.so \
	 bin/sdp-run bin/sdp-stat bin/sdp-conformance \
	 include/sdp-switch/sdp_provider.h share/sdp-switch/provider.map \
	 lib/pkgconfig/sdp-switch-provider.pc \
	 share/man/man1/sdp-run.1 share/man/man1/sdp-stat.1 \
	 share/man/man1/sdp-conformance.1 share/man/man5/sdp-rules.5; do
	[ -e "$root/$f" ] || missing="$missing $prefix/$f"
done
for f in etc/sdp-switch/providers.conf etc/sdp-switch/rules.conf; do
	[ -e "$dest/$f" ] || missing="$missing /$f"
done
if [ -z "$missing" ]; then
	pass "installed: library, provider modules, tools, manual pages, SDK, configuration"
else
	failed "missing after make install:$missing"
fi
for m in "$root"/share/man/man*/*; do
	if ! LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$m" >/dev/null 2>"$work/man.err" ||
	   [ -s "$work/man.err" ]; then
		failed "manual page $m does not format cleanly: $(cat "$work/man.err")"
	fi
done

# 2. A transfer through the installed sdp-run with nothing set.
installed_transfer "$root/bin/sdp-run" "$root/bin/sdp-stat"

# 3. The provider SDK: a module built with the pkg-config file exports only
#    the entry point and is loaded by the installed conformance suite.
cat >"$work/nodev.c" <<'C'
/* A provider module that finds no device. */
#include <string.h>
#include <sdp_provider.h>

int sdp_provider_startup(const struct sdp_startup_args *args,
			 struct sdp_provider_info *info,
			 struct sdp_provider **prov)
{
	(void)args;
	(void)prov;
	info->version = SDP_SPI_VERSION;
	info->low_version = info->high_version = SDP_SPI_VERSION;
	strcpy(info->name, "nodev");
	strcpy(info->description, "a module without a device");
	return -SDP_ENODEVICE;
}
C
pcdir=$root/lib/pkgconfig
cflags=$(PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest \
	 pkg-config --cflags sdp-switch-provider)
map=$dest$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=versionscript \
	    sdp-switch-provider)
libs=$(PKG_CONFIG_PATH=$pcdir pkg-config --libs sdp-switch-provider |
       sed "s|--version-script=[^ ]*|--version-script=$map|")
if ${CC:-gcc} -shared -fPIC -fvisibility=hidden $cflags -o \
	"$work/libsdp-nodev.so" "$work/nodev.c" $libs 2>"$work/cc.err" &&
   [ "$(nm -D --defined-only "$work/libsdp-nodev.so" | awk '{ print $3 }')" = sdp_provider_startup ]; then
	pass "a module built with pkg-config sdp-switch-provider exports only sdp_provider_startup"
else
	failed "building a module with the installed SDK: $(cat "$work/cc.err")"
fi
clean_env_set
out=$("${clean_env[@]}" "$root/bin/sdp-conformance" \
	--provider "$work/libsdp-nodev.so" 2>&1)
if [ $? = 0 ] && grep -q "SKIP" <<<"$out" && grep -q " 0 failed" <<<"$out"; then
	pass "the installed sdp-conformance loads it (no device: every case skipped)"
else
	failed "installed sdp-conformance on the SDK-built module: $out"
fi
exit $fail

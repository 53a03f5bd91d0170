#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# check-config.sh - configuration never fails silently: every bad variable
# is said once on stderr with its value and what is accepted, an unopenable
# log file is said, a rules file's every error is reported with the bad
# value quoted, sdp-run --check prints the effective settings and fails on
# errors, sdp-run --explain names the deciding rule and the outcome.
#   check-config.sh SDP-RUN LIBSDP_SWITCH.so PROVIDER_DIR
set -uo pipefail

run=$1
lib=$2
provdir=$3
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/lib/lib.sh"
sdp_abs lib provdir
sdp_workdir sdp-check-config
fail=0
pass() { echo "PASS $*"; }
failed() { echo "FAIL $*"; fail=1; }
# a sanitizer build needs its runtime first: sdp-run puts the switch first,
# so let ASan accept the order
if [ "${SANITIZE:-0}" = 1 ]; then
	export LD_PRELOAD=$(${CC:-gcc} -print-file-name=libasan.so)
	export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0
fi
export SDP_PROVIDER_DIR=$provdir SDP_STAT_DIR=$work SDP_PROVIDERS=shm
R=("$run" --lib "$lib")

# expect_err NAME STDERR-FILE PATTERN COUNT: PATTERN on exactly COUNT lines
expect_err() {
	local n
	n=$(grep -c -- "$3" "$2")
	if [ "$n" = "$4" ]; then
		pass "$1"
	else
		failed "$1: '$3' on $n lines of stderr, expected $4:"
		cat "$2"
	fi
}

# 1. Bad values of variables: said once each, the default applies.
SDP_LOG=verbose "${R[@]}" true 2>"$work/e1"
expect_err "SDP_LOG=verbose is said once with the accepted levels" "$work/e1" \
	"SDP_LOG=verbose: expected off, error, warn, notice, info, debug or a number 0..7; using warn" 1
SDP_LOG=9 SDP_SPIN_US=abc "${R[@]}" true 2>"$work/e2"
expect_err "SDP_LOG=9 is refused, not taken as a level that hides errors" \
	"$work/e2" "SDP_LOG=9: expected" 1
expect_err "SDP_SPIN_US=abc names the range and the default" "$work/e2" \
	"SDP_SPIN_US=abc: expected a number from 0 to 4000000 .*; using the default 50" 1
SDP_RECV_BUFS=4 SDP_RECV_BUFS_IDLE=8 SDP_PATH=fast SDP_XSLOT=-1 \
	"${R[@]}" true 2>"$work/e3"
expect_err "SDP_RECV_BUFS_IDLE above SDP_RECV_BUFS is said" "$work/e3" \
	"SDP_RECV_BUFS_IDLE=8 is more than the 4 receive buffers" 1
expect_err "SDP_PATH=fast names the accepted words" "$work/e3" \
	"SDP_PATH=fast: expected auto, copy, read or write; using auto" 1
expect_err "SDP_XSLOT=-1 (a negative number) is refused" "$work/e3" \
	"SDP_XSLOT=-1: expected a number from 0 to 1" 1
SDP_LOG_FILE=$work/no/such/dir/log "${R[@]}" true 2>"$work/e4"
expect_err "an SDP_LOG_FILE that cannot be opened is said" "$work/e4" \
	"SDP_LOG_FILE=$work/no/such/dir/log: cannot open: No such file or directory; logging to stderr instead" 1
SDP_PROVIDER_DIR=$work "${R[@]}" true 2>"$work/e5"
expect_err "no provider module found is said at the default level" "$work/e5" \
	"no provider module could be loaded (from $work): every connection stays on TCP" 1
"${R[@]}" true 2>"$work/e6"
if [ ! -s "$work/e6" ]; then
	pass "a good configuration prints nothing"
else
	failed "a good configuration printed:"; cat "$work/e6"
fi

# 2. A rules file with three errors: each reported, the value quoted, and
#    sdp-run --check fails.
cat >"$work/bad.rules" <<'RULES'
# three mistakes and a good rule
tcp * [abc * 22
san connect ~/^redis/ 10.0.0.0/8 6379
both * * * 70000
tcp * ssh* * 22
RULES
"${R[@]}" --rules "$work/bad.rules" --check >"$work/c1.out" 2>"$work/c1.err"
rc=$?
cat "$work/c1.err" "$work/c1.out" >"$work/c1.all"
if [ $rc = 1 ] &&
   grep -q "bad.rules:2: program pattern '\[abc' has a '\[' without its '\]'" "$work/c1.err" &&
   grep -q "bad.rules:3: program pattern '~/^redis/' has a '/'" "$work/c1.err" &&
   grep -q "bad.rules:4: bad ports '70000'" "$work/c1.err" &&
   ! grep -q "bad.rules:5" "$work/c1.err" &&
   grep -q "every connection stays on TCP" "$work/c1.err" &&
   grep -q "^3 problems found" "$work/c1.out" &&
   grep -q "BROKEN" "$work/c1.out"; then
	pass "sdp-run --check: three errors of a rules file, each quoted, exit 1"
else
	failed "sdp-run --check on three errors (rc $rc):"; cat "$work/c1.all"
fi

# 3. --check on a good configuration: effective settings, exit 0; a
#    misspelt variable is noted.
SDP_SPIN_US=70 SDP_SPINUS=3 "${R[@]}" --check >"$work/c2.out" 2>"$work/c2.err"
rc=$?
if [ $rc = 0 ] && grep -qE '^  SDP_SPIN_US +70 +set ' "$work/c2.out" &&
   grep -qE '^  SDP_MSG_SIZE +16400 +default ' "$work/c2.out" &&
   grep -qE '^  shm +usable' "$work/c2.out" &&
   grep -q "statistics: published in $work" "$work/c2.out" &&
   grep -q "read by nothing (misspelt?): SDP_SPINUS" "$work/c2.out" &&
   grep -q "^configuration OK" "$work/c2.out" && [ ! -s "$work/c2.err" ]; then
	pass "sdp-run --check prints the effective settings, providers, statistics; notes a misspelt variable"
else
	failed "sdp-run --check on a good configuration (rc $rc):"
	cat "$work/c2.out" "$work/c2.err"
fi

# 4. --explain: the deciding rule and what the switch does.
printf 'tcp * ssh* * 22\nsan connect redis* 127.0.0.0/8 6379\n' >"$work/good.rules"
"${R[@]}" --rules "$work/good.rules" --explain /usr/bin/ssh 127.0.0.1:22 \
	>"$work/x1.out" 2>&1
"${R[@]}" --rules "$work/good.rules" --explain redis-cli 127.0.0.1:6379 \
	>"$work/x2.out" 2>&1
"${R[@]}" --rules "$work/good.rules" --explain curl 127.0.0.1:80 \
	>"$work/x3.out" 2>&1
if grep -q "rule 1 matches: tcp \* ssh\* \* 22" "$work/x1.out" &&
   grep -q "=> plain TCP: the switch leaves this connection alone" "$work/x1.out" &&
   grep -q "rule 2 matches: san connect redis\* 127.0.0.0/8 6379" "$work/x2.out" &&
   grep -q "=> the SAN or nothing" "$work/x2.out" &&
   grep -q "no rule matches: the default applies: both" "$work/x3.out" &&
   grep -q "else plain TCP (fallback reason: no-peer-switch)" "$work/x3.out"; then
	pass "sdp-run --explain names the deciding rule and the outcome"
else
	failed "sdp-run --explain:"; cat "$work/x1.out" "$work/x2.out" "$work/x3.out"
fi
"${R[@]}" --explain curl nohost.invalid:80 >"$work/x4.out" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "ERROR --explain: nohost.invalid:80" "$work/x4.out"; then
	pass "sdp-run --explain with an unknown host fails and says so"
else
	failed "sdp-run --explain nohost.invalid (rc $rc):"; cat "$work/x4.out"
fi
exit $fail

#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# run-fuzz.sh - runs each libFuzzer target for a bounded time over its seed
# corpus (tests/fuzz/corpus/<target>) plus a scratch corpus in the build dir.
#   run-fuzz.sh BUILD_DIR SECONDS TARGET...
set -u
dir=$1
secs=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
rc=0
for t in "$@"; do
	case $t in
	msg_decode) seed=$here/corpus/decode ;;
	*) seed=$here/corpus/$t ;;
	esac
	scratch=$dir/corpus-$t
	mkdir -p "$scratch"
	echo "fuzz_$t: ${secs}s over $seed"
	if ! "$dir/fuzz_$t" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=1024 -max_len=4096 -print_final_stats=1 \
		-artifact_prefix="$dir/fuzz_$t-" "$scratch" "$seed" \
		>"$dir/fuzz_$t.log" 2>&1; then
		echo "FAIL fuzz_$t: crash or leak; reproducer and log:"
		ls "$dir"/fuzz_"$t"-* 2>/dev/null
		grep -m1 -A12 'ERROR\|fuzz_[a-z_]*: accepted' "$dir/fuzz_$t.log"
		rc=1
	else
		echo "PASS fuzz_$t: $(grep -m1 'stat::number_of_executed_units' \
			"$dir/fuzz_$t.log" | awk '{print $2}') inputs"
	fi
done
exit $rc

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# run-checks.sh - what `make check` runs: every suite in turn, whatever the
# ones before it did, each with its time and result; a summary at the end,
# and exit status 1 if any suite failed.
#   run-checks.sh MAKE TARGET...
set -u

make_cmd=$1
shift
results=()
failed=()
t_all=$(date +%s)
for t in "$@"; do
	printf '\n==== make %s\n' "$t"
	t0=$(date +%s)
	$make_cmd --no-print-directory "$t"
	rc=$?
	secs=$(($(date +%s) - t0))
	if [ $rc = 0 ]; then
		results+=("$(printf '%-22s %5ds  ok' "$t" $secs)")
	else
		results+=("$(printf '%-22s %5ds  FAILED (exit %d)' "$t" $secs $rc)")
		failed+=("$t")
	fi
done
printf '\n==== make check: summary\n'
printf '%s\n' "${results[@]}"
printf '%-22s %5ds\n' total $(($(date +%s) - t_all))
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s (their output is above, under "==== make NAME")\n' \
		"${failed[*]}"
	exit 1
fi
echo "every suite passed"

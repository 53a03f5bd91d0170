#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# The lab subset CI runs: reuses or builds the cached image, then on
# soft-RoCE one VM builds everything the lab needs into build-lab/ and runs
# the conformance suite on verbs, and two VMs run two cross-VM switch tests
# (a 256 MiB hashed transfer over verbs, and redis-benchmark's 16
# connections opened at once against redis-server); then on soft-iWARP one VM runs the
# conformance suite on verbs and the switch between two processes: iperf3,
# a transfer and the epoll echo server.
# Prints each part's wall time; exits non-zero when any part fails.
# `make check-rxe` is the full run (LAB_TRANSPORT=siw for soft-iWARP).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
t0=$(date +%s)
if ! lab_image_ready; then
	"$here/build-image.sh" || { echo "rxe-lab ci: FAIL (image build)"; exit 2; }
fi
O=build-lab
rc=0
times=""

# part NAME CMD...: runs one part, notes its wall time and result.
part()
{
	local name=$1 s=$(date +%s) r
	shift
	echo "=== $name ==="
	"$@"
	r=$?
	[ $r = 0 ] || rc=1
	times="$times
  $name: $(( $(date +%s) - s )) s, $([ $r = 0 ] && echo PASS || echo "FAIL (exit $r)")"
}

conformance="
make -s O=$O $O/lib/sdp/libsdp-verbs.so $O/lib/sdp/libsdp-shm.so \
	$O/lib/libsdp_switch.so $O/tests/sdp-xfer $O/tests/sdp-echo \
	$O/bin/sdp-conformance || exit 1
SDP_PROVIDER_DIR=\$PWD/$O/lib/sdp timeout 420 $O/bin/sdp-conformance --provider verbs"

# The first VM builds the tree under TCG (about 6 of its minutes on a
# clean clone; the later parts reuse that build): its bound is 5 minutes
# longer, which a slow host needed (the suite itself takes about 2).
part "soft-RoCE: conformance suite on verbs (one VM)" \
	env LAB_TRANSPORT=rxe LAB_TIMEOUT=$((${LAB_TIMEOUT:-600} + 300)) \
	"$here/run.sh" -c "$conformance"
part "soft-RoCE: the switch across two VMs (xfer_up, 256 MiB; redis)" \
	env LAB_TRANSPORT=rxe LAB_TIMEOUT=${LAB_TIMEOUT:-600} \
	"$here/two-vm-switch.sh" xfer_up redis
part "soft-iWARP: conformance suite on verbs and the switch (one VM)" \
	env LAB_TRANSPORT=siw LAB_TIMEOUT=${LAB_TIMEOUT:-600} \
	"$here/run.sh" -c "$conformance || exit 1
SWT_STEPS='iperf3 xfer_up echo' SWT_BYTES=67108864 SWT_TIMEOUT=150 \
	bash tests/lab/switch-tests.sh local"
echo "rxe-lab ci:$times"
echo "rxe-lab ci: $([ $rc = 0 ] && echo PASS || echo FAIL) after $(( $(date +%s) - t0 )) s"
exit $rc

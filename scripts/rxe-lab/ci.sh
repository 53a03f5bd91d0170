#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# The lab subset CI runs (about 8 minutes on 2 cores): reuses or builds the
# cached image, then in one VM builds everything the lab needs into
# build-lab/ and runs the conformance suite on verbs; then one cross-VM
# switch test (a 256 MiB hashed transfer over verbs between two VMs).
# Exits non-zero when any part fails. `make check-rxe` is the full run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
t0=$(date +%s)
if ! lab_image_ready; then
	"$here/build-image.sh" || { echo "rxe-lab ci: FAIL (image build)"; exit 2; }
fi
O=build-lab
rc=0
echo "=== conformance suite on verbs (one VM) ==="
LAB_TIMEOUT=${LAB_TIMEOUT:-600} "$here/run.sh" -c "
make -s O=$O $O/lib/sdp/libsdp-verbs.so $O/lib/sdp/libsdp-shm.so \
	$O/lib/libsdp_switch.so $O/tests/sdp-xfer $O/tests/sdp-echo \
	$O/bin/sdp-conformance || exit 1
SDP_PROVIDER_DIR=\$PWD/$O/lib/sdp timeout 420 $O/bin/sdp-conformance --provider verbs
" || rc=1
echo "=== the switch across two VMs: 256 MiB each way is in check-rxe; CI: one way ==="
LAB_TIMEOUT=${LAB_TIMEOUT:-600} "$here/two-vm-switch.sh" xfer_up || rc=1
echo "rxe-lab ci: $([ $rc = 0 ] && echo PASS || echo FAIL) after $(( $(date +%s) - t0 )) s"
exit $rc

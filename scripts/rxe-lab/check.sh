#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# `make check-rxe`: makes sure the lab image exists, boots one VM that builds
# the verbs provider and runs its smoke test and the conformance suite over
# soft-RoCE and the switch between two processes (guest-check.sh), then the
# two-VM tests: the provider's (two-vm.sh) and the switch's (two-vm-switch.sh).
# Set SDP_LAB_SKIP_TWO_VM=1 to run the single VM only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
lab_image_ready || "$here/build-image.sh"
rc=0
LAB_TIMEOUT=${LAB_TIMEOUT:-1800} "$here/run.sh" -c 'bash scripts/rxe-lab/guest-check.sh' || rc=$?
if [ "${SDP_LAB_SKIP_TWO_VM:-0}" != 1 ]; then
	"$here/two-vm.sh" || rc=1
	"$here/two-vm-switch.sh" || rc=1
fi
echo "check-rxe: $([ $rc = 0 ] && echo PASS || echo "FAIL (exit $rc)")"
exit $rc

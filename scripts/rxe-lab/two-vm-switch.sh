#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# The switch across two lab VMs joined by a virtual cable (rxe1 or siw1 on
# each end): VM 1 builds and runs the server end of switch-tests.sh, VM 2 the
# client end; they step together through marker files in the shared tree.
# Exit 0 only when both ends pass every step.
#   scripts/rxe-lab/two-vm-switch.sh [STEP...]   (default: all steps)
# LAB_TIMEOUT bounds each VM (default 900); SWT_BYTES as in switch-tests.sh;
# SWT_ENV adds variables to both ends.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
lab_image_ready || "$here/build-image.sh" || exit 2
tree=$(cd "$here/../.." && pwd)
port=$(( 20000 + RANDOM % 20000 ))
sync=build-lab/.switch-sync.$$
steps=${*:-${SWT_STEPS:-}}
out=$(mktemp -d)
mkdir -p "$tree/build-lab"
rm -rf "${tree:?}/$sync"
trap 'rm -rf "$out" "${tree:?}/$sync"' EXIT
export LAB_TIMEOUT=${LAB_TIMEOUT:-900} LAB_SMP=1
env="SWT_STEPS='$steps' SWT_BYTES=${SWT_BYTES:-268435456}"
[ -n "$steps" ] || env="SWT_BYTES=${SWT_BYTES:-268435456}"
# SWT_ENV: more variables for both ends, e.g. SWT_ENV="SDP_LOG=info"
env="$env ${SWT_ENV:-}"

lab_two_vms "$out" "
$env bash tests/lab/switch-tests.sh server 192.168.100.1 $port $sync
" "
$env bash tests/lab/switch-tests.sh client 192.168.100.1 $port $sync
" " end"

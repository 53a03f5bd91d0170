#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Cross-host test: two lab VMs joined by a virtual cable (qemu socket
# netdev), rxe1 or siw1 (LAB_TRANSPORT) on each end. VM 1 builds the verbs
# provider and serves; VM 2 connects over the cable, RDMA-writes and reads
# a region and both check the bytes. Exit 0 only when both VMs pass.
#   scripts/rxe-lab/two-vm.sh      (LAB_TIMEOUT bounds each VM, default 900)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
lab_image_ready || "$here/build-image.sh" || exit 2
tree=$(cd "$here/../.." && pwd)
port=$(( 20000 + RANDOM % 20000 ))
mark=build-lab/.two-vm-ready.$$
rm -f "$tree/$mark"
out=$(mktemp -d)
trap 'rm -rf "$out"; rm -f "$tree/$mark"' EXIT
export LAB_TIMEOUT=${LAB_TIMEOUT:-900} LAB_SMP=1

lab_two_vms "$out" "
make -s O=build-lab build-lab/lib/sdp/libsdp-verbs.so build-lab/tests/test_verbs || exit 1
touch $mark
SDP_PROVIDER_DIR=build-lab/lib/sdp timeout 600 build-lab/tests/test_verbs --serve 192.168.100.1 $port
" "
for i in \$(seq 600); do [ -f $mark ] && break; sleep 1; done
SDP_PROVIDER_DIR=build-lab/lib/sdp timeout 600 build-lab/tests/test_verbs --connect 192.168.100.1 $port
" ""

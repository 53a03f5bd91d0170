#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Runs in the lab guest under sdp-lab-init, copied fresh by run.sh on each
# boot: network, the RDMA transport ($LAB_TRANSPORT: soft-RoCE rxe0 or
# soft-iWARP siw0 on the NIC, rxe1 or siw1 on the optional link to a second
# VM), the /src share, then the command; its output goes to the console and
# /lab/output.log, its exit code to /lab/rc (3: the transport did not come up).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C
. /lab/env
ulimit -l unlimited
hostname sdplab
ip link set lo up
modprobe -q virtio_net

# NICs by MAC: qemu's default for user networking, ours for the link.
nic_with_mac()
{
	local p tries
	for tries in $(seq 50); do
		for p in /sys/class/net/*; do
			case "$(cat "$p/address")" in $1) echo "${p##*/}"; return 0 ;; esac
		done
		sleep 0.1
	done
	return 1
}

nic=$(nic_with_mac 52:54:00:12:34:56) || echo "[lab] no user-net NIC"
if [ -n "$nic" ]; then
	ip link set "$nic" up
	ip addr add 10.0.2.15/24 dev "$nic"
	ip route add default via 10.0.2.2 dev "$nic"
fi
export LAB_IP=10.0.2.15
LAB_TRANSPORT=${LAB_TRANSPORT:-rxe}
case $LAB_TRANSPORT in
rxe) mod=rdma_rxe ;;
siw) mod=siw ;;
*) mod="" ;;
esac
export LAB_TRANSPORT

# transport_fail WHAT: the command never runs on a missing transport.
transport_fail()
{
	echo "[lab] error: transport $LAB_TRANSPORT: $*; the command was not run"
	echo "[lab] error: transport $LAB_TRANSPORT: $*" > /lab/output.log
	echo 3 > /lab/rc
	sync
	exit 0
}

[ -n "$mod" ] || transport_fail "unknown (LAB_TRANSPORT is rxe or siw)"
err=$(modprobe "$mod" 2>&1) ||
	transport_fail "modprobe $mod failed: ${err:-no message} (kernel $(uname -r); an image without the module needs scripts/rxe-lab/build-image.sh --force)"
modprobe ib_uverbs && modprobe rdma_ucm ||
	transport_fail "modprobe ib_uverbs/rdma_ucm failed"
if [ -n "$nic" ]; then
	err=$(rdma link add ${LAB_TRANSPORT}0 type $LAB_TRANSPORT netdev "$nic" 2>&1) ||
		transport_fail "rdma link add ${LAB_TRANSPORT}0 on $nic failed: $err"
fi
if [ -n "$LAB_LINK_IP" ]; then
	link=$(nic_with_mac '52:54:00:5d:00:*') || echo "[lab] no link NIC"
	ip link set "$link" up
	ip addr add "$LAB_LINK_IP/24" dev "$link"
	err=$(rdma link add ${LAB_TRANSPORT}1 type $LAB_TRANSPORT netdev "$link" 2>&1) ||
		transport_fail "rdma link add ${LAB_TRANSPORT}1 on $link failed: $err"
	export LAB_LINK_IP
fi
mkdir -p /src
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 src /src ||
	echo "[lab] mounting the source share failed"
cd /src
echo "[lab] ready at $(cut -d' ' -f1 /proc/uptime)s: $(uname -r), transport $LAB_TRANSPORT; $(rdma link show | tr '\n' ' ')"
bash /lab/cmd.sh 2>&1 | tee /lab/output.log
echo "${PIPESTATUS[0]}" > /lab/rc
sync

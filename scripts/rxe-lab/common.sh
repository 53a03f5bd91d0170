# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Shared settings of the sdp-switch soft-RoCE lab: where the cached image
# lives, which Debian packages the guest gets, and small helpers. Sourced by
# build-image.sh, run.sh, two-vm.sh and two-vm-switch.sh; never run on its
# own.

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_CACHE=${SDP_LAB_CACHE:-/var/cache/sdp-lab}
LAB_SUITE=bookworm

# Guest packages on top of debootstrap's minbase: the kernel (ships
# rdma_rxe.ko), rdma-core user space and its headers, the tool chain and Check
# (the conformance suite and unit tests build in the guest), the programs the
# integration tests and benchmarks drive (iperf3, sockperf, redis-server with
# redis-benchmark, nginx with wrk).
LAB_PKGS="linux-image-amd64 initramfs-tools kmod iproute2 procps udev
	rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest
	libibverbs-dev librdmacm-dev build-essential pkg-config make
	check libsubunit-dev iperf3 sockperf netcat-openbsd strace
	python3 redis-server redis-tools nginx-light wrk
	${SDP_LAB_EXTRA_PKGS:-}"
LAB_PKGS=$(echo $LAB_PKGS)

lab_say()
{
	echo "[sdp-lab] $*" >&2
}

lab_die()
{
	echo "[sdp-lab] error: $*" >&2
	exit 2
}

# The image is valid when its stamp records the current package list; a
# changed list means build-image.sh must run again.
lab_image_stamp()
{
	echo "suite=$LAB_SUITE pkgs=$LAB_PKGS siw=source"
}

lab_image_ready()
{
	[ -f "$LAB_CACHE/vmlinuz" ] && [ -f "$LAB_CACHE/initrd.img" ] &&
	[ -f "$LAB_CACHE/rootfs.img" ] && [ -f "$LAB_CACHE/stamp" ] &&
	[ "$(cat "$LAB_CACHE/stamp")" = "$(lab_image_stamp)" ]
}

# lab_two_vms OUT SERVER_CMD CLIENT_CMD WHAT: two lab VMs joined by a
# virtual cable (qemu socket netdev): VM 1 (192.168.100.1) runs SERVER_CMD,
# VM 2 (192.168.100.2) CLIENT_CMD two seconds later; their logs go to OUT
# and are shown with each VM's exit status, its role named "server" or
# "client" followed by WHAT (" end", or ""). Returns 0 only when both VMs
# exit 0. LAB_CABLE=udp makes the cable UDP datagrams instead of a TCP
# stream: a full receiver drops frames, as a wire does, where the stream
# holds the sender's transmit queue (a stream cable wedged for good under
# iperf3 -P 4 over soft-iWARP, the sender's NETDEV WATCHDOG firing).
lab_two_vms()
{
	local out=$1 srv=$2 cli=$3 what=$4 cable vm1 rc1 rc2 l1 l2

	cable=$(( 30000 + RANDOM % 20000 ))
	l1=listen:$cable
	l2=connect:$cable
	if [ "${LAB_CABLE:-tcp}" = udp ]; then
		l1=udp:$cable:$((cable + 1))
		l2=udp:$((cable + 1)):$cable
	fi
	LAB_LINK=$l1 LAB_LINK_IP=192.168.100.1 \
		"$LAB_DIR/run.sh" -c "$srv" > "$out/vm1.log" 2>&1 &
	vm1=$!
	sleep 2
	LAB_LINK=$l2 LAB_LINK_IP=192.168.100.2 \
		"$LAB_DIR/run.sh" -c "$cli" > "$out/vm2.log" 2>&1
	rc2=$?
	wait $vm1
	rc1=$?
	echo "--- VM 1 (server$what, 192.168.100.1), exit $rc1"
	cat "$out/vm1.log"
	echo "--- VM 2 (client$what, 192.168.100.2), exit $rc2"
	cat "$out/vm2.log"
	[ $rc1 = 0 ] && [ $rc2 = 0 ]
}

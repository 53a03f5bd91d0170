#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Boots the sdp-switch lab VM (qemu, TCG) from the cached image, runs one
# shell command in it against a host directory shared over 9p (/src in the
# guest, the working directory), powers off and exits with its exit code.
#
#   scripts/rxe-lab/run.sh [-d DIR] [-v] -c 'COMMAND'
#   scripts/rxe-lab/run.sh [-d DIR] [-v] -- PROGRAM ARGS...
#
# DIR defaults to the project tree. Exit 125: the guest reported no exit
# code (boot failure, LAB_TIMEOUT, crash); the console log is kept. Exit 3:
# the transport did not come up (module missing, device not created).
# Environment:
#   LAB_TIMEOUT=S   wall-clock bound of the whole run (default 1200)
#   LAB_MEM=MiB (2048)  LAB_SMP=N (2)
#   LAB_LINK=listen:PORT|connect:PORT|udp:PORT:PEER_PORT
#   LAB_LINK_IP=192.168.100.N
#                   a second NIC joined by a qemu socket to another lab VM
#                   (a TCP stream, or UDP datagrams between two local
#                   ports), with the transport's second device on it
#   LAB_TRANSPORT=rxe|siw  soft-RoCE (default) or soft-iWARP devices
#   LAB_KEEP=1      keep the run directory even on success
set -euo pipefail
. "$(dirname "$0")/common.sh"

dir=$(cd "$LAB_DIR/../.." && pwd)
cmd=""
verbose=0
while [ $# -gt 0 ]; do
	case "$1" in
	-d) dir=$(cd "$2" && pwd); shift 2 ;;
	-v) verbose=1; shift ;;
	-c) cmd=$2; shift 2; break ;;
	--) shift; cmd=$(printf '%q ' "$@"); break ;;
	*) lab_die "unknown argument '$1'; usage: run.sh [-d DIR] [-v] -c CMD | -- PROG ARGS" ;;
	esac
done
transport=${LAB_TRANSPORT:-rxe}
case $transport in
rxe|siw) ;;
*) lab_die "LAB_TRANSPORT must be rxe (soft-RoCE) or siw (soft-iWARP), not '$transport'" ;;
esac
[ -n "$cmd" ] || lab_die "no command; usage: run.sh [-d DIR] [-v] -c CMD | -- PROG ARGS"
lab_image_ready || lab_die "no up-to-date image in $LAB_CACHE; run scripts/rxe-lab/build-image.sh (as root)"
command -v qemu-system-x86_64 >/dev/null ||
	lab_die "qemu-system-x86_64 missing: apt-get install qemu-system-x86 qemu-utils"

mkdir -p "$LAB_CACHE/runs"
run=$(mktemp -d "$LAB_CACHE/runs/run.XXXXXX")
cp "$LAB_DIR/guest/setup.sh" "$run/setup.sh"
printf '%s\n' "$cmd" > "$run/cmd.sh"
{
	printf 'LAB_LINK_IP=%q\n' "${LAB_LINK_IP:-}"
	printf 'LAB_VERBOSE=%q\n' "$verbose"
	printf 'LAB_TRANSPORT=%q\n' "$transport"
} > "$run/env"

qemu=(qemu-system-x86_64 -accel tcg -cpu max
	-smp "${LAB_SMP:-2}" -m "${LAB_MEM:-2048}"
	-machine pc -nographic -no-reboot -nodefaults -serial stdio
	-kernel "$LAB_CACHE/vmlinuz" -initrd "$LAB_CACHE/initrd.img"
	-append "console=ttyS0 root=/dev/vda rw rootfstype=ext4 init=/sbin/sdp-lab-init quiet loglevel=3 panic=-1 mitigations=off"
	-drive "file=$LAB_CACHE/rootfs.img,format=raw,if=virtio,cache=unsafe"
	-snapshot
	-virtfs "local,path=$run,mount_tag=ctl,security_model=none,id=ctl"
	-virtfs "local,path=$dir,mount_tag=src,security_model=none,id=src"
	-netdev user,id=n0 -device virtio-net-pci,netdev=n0,romfile=)
if [ -n "${LAB_LINK:-}" ]; then
	mode=${LAB_LINK%%:*}
	port=${LAB_LINK#*:}
	case "$mode" in
	listen|connect) nd="socket,id=n1,$mode=127.0.0.1:$port" ;;
	udp) nd="socket,id=n1,udp=127.0.0.1:${port#*:},localaddr=127.0.0.1:${port%%:*}" ;;
	*) lab_die "LAB_LINK must be listen:PORT, connect:PORT or udp:PORT:PEER_PORT, not '$LAB_LINK'" ;;
	esac
	[ -n "${LAB_LINK_IP:-}" ] || lab_die "LAB_LINK needs LAB_LINK_IP (192.168.100.N)"
	qemu+=(-netdev "$nd"
	       -device "virtio-net-pci,netdev=n1,romfile=,mac=52:54:00:5d:00:$(printf %02x "${LAB_LINK_IP##*.}")")
fi

lab_say "booting (TCG, $transport), run dir $run"
t0=$(date +%s)
set +e
if [ $verbose = 1 ]; then
	timeout "${LAB_TIMEOUT:-1200}" "${qemu[@]}" < /dev/null 2>&1 | tee "$run/console.log"
else
	timeout "${LAB_TIMEOUT:-1200}" "${qemu[@]}" < /dev/null > "$run/console.log" 2>&1
fi
set -e
if [ -f "$run/rc" ]; then
	[ $verbose = 1 ] || cat "$run/output.log"
	rc=$(cat "$run/rc")
else
	lab_say "the guest reported no exit code (timeout ${LAB_TIMEOUT:-1200} s or boot failure); last console lines:"
	tail -n 25 "$run/console.log" >&2
	rc=125
fi
lab_say "exit $rc after $(( $(date +%s) - t0 )) s"
if [ "$rc" = 0 ] && [ "${LAB_KEEP:-0}" != 1 ]; then
	rm -rf "$run"
else
	lab_say "kept $run (console.log, output.log)"
fi
exit "$rc"

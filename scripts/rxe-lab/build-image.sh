#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Builds the sdp-switch lab image from Debian packages: a bookworm rootfs with
# a kernel that has rdma_rxe (soft-RoCE), soft-iWARP's siw module built from
# Debian's own kernel source (Debian's kernel config leaves it out),
# rdma-core, the tool chain and Check, packed into an ext4 image in
# $SDP_LAB_CACHE (default /var/cache/sdp-lab), outside the tree.
#
#   scripts/rxe-lab/build-image.sh [--force]
#
# Skips all work when the cached image already matches the package list.
# Needs root and the host packages qemu-system-x86 qemu-utils debootstrap
# e2fsprogs. The Debian mirror is taken from the host's apt configuration.
set -euo pipefail
. "$(dirname "$0")/common.sh"

force=0
[ "${1:-}" = --force ] && force=1

[ "$(id -u)" = 0 ] || lab_die "run as root: debootstrap and chroot need it"
for tool in debootstrap mke2fs qemu-system-x86_64; do
	command -v "$tool" >/dev/null ||
		lab_die "$tool not found; install: apt-get install qemu-system-x86 qemu-utils debootstrap e2fsprogs"
done

if [ $force = 0 ] && lab_image_ready; then
	lab_say "image in $LAB_CACHE is up to date (use --force to rebuild)"
	exit 0
fi

mkdir -p "$LAB_CACHE"
exec 9> "$LAB_CACHE/.build.lock"
flock -w 900 9 || lab_die "another build holds $LAB_CACHE/.build.lock"

ROOT=$LAB_CACHE/rootfs
LOG=$LAB_CACHE/build.log
: > "$LOG"

# Mirror: first URI of the host's deb822 sources, else the first plain
# "deb" line that is not the security archive.
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
	 awk '$1 == "URIs:" { print $2; exit }')
if [ -z "$mirror" ]; then
	mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		 2>/dev/null | awk '$1 == "deb" && !/security/ { print $2; exit }')
fi
[ -n "$mirror" ] || lab_die "no Debian mirror found in /etc/apt; configure apt first"

unmount_all()
{
	local m
	for m in dev sys proc; do
		if mountpoint -q "$ROOT/$m"; then
			umount -R "$ROOT/$m" || true
		fi
	done
}
trap unmount_all EXIT

start=$(date +%s)
[ $force = 1 ] && rm -rf "$ROOT"
if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
	lab_say "debootstrap $LAB_SUITE from $mirror (log: $LOG)"
	rm -rf "$ROOT"
	debootstrap --variant=minbase "$LAB_SUITE" "$ROOT" "$mirror" >> "$LOG" 2>&1 ||
		lab_die "debootstrap failed; see $LOG"
fi

# The host's sources include -updates and -security, where the current
# kernel lives; they are removed from the image again afterwards.
mkdir -p "$ROOT/etc/apt/sources.list.d"
rm -f "$ROOT/etc/apt/sources.list"
cat /etc/apt/sources.list.d/*.sources > "$ROOT/etc/apt/sources.list.d/lab.sources" 2>/dev/null || true
cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list > "$ROOT/etc/apt/sources.list.d/lab.list" 2>/dev/null || true
printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"

# A small initrd: the root file system is ext4 on virtio-blk, nothing else.
mkdir -p "$ROOT/etc/initramfs-tools/conf.d"
printf 'MODULES=list\nCOMPRESS=gzip\n' > "$ROOT/etc/initramfs-tools/conf.d/sdp-lab.conf"
printf 'virtio_pci\nvirtio_blk\nvirtio_net\next4\n' > "$ROOT/etc/initramfs-tools/modules"

mount -t proc proc "$ROOT/proc"
mount -t sysfs sysfs "$ROOT/sys"
mount --rbind /dev "$ROOT/dev"
lab_say "installing guest packages (log: $LOG)"
chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
	sh -c "apt-get update -q && apt-get install -y -q --no-install-recommends $LAB_PKGS" \
	>> "$LOG" 2>&1 || lab_die "package installation failed; see $LOG"
chroot "$ROOT" update-initramfs -u -k all >> "$LOG" 2>&1 ||
	lab_die "update-initramfs failed; see $LOG"

# soft-iWARP: Debian builds its kernels without CONFIG_RDMA_SIW, so the
# module is compiled here from the linux-source package of the same kernel
# series against the image kernel's headers, into /lib/modules/KVER/updates.
kver=$(ls "$ROOT/lib/modules" | sort -V | tail -n 1)
kser=$(echo "$kver" | cut -d. -f1,2)
lab_say "building soft-iWARP (siw) for $kver from linux-source-$kser (log: $LOG)"
chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
	apt-get install -y -q --no-install-recommends \
	"linux-headers-$kver" "linux-source-$kser" >> "$LOG" 2>&1 ||
	lab_die "installing linux-headers-$kver and linux-source-$kser failed; see $LOG"
chroot "$ROOT" sh -ec "
	rm -rf /usr/src/siw && mkdir /usr/src/siw
	tar -xJf /usr/src/linux-source-$kser.tar.xz -C /usr/src/siw \
		--strip-components=5 linux-source-$kser/drivers/infiniband/sw/siw
	make -C /usr/src/linux-headers-$kver M=/usr/src/siw CONFIG_RDMA_SIW=m modules
	install -D -m 644 /usr/src/siw/siw.ko /lib/modules/$kver/updates/siw.ko
	depmod $kver
	rm -rf /usr/src/siw
	apt-get purge -y -q linux-source-$kser
" >> "$LOG" 2>&1 || lab_die "building the siw module failed; see $LOG"
chroot "$ROOT" apt-get clean >> "$LOG" 2>&1
unmount_all
rm -f "$ROOT/etc/apt/sources.list.d/lab.sources" "$ROOT/etc/apt/sources.list.d/lab.list"

# Guest configuration: our PID 1, host name, memlock for verbs.
install -m 755 "$LAB_DIR/guest/init" "$ROOT/sbin/sdp-lab-init"
echo sdplab > "$ROOT/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 sdplab\n' > "$ROOT/etc/hosts"
printf '/dev/vda / ext4 rw 0 1\n' > "$ROOT/etc/fstab"
mkdir -p "$ROOT/etc/security/limits.d" "$ROOT/lab" "$ROOT/src"
printf '* - memlock unlimited\n' > "$ROOT/etc/security/limits.d/sdp-lab.conf"

[ -f "$ROOT/lib/modules/$kver/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko" ] ||
	lab_die "kernel $kver has no rdma_rxe module"
[ -f "$ROOT/lib/modules/$kver/updates/siw.ko" ] ||
	lab_die "kernel $kver has no siw module after the build; see $LOG"
cp "$ROOT/boot/vmlinuz-$kver" "$LAB_CACHE/vmlinuz.new"
cp "$ROOT/boot/initrd.img-$kver" "$LAB_CACHE/initrd.img.new"

lab_say "creating the ext4 image"
rm -f "$LAB_CACHE/rootfs.img.new"
mke2fs -q -t ext4 -L sdplab -d "$ROOT" "$LAB_CACHE/rootfs.img.new" 4G >> "$LOG" 2>&1 ||
	lab_die "mke2fs failed; see $LOG"
for f in vmlinuz initrd.img rootfs.img; do
	mv -f "$LAB_CACHE/$f.new" "$LAB_CACHE/$f"
done
echo "$kver" > "$LAB_CACHE/kernel-version"
lab_image_stamp > "$LAB_CACHE/stamp"
lab_say "image ready in $LAB_CACHE: kernel $kver, $(( $(date +%s) - start )) s"

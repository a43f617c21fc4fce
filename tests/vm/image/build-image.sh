#!/bin/sh
# Build the corral VM test guest: a Debian 12 root file system as an ext4
# image plus the kernel and initrd installed inside it (so /lib/modules
# matches the kernel that boots).
#
# usage: build-image.sh OUTDIR PACKAGES_FILE BOOT_DIR
#   OUTDIR         must not exist; created atomically (built in OUTDIR.tmp)
#   PACKAGES_FILE  package names, one a line, '#' comments
#   BOOT_DIR       files baked into the image: corral-vm-boot (the driver
#                  that mounts the 9p share and runs the checks found there)
#                  and corral-vm-check.service
#
# The apt sources are the host's own (/etc/apt/sources.list and
# sources.list.d/*.list|*.sources, deb822 included): no mirror is hard-coded.
# Output: OUTDIR/rootfs.ext4, OUTDIR/vmlinuz, OUTDIR/initrd.img.
set -eu

out=$1
pkgfile=$2
bootdir=$3
tmp=$out.tmp
root=$tmp/root

rm -rf "$tmp"
mkdir -p "$tmp"

set --
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
	/etc/apt/sources.list.d/*.sources; do
	[ -s "$f" ] && set -- "$@" "$f"
done
if [ $# -eq 0 ]; then
	echo "build-image: no apt sources configured on this host" >&2
	exit 1
fi

pkgs=$(sed -e 's/#.*//' "$pkgfile" | tr -s ' \n' ',' | sed -e 's/^,//;s/,$//')

# virtio and ext4 are modules in Debian's kernel: the initrd must carry them
# to find the root disk, and the 9p ones to reach the share early. They are
# listed in modules.d (not a conffile) before the kernel is installed, so its
# postinst builds the right initrd once; MODULES=list keeps the initrd to
# these (and their dependencies) instead of every storage driver, which
# makes building it several times faster.
mods='virtio_pci virtio_blk ext4 crc32c_generic 9p 9pnet 9pnet_virtio netfs'

# Kernel modules the guest never loads (no GPU, sound, wireless, USB, ...):
# not unpacking them saves most of the kernel package's write time and size.
kexcl=''
for d in drivers/gpu drivers/media drivers/net/wireless drivers/infiniband \
	drivers/staging drivers/usb drivers/bluetooth drivers/iio drivers/hid \
	drivers/scsi drivers/isdn drivers/input/touchscreen drivers/mtd \
	drivers/net/ethernet drivers/net/can drivers/hwmon sound net/wireless \
	net/bluetooth net/mac80211; do
	kexcl="$kexcl --dpkgopt=path-exclude=/lib/modules/*/kernel/$d/*"
	kexcl="$kexcl --dpkgopt=path-exclude=/usr/lib/modules/*/kernel/$d/*"
done

# The path-exclude globs are for dpkg, not for this shell.
set -f
mmdebstrap --variant=apt --mode=root \
	--include="$pkgs" \
	--dpkgopt=force-unsafe-io \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	$kexcl \
	--essential-hook='mkdir -p "$1/usr/share/initramfs-tools/modules.d" \
		"$1/etc/initramfs-tools/conf.d" &&
		echo MODULES=list > "$1/etc/initramfs-tools/conf.d/corral-vm" &&
		for m in '"$mods"'; do echo $m; done \
		> "$1/usr/share/initramfs-tools/modules.d/corral-vm"' \
	--customize-hook="cp '$bootdir/corral-vm-boot' \"\$1/usr/local/sbin/corral-vm-boot\"" \
	--customize-hook="cp '$bootdir/corral-vm-check.service' \"\$1/etc/systemd/system/\"" \
	--customize-hook='chmod 0755 "$1/usr/local/sbin/corral-vm-boot" &&
		ln -sf /etc/systemd/system/corral-vm-check.service \
		"$1/etc/systemd/system/multi-user.target.wants/corral-vm-check.service" &&
		echo corral-vm > "$1/etc/hostname" &&
		printf "/dev/vda / ext4 rw,relatime 0 1\n" > "$1/etc/fstab" &&
		rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
	--customize-hook='rm -f \
		"$1"/etc/systemd/system/multi-user.target.wants/docker.service \
		"$1"/etc/systemd/system/sockets.target.wants/docker.socket \
		"$1"/etc/systemd/system/multi-user.target.wants/containerd.service' \
	bookworm "$root" "$@"
set +f

# lsinitramfs may be absent on the host: list from inside the guest tree.
chroot "$root" sh -c 'lsinitramfs /boot/initrd.img-*' > "$tmp/initrd.list"
for m in $mods; do
	grep -q "/$m\.ko" "$tmp/initrd.list" || {
		echo "build-image: module $m missing from the initrd" >&2
		exit 1
	}
done
rm -f "$tmp/initrd.list"

cp "$root"/boot/vmlinuz-* "$tmp/vmlinuz"
cp "$root"/boot/initrd.img-* "$tmp/initrd.img"

# Room for the corral stage, the journal and the checks' files, and the
# container image guest/engine.sh loads into docker (~130 MB, stored twice
# while it loads).
size_mb=$(( $(du -sm "$root" | cut -f1) + 1280 ))
mkfs.ext4 -q -F -L corral-root -d "$root" "$tmp/rootfs.ext4" "${size_mb}M"
rm -rf "$root"
mv "$tmp" "$out"

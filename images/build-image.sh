#!/bin/bash
# Build an hcasim guest image of one Debian release: its generic amd64 kernel,
# a tiny initramfs made of its busybox-static plus the kernel's own virtio/ext4
# modules, and an ext4 root filesystem with the packages of packages.txt, all
# from that release's packages.
#
#   debian12  bookworm (Debian 12: kernel 6.1, rdma-core 44)
#   debian13  trixie   (Debian 13: kernel 6.12, rdma-core 56)
#   unstable  sid      (Debian unstable: kernel 7.x, rdma-core 6x)
#
# The release's package lists are kept under $HCASIM_CACHE/apt/<release> (the
# same apt setup as tools/hcasim/kernels.py; the machine's own apt sources
# are not touched) and refreshed when older than a day.  The result is cached
# under $HCASIM_CACHE/image/<key>, where <key> hashes the release, this
# script, the package list, the files we add to the guest and the candidate
# version of every listed package; a new kernel revision in the archive
# therefore produces a new image.  The directory is linked to LINK.
#
# With --build-root, the image also gets a build root (<key>/buildroot): a
# minimal chroot of the same release with its gcc, make and the headers of
# the image's kernel, in which modules for that kernel are built
# (tools/hcasim/build.py: kverbs, the driver under test). A newer release's
# kernel wants its own compiler and build programs, not this host's.
#
# Usage: images/build-image.sh NAME LINK [--build-root]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${HCASIM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hcasim}
name=${1:?usage: build-image.sh debian12|debian13|unstable LINK}
link=$(realpath -ms "${2:?usage: build-image.sh NAME LINK}")  # the link itself, not its target
want_build_root=${3:-}
mirror=${HCASIM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${HCASIM_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
case "$name" in
debian12) release=bookworm ;;
debian13) release=trixie ;;
unstable) release=sid ;;
*) echo "image: error: no image '$name' (debian12, debian13, unstable)" >&2; exit 2 ;;
esac

step() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf 'image: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "building the guest image needs root (debootstrap, chroot)"
for tool in debootstrap mke2fs cpio gzip apt-cache sha256sum; do
    command -v "$tool" > /dev/null || die "missing $tool (run ./hcasim setup)"
done

# The release's sources: the archive, and its updates and security suites
# for a stable release.
sources() {
    echo "deb [signed-by=$keyring] $mirror $release main"
    if [ "$release" != sid ]; then
        echo "deb [signed-by=$keyring] $mirror $release-updates main"
        echo "deb [signed-by=$keyring] $security_mirror $release-security main"
    fi
}
aptdir=$cache/apt/$release
mkdir -p "$aptdir"/{lists/partial,archives/partial,cache}
sources > "$aptdir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache" -o "Dir::Cache::Archives=$aptdir/archives"
    -o APT::Architecture=amd64 -o APT::Architectures=amd64 -o Acquire::Languages=none
    -o Acquire::Check-Valid-Until=false)
if [ -z "$(find "$aptdir/lists" -maxdepth 1 -name '*_Packages*' -mtime -1 2> /dev/null)" ]; then
    step "$release: apt-get update (lists in $aptdir)"
    apt-get "${apt_opts[@]}" -q update > "$aptdir/update.log" 2>&1 ||
        step "$release: apt-get update failed (offline?); using the lists fetched before"
fi

cd "$here"
mapfile -t pkgs < <(sed -e 's/#.*//' packages.txt | awk NF)
versions=$(apt-cache "${apt_opts[@]}" policy "${pkgs[@]}" | awk '/^[^ ]/ {p = $1} /Candidate:/ {print p, $2}')
if [ -z "$versions" ] || grep -q '(none)' <<< "$versions"; then
    die "$release has no candidate for: $(grep '(none)' <<< "$versions" | tr '\n' ' ') (lists in $aptdir)"
fi
key=$({
    echo "$name $release"
    cat build-image.sh in-root.sh packages.txt initramfs/init
    find rootfs -type f | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done
    echo "$versions"
} | sha256sum | cut -c1-16)
dir=$cache/image/$key

publish() {
    mkdir -p "$(dirname "$link")"
    ln -sfn "$dir" "$link"
    step "guest image ready: $link -> $dir"
    sed -n '1,3p' "$dir/manifest.txt"
}

# The release's apt sources in a chroot made by debootstrap (the archive may
# be a snapshot whose Release files are past their Valid-Until: sid's, a
# week after signing).
apt_sources_in() {
    rm -f "$1/etc/apt/sources.list.d/"*
    sources | sed 's/ \[signed-by=[^]]*\]//' > "$1/etc/apt/sources.list"
    echo 'Acquire::Check-Valid-Until "false";' > "$1/etc/apt/apt.conf.d/99hcasim-snapshot"
}

# No initramfs of Debian's in a chroot of ours: the image boots the one made
# below, and a build root boots nothing.
no_initramfs() {
    chroot "$1" dpkg-divert --local --rename --add /usr/sbin/update-initramfs > /dev/null
    printf '#!/bin/sh\n# hcasim: no initramfs here (images/build-image.sh)\nexit 0\n' > "$1/usr/sbin/update-initramfs"
    chmod +x "$1/usr/sbin/update-initramfs"
}

build_root() {
    local br=$dir/buildroot kver blog
    [ -f "$br/.complete" ] && return 0
    kver=$(awk '$1 == "kernel" {print $2}' "$dir/manifest.txt")
    blog=$dir/buildroot.log
    step "build root for $kver: $release's gcc and linux-headers-$kver - log in $blog"
    rm -rf "$br.tmp"
    debootstrap --variant=minbase --keyring="$keyring" "$release" "$br.tmp" "$mirror" > "$blog" 2>&1 ||
        { tail -20 "$blog"; die "debootstrap failed"; }
    apt_sources_in "$br.tmp"
    no_initramfs "$br.tmp"
    # shellcheck disable=SC2016  # expanded by the chroot's shell
    "$here/in-root.sh" "$br.tmp" sh -c 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
        --no-install-recommends make gcc "linux-headers-$1" && apt-get clean' sh "$kver" >> "$blog" 2>&1 ||
        { tail -20 "$blog"; die "the build root's apt-get failed"; }
    rm -rf "$br.tmp"/var/lib/apt/lists/*
    touch "$br.tmp/.complete"
    mv "$br.tmp" "$br"
    step "build root ready: $br"
}

if [ -f "$dir/.complete" ]; then
    publish
    [ "$want_build_root" != --build-root ] || build_root
    exit 0
fi

step "building guest image $name ($release) $key (debootstrap + apt; several minutes on a fresh machine)"
work=$cache/image/$key.tmp
root=$work/rootfs
log=$work/build.log
cleanup() {
    for m in dev/pts dev proc sys; do
        mountpoint -q "$root/$m" 2> /dev/null && umount -l "$root/$m"
    done
    return 0
}
trap 'cleanup; echo "image: failed; log: $log" >&2' ERR
trap cleanup EXIT
cleanup
rm -rf "$work"
mkdir -p "$work"

step "debootstrap $release (minbase) - log in $log"
debootstrap --variant=minbase --keyring="$keyring" "$release" "$root" "$mirror" >> "$log" 2>&1 ||
    { tail -20 "$log"; die "debootstrap failed"; }

apt_sources_in "$root"
# No services may start inside the build chroot, and the kernel package must
# not build Debian's initramfs: ours (below) is what the guest boots.
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
no_initramfs "$root"

mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"

step "apt-get install ${#pkgs[@]} packages"
chroot "$root" apt-get update >> "$log" 2>&1 || { tail -20 "$log"; die "apt-get update failed"; }
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y --no-install-recommends \
    "${pkgs[@]}" >> "$log" 2>&1 || { tail -20 "$log"; die "apt-get install failed"; }
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root/usr/sbin/policy-rc.d"
cleanup

kver=$(ls "$root/lib/modules" | sort -V | tail -1)
[ -n "$kver" ] || die "no kernel installed"
step "kernel $kver"

# Files of ours, then the rdma-core test suite copied out and gunzipped
# (SUITES.md section 2).
cp -a rootfs/. "$root/"
tests=$(find "$root/usr/share/doc" -path '*/tests/run_tests.py*' -printf '%h\n' | head -1)
if [ -n "$tests" ]; then
    rm -rf "$root/opt/rdma-tests"
    mkdir -p "$root/opt"
    cp -r "$tests" "$root/opt/rdma-tests"
    find "$root/opt/rdma-tests" -name '*.gz' -exec gunzip -f {} +
fi
# Keep the kernel's device names (mlx5_0, ib0); users may opt in to
# rdma-core's persistent names by restoring this rule.
rm -f "$root/lib/udev/rules.d/60-rdma-persistent-naming.rules"

{
    echo "hcasim guest image $key $name"
    echo "kernel $kver $(chroot "$root" dpkg-query -W -f '${Version}' "linux-image-$kver")"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $mirror $release$([ "$release" = sid ] || echo ' (+updates, +security)')"
    chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' "${pkgs[@]}" 2> /dev/null | grep -v '^linux-image-amd64 ' | sed 's/^/package /'
} > "$work/manifest.txt"
cp "$work/manifest.txt" "$root/etc/hcasim-image"

step "initramfs (busybox-static + virtio/ext4 modules)"
ird=$work/initramfs
mkdir -p "$ird"/{bin,dev,proc,sys,newroot,lib/modules}
cp "$root/bin/busybox" "$ird/bin/busybox"
cp initramfs/init "$ird/init"
chmod +x "$ird/init"
: > "$ird/modules.load"
chroot "$root" modprobe -S "$kver" -a --show-depends virtio_pci virtio_blk ext4 |
    awk '$1 == "insmod" {print $2}' | while read -r ko; do
    rel=${ko#/lib/modules/}
    case "$rel" in
    *.ko.xz) mkdir -p "$ird/lib/modules/$(dirname "$rel")"
        xz -dc "$root$ko" > "$ird/lib/modules/${rel%.xz}"; rel=${rel%.xz} ;;
    *.ko.zst) mkdir -p "$ird/lib/modules/$(dirname "$rel")"
        zstd -qdc "$root$ko" > "$ird/lib/modules/${rel%.zst}"; rel=${rel%.zst} ;;
    *) install -D -m 644 "$root$ko" "$ird/lib/modules/$rel" ;;
    esac
    grep -qxF "$rel" "$ird/modules.load" || echo "$rel" >> "$ird/modules.load"
done
[ -s "$ird/modules.load" ] || die "no modules for the initramfs"
(cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.img"
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
rm -f "$root"/boot/initrd.img*

step "ext4 root filesystem"
size_mb=$(($(du -sm "$root" | cut -f1) * 5 / 4 + 256))
mke2fs -q -t ext4 -L hcasim-root -d "$root" -E root_owner=0:0 "$work/rootfs.ext4" "${size_mb}M" >> "$log" 2>&1 ||
    { tail -20 "$log"; die "mke2fs failed"; }
rm -rf "$root" "$ird"
touch "$work/.complete"
rm -rf "$dir"
mv "$work" "$dir"
trap - ERR EXIT
publish
[ "$want_build_root" != --build-root ] || build_root

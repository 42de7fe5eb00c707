#!/bin/bash
# Build Debian's QEMU 7.2 (x86_64-softmmu only) with the mlx5-hca device.
#
#   qemu-device/build-qemu.sh MODEL_LIB OUT_DIR
#
# MODEL_LIB is the hcasim model static library (libhcasim-model.a) and
# OUT_DIR receives a link to the built qemu-system-x86_64.
#
# The source comes from `apt-get source qemu` (bookworm's deb-src) and must be
# the 7.2 line; the revision built is recorded in OUT_DIR/qemu-version.  The
# unpacked source and the QEMU build tree live in the cache directory
# ($HCASIM_CACHE, default ~/.cache/hcasim) under a key made of that revision,
# the overlay hooks below and the configure options, so a second clone or a
# rebuild reuses them.  Only the device directory (hw/hcasim) is synced from
# this repository on each run: a change to the model or the device relinks
# QEMU in seconds and never reconfigures it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
model_lib=$(realpath "$1")
out=$(mkdir -p "$2" && realpath "$2")
cache=${HCASIM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hcasim}
jobs=${HCASIM_JOBS:-$(nproc)}

step() { printf '[qemu %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf 'qemu: error: %s\n' "$*" >&2; exit 1; }

[ -f "$model_lib" ] || die "model library $model_lib not found"

configure_opts=(
    --target-list=x86_64-softmmu
    --without-default-features
    --enable-kvm --enable-tcg
    --enable-virtfs --enable-attr --enable-cap-ng
    --enable-fdt=system
    --disable-docs --disable-tools --disable-werror
    --disable-user --disable-guest-agent
    --firmwarepath=/usr/share/qemu:/usr/share/seabios
)

# The overlay: the device directory plus three hooks into QEMU's own files.
apply_hooks() {
    local src=$1
    grep -q 'source hcasim/Kconfig' "$src/hw/Kconfig" ||
        sed -i 's|^source 9pfs/Kconfig$|source 9pfs/Kconfig\nsource hcasim/Kconfig|' "$src/hw/Kconfig"
    grep -q "subdir('hcasim')" "$src/hw/meson.build" ||
        sed -i "s|^subdir('net')$|subdir('net')\nsubdir('hcasim')|" "$src/hw/meson.build"
    grep -q "'hw/hcasim'," "$src/meson.build" ||
        sed -i "s|^    'hw/gpio',$|    'hw/gpio',\n    'hw/hcasim',|" "$src/meson.build"
    grep -q 'source hcasim/Kconfig' "$src/hw/Kconfig" &&
        grep -q "subdir('hcasim')" "$src/hw/meson.build" &&
        grep -q "'hw/hcasim'," "$src/meson.build" ||
        die "overlay hooks did not apply to this QEMU source"
}

# Copy a file only when its content differs, so ninja sees no change otherwise.
sync_file() {
    if ! cmp -s "$1" "$2"; then
        cp "$1" "$2"
        return 0
    fi
    return 1
}

version=$(apt-cache showsrc qemu 2> /dev/null | awk '/^Version:/ {print $2}' | sort -V | tail -1)
[ -n "$version" ] ||
    die "apt has no source for qemu: add a deb-src entry for bookworm and run apt-get update (./hcasim setup does)"
case "$version" in
1:7.2+* | 1:7.2.*) ;;
*) die "Debian's QEMU source is $version, not the 7.2 line this overlay is written for" ;;
esac

key=$({
    echo "$version"
    declare -f apply_hooks
    printf '%s\n' "${configure_opts[@]}"
} | sha256sum | cut -c1-12)
top=$cache/qemu/$key
src=$top/src
bld=$top/build

# One build at a time in the shared tree: several clones or worktrees may
# relink at once, each with its own model library, and each must get the
# emulator built from its own sources (hence a copy below, not a link).
mkdir -p "$cache/qemu"
exec 9> "$top.lock"
flock 9

if [ ! -f "$src/.hcasim-unpacked" ]; then
    step "fetching Debian's QEMU source $version (apt-get source)"
    rm -rf "$top"
    mkdir -p "$top/dl"
    (cd "$top/dl" && apt-get source --download-only "qemu=$version" > "$top/dl/apt.log" 2>&1) ||
        { tail "$top/dl/apt.log"; die "apt-get source qemu failed"; }
    dpkg-source -x "$top"/dl/qemu_*.dsc "$src" > "$top/dl/unpack.log" 2>&1 ||
        { tail "$top/dl/unpack.log"; die "dpkg-source -x failed"; }
    rm -rf "$top/dl"
    apply_hooks "$src"
    mkdir -p "$src/hw/hcasim"
    echo "$version" > "$src/.hcasim-unpacked"
fi

relink=0
for f in "$here"/src/*; do
    sync_file "$f" "$src/hw/hcasim/$(basename "$f")" && relink=1
done
sync_file "$here/../hca-model/include/hcasim/hca_model.h" "$src/hw/hcasim/hca_model.h" && relink=1
sync_file "$model_lib" "$src/hw/hcasim/libhcasim-model.a" && relink=1

if [ ! -f "$bld/build.ninja" ]; then
    step "configuring QEMU $version (x86_64-softmmu only) in $bld"
    rm -rf "$bld"
    mkdir -p "$bld"
    (cd "$bld" && "$src/configure" "${configure_opts[@]}" > configure.log 2>&1) ||
        { tail -30 "$bld/configure.log"; die "QEMU configure failed (log: $bld/configure.log)"; }
fi

# The model library is a link input that meson does not track: a changed
# library must relink the emulator, which removing the binary forces.
[ "$relink" = 1 ] && rm -f "$bld/qemu-system-x86_64"

step "building qemu-system-x86_64 ($jobs jobs)"
if [ -t 1 ]; then
    ninja -C "$bld" -j "$jobs" qemu-system-x86_64 || die "QEMU build failed"
else
    # No terminal: print progress every 100 steps instead of ninja's status line.
    if ! ninja -C "$bld" -j "$jobs" qemu-system-x86_64 | awk '
        /^\[[0-9]+\/[0-9]+\]/ { n++; if (n % 100 == 1) { print "[qemu] " $1; fflush() }; next }
        /^ninja: no work to do/ { next }
        { print }'; then
        die "QEMU build failed"
    fi
fi

rm -f "$out/qemu-system-x86_64"
cp "$bld/qemu-system-x86_64" "$out/qemu-system-x86_64.tmp"
mv "$out/qemu-system-x86_64.tmp" "$out/qemu-system-x86_64"
echo "$version" > "$out/qemu-version"
step "ready: $out/qemu-system-x86_64 (Debian qemu $version)"

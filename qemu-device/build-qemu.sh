#!/bin/bash
# Build Debian's QEMU (x86_64-softmmu only) with the mlx5-hca device.
#
#   qemu-device/build-qemu.sh MODEL_LIB OUT_DIR [LINE]
#
# MODEL_LIB is the hcasim model static library (libhcasim-model.a) and
# OUT_DIR receives a copy of the built qemu-system-x86_64.  LINE is the QEMU
# line, each from its Debian release's source package:
#
#   7.2   bookworm (Debian 12; the machine's own deb-src entry)
#   10.0  trixie   (Debian 13)
#   10.2  sid      (Debian unstable; sid also lists 11.1, whose source the
#                   archive does not serve)                       the default
#
# The releases other than the machine's own are reached through apt
# configurations of their own under the cache (apt/qemu-<release>: deb-src
# for QEMU, deb for meson); the machine's apt setup is not touched.  QEMU
# 8.1 and later need meson 1.5 or newer, which bookworm does not have: those
# lines run the meson package of their own release, unpacked into the cache.
# The revision built is recorded in OUT_DIR/qemu-version.  The unpacked
# source and the QEMU build tree live in the cache directory ($HCASIM_CACHE,
# default ~/.cache/hcasim) under a key made of that revision, the overlay
# hooks below and the configure options, so a second clone or a rebuild
# reuses them.  Only the device directory (hw/hcasim) is synced from this
# repository on each run: a change to the model or the device relinks QEMU
# in seconds and never reconfigures it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
model_lib=$(realpath "$1")
out=$(mkdir -p "$2" && realpath "$2")
cache=${HCASIM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hcasim}
jobs=${HCASIM_JOBS:-$(nproc)}
line=${3:-10.2}

step() { printf '[qemu %s %s] %s\n' "$line" "$(date +%H:%M:%S)" "$*"; }
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

case "$line" in
7.2) release=bookworm pattern='1:7.2[+.]*' ;;
10.0) release=trixie pattern='1:10.0[+.]*' ;;
10.2) release=sid pattern='1:10.2[+.]*' ;;
*) die "no QEMU line '$line' (7.2, 10.0, 10.2)" ;;
esac
# Debian's newer sources are +ds: without the firmware blobs, which the
# build must then not install (the machine's seabios and ipxe serve).
[ "$line" = 7.2 ] || configure_opts+=(--disable-install-blobs)

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

# apt for another release: its own sources, lists and caches in the cache.
apt_opts=()
if [ "$line" != 7.2 ]; then
    aptdir=$cache/apt/qemu-$release
    mkdir -p "$aptdir"/{lists/partial,archives/partial,cache}
    for kind in deb deb-src; do
        echo "$kind [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $release main"
    done > "$aptdir/sources.list"
    apt_opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache"
        -o "Dir::Cache::Archives=$aptdir/archives" -o APT::Architecture=amd64
        -o APT::Architectures=amd64 -o Acquire::Languages=none -o Acquire::Check-Valid-Until=false)
    if [ -z "$(find "$aptdir/lists" -maxdepth 1 -name '*_Sources*' -mtime -1 2> /dev/null)" ]; then
        step "$release: apt-get update (lists in $aptdir)"
        apt-get "${apt_opts[@]}" -q update > "$aptdir/update.log" 2>&1 ||
            step "$release: apt-get update failed (offline?); using the lists fetched before"
    fi
fi

# The newest revision of the line that the archive actually serves (sid's
# lists can name revisions whose files are gone).
mapfile -t versions < <(apt-cache "${apt_opts[@]}" showsrc qemu 2> /dev/null |
    awk '/^Version:/ {print $2}' | sort -Vr)
version=
for v in "${versions[@]}"; do
    # shellcheck disable=SC2254
    case "$v" in $pattern) ;; *) continue ;; esac
    if [ -f "$cache/qemu/served-$v" ] || [ "$line" = 7.2 ] ||
        apt-get "${apt_opts[@]}" source --print-uris "qemu=$v" 2> /dev/null |
        awk -F"'" '/orig.tar/ {print $2}' | head -1 | xargs -r curl -sfI -o /dev/null; then
        version=$v
        break
    fi
done
[ -n "$version" ] || {
    [ "$line" = 7.2 ] &&
        die "apt has no 7.2 source for qemu: add a deb-src entry for bookworm and run apt-get update (./hcasim setup does)"
    die "$release's archive serves no QEMU $line source (listed: ${versions[*]:-none})"
}
mkdir -p "$cache/qemu"
touch "$cache/qemu/served-$version"

# meson for the lines that need a newer one than the machine's: the meson
# package of the line's own release (pure Python), unpacked once.
meson_path=
if [ "$line" != 7.2 ]; then
    mver=$(apt-cache "${apt_opts[@]}" policy meson | awk '/Candidate:/ {print $2}')
    meson_path=$cache/qemu/meson-$mver/usr/lib/python3/dist-packages
    if [ ! -d "$meson_path/mesonbuild" ]; then
        step "fetching $release's meson $mver (QEMU $line needs meson >= 1.5)"
        rm -rf "$cache/qemu/meson-$mver" "$cache/qemu/meson-dl"
        mkdir -p "$cache/qemu/meson-dl"
        (cd "$cache/qemu/meson-dl" && apt-get "${apt_opts[@]}" download "meson=$mver" > apt.log 2>&1) ||
            { tail "$cache/qemu/meson-dl/apt.log"; die "apt-get download meson failed"; }
        dpkg-deb -x "$cache"/qemu/meson-dl/meson_*.deb "$cache/qemu/meson-$mver"
        rm -rf "$cache/qemu/meson-dl"
    fi
    export PYTHONPATH=$meson_path${PYTHONPATH:+:$PYTHONPATH}
fi

key=$({
    echo "$version"
    declare -f apply_hooks
    printf '%s\n' "${configure_opts[@]}"
    [ -z "$meson_path" ] || echo "$meson_path"
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
    (cd "$top/dl" && apt-get "${apt_opts[@]}" source --download-only "qemu=$version" > "$top/dl/apt.log" 2>&1) ||
        { tail "$top/dl/apt.log"; die "apt-get source qemu failed"; }
    dpkg-source -x "$top"/dl/qemu_*.dsc "$src" > "$top/dl/unpack.log" 2>&1 ||
        { tail "$top/dl/unpack.log"; die "dpkg-source -x failed"; }
    rm -rf "$top/dl"
    apply_hooks "$src"
    mkdir -p "$src/hw/hcasim"
    echo "$version" > "$src/.hcasim-unpacked"
fi

relink=0
# Fixes to QEMU itself that hcasim's guests need (qemu-device/patches/LINE,
# each file says what it fixes and why).  Applied on every run when not yet
# applied, like the qtest hook below, so that a cached tree keeps its key
# and only the patched files recompile.
for p in "$here/patches/$line"/*.patch; do
    [ -f "$p" ] || continue
    if ! patch -d "$src" -p1 -R -s -f --dry-run < "$p" > /dev/null 2>&1; then
        step "applying $(basename "$p")"
        patch -d "$src" -p1 -s -f --no-backup-if-mismatch < "$p" ||
            die "$(basename "$p") does not apply to QEMU $version"
    fi
done
for f in "$here"/src/*; do
    sync_file "$f" "$src/hw/hcasim/$(basename "$f")" && relink=1
done
sync_file "$here/../hca-model/include/hcasim/hca_model.h" "$src/hw/hcasim/hca_model.h" && relink=1
sync_file "$model_lib" "$src/hw/hcasim/libhcasim-model.a" && relink=1
# The device's qtest (qemu-device/qtest) joins QEMU's x86_64 qtests.  It is
# hooked on every run, not at unpacking, so that the trees cached before it
# existed kept their key and their build.
sync_file "$here/qtest/mlx5-hca-test.c" "$src/tests/qtest/mlx5-hca-test.c" || true
grep -q "mlx5-hca-test" "$src/tests/qtest/meson.build" ||
    sed -i "s|^qtests_x86_64 = qtests_i386\$|&\nqtests_x86_64 += config_all_devices.has_key('CONFIG_MLX5_HCA') ? ['mlx5-hca-test'] : []|" \
        "$src/tests/qtest/meson.build"
grep -q "mlx5-hca-test" "$src/tests/qtest/meson.build" || die "the qtest hook did not apply to this QEMU source"
# Its user documentation joins docs/system/devices (and the toctree of
# device-emulation.rst), and its MAINTAINERS entry the end of MAINTAINERS,
# where a submission would add them.
sync_file "$here/docs/mlx5-hca.rst" "$src/docs/system/devices/mlx5-hca.rst" || true
grep -q "devices/mlx5-hca.rst" "$src/docs/system/device-emulation.rst" ||
    sed -i "s|^   devices/ivshmem.rst\$|&\n   devices/mlx5-hca.rst|" "$src/docs/system/device-emulation.rst"
grep -q "devices/mlx5-hca.rst" "$src/docs/system/device-emulation.rst" || die "the docs hook did not apply to this QEMU source"
grep -q "^F: hw/hcasim/" "$src/MAINTAINERS" || { echo; cat "$here/MAINTAINERS"; } >> "$src/MAINTAINERS"

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

# HCASIM_QTEST=1: also build the device's qtest in QEMU's tree and run it
# against this emulator; its TAP output goes to OUT_DIR/qtest.tap.  The
# line's scripts/checkpatch.pl reads the device's files as they sit in the
# tree (OUT_DIR/checkpatch.txt).
if [ "${HCASIM_QTEST:-0}" = 1 ]; then
    (cd "$src" && perl scripts/checkpatch.pl --no-tree -f hw/hcasim/mlx5_hca.c hw/hcasim/mlx5_hca_compat.h \
        hw/hcasim/trace.h tests/qtest/mlx5-hca-test.c docs/system/devices/mlx5-hca.rst) \
        > "$out/checkpatch.txt" 2>&1 || true
    grep '^total:' "$out/checkpatch.txt" | sed "s/^/[qemu $line] checkpatch: /"
    step "building tests/qtest/mlx5-hca-test"
    ninja -C "$bld" -j "$jobs" tests/qtest/mlx5-hca-test > "$bld/qtest-build.log" 2>&1 ||
        { tail -30 "$bld/qtest-build.log"; die "the qtest did not build (log: $bld/qtest-build.log)"; }
    step "running tests/qtest/mlx5-hca-test"
    rc=0
    # The copy, not the build tree's binary: run from its build tree QEMU
    # looks for firmware only in the tree, which Debian's source lacks.
    (cd "$bld" && QTEST_QEMU_BINARY="$out/qemu-system-x86_64" timeout 300 tests/qtest/mlx5-hca-test --tap -k) \
        > "$out/qtest.tap" 2>&1 || rc=$?
    cat "$out/qtest.tap"
    exit "$rc"
fi

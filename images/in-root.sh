#!/bin/sh
# Usage: images/in-root.sh ROOT COMMAND [ARG...]
# Runs COMMAND chrooted in ROOT (a build root of build-image.sh) with /proc
# and /dev mounted, in a mount namespace of its own: the mounts go away with
# it, whatever COMMAND does. Used by build-image.sh to install the build
# root's packages and by tools/hcasim/build.py to build modules in it.
[ $# -ge 2 ] || { echo "usage: in-root.sh ROOT COMMAND [ARG...]" >&2; exit 2; }
# shellcheck disable=SC2016  # expanded by the inner shell
exec unshare --mount --fork sh -c \
    'root=$1; shift; mount -t proc proc "$root/proc" && mount --bind /dev "$root/dev" && exec chroot "$root" "$@"' \
    in-root "$@"

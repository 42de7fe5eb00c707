"""Host dependencies: Debian packages installed with apt, and the deb-src
entry that `apt-get source qemu` needs on a fresh bookworm machine."""
import os
from pathlib import Path

from hcasim.common import capture, die, run, say

# Everything the build, the guest image and the tests need on the host.
PACKAGES = [
    # toolchain
    "build-essential", "cmake", "ninja-build", "pkg-config", "meson", "python3",
    "clang", "libclang-rt-14-dev", "ccache",
    # libraries of hcasim
    "catch2", "libboost-dev", "libibverbs-dev", "libfmt-dev", "nlohmann-json3-dev", "libcli11-dev", "zlib1g-dev", "libdeflate-dev", "libisal-dev",
    # Debian's QEMU source builds (x86_64-softmmu, virtfs; 10.x configures in
    # a venv, and the archive is asked with curl which sources it serves) and
    # the firmware
    "dpkg-dev", "libglib2.0-dev", "libpixman-1-dev", "libfdt-dev", "libcap-ng-dev", "libattr1-dev",
    "python3-venv", "curl", "seabios", "qemu-system-data",
    # test checks on the host: decoding the fabric capture; rendering the
    # trace report (./hcasim trace export --html) headless
    "tshark", "chromium",
    # guest image; a user kernel's initramfs (kmod's modprobe reads its tree)
    "debootstrap", "e2fsprogs", "cpio", "xz-utils", "zstd", "kmod",
]

SRC_LIST = Path("/etc/apt/sources.list.d/hcasim-deb-src.sources")
SRC_ENTRY = """# Added by ./hcasim setup: Debian's source packages (apt-get source qemu).
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def missing_packages(pkgs):
    r = capture(["dpkg-query", "-W", "-f=${Package} ${Status}\n"] + pkgs)
    ok = {line.split()[0] for line in r.stdout.splitlines() if line.endswith("install ok installed")}
    return [p for p in pkgs if p not in ok]


def have_qemu_source():
    r = capture(["apt-cache", "showsrc", "qemu"])
    return r.returncode == 0 and "Version:" in r.stdout


def ensure(extra=(), update=False):
    """Installs what is missing; idempotent and quiet when nothing is."""
    if os.geteuid() != 0:
        die("hcasim needs root on this machine (apt, debootstrap, chroot)")
    pkgs = list(PACKAGES) + list(extra)
    need = missing_packages(pkgs)
    updated = False
    if not have_qemu_source():
        say(f"adding the bookworm deb-src entry {SRC_LIST}")
        SRC_LIST.write_text(SRC_ENTRY)
        update = True
    if need or update:
        say("apt-get update")
        run(["apt-get", "update", "-q"], quiet=True)
        updated = True
    if need:
        say(f"apt-get install {' '.join(need)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        run(["apt-get", "install", "-y", "-q", "--no-install-recommends"] + need, env=env)
    if not have_qemu_source():
        die("apt still has no source package for qemu after adding the deb-src entry")
    return updated

"""An initramfs for a user's modular kernel (--kernel IMAGE --modules TREE).

The guest image boots its own kernel through a small initramfs (busybox,
images/initramfs/init) that loads the modules the root disk needs and hands
over to /sbin/hcasim-init. A user's kernel gets the same initramfs with the
modules taken from the user's tree TREE/<release>: virtio-pci, virtio-blk
and ext4 for the root disk, virtio-net and 9p for the harness (the
management network and the run directory). The load order comes from the
tree itself, through kmod's `modprobe --show-depends` (dependencies and
softdeps); a module the tree has built in (modules.builtin) needs nothing.
A kernel that can neither mount the root disk nor reach the harness is
refused before anything boots, with what it lacks."""
import gzip
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

# What a guest needs from its kernel, and why.
NEEDED = {
    "virtio_pci": "the root disk's and the host share's PCI transport",
    "virtio_blk": "the root disk (/dev/vda)",
    "ext4": "the root filesystem",
    "virtio_net": "the management network",
    "9pnet_virtio": "the run directory shared with the host",
    "9p": "the run directory shared with the host",
}


class KernelError(RuntimeError):
    pass


def kernel_release(image):
    """The release of an x86 bzImage ("6.12.57+deb13-amd64"): the setup
    header's kernel_version string (boot protocol 2.00+)."""
    data = Path(image).read_bytes()[:0x10000]
    if len(data) < 0x210 or data[0x202:0x206] != b"HdrS":
        raise KernelError(f"{image}: not an x86 bzImage (no 'HdrS' setup header)")
    off = struct.unpack_from("<H", data, 0x20E)[0] + 0x200
    end = data.find(b"\0", off)
    if not off or end < 0:
        raise KernelError(f"{image}: the setup header names no kernel version")
    return data[off:end].decode(errors="replace").split()[0]


def module_tree(modules, release):
    """TREE/<release> when it is a complete module tree (modules.dep, or
    kernel/ and modules.order as a kernel package ships it before its
    depmod), else None (replacement .ko files for the image's kernel)."""
    tree = Path(modules) / release
    if (tree / "modules.dep").is_file() or ((tree / "kernel").is_dir() and (tree / "modules.order").is_file()):
        return tree
    return None


def _kmod_root(tmp, tree, release):
    """ROOT with ROOT/lib/modules/<release> -> tree, as modprobe -d and
    depmod -b want it."""
    (Path(tmp) / "lib" / "modules").mkdir(parents=True)
    (Path(tmp) / "lib" / "modules" / release).symlink_to(Path(tree).resolve())
    return tmp


def depmod(tree, release):
    """Writes tree's modules.dep (and the rest of depmod's indexes) when the
    tree has none: a kernel package's tree gets them from its postinst."""
    if (Path(tree) / "modules.dep").is_file():
        return False
    with tempfile.TemporaryDirectory(prefix="hcasim-kmod-") as tmp:
        r = subprocess.run(["depmod", "-b", _kmod_root(tmp, tree, release), release],
                           capture_output=True, text=True)
    if r.returncode != 0:
        raise KernelError(f"depmod over {tree} failed: {r.stderr.strip()[:300]}")
    return True


def _builtin(tree):
    f = tree / "modules.builtin"
    if not f.is_file():
        return set()
    return {Path(line.strip()).name.removesuffix(".ko").replace("-", "_")
            for line in f.read_text().splitlines() if line.strip()}


def load_order(tree, release):
    """The module files (relative to tree) to insmod, in order, for NEEDED;
    raises KernelError naming what is neither built in nor in the tree."""
    builtin = _builtin(tree)
    order, missing = [], []
    with tempfile.TemporaryDirectory(prefix="hcasim-kmod-") as tmp:
        _kmod_root(tmp, tree, release)
        base = f"{tmp}/lib/modules/{release}/"
        for name, why in NEEDED.items():
            if name in builtin:
                continue
            r = subprocess.run(["modprobe", "-d", tmp, "-S", release, "--show-depends", name],
                               capture_output=True, text=True)
            if r.returncode != 0:
                missing.append(f"{name} ({why})")
                continue
            for line in r.stdout.splitlines():
                f = line.split()
                if len(f) >= 2 and f[0] == "insmod" and f[1].startswith(base):
                    rel = f[1][len(base):]
                    if rel not in order:
                        order.append(rel)
    if missing:
        raise KernelError(f"kernel {release} cannot boot as an hcasim guest: neither built in nor in "
                          f"{tree}: " + "; ".join(missing))
    return order


def _unpack_cpio_gz(archive, into):
    subprocess.run(["cpio", "-id", "--quiet"], input=gzip.decompress(Path(archive).read_bytes()), cwd=into,
                   check=True, capture_output=True)


def _decompressed(src, dst):
    """Copies a module, decompressing .ko.xz/.ko.zst/.ko.gz (busybox's insmod
    takes plain .ko); returns dst's name."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    for ext, cmd in ((".xz", ["xz", "-dc"]), (".zst", ["zstd", "-qdc"]), (".gz", ["gzip", "-dc"])):
        if src.name.endswith(ext):
            out = dst.with_name(dst.name.removesuffix(ext))
            with open(out, "wb") as f:
                subprocess.run([*cmd, str(src)], stdout=f, check=True)
            return out
    shutil.copyfile(src, dst)
    return dst


def build(image_initrd, tree, release, out):
    """Writes to out the image's initramfs with the root-disk and harness
    modules of tree (release) instead of its own; returns the module list."""
    order = load_order(tree, release)
    with tempfile.TemporaryDirectory(prefix="hcasim-initramfs-") as tmp:
        root = Path(tmp)
        _unpack_cpio_gz(image_initrd, root)
        shutil.rmtree(root / "lib" / "modules", ignore_errors=True)
        loaded = []
        for rel in order:
            ko = _decompressed(tree / rel, root / "lib" / "modules" / release / rel)
            loaded.append(str(ko.relative_to(root / "lib" / "modules")))
        (root / "modules.load").write_text("".join(f"{m}\n" for m in loaded))
        files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
        packed = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=files,
                                capture_output=True, check=True).stdout
    Path(out).write_bytes(gzip.compress(packed, compresslevel=1))
    return loaded

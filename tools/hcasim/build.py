"""Building hcasim: the CMake trees, QEMU with the device, the guest image,
and our guest modules (guest-driver/)."""
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from hcasim import deps
from hcasim.common import BUILD, ROOT, SAN_BUILD, capture, die, run, say

KVERBS_SRC = ROOT / "guest-driver" / "kverbs"
KVERBS_OBJ = BUILD / "kverbs-obj"   # the kbuild tree for an image of the host's own release (sources copied in)
KVERBS_OUT = BUILD / "kverbs"       # <image>/kverbs.ko: what a guest of that image gets as /hcasim/kverbs/kverbs.ko


def cmake_tree(tree, *options, env=None, targets=()):
    # Configured again when the options change (a stamp of them in the tree).
    stamp = tree / ".hcasim-options"
    if not (tree / "build.ninja").exists() or not stamp.exists() or stamp.read_text() != "\n".join(options):
        say(f"configuring {tree}")
        run(["cmake", "-S", ROOT, "-B", tree, "-G", "Ninja", *options], env=env)
        stamp.write_text("\n".join(options))
    run(["cmake", "--build", tree, *(["--target", *targets] if targets else [])])


def main_tree():
    cmake_tree(BUILD)


def san_tree(targets=()):
    """The ASan/UBSan + libFuzzer tree (all of it, or the given targets)."""
    env = dict(os.environ, CC="clang", CXX="clang++")
    # Asserts stay on in this tree: RelWithDebInfo without its -DNDEBUG.
    cmake_tree(SAN_BUILD, "-DHCASIM_SANITIZE=ON", "-DHCASIM_FUZZ=ON", "-DHCASIM_QEMU=OFF",
               "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g",
               "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g", env=env, targets=targets)


# The QEMU lines the device builds against (qemu-device/build-qemu.sh), each
# from its Debian release's source package.
QEMU_LINES = {
    "7.2": "Debian 12 (bookworm)",
    "10.0": "Debian 13 (trixie)",
    "10.2": "Debian unstable (sid)",
}
DEFAULT_QEMU = "10.2"  # the newest line that builds here (11.1: the archive serves no source)


def qemu_line():
    """The QEMU line VMs run on: --qemu, which sets HCASIM_QEMU_LINE."""
    line = os.environ.get("HCASIM_QEMU_LINE") or DEFAULT_QEMU
    if line not in QEMU_LINES:
        die(f"HCASIM_QEMU_LINE={line}: one of {', '.join(QEMU_LINES)}")
    return line


def named(option, spec, table):
    """OPTION NAME[,NAME...] or all: the names of TABLE given, in its order."""
    names = list(table) if spec == "all" else [n.strip() for n in spec.split(",") if n.strip()]
    if not names or any(n not in table for n in names):
        die(f"{option} {spec}: one or more of {', '.join(table)}, or all")
    return [n for n in table if n in names]


def qemu_lines(spec):
    """--qemu LINE[,LINE...] or all: the lines named, in QEMU_LINES order."""
    return named("--qemu", spec, QEMU_LINES)


def qemu_dir(line=None):
    return BUILD / "qemu" / (line or qemu_line())


def qemu(line=None, qtest=False):
    """QEMU of the line (default: the one VMs run on) with the device. With
    qtest, also the device's qtest built in QEMU's tree and run against it:
    the CompletedProcess (its TAP output is qemu_dir(line)/qtest.tap)."""
    line = line or qemu_line()
    run(["cmake", "--build", BUILD, "--target", "hcasim-model"])
    cmd = [ROOT / "qemu-device" / "build-qemu.sh", BUILD / "hca-model" / "libhcasim-model.a", qemu_dir(line), line]
    if qtest:
        return run(cmd, check=False, env=dict(os.environ, HCASIM_QTEST="1"))
    return run(cmd)


# The guest images (images/build-image.sh): name -> (Debian release, what it holds).
IMAGES = {
    "debian12": ("bookworm", "Debian 12: kernel 6.1, rdma-core 44"),
    "debian13": ("trixie", "Debian 13: kernel 6.12, rdma-core 56"),
    "unstable": ("sid", "Debian unstable: kernel 7.x, rdma-core 6x"),
}
DEFAULT_IMAGE = "debian13"  # Debian stable


def host_release():
    """This machine's Debian release (VERSION_CODENAME of /etc/os-release)."""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return ""


def native(name):
    """Whether modules for the image's kernel build on this host (the same
    Debian release: its gcc and linux-headers package); else in the image's
    build root."""
    return IMAGES[name][0] == host_release()


def image_names(spec):
    """--image NAME[,NAME...] or all: the images named, in IMAGES order."""
    return named("--image", spec, IMAGES)


def image_dir(name=DEFAULT_IMAGE):
    return BUILD / "images" / name


def image(name=DEFAULT_IMAGE):
    run([ROOT / "images" / "build-image.sh", name, image_dir(name)])


def build_root(name):
    """The image's build root (images/build-image.sh --build-root): a chroot
    of its release with its gcc and its kernel's headers; None if it could
    not be made."""
    r = run([ROOT / "images" / "build-image.sh", name, image_dir(name), "--build-root"], check=False)
    return image_dir(name) / "buildroot" if r.returncode == 0 else None


def kbuild_in_root(root, headers, mdir, extra=()):
    """make -C HEADERS M=MDIR modules inside the build root (both paths as
    seen inside it), in a mount namespace of its own; the CompletedProcess."""
    return subprocess.run([ROOT / "images" / "in-root.sh", root, "make", "-C", headers, f"M={mdir}",
                           f"-j{os.cpu_count() or 2}", *extra, "modules"], capture_output=True, text=True)


def image_manifest(name=DEFAULT_IMAGE):
    """The image's manifest as {"kernel": "RELEASE VERSION", "package rdma-core": VERSION, ...}."""
    manifest = image_dir(name) / "manifest.txt"
    info = {}
    if manifest.exists():
        for line in manifest.read_text().splitlines():
            words = line.split()
            if words[:1] == ["package"] and len(words) >= 3:
                info[f"package {words[1]}"] = words[2]
            elif words[:1] == ["kernel"]:
                info["kernel"] = " ".join(words[1:])
    return info


def image_kernel(name=DEFAULT_IMAGE):
    """(release, Debian version) of the guest image's kernel, e.g.
    ("6.12.118+deb13-amd64", "6.12.118-1"), or None before the image is
    built."""
    words = image_manifest(name).get("kernel", "").split()
    return (words[0], words[1]) if len(words) >= 2 else None


def kernel_headers(release):
    """/usr/src/linux-headers-RELEASE, installed with apt if missing; None
    if apt has no such package."""
    headers = Path(f"/usr/src/linux-headers-{release}")
    if (headers / "Makefile").exists():
        return headers
    pkg = f"linux-headers-{release}"
    if capture(["apt-cache", "show", pkg]).returncode != 0:
        say(f"apt-get update (looking for {pkg})")
        run(["apt-get", "update", "-q"], quiet=True)
    if capture(["apt-cache", "show", pkg]).returncode != 0:
        return None
    deps.ensure(extra=[pkg])
    return headers if (headers / "Makefile").exists() else None


def kverbs(image=DEFAULT_IMAGE):
    """guest-driver/kverbs built against the image's kernel headers into
    build/kverbs/<image>/kverbs.ko: on this host for an image of its own
    release, in the image's build root for the others; rebuilt only when
    its sources or the kernel change."""
    kernel = image_kernel(image)
    if not kernel:
        say(f"kverbs: the guest image {image} names no kernel; not built")
        return
    release = kernel[0]
    sources = sorted(f for f in KVERBS_SRC.iterdir()
                     if f.is_file() and (f.suffix in (".c", ".h") or f.name in ("Kbuild", "Makefile")))
    h = hashlib.sha256(release.encode())
    for f in sources:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    key = h.hexdigest()
    out = KVERBS_OUT / image
    stamp = out / ".hcasim-stamp"
    ko = out / "kverbs.ko"
    if ko.exists() and stamp.exists() and stamp.read_text() == key:
        say(f"kverbs.ko for {image} is up to date")
        return
    if native(image):
        headers = kernel_headers(release)
        if not headers:
            say(f"kverbs: apt has no linux-headers-{release}; kverbs.ko not built (the kverbs guest test will fail)")
            return
        obj, inside = KVERBS_OBJ, None
    else:
        root = build_root(image)
        if not root:
            say(f"kverbs: no build root for {image}; kverbs.ko not built (the kverbs guest test will fail there)")
            return
        headers, obj, inside = f"/usr/src/linux-headers-{release}", root / "build" / "kverbs", "/build/kverbs"
    say(f"building kverbs.ko for {release} ({image})")
    obj.mkdir(parents=True, exist_ok=True)
    for f in sources:
        dst = obj / f.name
        if not dst.exists() or dst.read_bytes() != f.read_bytes():
            shutil.copy2(f, dst)
    if inside:
        r = kbuild_in_root(root, headers, inside)
    else:
        r = subprocess.run(["make", "-C", str(headers), f"M={obj}", f"-j{os.cpu_count() or 2}", "modules"],
                           capture_output=True, text=True)
    (obj / "build.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).splitlines()[-25:])
        die(f"building kverbs.ko for {image} failed (log {obj / 'build.log'}):\n{tail}")
    out.mkdir(parents=True, exist_ok=True)
    # Without debug info (1 MB -> ~60 KB): the guests get a copy per run.
    run(["objcopy", "--strip-debug", obj / "kverbs.ko", ko], quiet=True)
    stamp.write_text(key)
    say(f"kverbs.ko: {ko}")


GUEST_TOOLS_SRC = ROOT / "testbench" / "guest" / "tools"
GUEST_TOOLS_OUT = BUILD / "guest-tools"  # what the guests get: /hcasim/tools/NAME


def guest_tools():
    """testbench/guest/tools/*.c: user-space programs of the guest tests,
    built on the host against Debian's rdma-core (the guest image has no
    compiler; host and guest share the ABI of libibverbs.so.1 and
    libmlx5.so.1). Rebuilt only when a source is newer than its program."""
    GUEST_TOOLS_OUT.mkdir(parents=True, exist_ok=True)
    for src in sorted(GUEST_TOOLS_SRC.glob("*.c")):
        out = GUEST_TOOLS_OUT / src.stem
        if out.exists() and out.stat().st_mtime >= src.stat().st_mtime:
            continue
        say(f"building guest tool {src.stem}")
        run(["cc", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-o", out, src, "-libverbs", "-lmlx5"], quiet=True)


def everything(sanitizers=False, images=(DEFAULT_IMAGE,), qemus=()):
    """Dependencies, the main tree, QEMU (the lines given, default the one
    VMs run on) and the guest images (each step is a no-op when its inputs
    did not change). kverbs.ko is built for the default image's kernel."""
    deps.ensure()
    say("building hcasim (model, fabric, tests)")
    main_tree()
    for line in qemus or [qemu_line()]:
        say(f"building QEMU {line} ({QEMU_LINES[line]}'s source) with the mlx5-hca device")
        qemu(line)
    for name in dict.fromkeys((DEFAULT_IMAGE, *images)):
        say(f"building the guest image {name} ({IMAGES[name][1]})")
        image(name)
        kverbs(name)
    guest_tools()
    if sanitizers:
        say("building the ASan/UBSan + libFuzzer tree")
        san_tree()


def artifacts(name=DEFAULT_IMAGE):
    """Paths the VM launcher needs to boot image NAME; fails if something is
    not built."""
    img = image_dir(name)
    a = {
        "qemu": qemu_dir() / "qemu-system-x86_64",
        "fabric": BUILD / "fabric" / "hcasim-fabric",
        "kernel": img / "vmlinuz",
        "initrd": img / "initrd.img",
        "rootfs": img / "rootfs.ext4",
        "manifest": img / "manifest.txt",
    }
    for what, path in a.items():
        if not path.exists():
            hint = "run ./hcasim setup" if name == DEFAULT_IMAGE else f"./hcasim build --image {name}"
            if what == "qemu":
                hint = f"./hcasim build --qemu {qemu_line()}"
            die(f"{what} is not built ({path}); {hint}")
    return a

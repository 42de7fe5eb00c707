"""The driver under test, built from source: mlx5_core, mlx5_ib and ib_ipoib
compiled as out-of-tree modules for a guest image's kernel, from Debian's
linux-source-X.Y of that kernel's exact version (or a kernel tree the user
points to), with the user's patches applied. An image of this host's
release gets them built on this host; the others in the image's build root (a chroot of its
release with its gcc and kernel headers: images/build-image.sh).

    ./hcasim driver build [--image NAME] [--source DIR] [--patch FILE ...]
    ./hcasim run [--image NAME] --modules build/driver/current ...   (or suite/test/demo)

The guest init installs the modules it finds in /hcasim/modules/<kernel
release>/ under /lib/modules/<release>/updates/ and runs depmod, so
`modprobe mlx5_ib` loads them instead of the stock ones.
"""
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from hcasim import deps, kernels
from hcasim.build import DEFAULT_IMAGE, IMAGES, build_root, image_kernel, kbuild_in_root, native
from hcasim.common import BUILD, CACHE, die, run, say

# The three drivers, their directories in a kernel tree, and the modules
# whose symbols each one needs from the others.
DRIVERS = [
    ("mlx5_core", "drivers/net/ethernet/mellanox/mlx5/core", []),
    ("mlx5_ib", "drivers/infiniband/hw/mlx5", ["mlx5_core"]),
    ("ib_ipoib", "drivers/infiniband/ulp/ipoib", []),
]
# Copied from the tree: the drivers and the private headers they include.
COPY = ["drivers/net/ethernet/mellanox", "drivers/infiniband/hw/mlx5", "drivers/infiniband/ulp/ipoib",
        "drivers/infiniband/core"]


def guest_kernel(image=DEFAULT_IMAGE):
    """(release, Debian version) of the guest image's kernel."""
    return image_kernel(image) or die(f"the {image} image is not built yet (./hcasim build --image {image})")


def debian_source(version, line):
    """Debian's linux-source-X.Y of release LINE at exactly the guest
    kernel's version, its driver directories extracted once into the cache."""
    src = "linux-source-" + ".".join(version.split(".")[:2])
    dest = CACHE / "ksrc" / version
    tree = dest / src
    if (tree / "Makefile").exists():
        return tree
    dl = dest / "deb"
    dl.mkdir(parents=True, exist_ok=True)
    say(f"downloading {src} {version} (Debian {line}'s source of the guest kernel)")
    download = ["apt-get", *kernels._apt_options(line), "download", f"{src}={version}"]
    r = run(download, cwd=dl, check=False)
    if r.returncode != 0:
        # This release's package lists may not be here yet (a fresh cache):
        # fetch them once and try again.
        say(f"updating the package lists of {line}")
        run(["apt-get", *kernels._apt_options(line), "update", "-q"], check=False)
        r = run(download, cwd=dl, check=False)
    debs = list(dl.glob(f"{src}_*.deb"))
    if r.returncode != 0 or not debs:
        die(f"apt-get download {src}={version} from {line} failed (is the guest image older than the archive? "
            "./hcasim build rebuilds it)")
    run(["dpkg-deb", "-x", debs[0], dl / "x"])
    tarball = next((dl / "x").rglob(f"{src}.tar.xz"))
    say("extracting the driver directories")
    tmp = dest / "tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    run(["tar", "-xf", tarball, "-C", tmp, f"{src}/Makefile"] + [f"{src}/{d}" for d in COPY])
    (tmp / src).rename(tree)
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(dl / "x", ignore_errors=True)
    return tree


def build(source=None, patches=(), jobs=None, image=DEFAULT_IMAGE):
    """Builds the three modules; returns the directory holding them."""
    release, version = guest_kernel(image)
    root, headers = _headers(image, release)
    tree = Path(source).resolve() if source else debian_source(version, IMAGES[image][0])
    for d in COPY:
        if not (tree / d).is_dir():
            die(f"{tree} is not a kernel tree with {d}")
    patches = [Path(p).resolve() for p in patches]
    key = _source_key(release, tree, patches)
    out = BUILD / "driver" / key
    current = BUILD / "driver" / "current"
    modules = out / "modules" / release
    if all((modules / f"{name}.ko").exists() for name, _, _ in DRIVERS):
        say(f"driver modules up to date: {modules}")
    else:
        # The sources are built where the compiler is: in the build root
        # for a newer image (seen there as /build/driver-KEY).
        work = root / "build" / f"driver-{key}" if root else out / "src"
        inside = Path(f"/build/driver-{key}") if root else work
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
        out.mkdir(parents=True)
        work.mkdir(parents=True)
        _patched_copy(tree, work, patches)
        _make_modules(out, work, inside, headers, root, release, image, jobs or os.cpu_count() or 2)
        _install(out, work, modules)
        (out / "source.txt").write_text(
            f"kernel {release} ({version}), image {image}\nsource {tree}\n" + "".join(f"patch {p}\n" for p in patches))
        if root:
            shutil.rmtree(work, ignore_errors=True)
    if current.is_symlink() or current.exists():
        current.unlink()
    current.symlink_to(out.name)
    say(f"driver modules: {modules} (also {current})")
    return out / "modules"


def _headers(image, release):
    """(the image's build root or None, the kernel headers' directory): this
    host's headers (installed when missing) for an image of its release."""
    headers = Path(f"/usr/src/linux-headers-{release}")
    if not native(image):
        root = build_root(image)
        if not root:
            die(f"no build root for the {image} image (images/build-image.sh {image} LINK --build-root)")
        return root, headers
    if not (headers / "Makefile").exists():
        deps.ensure(extra=[f"linux-headers-{release}"])
    if not (headers / "Makefile").exists():
        die(f"no kernel headers for the guest kernel {release} (apt package linux-headers-{release})")
    return None, headers


def _source_key(release, tree, patches):
    """The build's name: a hash of the kernel release, the driver sources
    and the patches."""
    h = hashlib.sha256(f"{release} {tree}".encode())
    for d in COPY:
        for f in sorted((tree / d).rglob("*")):
            if f.is_file() and (f.suffix in (".c", ".h") or f.name in ("Makefile", "Kconfig", "Kbuild")):
                h.update(f.relative_to(tree).as_posix().encode())
                h.update(f.read_bytes())
    for p in patches:
        if not p.is_file():
            die(f"no such patch: {p}")
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _patched_copy(tree, work, patches):
    """The driver directories of tree copied into work, the patches applied."""
    for d in COPY:
        shutil.copytree(tree / d, work / d, symlinks=True)
    for p in patches:
        say(f"applying {p.name}")
        r = subprocess.run(["patch", "-p1", "--forward", "--batch", "-d", str(work), "-i", str(p)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            die(f"patch {p} does not apply to the driver sources:\n{r.stdout}{r.stderr}"
                "(patches may only touch drivers/net/ethernet/mellanox, drivers/infiniband/hw/mlx5, "
                "drivers/infiniband/ulp/ipoib, drivers/infiniband/core)")


def _make_modules(out, work, inside, headers, root, release, image, jobs):
    """Each driver built in turn (in the build root when there is one), with
    the Module.symvers of those it needs; the logs in out."""
    symvers = {}
    for name, rel, needs in DRIVERS:
        say(f"building {name}.ko for {release}" + (f" in {image}'s build root" if root else ""))
        extra = [f"KBUILD_EXTRA_SYMBOLS={' '.join(str(symvers[n]) for n in needs)}"] if needs else []
        if root:
            r = kbuild_in_root(root, str(headers), str(inside / rel), extra)
        else:
            cmd = ["make", "-C", headers, f"M={work / rel}", f"-j{jobs}", *extra, "modules"]
            r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        (out / f"{name}-build.log").write_text(r.stdout + r.stderr)
        if r.returncode != 0:
            tail = "\n".join((r.stdout + r.stderr).splitlines()[-25:])
            die(f"building {name} failed (log {out / f'{name}-build.log'}):\n{tail}")
        symvers[name] = inside / rel / "Module.symvers"


def _install(out, work, modules):
    """The built modules into modules/ without debug info, into debug/ with."""
    modules.mkdir(parents=True, exist_ok=True)
    (out / "debug").mkdir(exist_ok=True)
    for name, rel, _ in DRIVERS:
        # The guests get them without debug info (6.12's mlx5_core: 118
        # MB -> a few MB, copied into every run and over 9p); the full
        # ones stay in debug/ for gdb and decode_stacktrace.
        shutil.copy2(work / rel / f"{name}.ko", out / "debug" / f"{name}.ko")
        run(["objcopy", "--strip-debug", out / "debug" / f"{name}.ko", modules / f"{name}.ko"], quiet=True)


def main(a):
    if a.action == "build":
        d = build(a.source, a.patch, image=a.image)
        print(d)
        return 0
    if a.action == "show":
        cur = BUILD / "driver" / "current"
        if not cur.exists():
            say("no driver built from source (./hcasim driver build)")
            return 1
        print((cur / "source.txt").read_text().rstrip())
        for ko in sorted((cur / "modules").rglob("*.ko")):
            print(ko)
        return 0
    return 1


def resolve_modules(path):
    """--modules accepts a build (build/driver/current, holding modules/) or
    a directory <kernel release>/*.ko itself; "" when none was given."""
    if not path:
        return ""
    p = Path(path)
    if (p / "modules").is_dir():
        p = p / "modules"
    if not p.is_dir():
        die(f"--modules {path}: no such directory")
    return str(p.resolve())

"""Debian's kernel packages of any release, ready for --kernel/--modules.

`./hcasim kernel fetch LINE` (bookworm, trixie, sid) asks Debian's archive
which kernel `linux-image-amd64` of that release depends on today, through
an apt configuration of its own (its sources, package lists and caches live
under the hcasim cache; the machine's apt setup is not touched), downloads
that package, unpacks its kernel image and module tree and runs depmod over
the tree (what the package's postinst would do). The result is cached by
package and version: CACHE/kernels/<package>_<version>/{vmlinuz,modules/}.
A guest test asks for one with `kernel=LINE` in its header."""
import shutil
import subprocess
import tempfile
from pathlib import Path

from hcasim import initramfs
from hcasim.common import CACHE, die, say

MIRROR = "http://deb.debian.org/debian"
SECURITY = "http://deb.debian.org/debian-security"
# The suites of each release line that carry its kernels.
LINES = {
    "bookworm": ["bookworm", "bookworm-updates", "SECURITY bookworm-security"],
    "trixie": ["trixie", "trixie-updates", "SECURITY trixie-security"],
    "sid": ["sid"],
}


def _apt_options(line):
    d = CACHE / "apt" / line
    for sub in ("lists/partial", "archives/partial", "cache"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    sources = d / "sources.list"
    entries = []
    for s in LINES[line]:
        url, suite = (SECURITY, s.split()[1]) if s.startswith("SECURITY ") else (MIRROR, s)
        entries.append(f"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {url} {suite} main\n")
    sources.write_text("".join(entries))
    return ["-o", f"Dir::Etc::SourceList={sources}", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={d / 'lists'}", "-o", f"Dir::Cache={d / 'cache'}",
            "-o", f"Dir::Cache::Archives={d / 'archives'}", "-o", "APT::Architecture=amd64",
            "-o", "APT::Architectures=amd64", "-o", "Acquire::Languages=none",
            "-o", "Acquire::Check-Valid-Until=false"]


def _apt(line, *args, quiet=True):
    r = subprocess.run(["apt-get" if args[0] in ("update", "download") else "apt-cache",
                        *_apt_options(line), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise initramfs.KernelError(f"apt ({line}) {' '.join(args)} failed: {r.stderr.strip()[-400:]}")
    return r.stdout


def _depends(line, pkg):
    return [l.split(":", 1)[1].strip().strip("<>") for l in _apt(line, "depends", pkg).splitlines()
            if l.strip().lstrip("|").startswith("Depends:")]


def current_package(line):
    """The kernel package linux-image-amd64 of LINE depends on, and its
    version: ("linux-image-6.12.57+deb13-amd64", "6.12.57-1")."""
    say(f"kernel {line}: apt-get update (own lists: {CACHE / 'apt' / line})")
    _apt(line, "update")
    deps = [d for d in _depends(line, "linux-image-amd64") if d.startswith("linux-image-")]
    if not deps:
        raise initramfs.KernelError(f"kernel {line}: linux-image-amd64 depends on no linux-image package")
    pkg = deps[0]
    version = ""
    for l in _apt(line, "policy", pkg).splitlines():
        if l.strip().startswith("Candidate:"):
            version = l.split(":", 1)[1].strip()
    if not version or version == "(none)":
        raise initramfs.KernelError(f"kernel {line}: no candidate version of {pkg}")
    return pkg, version


def fetch(line):
    """(kernel image, module directory) of LINE's current kernel package,
    downloaded and prepared once."""
    if line not in LINES:
        die(f"unknown kernel line {line!r}: one of {', '.join(LINES)}")
    try:
        pkg, version = current_package(line)
    except initramfs.KernelError as e:
        # Offline: the newest kernel of the line fetched before.
        cached = sorted((d for d in (CACHE / "kernels").glob("*/package.txt")
                         if d.read_text().split()[2:3] == [line]), key=lambda f: f.stat().st_mtime)
        if not cached:
            die(str(e))
        say(f"kernel {line}: {e}; using the one fetched before")
        pkg, version = cached[-1].read_text().split()[:2]
    dest = CACHE / "kernels" / f"{pkg}_{version}"
    if (dest / ".complete").exists():
        say(f"kernel {line}: {pkg} {version} (cached in {dest})")
        return dest / "vmlinuz", dest / "modules"
    say(f"kernel {line}: downloading {pkg} {version}")
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Since 7.x the image package is split: the kernel in linux-binary-*,
    # the modules in linux-modules-*, modules.builtin/order in linux-base-*.
    suffix = pkg.removeprefix("linux-image-")
    parts = [pkg] + [d for d in _depends(line, pkg)
                     if d in (f"linux-binary-{suffix}", f"linux-modules-{suffix}", f"linux-base-{suffix}")]
    with tempfile.TemporaryDirectory(prefix="hcasim-kernel-", dir=dest.parent) as tmp:
        subprocess.run(["apt-get", *_apt_options(line), "download", *(f"{p}={version}" for p in parts)], cwd=tmp,
                       check=True, capture_output=True)
        unpacked = Path(tmp) / "x"
        for deb in sorted(Path(tmp).glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        trees = sorted(unpacked.glob("lib/modules/*")) + sorted(unpacked.glob("usr/lib/modules/*"))
        images = sorted(unpacked.glob("boot/vmlinuz-*")) + [t / "vmlinuz" for t in trees if (t / "vmlinuz").exists()]
        if len(images) != 1 or len(trees) != 1:
            die(f"{' '.join(parts)}: expected one kernel image and one module tree, found "
                f"{[str(i.relative_to(unpacked)) for i in images]} and {[t.name for t in trees]}")
        staged = Path(tmp) / "out"
        (staged / "modules").mkdir(parents=True)
        shutil.move(str(images[0]), staged / "vmlinuz")
        shutil.move(str(trees[0]), staged / "modules" / trees[0].name)
        release = initramfs.kernel_release(staged / "vmlinuz")
        if release != trees[0].name:
            die(f"{deb.name}: the kernel says {release}, its module tree is {trees[0].name}")
        initramfs.depmod(staged / "modules" / release, release)
        (staged / "package.txt").write_text(f"{pkg} {version} {line}\n")
        (staged / ".complete").touch()
        staged.rename(dest)
    say(f"kernel {line}: {pkg} {version} ready in {dest}")
    return dest / "vmlinuz", dest / "modules"


def register(sub):
    s = sub.add_parser("kernel", help="Debian's kernel packages for --kernel/--modules (fetch LINE)")
    ks = s.add_subparsers(dest="kernel_cmd", required=True)
    f = ks.add_parser("fetch", help="download and prepare the current kernel of a Debian release line")
    f.add_argument("line", choices=list(LINES), help="bookworm (Debian 12), trixie (13), sid (unstable)")
    f.set_defaults(func=lambda a: _print_fetch(a.line))


def _print_fetch(line):
    kernel, modules = fetch(line)
    print(f"--kernel {kernel} --modules {modules}")
    return 0

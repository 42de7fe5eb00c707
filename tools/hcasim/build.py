"""Building hcasim: the CMake trees, QEMU with the device, the guest image."""
import os

from hcasim import deps
from hcasim.common import BUILD, ROOT, SAN_BUILD, die, run, say


def cmake_tree(tree, *options, env=None):
    if not (tree / "build.ninja").exists():
        say(f"configuring {tree}")
        run(["cmake", "-S", ROOT, "-B", tree, "-G", "Ninja", *options], env=env)
    run(["cmake", "--build", tree])


def main_tree():
    cmake_tree(BUILD)


def san_tree():
    env = dict(os.environ, CC="clang", CXX="clang++")
    cmake_tree(SAN_BUILD, "-DHCASIM_SANITIZE=ON", "-DHCASIM_FUZZ=ON", "-DHCASIM_QEMU=OFF", env=env)


def qemu():
    run(["cmake", "--build", BUILD, "--target", "qemu"])


def image():
    run([ROOT / "images" / "build-image.sh", BUILD / "image"])


def everything(sanitizers=False):
    """Dependencies, the main tree, QEMU and the guest image (each step is a
    no-op when its inputs did not change)."""
    deps.ensure()
    say("building hcasim (model, fabric, tests)")
    main_tree()
    say("building QEMU with the mlx5-hca device")
    qemu()
    say("building the guest image")
    image()
    if sanitizers:
        say("building the ASan/UBSan + libFuzzer tree")
        san_tree()


def artifacts():
    """Paths the VM launcher needs; fails if something is not built."""
    a = {
        "qemu": BUILD / "qemu" / "qemu-system-x86_64",
        "fabric": BUILD / "fabric" / "hcasim-fabric",
        "kernel": BUILD / "image" / "vmlinuz",
        "initrd": BUILD / "image" / "initrd.img",
        "rootfs": BUILD / "image" / "rootfs.ext4",
        "manifest": BUILD / "image" / "manifest.txt",
    }
    for name, path in a.items():
        if not path.exists():
            die(f"{name} is not built ({path}); run ./hcasim setup")
    return a

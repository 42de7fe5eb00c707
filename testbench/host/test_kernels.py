"""User kernels (tools/hcasim/initramfs.py): the release read from a bzImage,
what counts as a module tree, the refusal of a kernel that could not boot
as a guest, and the initramfs made from Debian's own kernel packages when
./hcasim kernel fetch has cached them."""
import gzip
import struct
import subprocess
import tempfile
import unittest
from pathlib import Path

from hcasim import initramfs, suite, testing
from hcasim.common import CACHE, ROOT


def fake_bzimage(path, version):
    data = bytearray(0x400)
    data[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", data, 0x20E, 0x100)  # the string at 0x300
    v = version.encode() + b" (builder@host) #1 SMP\0"
    data[0x300:0x300 + len(v)] = v
    Path(path).write_bytes(bytes(data))


class ReleaseTest(unittest.TestCase):
    def test_release_from_the_setup_header(self):
        with tempfile.TemporaryDirectory() as d:
            fake_bzimage(f"{d}/bz", "6.12.118+deb13-amd64")
            self.assertEqual(initramfs.kernel_release(f"{d}/bz"), "6.12.118+deb13-amd64")

    def test_not_a_bzimage_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            Path(f"{d}/elf").write_bytes(b"\x7fELF" + bytes(0x400))
            with self.assertRaisesRegex(initramfs.KernelError, "not an x86 bzImage"):
                initramfs.kernel_release(f"{d}/elf")


class TreeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.mods = Path(self.tmp.name)
        self.tree = self.mods / "9.9.9"
        self.tree.mkdir()

    def tearDown(self):
        self.tmp.cleanup()

    def test_what_counts_as_a_tree(self):
        self.assertIsNone(initramfs.module_tree(self.mods, "9.9.9"))  # empty
        (self.tree / "mlx5_core.ko").touch()
        self.assertIsNone(initramfs.module_tree(self.mods, "9.9.9"))  # replacement modules only
        (self.tree / "kernel").mkdir()
        (self.tree / "modules.order").touch()
        self.assertEqual(initramfs.module_tree(self.mods, "9.9.9"), self.tree)  # a package's, before depmod
        self.assertIsNone(initramfs.module_tree(self.mods, "1.0.0"))

    def test_built_in_modules_need_nothing(self):
        (self.tree / "modules.builtin").write_text(
            "".join(f"kernel/x/{n}.ko\n" for n in initramfs.NEEDED))
        (self.tree / "modules.dep").write_text("")
        self.assertEqual(initramfs.load_order(self.tree, "9.9.9"), [])

    def test_what_is_missing_is_named(self):
        builtin = [n for n in initramfs.NEEDED if n not in ("virtio_blk", "9p")]
        (self.tree / "modules.builtin").write_text("".join(f"kernel/x/{n}.ko\n" for n in builtin))
        (self.tree / "modules.dep").write_text("")
        with self.assertRaises(initramfs.KernelError) as e:
            initramfs.load_order(self.tree, "9.9.9")
        msg = str(e.exception)
        self.assertIn("virtio_blk (the root disk", msg)
        self.assertIn("9p (the run directory", msg)
        self.assertNotIn("ext4", msg)


class DebianPackageTest(unittest.TestCase):
    """Debian's kernel packages fetched by ./hcasim kernel fetch (cached)."""

    def test_initramfs_of_each_cached_kernel(self):
        kernels = sorted((CACHE / "kernels").glob("*/.complete"))
        initrd = ROOT / "build" / "image" / "initrd.img"
        if not kernels or not initrd.exists():
            self.skipTest("no cached Debian kernel (./hcasim kernel fetch LINE) or no guest image")
        for done in kernels:
            d = done.parent
            with self.subTest(kernel=d.name):
                release = initramfs.kernel_release(d / "vmlinuz")
                tree = initramfs.module_tree(d / "modules", release)
                self.assertIsNotNone(tree)
                with tempfile.TemporaryDirectory() as tmp:
                    mods = initramfs.build(initrd, tree, release, f"{tmp}/initrd.img")
                    names = {Path(m).name for m in mods}
                    for need in ("virtio_blk.ko", "ext4.ko", "9p.ko", "virtio_net.ko"):
                        self.assertIn(need, names)  # Debian builds them as modules
                    listing = subprocess.run(["cpio", "-it", "--quiet"], capture_output=True, check=True,
                                             input=gzip.decompress(Path(f"{tmp}/initrd.img").read_bytes())).stdout
                    files = set(listing.decode().split())
                    self.assertIn("init", files)
                    self.assertIn("bin/busybox", files)
                    for m in mods:
                        self.assertIn(f"lib/modules/{m}", files)
                        self.assertTrue(m.endswith(".ko"))  # decompressed for busybox insmod



class MatrixTest(unittest.TestCase):
    """./hcasim suite --kernels: which tests a matrix runs. A test that pins
    its own kernel line is left out; a guest test's name is a suite of one;
    a quick budget applies only at the quick depth."""

    def test_test_names_are_suites_and_pinned_tests_are_left_out(self):
        self.assertEqual(suite.expand(["17-faults"]), ["17-faults"])
        self.assertEqual(suite.SUITES["17-faults"][1], ["17-faults"])
        self.assertTrue(suite.pinned("24-kernel-trixie"))
        self.assertFalse(suite.pinned("17-faults"))
        with self.assertRaises(SystemExit):
            suite.expand(["no-such-test"])

    def test_smoke_columns_are_each_releases_own_stack(self):
        """./hcasim test's image smoke runs besides the default image on the
        default line: each image in its own release's QEMU; with only other
        images or only other lines, each of those once."""
        cols = testing.smoke_columns("debian13", ["debian12", "unstable"], "10.2", ["7.2", "10.0"])
        self.assertEqual(sorted(cols), [("debian12", "7.2"), ("debian13", "10.0"), ("unstable", "10.2")])
        self.assertEqual(testing.smoke_columns("debian13", [], "10.2", ["7.2", "10.0"]),
                         [("debian13", "7.2"), ("debian13", "10.0")])
        self.assertEqual(testing.smoke_columns("debian13", ["debian12", "unstable"], "10.2", []),
                         [("debian12", "10.2"), ("unstable", "10.2")])
        # On 7.2 by default: every line and every image still runs it once.
        cols = testing.smoke_columns("debian13", ["debian12", "unstable"], "7.2", ["10.0", "10.2"])
        self.assertEqual({i for i, _ in cols}, {"debian13", "debian12", "unstable"})
        self.assertEqual({q for _, q in cols} | {"7.2"}, {"7.2", "10.0", "10.2"})
        self.assertNotIn(("debian13", "7.2"), cols)

    def test_quick_timeout(self):
        script = ROOT / "testbench" / "guest" / "09-rdma-core.sh"
        self.assertEqual(testing.guest_header(script, "quick")[0].timeout, 600)
        self.assertEqual(testing.guest_header(script, "full")[0].timeout, 1800)


class BaselineTest(unittest.TestCase):
    """A test's baseline count depends on its image, not on its QEMU line:
    26-image-smoke@debian12@qemu-7.2 is held to 26-image-smoke@debian12's
    count, a label without a line of its own to the test's."""

    BASE = {"26-image-smoke": 85, "26-image-smoke@debian12": 84}

    def verdict(self, label, passed):
        got = [testing.Outcome(label, f"check {i}", True) for i in range(passed)]
        testing.apply_baseline(label, got, self.BASE)
        return all(o.passed for o in got)

    def test_image_and_line(self):
        self.assertTrue(self.verdict("26-image-smoke@debian12@qemu-7.2", 84))
        self.assertFalse(self.verdict("26-image-smoke@debian12@qemu-7.2", 83))
        self.assertTrue(self.verdict("26-image-smoke@debian12", 84))
        self.assertFalse(self.verdict("26-image-smoke@qemu-10.0", 84))
        self.assertTrue(self.verdict("26-image-smoke@qemu-10.0", 85))
        self.assertFalse(self.verdict("26-image-smoke@unstable@qemu-7.2", 84))


class HeaderTest(unittest.TestCase):
    """One parse of a guest test's header serves the VM options, the
    image filter and the CI set; a misspelt key is an error, not ignored."""

    def parse(self, text):
        with tempfile.TemporaryDirectory() as d:
            script = Path(d) / "99-x.sh"
            script.write_text("# hcasim-test: " + text + "\necho\n")
            return testing.header(script), script

    def test_keys(self):
        h, _ = self.parse("nodes=3 timeout=60 quick-timeout=30 sm=0 fabric-arg=--drop=1 fabric-arg=--x "
                          "append=a=b env=K=V include=f.inc kernel=sid images=debian12,unstable ci=0")
        self.assertEqual((h.nodes, h.timeout, h.quick_timeout, h.sm, h.ci), (3, 60, 30, False, False))
        self.assertEqual(h.fabric_args, ["--drop=1", "--x"])
        self.assertEqual((h.append, h.env, h.includes, h.kernel), (["a=b"], ["K=V"], ["f.inc"], "sid"))
        self.assertEqual(h.images, ["debian12", "unstable"])

    def test_filters(self):
        with tempfile.TemporaryDirectory() as d:
            script = Path(d) / "99-x.sh"
            script.write_text("# hcasim-test: nodes=2 images=debian12 ci=0\n")
            self.assertTrue(testing.applies(script, "debian12"))
            self.assertFalse(testing.applies(script, "debian13"))
            self.assertTrue(testing.suite_only(script))
            self.assertEqual(testing.guest_header(script)[0].nodes, 2)
            script.write_text("# hcasim-test: nodes=1\n")
            self.assertTrue(testing.applies(script, "unstable"))
            self.assertFalse(testing.suite_only(script))

    def test_unknown_key(self):
        with self.assertRaises(ValueError):
            self.parse("nodes=1 node=2")

    def test_every_guest_test_parses(self):
        for script in sorted((ROOT / "testbench" / "guest").glob("[0-9]*.sh")):
            testing.header(script)


class BootPanicTest(unittest.TestCase):
    """./hcasim test runs a guest test once more only when a node without a
    result died in its kernel before the image's init was ready."""

    def node(self, d, n, console):
        (d / f"node{n}").mkdir()
        (d / f"node{n}" / "console.log").write_text(console)

    def test_only_a_panic_before_init_counts(self):
        from types import SimpleNamespace as R
        with tempfile.TemporaryDirectory() as t:
            d = Path(t)
            self.node(d, 0, "[ 1.6] Oops: int3\n[ 1.6] Kernel panic - not syncing: Fatal exception\n")
            self.node(d, 1, "hcasim: node1 ready after 7.1s (mode run)\n[ 90.0] Kernel panic - not syncing\n")
            self.node(d, 2, "[ 1.6] Kernel panic - not syncing\n")
            results = [R(node=0, exit_code=None), R(node=1, exit_code=None), R(node=2, exit_code=1)]
            self.assertEqual(testing.boot_panics(d, results), [0])

    def test_a_qemu_dead_before_init_counts(self):
        from types import SimpleNamespace as R
        with tempfile.TemporaryDirectory() as t:
            d = Path(t)
            self.node(d, 0, "[ 1.28] pci 0000:00:04.0: BAR 1 [mem 0xfe")
            (d / "node0-qemu-died.txt").write_text("QEMU ended on signal 6: msix.c:228 Assertion\n")
            self.node(d, 1, "hcasim: node1 ready after 7.1s (mode run)\n")
            (d / "node1-qemu-died.txt").write_text("QEMU ended on signal 6\n")
            self.node(d, 2, "[ 1.28] pci 0000:00:04.0")
            results = [R(node=0, exit_code=None), R(node=1, exit_code=None), R(node=2, exit_code=None)]
            # Node 1 died after init (the driver may have caused it), node 2
            # did not die (it was stopped): neither is retried.
            self.assertEqual(testing.boot_panics(d, results), [0])


if __name__ == "__main__":
    unittest.main()

"""./hcasim: set up, build, boot VMs with the virtual HCA, run scripts and tests."""
import argparse
import os
import signal
import sys
from pathlib import Path

from hcasim import build, clues, demo, driver, fault, initramfs, kernels, suite, testing, vm
from hcasim.common import die, say


def add_vm_options(p, default_timeout=600):
    p.add_argument("--nodes", type=int, default=1, help="number of VMs (default 1, at most 16; with many, "
                   "--smp 1 --mem 512M keep a 2-core host going)")
    p.add_argument("--smp", type=int, default=0, help="vCPUs per VM (default: the host's CPUs shared out among "
                   "the VMs, 1 or 2)")
    p.add_argument("--mem", default="1536M", help="memory per VM (default 1536M)")
    p.add_argument("--accel", default="tcg", choices=["tcg", "kvm"],
                   help="QEMU accelerator (default tcg; kvm only where it really works)")
    p.add_argument("--trace-filter", default="all", help="device trace categories (default all)")
    p.add_argument("--append", default="", metavar="ARGS",
                   help="more guest kernel parameters, after hcasim's own (e.g. --append "
                        "'mlx5_core.dyndbg=+p': the driver's debug messages from its first probe on)")
    p.add_argument("--timeout", type=float, default=default_timeout, help="seconds before the VMs are killed")
    p.add_argument("--no-build", action="store_true", help="do not check/rebuild before booting")
    p.add_argument("--no-sm", action="store_true",
                   help="no built-in subnet manager/SA in the fabric (run opensm in a guest)")
    p.add_argument("--no-fabric", action="store_true",
                   help="no InfiniBand fabric: each port's link is up with nothing behind it")
    p.add_argument("--topology", metavar="FILE[,FILE]",
                   help="a fabric of several switches: the topology file (docs/FABRIC.md); node N is cabled "
                        "where its N-th 'node' line says; each further file is a further hcasim-fabric joined "
                        "by the files' remote lines (@PORT@ in them: a free TCP port of 127.0.0.1), its nodes "
                        "numbered after the first file's")
    p.add_argument("--fabric-arg", action="append", default=[],
                   help="extra hcasim-fabric option, e.g. --fabric-arg=--drop=1 (repeatable)")
    p.add_argument("--fault", action="append", default=[], metavar="KIND[:ARGS]",
                   help="arm a fault in every node's HCA from power-on, e.g. "
                        "cmd-status:opcode=QUERY_HCA_CAP,status=BAD_PARAM (repeatable; ./hcasim fault --list)")
    add_image_option(p)
    add_qemu_option(p)
    add_driver_options(p)


def add_qemu_option(p, matrix=False):
    what = ", ".join(f"{n} ({d})" for n, d in build.QEMU_LINES.items())
    if matrix:
        p.add_argument("--qemu", metavar="LINE,...|all",
                       help=f"the QEMU line(s) the device is built into: {what}; default {build.DEFAULT_QEMU}. "
                            "Several (or all) make a matrix")
    else:
        p.add_argument("--qemu", choices=list(build.QEMU_LINES),
                       help=f"the QEMU line the device is built into: {what}; default {build.DEFAULT_QEMU}")


def add_image_option(p, matrix=False):
    what = ", ".join(f"{n} ({d})" for n, (_, d) in build.IMAGES.items())
    if matrix:
        p.add_argument("--image", metavar="NAME,...|all",
                       help=f"the guest image(s): {what}; default {build.DEFAULT_IMAGE}. Several (or all) make a "
                            "matrix: each suite on each image, a table test x image")
    else:
        p.add_argument("--image", default=build.DEFAULT_IMAGE, choices=list(build.IMAGES),
                       help=f"the guest image: {what}; default {build.DEFAULT_IMAGE}")


def add_driver_options(p):
    p.add_argument("--modules", help="boot with these modules instead of the stock ones: a directory "
                   "<kernel release>/*.ko (./hcasim driver build makes build/driver/current/modules)")
    p.add_argument("--kernel", help="boot this kernel image (an x86 bzImage) instead of the guest image's; "
                   "a modular kernel wants --modules with its module tree (<release>/, e.g. a kernel package's "
                   "lib/modules or make modules_install's), from which the initramfs is made")
    p.add_argument("--test-fault", choices=["cqe-opcode"],
                   help="TESTING THE TESTS: make the device misbehave on purpose (cqe-opcode: requester "
                        "CQEs carry a wrong opcode)")


def check_kernel(kernel, modules):
    """--kernel: refused before anything boots when it is no bzImage, or
    when its module tree (complete, with modules.dep) lacks what a guest
    needs; a kernel package's tree without modules.dep is checked once
    depmod has run over the run's copy."""
    if not Path(kernel).is_file():
        die(f"--kernel {kernel}: no such file")
    try:
        release = initramfs.kernel_release(kernel)
        tree = initramfs.module_tree(modules, release) if modules else None
        if modules and tree is None:
            die(f"--modules {modules}: no module tree {release}/ (modules.dep, or kernel/ and modules.order) "
                f"for kernel {kernel}")
        if tree is not None and (tree / "modules.dep").is_file():
            initramfs.load_order(tree, release)
    except initramfs.KernelError as e:
        die(str(e))


def vm_options(a):
    if a.nodes < 1 or a.nodes > 16:
        die("--nodes must be between 1 and 16")
    fault.check_specs(a.fault)
    if a.kernel:
        check_kernel(a.kernel, driver.resolve_modules(a.modules))
    if a.topology:
        try:
            vm.check_topology(a.topology, a.nodes)
        except ValueError as e:
            die(str(e))
    return vm.VmOptions(topology=a.topology or "", faults=a.fault, nodes=a.nodes, smp=a.smp, mem=a.mem, accel=a.accel, trace_filter=a.trace_filter,
                        timeout=a.timeout, fabric=not a.no_fabric, builtin_sm=not a.no_sm,
                        fabric_args=a.fabric_arg, modules=driver.resolve_modules(a.modules),
                        kernel=a.kernel or "", test_fault=a.test_fault or "", image=a.image,
                        extra_append=a.append)


def cmd_setup(a):
    build.everything(sanitizers=True)
    say("setup complete")
    return 0


def cmd_build(a):
    build.everything(sanitizers=a.sanitizers, images=build.image_names(a.image or build.DEFAULT_IMAGE),
                     qemus=build.qemu_lines(a.qemu) if a.qemu else ())
    return 0


def cmd_run(a):
    if not a.no_build:
        build.everything(images=[a.image])
    script = Path(a.script)
    if not script.is_file():
        die(f"no such script: {script}")
    run_dir, results = vm.run_script(script, vm_options(a), name=script.stem)
    rc = 0
    for r in results:
        state = ("timed out" if r.timed_out else "no result") if r.exit_code is None else f"exit {r.exit_code}"
        say(f"node{r.node}: {state}; output {run_dir}/node{r.node}/output.log")
        if r.exit_code != 0:
            rc = 1
    if rc:
        for h in clues.clues(run_dir):
            say(f"  clue: {h}")
    print(run_dir)
    return rc


def cmd_boot(a):
    if not a.no_build:
        build.everything(images=[a.image])
    run_dir = vm.boot_interactive(vm_options(a))
    print(run_dir)
    return 0


def cmd_qtest(a):
    build.main_tree()
    outcomes = []
    for line in build.qemu_lines(a.qemu) if a.qemu else [build.qemu_line()]:
        outcomes += testing.qtest(line)
    for o in outcomes:
        print(f"{'ok  ' if o.passed else 'FAIL'} [{o.suite}] {o.name}")
    failed = sum(not o.passed for o in outcomes)
    print(f"{len(outcomes) - failed} passed, {failed} failed")
    return 0 if outcomes and not failed else 1


def parser():
    """The command line: every command of ./hcasim."""
    p = argparse.ArgumentParser(prog="hcasim", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    add_vm_commands(sub)
    add_test_commands(sub)
    add_driver_command(sub)

    from hcasim import fuzz, trace_cli
    trace_cli.register(sub)  # trace, inspect
    fuzz.register(sub)
    fault.register(sub)
    kernels.register(sub)
    return p


def add_vm_commands(sub):
    """setup, build, boot, run, demo."""
    s = sub.add_parser("setup", help="install dependencies with apt and build everything (idempotent)")
    s.set_defaults(func=cmd_setup)

    s = sub.add_parser("build", help="build the model, QEMU, the fabric and the guest image")
    s.add_argument("--sanitizers", action="store_true", help="also the ASan/UBSan + fuzz tree")
    add_image_option(s, matrix=True)
    add_qemu_option(s, matrix=True)
    s.set_defaults(func=cmd_build)

    s = sub.add_parser("boot", help="boot VMs; interactive console on node 0")
    add_vm_options(s, default_timeout=0)
    s.set_defaults(func=cmd_boot)

    s = sub.add_parser("run", help="boot VMs and run SCRIPT as root in every guest")
    add_vm_options(s)
    s.add_argument("script", help="shell script; sees HCASIM_NODE, HCASIM_NODES, HCASIM_MGMT_IPS")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("demo", help="the main job: build, boot, show the HCA at work")
    add_vm_options(s, default_timeout=600)
    s.set_defaults(func=demo.main)


def add_test_commands(sub):
    """test, suite, qtest."""
    s = sub.add_parser("test", help="build and run every test level; prints 'N passed, N failed'")
    s.add_argument("--no-guest", action="store_true", help="skip the guest tests")
    s.add_argument("--only", nargs="*", help="guest tests whose file name contains one of these")
    s.add_argument("--guest-only", action="store_true",
                   help="only the guest tests (no CTest levels, no sanitizer tree): for iterating on one guest test")
    s.add_argument("--image", choices=list(build.IMAGES),
                   help="run the guest tests on this image only (default: all of them on "
                        f"{build.DEFAULT_IMAGE}, the image smoke test on every image)")
    add_qemu_option(s)
    s.set_defaults(func=testing.main)

    s = sub.add_parser("suite", help="driver regression suites in VMs; summary table, JUnit XML, "
                       "'N passed, N failed'")
    s.add_argument("names", nargs="*", help="suites or guest tests to run (default all; --list shows them)")
    s.add_argument("--kernels", metavar="LINE,...",
                   help="a matrix: run the suites on the current kernel package of each Debian line "
                        f"({', '.join(kernels.LINES)}), booted with its own modules; a table test x kernel")
    s.add_argument("--list", action="store_true", help="list the suites and the guest tests they run")
    add_image_option(s, matrix=True)
    add_qemu_option(s, matrix=True)
    s.add_argument("--jobs", type=int, default=1,
                   help="guest tests run at once (default 1; each two-VM test wants about 2 cores)")
    s.add_argument("--junit", help="JUnit XML output (default build/suite-results.xml)")
    s.add_argument("--no-build", action="store_true", help="do not check/rebuild before booting")
    add_driver_options(s)
    s.add_argument("--expect-dmesg", metavar="REGEX",
                   help="every guest test also checks that the kernel log has a line matching REGEX "
                        "(e.g. the pr_info of a patched driver)")
    s.set_defaults(func=suite.main)

    s = sub.add_parser("qtest", help="build the device's qtest (qemu-device/qtest) in QEMU's own tree and run it; "
                       "'N passed, N failed'")
    add_qemu_option(s, matrix=True)
    s.set_defaults(func=cmd_qtest)


def add_driver_command(sub):
    s = sub.add_parser("driver", help="build mlx5_core/mlx5_ib/ib_ipoib from source for the guest kernel")
    s.add_argument("action", choices=["build", "show"], help="build: build the modules; show: what is built")
    s.add_argument("--source", help="a kernel tree to build from (default: Debian's linux-source-X.Y at the "
                   "guest kernel's exact version)")
    s.add_argument("--patch", action="append", default=[], help="a patch to apply first (repeatable)")
    add_image_option(s)
    s.set_defaults(func=driver.main)


def _terminated(signum, _frame):
    # SIGTERM and SIGHUP (a CI timeout, a closed terminal) unwind like
    # Ctrl-C: the VMs, the fabric and the relays are stopped on the way out.
    # A signal the caller ignores (nohup's SIGHUP) stays ignored.
    raise SystemExit(128 + signum)


def main(argv=None):
    a = parser().parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _terminated)
    # One QEMU line for the whole command (a suite matrix sets it per column).
    if getattr(a, "qemu", None) and len(build.qemu_lines(a.qemu)) == 1:
        os.environ["HCASIM_QEMU_LINE"] = build.qemu_lines(a.qemu)[0]
    try:
        return a.func(a)
    except KeyboardInterrupt:
        return 130
    except initramfs.KernelError as e:
        die(str(e))


if __name__ == "__main__":
    sys.exit(main())

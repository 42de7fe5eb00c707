"""./hcasim suite: the driver regression suites, each booting the VMs it
needs and asserting on what the guests print.

    ./hcasim suite                 every suite
    ./hcasim suite verbs ipoib     some
    ./hcasim suite --list          what each suite runs
    ./hcasim suite faults --kernels bookworm,trixie,sid
                                   a matrix: each suite on each Debian
                                   kernel line's current kernel package
    ./hcasim suite --image debian13
                                   every suite on the Debian 13 image
    ./hcasim suite smoke verbs --image all
                                   a matrix: each suite on each guest
                                   image (its own kernel and rdma-core)
    ./hcasim suite 17-faults       one guest test by name

Each suite is a list of guest tests (testbench/guest/NN-*.sh; their TAP
lines are the checks). A test that two suites share runs once. Results: a
summary table, JUnit XML (build/suite-results.xml), the run directory of
every failing test (dmesg, console, device trace, fabric capture), and a
final "N passed, N failed" line. testbench/guest/baseline.txt records how
many checks of each test pass; fewer fails the suite even if nothing said
"not ok" (a test that silently stopped checking things).
"""
import os
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hcasim import build, clues, driver, kernels, testing
from hcasim.common import BUILD, ROOT, die, say

GUEST = ROOT / "testbench" / "guest"

SUITES = {
    "smoke": ("PCI device, init segment, mlx5_core probe/reload/reboot", ["01-foundation", "02-core-probe"]),
    "diags": ("infiniband-diags and opensm: one guest with opensm, the fabric with its SM and with opensm",
              ["04-ib-opensm", "05-fabric-ud", "06-fabric-opensm"]),
    "verbs": ("the rdma-core pingpongs (RC, UC, SRQ, XRC, UD), loss, error completions",
              ["08-verbs", "05-fabric-ud"]),
    "perftest": ("perftest bandwidth/latency matrix next to rxe", ["10-perftest"]),
    "rdma-core": ("the rdma-core pyverbs test suite against its baseline", ["09-rdma-core"]),
    "ipoib": ("IPoIB datagram and connected mode: ping, iperf3, link flap, reloads, MTU 4092",
              ["07-ipoib", "11-rdmacm", "33-ipoib-4k"]),
    "rdmacm": ("RDMA-CM over IPoIB: rping, ucmatose, udaddy, mckey", ["11-rdmacm"]),
    "reload": ("driver reload and port recovery stress; unload, FLR and reboot under traffic",
               ["02-core-probe", "04-ib-opensm", "07-ipoib", "13-teardown"]),
    "kverbs": ("guest-driver/kverbs: kernel ib_post_send/ib_post_recv exerciser", ["12-kverbs"]),
    "counters": ("Q counters through mlx5_ib (hw_counters, rdma statistic): error completions, RNR, a QP bound "
                 "to its own counter, loss on the fabric", ["27-counters"]),
    "hostile": ("a guest spraying doorbells, BlueFlame writes, BAR0 reads and random WQEs next to two honest "
                "guests; PCI reset and the driver's recovery", ["16-hostile"]),
    "faults": ("injected faults and the unmodified driver's reaction: command status, delivery, delay; error "
               "CQEs; lost CQEs and EQEs; QP, CQ, SRQ and port events; page requests; fatal health and the "
               "driver's recovery; link down, flap, retrain, ClientReregister, SM gone, partition, loss, "
               "duplicates, reordering; firmware death, error CQEs, QP and CQ errors, page requests and port "
               "events under iperf3 and ib_write_bw; a late completion and a lost interrupt under IPoIB; general "
               "events; AER errors, hot-unplug and re-plug, a surprise removal; a CQ error on mlx5_ib's UMR CQ; "
               "the fw_fatal grace period, slow firmware initialization, command faults on the driver's own "
               "commands and every application-level fault while IPoIB and RC traffic run (docs/FAULTS.md)",
               ["17-faults", "18-faults-slow", "19-faults-ipoib", "20-faults-link", "21-faults-traffic",
                "22-faults-pci", "34-faults-umr", "35-faults-busy"]),
    "kernels": ("Debian's current kernel packages of bookworm (6.1), trixie (6.12) and sid (7.2) booted as user "
                "kernels (--kernel/--modules, an initramfs from each package's tree): probe, Active port, IPoIB, "
                "RC and UD pingpongs with their stock mlx5 drivers",
                ["23-kernel-bookworm", "24-kernel-trixie", "25-kernel-sid"]),
    "images": ("each guest image's own stack (kernel, stock drivers, rdma-core): probe, IPoIB, RC/UD/SRQ "
               "pingpongs, ib_write_bw, part of its rdma-core suite; with --image all, a column per image",
               ["26-image-smoke"]),
    "topology": ("fabrics beyond one switch: a two-level fat tree of four switches routed by opensm in a guest "
                 "and by the built-in SM with LMC 1 (ibnetdiscover, ibtracert, IPoIB, RC across it, per-switch "
                 "capture records); one subnet across two daemons joined over TCP (docs/FABRIC.md)",
                 ["28-fabric-fattree", "29-fabric-fattree-sm", "30-fabric-two-daemons"]),
    "scale": ("16 VMs (1 vCPU, 512 MiB) on one switch with the built-in SM and with opensm in a guest: every "
              "port Active with its own LID, all pairs of 8 VMs ping over IPoIB, four ib_write_bw pairs at once",
              ["31-scale-16", "32-scale-16-opensm"]),
    "robustness": ("the host side under a wrong or hostile guest: teardown and FLR under traffic, fabric restart, "
                   "the run directory's protection, the hostile guest",
                   ["13-teardown", "14-fabric-restart", "15-harness", "16-hostile"]),
}


def script_of(name):
    s = GUEST / f"{name}.sh"
    if not s.exists():
        die(f"suite test {name} has no script {s}")
    return s


def run_tests(names, jobs, opts_extra):
    """Runs the guest tests; returns {name: (outcomes, seconds)}.
    With jobs > 1, single-node tests run side by side; a multi-node test
    runs alone (the machine's cores go to its VMs)."""
    results = {}
    lock = threading.Lock()
    image = opts_extra.get("image", build.DEFAULT_IMAGE)

    def one(name):
        timing = {}
        outcomes = testing.guest_test(script_of(name), timing=timing, **opts_extra)
        with lock:
            results[name] = (outcomes, timing[testing.label_of(script_of(name), image)][0])

    single = [n for n in names if testing.guest_header(script_of(n))[0].nodes == 1]
    multi = [n for n in names if n not in single]
    if jobs > 1 and len(single) > 1:
        with ThreadPoolExecutor(max_workers=jobs) as ex:
            list(ex.map(one, single))
    else:
        for n in single:
            one(n)
    for n in multi:
        one(n)
    return results


def junit(suites, results, properties=None):
    """JUnit XML of one run; properties (e.g. {"image": ...}) go on every
    test suite. results: {test: (outcomes, seconds)}; a suite's test that
    did not run there (another image's) is left out."""
    root = ET.Element("testsuites")
    for suite in suites:
        tests = [t for t in SUITES[suite][1] if t in results]
        ts = ET.SubElement(root, "testsuite", name=suite)
        if properties:
            props = ET.SubElement(ts, "properties")
            for k, v in properties.items():
                ET.SubElement(props, "property", name=k, value=v)
        n = f = 0
        for t in tests:
            outcomes, secs = results[t]
            for o in outcomes:
                tc = ET.SubElement(ts, "testcase", classname=f"{suite}.{t}", name=o.name,
                                   time=f"{secs / max(len(outcomes), 1):.2f}")
                n += 1
                if not o.passed:
                    f += 1
                    ET.SubElement(tc, "failure", message=o.detail or "failed").text = o.detail
        ts.set("tests", str(n))
        ts.set("failures", str(f))
    return root


def write_junit(path, roots):
    """One file of the testsuites of several runs (a matrix's columns)."""
    top = ET.Element("testsuites")
    for r in roots:
        top.extend(list(r))
    ET.ElementTree(top).write(path, encoding="unicode", xml_declaration=True)


def expand(names):
    """The suites named (a guest test's own name is a suite of one)."""
    for n in names:
        if n not in SUITES:
            if not (GUEST / f"{n}.sh").exists():
                die(f"no suite or guest test '{n}' (./hcasim suite --list)")
            SUITES[n] = (f"the guest test {n}", [n])
    return names or list(SUITES)


def pinned(name):
    """A test whose header boots a kernel line of its own (kernel=LINE)."""
    return testing.guest_header(script_of(name))[0].kernel_line != ""


def columns_of(images, lines, qemus=()):
    """The matrix's columns: (label, image, kernel line or None, QEMU line
    or None)."""
    cols = []
    for q in qemus or [None]:
        for img in images:
            for line in lines or [None]:
                parts = ([img] if len(images) > 1 or img != build.DEFAULT_IMAGE or not (lines or qemus) else []) + \
                        ([line] if line else []) + ([f"qemu-{q}"] if q else [])
                cols.append(("/".join(parts), img, line, q))
    return cols


def matrix(a, suites, cols):
    """Each suite's tests in each column (a guest image, a kernel line or
    both); a table test x column. A test that does not apply to an image
    (its header's images=) shows "-" there."""
    names = [t for s in suites for t in SUITES[s][1] if not pinned(t)]
    names = list(dict.fromkeys(names))
    if not names:
        die("nothing to run: the tests named pin their own kernel (kernel=LINE)")
    base = testing.load_baseline()
    cells, failed, roots = {}, [], []
    t0 = time.monotonic()
    for label, img, line, q in cols:
        if q:
            os.environ["HCASIM_QEMU_LINE"] = q
        extra = {"image": img, "expect_dmesg": a.expect_dmesg or ""}
        if line:
            k, m = kernels.fetch(line)
            extra.update(kernel=str(k), modules=str(m))
        here = [t for t in names if testing.applies(script_of(t), img)]
        say(f"{label}: {', '.join(here)}")
        results = run_tests(here, a.jobs, extra)
        for t in here:
            outcomes, secs = results[t]
            testing.apply_baseline(testing.label_of(script_of(t), img), outcomes, base)
            p = sum(o.passed for o in outcomes)
            cells[t, label] = (p, len(outcomes) - p, secs)
            failed += [(label, t, o) for o in outcomes if not o.passed]
        props = {"image": img, "qemu": build.qemu_line(), **({"kernel": line} if line else {})}
        roots.append(junit(suites, results, props))
    labels = [c[0] for c in cols]
    print(f"\n{'test':20}" + "".join(f" {label:>20}" for label in labels) + "   (passed/failed, seconds)")
    for t in names:
        row = "".join(f" {f'{cells[t, c][0]}/{cells[t, c][1]}, {cells[t, c][2]:.0f}s' if (t, c) in cells else '-':>20}"
                      for c in labels)
        print(f"{t:20}{row}")
    if failed:
        print("\nFailures:")
        for label, t, o in failed:
            print(f"  [{label}] [{t}] {o.name}")
        for d in sorted({o.detail for _, _, o in failed if o.detail}):
            print(f"  artifacts: {d}")
            for h in clues.clues(Path(d)):
                print(f"    {h}")
    xml = Path(a.junit) if a.junit else BUILD / "suite-results.xml"
    write_junit(xml, roots)
    total_pass = sum(c[0] for c in cells.values())
    print(f"\nJUnit XML: {xml}; wall time {time.monotonic() - t0:.0f}s")
    print(f"{total_pass} passed, {len(failed)} failed")
    return 0 if not failed and total_pass else 1


def main(a):
    if a.list:
        for name, (what, tests) in SUITES.items():
            print(f"{name:10} {what}\n{'':10} tests: {', '.join(tests)}")
        return 0
    suites = expand(a.names)
    if a.kernels and (a.kernel or a.modules or a.test_fault):
        die("--kernels runs Debian's kernel packages: not with --kernel, --modules or --test-fault")
    images = build.image_names(a.image) if a.image else [build.DEFAULT_IMAGE]
    qemus = build.qemu_lines(a.qemu) if a.qemu else []
    if not a.no_build:
        build.everything(images=images, qemus=qemus)
    lines = [line.strip() for line in (a.kernels or "").split(",") if line.strip()]
    if lines or len(images) > 1 or len(qemus) > 1:
        return matrix(a, suites, columns_of(images, lines, qemus if len(qemus) > 1 else ()))
    image = images[0]
    extra = {"image": image}
    if a.modules or a.kernel or a.test_fault or a.expect_dmesg:
        extra.update(modules=driver.resolve_modules(a.modules), kernel=a.kernel or "",
                     test_fault=a.test_fault or "", expect_dmesg=a.expect_dmesg or "")
    if a.test_fault:
        say(f"WARNING: the device runs with the deliberate test fault '{a.test_fault}'")
    names = []
    for s in suites:
        for t in SUITES[s][1]:
            if t not in names and testing.applies(script_of(t), image):
                names.append(t)
    if not names:
        die(f"nothing to run on {image}: the tests named are for other images (their images=)")
    t0 = time.monotonic()
    results = run_tests(names, a.jobs, extra)
    base = testing.load_baseline()
    for t in names:
        testing.apply_baseline(testing.label_of(script_of(t), image), results[t][0], base)
    print()
    print(f"{'suite':10} {'test':18} {'passed':>7} {'failed':>7} {'seconds':>8}  artifacts of failures")
    total_pass = total_fail = 0
    for s in suites:
        for t in SUITES[s][1]:
            if t not in results:
                print(f"{s:10} {t:18} {'-':>7} {'-':>7} {'-':>8}  (not for {image})")
                continue
            outcomes, secs = results[t]
            p = sum(o.passed for o in outcomes)
            f = len(outcomes) - p
            where = next((o.detail for o in outcomes if not o.passed and o.detail), "")
            print(f"{s:10} {t:18} {p:7} {f:7} {secs:8.0f}  {where}")
    for t in names:
        outcomes, _ = results[t]
        total_pass += sum(o.passed for o in outcomes)
        total_fail += sum(not o.passed for o in outcomes)
    failed = [(t, o) for t in names for o in results[t][0] if not o.passed]
    if failed:
        print("\nFailures:")
        for t, o in failed:
            print(f"  [{t}] {o.name}")
        dirs = sorted({o.detail for _, o in failed if o.detail})
        for d in dirs:
            print(f"  artifacts: {d} (nodeN/dmesg.txt, console.log, hca.trace, fabric.pcapng)")
            for line in clues.clues(Path(d)):
                print(f"    {line}")
        if a.test_fault:
            print(f"  note: the device ran with the deliberate test fault '{a.test_fault}' "
                  f"(requester CQEs carry a wrong opcode); the failures above are expected to point at it")
    xml = Path(a.junit) if a.junit else BUILD / "suite-results.xml"
    write_junit(xml, [junit(suites, results, {"image": image, "qemu": build.qemu_line()})])
    print(f"\nJUnit XML: {xml}; wall time {time.monotonic() - t0:.0f}s")
    print(f"{total_pass} passed, {total_fail} failed")
    return 0 if total_fail == 0 and total_pass else 1


"""The harness keeps guests in their run directory: the fabric control relay
(tools/hcasim/vm.py) and the result readers against what a guest can plant
in the shared run directory — symlinks to host files, fifos, huge files, a
directory swapped for a link.  Real host symlinks and fifos here, i.e. what
a guest could make with 9p security_model=none; the relay must not rely on
the 9p model."""
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock
from pathlib import Path

from hcasim import clues, fuzz, hostcpu, pci_fault, postmortem, rundir, runs, testing, vm


class FakeFabric(threading.Thread):
    """A control socket that answers every line with reply ("ok") and keeps the lines."""

    def __init__(self, path, reply=b"ok\n"):
        super().__init__(daemon=True)
        self.lines = []
        self.reply = reply
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(path))
        self.srv.listen()
        self.srv.settimeout(0.2)
        self.stopping = False

    def run(self):
        while not self.stopping:
            try:
                c, _ = self.srv.accept()
            except OSError:
                continue
            with c:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                self.lines.append(data.decode(errors="replace"))
                c.sendall(self.reply)


class RelayBase(unittest.TestCase):
    """A relay on a fresh run directory, a fake fabric, a canary outside."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="hcasim-harness-"))
        self.run_dir = self.tmp / "run"
        self.run_dir.mkdir()
        self.outside = self.tmp / "outside"
        self.outside.mkdir()
        self.canary = self.outside / "canary"
        self.canary.write_text("SECRET-CANARY\n")
        self.canary_stat = self.canary.stat()
        self.fabric = FakeFabric(self.tmp / "ctl.sock")
        self.fabric.start()
        self.relay = vm.ControlRelay(self.run_dir, self.tmp / "ctl.sock")
        self.req = self.run_dir / "fabric-requests"

    def tearDown(self):
        self.relay.stop()
        self.fabric.stopping = True
        self.fabric.join()
        for p in sorted(self.tmp.rglob("*"), reverse=True):
            if p.is_dir() and not p.is_symlink():
                p.rmdir()
            else:
                p.unlink()
        self.tmp.rmdir()

    def assert_canary_untouched(self):
        st = self.canary.stat()
        self.assertEqual(self.canary.read_text(), "SECRET-CANARY\n")
        self.assertEqual((st.st_mtime_ns, st.st_ctime_ns), (self.canary_stat.st_mtime_ns, self.canary_stat.st_ctime_ns))
        self.assertFalse(any("SECRET" in line for line in self.fabric.lines), self.fabric.lines)
        self.assertNotIn("SECRET", (self.run_dir / "fabric-requests.log").read_text())
        self.assertFalse(any("SECRET" in p.read_text(errors="replace") for p in self.req.glob("*.rep")))

    def poll(self):
        self.relay.poll()


class RelayTest(RelayBase):
    def test_symlinked_request_is_refused(self):
        (self.req / "evil.req").symlink_to(self.canary)
        self.poll()
        self.assertIn("error refused", (self.req / "evil.rep").read_text())
        self.assertFalse((self.req / "evil.req").is_symlink())
        self.assert_canary_untouched()

    def test_planted_reply_and_temp_links_are_replaced_not_followed(self):
        (self.req / "a.rep").symlink_to(self.canary)
        (self.req / "a.rep.relay-tmp").symlink_to(self.canary)
        (self.req / "a.req").write_text("ports\n")
        self.poll()
        self.assertFalse((self.req / "a.rep").is_symlink())
        self.assertEqual((self.req / "a.rep").read_text(), "ok\n")
        self.assertEqual(self.fabric.lines, ["ports\n"])
        self.assert_canary_untouched()

    def test_fifo_device_and_huge_requests_are_refused_without_blocking(self):
        os.mkfifo(self.req / "f.req")
        (self.req / "big.req").write_bytes(b"x" * (vm.ControlRelay.MAX_REQUEST + 1))
        (self.req / "bin.req").write_bytes(b"\x00\xff\x01")
        (self.req / "ok.req").write_text("stats\n")
        t0 = time.monotonic()
        self.poll()
        self.assertLess(time.monotonic() - t0, 5)
        for n in ("f", "big", "bin"):
            self.assertIn("error refused", (self.req / f"{n}.rep").read_text(), n)
        self.assertEqual((self.req / "ok.rep").read_text(), "ok\n")
        self.assertEqual(self.fabric.lines, ["stats\n"])

    def test_swapped_directory_is_not_followed(self):
        self.req.rename(self.run_dir / "old")
        self.req.symlink_to(self.outside)
        (self.outside / "x.req").write_text("ports\n")
        self.poll()
        self.assertTrue((self.outside / "x.req").exists())
        self.assertFalse((self.outside / "x.rep").exists())
        self.assertEqual(self.fabric.lines, [])
        self.req.unlink()
        (self.run_dir / "old").rename(self.req)

    def test_only_harness_fabric_restart_and_no_cluster(self):
        (self.req / "h.req").write_text("harness rm -rf /\n")
        self.poll()
        self.assertIn("error", (self.req / "h.rep").read_text())


class LinkFaultTest(RelayBase):
    """`harness fault node<N> LINK-KIND` (hca_fault in a guest test) becomes
    fabric commands for the node's switch port; bad specs send nothing."""

    class Cluster:
        class Opts:
            nodes = 3
        opts = Opts()
        sock_dir = Path("/nonexistent")

    def setUp(self):
        super().setUp()
        self.relay.cluster = self.Cluster()

    def ask(self, line):
        (self.req / "f.req").write_text(line + "\n")
        self.poll()
        return (self.req / "f.rep").read_text()

    def test_link_kinds_become_fabric_commands(self):
        for spec, lines in [
            ("drop:pct=5", ["drop 2 5 all"]),
            ("drop:pct=0.5,scope=requests", ["drop 2 0.5 requests"]),
            ("link-flap:ms=300", ["link 2 flap 300"]),
            ("link-flap", ["link 2 flap 2000"]),
            ("partition:with=0+2", ["partition 2 1,3"]),
            ("client-rereg", ["sm rereg 2"]),
            ("lid-change", ["sm lid 2"]),
            ("pkey-change:pkeys=0x8001+0xffff", ["sm pkeys 2 0x8001,0xffff"]),
            ("sm-down", ["sm stop"]),
            ("link-clear", ["drop 2 0", "corrupt 2 0", "delay 2 0", "duplicate 2 0", "reorder 2 0", "link 2 up",
                            "partition clear"]),
        ]:
            self.fabric.lines.clear()
            reply = self.ask(f"harness fault node1 {spec}")
            self.assertTrue(reply.endswith("ok\n"), reply)
            self.assertIn("switch port 2", reply)
            self.assertEqual(self.fabric.lines, [line + "\n" for line in lines], spec)

    def test_bad_link_specs_send_nothing(self):
        for spec in ("drop", "drop:pct=5,color=red", "drop:pct=5;ports", "partition:with=1", "partition:with=x",
                     "delay:us=", "link-down:ms=5", "pkey-change", "pkey-change:pkeys=0x80;01"):
            reply = self.ask(f"harness fault node1 {spec}")
            self.assertTrue(reply.startswith("error"), (spec, reply))
        self.assertEqual(self.fabric.lines, [])


class FakeQmp(threading.Thread):
    """A QMP monitor on a unix socket: greets, records each command, answers
    from `answers` (command -> return value, an exception: an error, or a
    function of the command's arguments returning either)."""

    def __init__(self, path, answers):
        super().__init__(daemon=True)
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(path))
        self.srv.listen(4)
        self.srv.settimeout(0.2)
        self.answers = answers
        self.commands = []
        self.stopping = False

    def run(self):
        while not self.stopping:
            try:
                c, _ = self.srv.accept()
            except socket.timeout:
                continue
            with c, c.makefile("rwb") as f:
                f.write(b'{"QMP": {"version": {}}}\n')
                f.flush()
                for line in f:
                    msg = json.loads(line)
                    self.commands.append(msg)
                    r = self.answers.get(msg["execute"], {})
                    if callable(r):
                        r = r(msg.get("arguments", {}))
                    out = {"error": {"desc": str(r)}} if isinstance(r, Exception) else {"return": r}
                    f.write(json.dumps(out).encode() + b"\n")
                    f.flush()


class PciFaultTest(unittest.TestCase):
    """pci-unplug / pci-replug: QMP device_del / device_add with the options
    recorded on the run's host side, typed as QMP wants them."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="hcasim-pci-"))
        self.run_dir = self.tmp / "run"
        (self.run_dir / "node0").mkdir(parents=True)
        self.sock = self.tmp / "qmp.sock"
        pci_fault.record_device(self.run_dir, 0, "mlx5-hca,id=hca0,bus=rp0,node-guid=1234,"
                                f"trace={self.run_dir}/node0/hca.trace,trace-filter=cmd,,eq,fault=lost-eqe:eqn=1,,count=2")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def qmp(self, answers):
        q = FakeQmp(self.sock, answers)
        q.start()
        self.addCleanup(setattr, q, "stopping", True)
        return q

    def test_options_parse_as_qemu_does(self):
        a = pci_fault.replug_args(self.run_dir, 0)
        self.assertEqual(a, {"driver": "mlx5-hca", "id": "hca0", "bus": "rp0", "node-guid": 1234,
                             "trace": f"{self.run_dir}/node0/hca.trace", "trace-filter": "cmd,eq"})

    def test_unplug_then_replug(self):
        q = self.qmp({"qom-list": [{"name": "rp0"}]})
        ok, text = pci_fault.pci_fault(self.sock, self.run_dir, 0, "pci-unplug")
        self.assertTrue(ok, text)
        (self.run_dir / "node0" / "hca.trace").write_text("old\n")
        ok, text = pci_fault.pci_fault(self.sock, self.run_dir, 0, "pci-replug")
        self.assertTrue(ok, text)
        cmds = [c for c in q.commands if c["execute"] != "qmp_capabilities"]
        self.assertEqual(cmds[0], {"execute": "device_del", "arguments": {"id": "hca0"}})
        self.assertEqual(cmds[-1]["execute"], "device_add")
        self.assertEqual(cmds[-1]["arguments"]["node-guid"], 1234)
        self.assertNotIn("fault", cmds[-1]["arguments"])
        self.assertEqual((self.run_dir / "node0" / "hca-unplugged-1.trace").read_text(), "old\n")

    def test_replugs_are_limited(self):
        q = self.qmp({"qom-list": [{"name": "rp0"}]})
        for k in range(1, pci_fault.MAX_REPLUGS + 1):
            (self.run_dir / "node0" / f"hca-unplugged-{k}.trace").write_text("old\n")
        ok, text = pci_fault.pci_fault(self.sock, self.run_dir, 0, "pci-replug")
        self.assertFalse(ok)
        self.assertIn("at most", text)
        self.assertFalse(any(c["execute"] == "device_add" for c in q.commands))

    def test_replug_is_refused_while_the_device_is_in_its_slot(self):
        q = self.qmp({"qom-list": [{"name": "rp0"}, {"name": "hca0"}]})
        ok, text = pci_fault.pci_fault(self.sock, self.run_dir, 0, "pci-replug")
        self.assertFalse(ok)
        self.assertIn("still in its slot", text)
        self.assertFalse(any(c["execute"] == "device_add" for c in q.commands))

    def test_aer_severities_become_monitor_commands(self):
        q = self.qmp({"human-monitor-command": "OK id: hca0 root bus: pcie.0, bus: 1 devfn: 0.0\n"})
        for spec, line in (("pci-aer", "pcie_aer_inject_error hca0 COMP_TIME"),
                           ("pci-aer:severity=fatal", "pcie_aer_inject_error hca0 MALF_TLP"),
                           ("pci-aer:severity=correctable", "pcie_aer_inject_error -c hca0 0x40")):
            ok, text = pci_fault.pci_fault(self.sock, self.run_dir, 0, spec)
            self.assertTrue(ok, text)
            self.assertEqual(q.commands[-1]["arguments"], {"command-line": line})
        for bad in ("pci-aer:severity=mild", "pci-aer:fatal"):
            self.assertFalse(pci_fault.pci_fault(self.sock, self.run_dir, 0, bad)[0], bad)

    def test_arguments_and_qmp_errors_are_reported(self):
        self.qmp({"device_del": RuntimeError("Device 'hca0' not found")})
        self.assertEqual(pci_fault.pci_fault(self.sock, self.run_dir, 0, "pci-unplug:now=1")[0], False)
        ok, text = pci_fault.pci_fault(self.sock, self.run_dir, 0, "pci-unplug")
        self.assertFalse(ok)
        self.assertIn("not found", text)


class HostCpuTest(unittest.TestCase):
    """host-cpu.txt: a node's QEMU main-loop and vCPU time per packet its
    device handled (counters through QMP), the fabric's per packet it
    forwarded (its control socket)."""

    def test_sample_and_report(self):
        tmp = Path(tempfile.mkdtemp(prefix="hcasim-cpu-"))
        self.addCleanup(shutil.rmtree, tmp)
        q = FakeQmp(tmp / "qmp.sock", {"qom-get": "counters: commands=9 packets_tx=1000 packets_rx=3000 "
                                                  "packets_looped=5 packets_dropped=0\n"})
        q.start()
        self.addCleanup(setattr, q, "stopping", True)
        fab = FakeFabric(tmp / "ctl.sock", b"switch: forwarded=4000 local=2 dropped=0\nok\n")
        fab.start()
        self.addCleanup(setattr, fab, "stopping", True)
        # A stand-in for QEMU: its main thread burns 0.5 s of CPU, then waits.
        proc = subprocess.Popen([sys.executable, "-c", "import sys, time\nt = time.process_time()\n"
                                 "while time.process_time() - t < 0.5: pass\nprint(flush=True)\nsys.stdin.read()\n"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        proc.stdout.readline()
        s = hostcpu.qemu_sample(proc.pid, tmp / "qmp.sock")
        self.assertGreaterEqual(s["main"], 0.4, s)
        self.assertEqual(s["vcpu"], 0.0)
        self.assertEqual((s["tx"], s["rx"], s["looped"]), (1000, 3000, 5))
        cpu, forwarded = hostcpu.fabric_sample(os.getpid(), tmp / "ctl.sock")
        self.assertEqual(forwarded, 4000)
        self.assertIn("stats\n", fab.lines)
        text = hostcpu.report({0: s}, cpu, forwarded)
        per = re.search(r"node0: main loop \(device, links\) ([0-9.]+) s, .* tx=1000 rx=3000 looped=5: "
                        r"([0-9.]+) us/packet in the main loop", text)
        self.assertTrue(per, text)
        self.assertAlmostEqual(float(per.group(2)), 1e6 * s["main"] / 4000, delta=0.1)
        self.assertRegex(text, r"fabric: [0-9.]+ s for 4000 forwarded packets: [0-9.]+ us/packet")


class PostMortemTest(unittest.TestCase):
    """A guest that runs out of time: before the kill, the harness records
    which QEMU threads burned CPU, what QMP says (or that it did not answer),
    and the tails of the guest's files, read without following what a guest
    planted; the runner prints it as clues."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="hcasim-pm-"))
        self.run_dir = self.tmp / "run"
        (self.run_dir / "node0").mkdir(parents=True)
        secret = self.tmp / "secret"
        secret.write_text("SECRET\n")
        (self.run_dir / "node0" / "dmesg.txt").symlink_to(secret)
        # Larger than anything read whole: only its tail is read.
        (self.run_dir / "node0" / "output.log").write_text("x" * (8 << 20) + "\nok 1 - booted\n# waiting for ever\n")
        self.sock = self.tmp / "qmp.sock"
        # A stand-in for QEMU: one thread spinning, one asleep.
        self.proc = subprocess.Popen([sys.executable, "-c", "import threading, time\n"
                                      "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                                      "while True: pass\n"])
        self.addCleanup(self.proc.wait)
        self.addCleanup(self.proc.kill)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_busy_threads_qmp_state_and_tails(self):
        q = FakeQmp(self.sock, {"query-status": {"status": "running", "running": True},
                                "human-monitor-command": "* CPU #0: thread_id=1\n  CPU #1: thread_id=2 (halted)\n",
                                "qom-get": "HCA: state=initialized\nport 1: Active lid=2\nEQs: 5\n"})
        q.start()
        self.addCleanup(setattr, q, "stopping", True)
        postmortem.record(self.proc.pid, self.sock, self.run_dir, 0)
        lines = postmortem.summary(self.run_dir, 0)
        text = "\n".join(lines)
        # The spinning thread leads the list; it gets a whole CPU only on an
        # idle machine (CTest runs two tests at once on two cores).
        busy = re.search(r"CPU over 2 s: \S+ (\d+)%", text)
        self.assertTrue(busy and int(busy.group(1)) >= 20, text)
        self.assertIn("run state: running", text)
        self.assertIn("CPU #1: thread_id=2 (halted)", text)
        self.assertIn("device: HCA: state=initialized", text)
        self.assertIn("# waiting for ever", text)
        self.assertIn("node0/dmesg.txt: empty or missing", (rundir.host_side(self.run_dir) /
                                                            "node0-timeout.txt").read_text())
        self.assertNotIn("SECRET", text)
        self.assertEqual([c["execute"] for c in q.commands][:2], ["qmp_capabilities", "query-status"])

    def test_vcpus_and_the_guests_own_stacks(self):
        """Where each vCPU is (RIP from _text, halted, interrupts), the
        stacks SysRq w and l asked the guest for (without the unwinder's
        guesses), and the gist of it for the runner's list of failures."""
        regs = ("CPU#0\nRAX=0000000000000000\nRIP=ffffffff8fb12a3f RFL=00000202 [-------] CPL=0 II=0 A20=1 "
                "SMM=0 HLT=1\nCPU#1\nRIP=ffffffff8f000010 RFL=00000002 [-------] CPL=0 II=0 A20=1 SMM=0 HLT=0\n")
        hmp = {"info cpus": "* CPU #0: thread_id=1\n  CPU #1: thread_id=2\n", "info registers -a": regs}
        node = self.run_dir / "node0"
        (node / "output.log").write_text("# hcasim-ktext ffffffff8ee00000\nok 1 - booted\n")
        (node / "console.log").write_text("[   61.0] mlx5_core: probe\n")

        def guest_prints(args):
            # What a guest prints on its console for SysRq w and l.
            key = args["keys"][-1]["data"]
            with open(node / "console.log", "a") as f:
                f.write("[  500.6] sysrq: Show Blocked State\n[  500.6] task:bash state:D pid:191\n"
                        "[  500.6]  p9_client_rpc+0x164/0x430\n[  500.6]  ? __pfx_autoremove_wake_function+0x10\n"
                        if key == "w" else "[  500.7] sysrq: Show backtrace of all active CPUs\n")
            return {}
        q = FakeQmp(self.sock, {"query-status": {"status": "running", "running": True},
                                "human-monitor-command": lambda a: hmp[a["command-line"]], "send-key": guest_prints})
        q.start()
        self.addCleanup(setattr, q, "stopping", True)
        with mock.patch.object(postmortem, "SYSRQ_SECONDS", 0.1):
            postmortem.record(self.proc.pid, self.sock, self.run_dir, 0)
        text = "\n".join(postmortem.summary(self.run_dir, 0))
        self.assertIn("vcpu 0: RIP=ffffffff8fb12a3f (_text+0xd12a3f) CPL=0 halted=1 interrupts=on", text)
        self.assertIn("vcpu 1: RIP=ffffffff8f000010 (_text+0x200010) CPL=0 halted=0 interrupts=off", text)
        self.assertIn("what SysRq w and l printed (4 line(s)):", text)
        self.assertIn("p9_client_rpc+0x164/0x430", text)
        self.assertIn("Show backtrace of all active CPUs", text)
        self.assertNotIn("__pfx_autoremove_wake_function", text)
        keys = [[k["data"] for k in c["arguments"]["keys"]] for c in q.commands if c["execute"] == "send-key"]
        self.assertEqual(keys, [["alt", "sysrq", "w"], ["alt", "sysrq", "l"]])
        gist = postmortem.digest(self.run_dir, 0)
        self.assertRegex(gist, r"^\S+ \d+%.*; vcpu 0: RIP=ffffffff8fb12a3f .*halted=1 interrupts=on; vcpu 1: ")

    def test_a_guest_that_prints_no_stacks_is_named(self):
        q = FakeQmp(self.sock, {"human-monitor-command": ""})
        q.start()
        self.addCleanup(setattr, q, "stopping", True)
        with mock.patch.object(postmortem, "SYSRQ_SECONDS", 0.1):
            postmortem.record(self.proc.pid, self.sock, self.run_dir, 0)
        self.assertIn("SysRq printed nothing within", postmortem.digest(self.run_dir, 0))

    def test_a_silent_monitor_is_named(self):
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(str(self.sock))
        srv.listen(1)  # accepts the connection, never greets: a stuck main loop
        self.addCleanup(srv.close)
        postmortem.record(self.proc.pid, self.sock, self.run_dir, 0)
        text = "\n".join(postmortem.summary(self.run_dir, 0))
        self.assertIn("QMP did not answer within 3 s", text)
        self.assertIn("main loop is not returning", text)

    def test_the_runner_records_it_at_the_deadline(self):
        class Opts:
            timeout = 1.0
        cluster = vm.Cluster.__new__(vm.Cluster)
        cluster.run_dir, cluster.opts, cluster.sock_dir = self.run_dir, Opts, self.tmp
        cluster.vms = [self.proc]
        self.assertEqual(cluster.wait(1.0), [0])
        self.assertIsNotNone(self.proc.poll())
        self.assertTrue(any("QMP did not answer" in l for l in postmortem.summary(self.run_dir, 0)))


class QemuAbortTest(unittest.TestCase):
    """A QEMU that aborts while its guest boots gets its note
    (nodeN-qemu-died.txt), which makes the runner run the test once more,
    also when it had ended before the harness first looked (a one-node
    test: CI 8's 02-core-probe, TCG's iotlb_to_section assertion at 1.3 s)."""

    def test_an_abort_before_the_first_look_is_noted(self):
        tmp = Path(tempfile.mkdtemp(prefix="hcasim-abort-"))
        self.addCleanup(shutil.rmtree, tmp, True)
        run_dir = tmp / "run"
        (run_dir / "node0").mkdir(parents=True)
        (run_dir / "node0" / "qemu.log").write_text("qemu-system-x86_64: physmem.c:760: Assertion failed\n")
        proc = subprocess.Popen(["sh", "-c", "kill -ABRT $$"])
        proc.wait()
        cluster = vm.Cluster.__new__(vm.Cluster)
        cluster.run_dir, cluster.sock_dir = run_dir, tmp
        cluster.vms = [proc]
        self.assertEqual(cluster.wait(5.0), [])
        note = run_dir / "node0-qemu-died.txt"
        self.assertTrue(note.exists())
        self.assertIn("signal 6: qemu-system-x86_64: physmem.c:760: Assertion failed", note.read_text())
        self.assertEqual(testing.boot_panics(run_dir, [vm.NodeResult(0, None, False, "")]), [0])


class FuzzParseTest(unittest.TestCase):
    """./hcasim fuzz reads libFuzzer's figures with and without --jobs (the
    fork parent's status lines differ: "#N: cov:"; a 4-minute --jobs 2 run
    once reported 0 executions)."""

    def result(self, out):
        r = fuzz.Result("send", 1)
        r.seconds = 10
        fuzz.parse(out, r)
        return r

    def test_single(self):
        r = self.result("#4096\tpulse  cov: 120 ft: 300 corp: 40/2Kb exec/s: 400 rss: 50Mb\n"
                        "#5000\tNEW    cov: 125 ft: 310 corp: 41/2Kb lim: 4 exec/s: 500\n")
        self.assertEqual((r.execs, r.cov, r.features, r.corpus), (5000, 125, 310, 41))

    def test_fork(self):
        r = self.result("#609464: cov: 12495 ft: 11865 corp: 885 exec/s 2472 oom/timeout/crash: 0/0/0 time: 151s\n"
                        "#878721: cov: 12518 ft: 11997 corp: 954 exec/s 1707 oom/timeout/crash: 0/0/0 time: 254s\n")
        self.assertEqual((r.execs, r.cov, r.features, r.corpus), (878721, 12518, 11997, 954))
        self.assertEqual(r.exec_per_s, 87872)


class ClueTest(unittest.TestCase):
    def test_a_guest_without_its_run_directory_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            (d / "node0").mkdir()
            (d / "node0" / "console.log").write_text(
                "[    6.5] 9p: Installing v9fs\nhcasim: cannot mount the run directory over 9p: mount: No such device\n")
            self.assertEqual(clues.clues(d), ["node0 console: hcasim: cannot mount the run directory over 9p: "
                                              "mount: No such device"])


class ResultReadTest(unittest.TestCase):
    def test_results_through_links_fifos_or_too_big_are_not_read(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            (d / "node0").mkdir()
            secret = d / "secret"
            secret.write_text("SECRET\n")
            (d / "node0" / "output.log").symlink_to(secret)
            os.mkfifo(d / "node0" / "exit-code")
            (d / "node1").symlink_to(d / "node0")
            (d / "node2").mkdir()
            (d / "node2" / "exit-code").write_text("0\n")
            (d / "node2" / "output.log").write_bytes(b"y" * 100)
            fd = rundir.open_dir(d)
            try:
                self.assertIsNone(vm.read_result(fd, "node0/output.log", 1 << 20))
                self.assertIsNone(vm.read_result(fd, "node0/exit-code", 64))
                self.assertIsNone(vm.read_result(fd, "node1/exit-code", 64))
                self.assertEqual(vm.read_result(fd, "node2/exit-code", 64), "0\n")
                self.assertIsNone(vm.read_result(fd, "node2/output.log", 99))
                self.assertIsNone(vm.read_result(fd, "../secret", 99))
                (d / "wall-seconds").symlink_to(secret)
                rundir.write_file(fd, "wall-seconds", b"1.0\n")
                self.assertEqual(secret.read_text(), "SECRET\n")
                self.assertEqual((d / "wall-seconds").read_text(), "1.0\n")
            finally:
                os.close(fd)


class RunPruneTest(unittest.TestCase):
    """Run directories are pruned oldest first beyond the budget; a live
    run (its maker holds the lock), the newest finished run, and whatever
    the runs' links point to are never touched."""

    def make(self, root, name, nbytes, live=False):
        d = root / name
        (d / "node0").mkdir(parents=True)
        (d / "node0" / "hca.trace").write_bytes(b"x" * nbytes)
        host = rundir.host_side(d, create=True)
        lock = open(host / "lock", "w")
        if live:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.addCleanup(lock.close)
        else:
            lock.close()
        return d

    def test_oldest_finished_runs_go_first(self):
        with tempfile.TemporaryDirectory() as t:
            root = Path(t)
            outside = root.parent / (root.name + "-outside")
            outside.write_text("keep")
            self.addCleanup(outside.unlink)
            a = self.make(root, "20260101-000000-a", 1 << 20, live=True)
            b = self.make(root, "20260101-000001-b", 1 << 20)
            (b / "node0" / "link").symlink_to(outside)
            c = self.make(root, "20260101-000002-c", 1 << 20)
            d = self.make(root, "20260101-000003-d", 1 << 20)
            removed = runs.prune(1 << 20 | 1 << 19, root=root)
            self.assertEqual([r for r, _ in removed], [b, c])
            self.assertTrue(a.is_dir() and rundir.host_side(a).is_dir())
            self.assertFalse(b.exists() or rundir.host_side(b).exists() or c.exists())
            self.assertTrue(d.is_dir())
            self.assertEqual(outside.read_text(), "keep")
            self.assertEqual(runs.prune(0, root=root), [])  # d: the newest finished run stays

    def test_sizes(self):
        self.assertEqual(runs.parse_size("16G"), 16 << 30)
        self.assertEqual(runs.parse_size("512m"), 512 << 20)
        self.assertEqual(runs.parse_size("0"), 0)
        with self.assertRaises(ValueError):
            runs.parse_size("lots")


if __name__ == "__main__":
    unittest.main()

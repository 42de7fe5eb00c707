"""Booting hcasim VMs: the fabric daemon, one QEMU per node with the
mlx5-hca device, the management network, the run directory."""
import os
import re
import secrets
import shutil
import socket
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hcasim import fault, hostcpu, initramfs, inspect_hca, pci_fault, postmortem, rundir, runs
from hcasim.fabric_ctl import fabric_command
from hcasim.build import DEFAULT_IMAGE, artifacts, qemu_line
from hcasim.common import ROOT, RUNS, say

MGMT_NET = "10.77.0.{}"  # node i has 10.77.0.(i+1), set by the guest init
NODE_GUID_BASE = 0x0002c90300a00001  # Mellanox OUI 00:02:c9


def node_guid(i):
    return NODE_GUID_BASE + i


# The nice value of a QEMU's vCPU threads. A guest that busy-polls (perftest,
# the pingpongs, NAPI under load) keeps its vCPU thread running all the
# time; at the same nice value as the main loop, the main loop (the device,
# its link to the fabric, virtio-net) waits for the scheduler's slice
# (milliseconds) whenever a packet arrives. Each QEMU runs in a session of
# its own (start_new_session, so its own autogroup): this only orders the
# QEMU's own threads. HCASIM_VCPU_NICE overrides it (0: as before).
VCPU_NICE = int(os.environ.get("HCASIM_VCPU_NICE", "5"))


def renice_vcpus(p, seconds=20.0):
    """Gives P's vCPU threads ("CPU <n>/TCG", "CPU <n>/KVM") VCPU_NICE once
    they exist (QEMU creates them at start)."""
    if VCPU_NICE == 0:
        return
    deadline = time.monotonic() + seconds
    done = set()
    while p.poll() is None and time.monotonic() < deadline:
        for tid, (name, _) in postmortem.thread_ticks(p.pid).items():
            if name.startswith("CPU ") and tid not in done:
                try:
                    os.setpriority(os.PRIO_PROCESS, int(tid), VCPU_NICE)
                    done.add(tid)
                except OSError:
                    pass
        if done:
            return
        time.sleep(0.1)


@dataclass
class VmOptions:
    nodes: int = 1
    smp: int = 0                # vCPUs per VM; 0: auto_smp()
    mem: str = "1536M"
    accel: str = "tcg"
    trace_filter: str = "all"
    timeout: float = 600.0
    extra_append: str = ""
    qemu_args: list = field(default_factory=list)
    allow_reboot: bool = False  # guest reboots reset the machine instead of ending QEMU
    fabric: bool = True         # cable every HCA to a switch port of hcasim-fabric
    builtin_sm: bool = True     # the fabric's subnet manager and SA (off: run opensm in a guest)
    capture: bool = True        # write fabric.pcapng in the run directory
    fabric_args: list = field(default_factory=list)
    topology: str = ""          # topology file(s), comma-separated (docs/FABRIC.md): several switches; node N at its
                                # N-th node line; a second file is a second daemon joined by its remote lines
    modules: str = ""           # a directory <kernel release>/*.ko: the guest loads these instead of its own;
                                # with kernel=, that kernel's whole module tree
    kernel: str = ""            # a user-supplied kernel image
    initrd: str = ""            # set by stage_modules(): the initramfs made for a modular user kernel
    kernel_line: str = ""       # a guest test's kernel=LINE: a Debian release whose kernel package to boot
    image: str = DEFAULT_IMAGE  # the guest image (build.IMAGES): root disk, kernel and initramfs
    test_fault: str = ""        # test-only: a deliberate device bug (x-test-fault)
    faults: list = field(default_factory=list)  # faults armed at power-on (docs/FAULTS.md)


def auto_smp(nodes):
    """vCPUs per VM when not given: the host's CPUs shared out, at most 2 and
    at least 1.  Under TCG every vCPU is a host thread; more vCPUs than host
    CPUs only makes them wait for each other (two VMs on a 2-core host are
    ready in 10 s with one vCPU each, 14-17 s with two: ./hcasim demo)."""
    return max(1, min(2, (os.cpu_count() or 2) // max(1, nodes)))


def topology_nodes(path):
    """How many VMs a topology file cables (its `node` lines)."""
    return sum(1 for line in Path(path).read_text().splitlines() if line.split("#")[0].split()[:1] == ["node"])


def check_topology(paths, nodes):
    """Topology files (comma-separated: one daemon each) must exist and
    cable at least `nodes` VMs between them (hcasim-fabric checks the rest
    when it starts)."""
    files = [Path(p) for p in str(paths).split(",")]
    for p in files:
        if not p.is_file():
            raise ValueError(f"no topology file {p}")
    cabled = sum(topology_nodes(p) for p in files)
    if cabled < nodes:
        raise ValueError(f"{paths} cable {cabled} node(s) (their 'node' lines), not {nodes}")


def free_tcp_port():
    """A TCP port of 127.0.0.1 nobody listens on now (for @PORT@ in topology files)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """The processes of one run: hcasim-fabric and N QEMUs."""

    def __init__(self, run_dir, opts):
        self.run_dir = Path(run_dir)
        self.opts = opts
        self.art = artifacts(opts.image)
        # Unix socket paths must stay short: keep them out of the run dir.
        self.sock_dir = Path(tempfile.mkdtemp(prefix="hcasim-"))
        self.fabric = None
        self.fabric_log = None
        self.more_fabrics = []   # the daemons of a second, third ... topology file
        self.topologies = self._topologies()
        self.fabric_starts = 0
        self.vms = []
        self.logs = []
        self.cpu = {}            # node -> hostcpu.qemu_sample() when its script ended
        self.fabric_cpu = None   # hostcpu.fabric_sample() when the last one did

    # -- processes -------------------------------------------------------

    def start_fabric(self):
        """Starts hcasim-fabric; again after restart_fabric().  Every file
        it opens by name is created before any guest runs (a restarted
        fabric gets no capture file: the guests could have planted one)."""
        ready = self.sock_dir / "fabric.ready"
        ready.unlink(missing_ok=True)
        if self.fabric_log is None:
            self.fabric_log = open(self.run_dir / "fabric.log", "w")
            self.logs.append(self.fabric_log)
        cmd = [self.art["fabric"], "--eth-socket", self.sock_dir / "mgmt.sock", "--ready-file", ready]
        if self.opts.fabric:
            cmd += ["--ib-ports", str(self.opts.nodes), "--ib-socket-dir", self.sock_dir,
                    "--control-socket", self.control_socket()]
            if not self.opts.builtin_sm:
                cmd.append("--no-sm")
            if self.topologies:
                cmd += ["--topology", self.topologies[0]]
            if self.opts.capture and self.fabric_starts == 0:
                cmd += ["--capture", self.run_dir / "fabric.pcapng"]
            cmd += self.opts.fabric_args
        if self.fabric_starts == 0:
            (self.run_dir / "fabric-cmdline.txt").write_text(" ".join(str(c) for c in cmd) + "\n")
            if self.opts.fabric:
                # Where its control socket listens (./hcasim fault NODE LINK-KIND).
                (rundir.host_side(self.run_dir, create=True) / "fabric-control").write_text(
                    f"{self.control_socket()}\n")
        self.fabric_starts += 1
        self.fabric = subprocess.Popen([str(c) for c in cmd], stdout=self.fabric_log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self._wait_ready(self.fabric, ready, "fabric.log")
        if self.fabric_starts == 1:
            for k in range(1, len(self.topologies)):
                self._start_more_fabric(k)

    def _wait_ready(self, proc, ready, log):
        for _ in range(200):
            if ready.exists():
                return
            if proc.poll() is not None:
                raise RuntimeError(f"hcasim-fabric exited; see {self.run_dir / log}")
            time.sleep(0.025)
        raise RuntimeError("hcasim-fabric did not start")

    def _topologies(self):
        """The topology files of the run, as given or, with @PORT@ in them
        (the TCP port two daemons meet on), copies with a free port of
        127.0.0.1 in its place, in the run's host-only directory (a
        restarted daemon reads its file again; no guest may rewrite it)."""
        if not self.opts.topology:
            return []
        files = [Path(p).resolve() for p in self.opts.topology.split(",")]
        if not any("@PORT@" in f.read_text() for f in files):
            return files
        port = str(free_tcp_port())
        out = []
        for k, f in enumerate(files):
            dst = rundir.host_side(self.run_dir, create=True) / f"topology-{k}-{f.name}"
            dst.write_text(f.read_text().replace("@PORT@", port))
            out.append(dst)
        return out

    def _start_more_fabric(self, k):
        """The daemon of topology file k: its own link sockets (sock_dir/fabric-k/),
        no SM (the first daemon's, or opensm in a guest, manages the subnet),
        no management Ethernet, fabric-k.log and fabric-k.pcapng."""
        d = self.sock_dir / f"fabric-{k}"
        d.mkdir(exist_ok=True)
        ready = d / "ready"
        log = open(self.run_dir / f"fabric-{k}.log", "w")
        self.logs.append(log)
        cmd = [self.art["fabric"], "--ready-file", ready, "--ib-socket-dir", d, "--no-sm",
               "--topology", self.topologies[k], "--control-socket", d / "fabric.ctl"]
        if self.opts.capture:
            cmd += ["--capture", self.run_dir / f"fabric-{k}.pcapng"]
        (self.run_dir / f"fabric-{k}-cmdline.txt").write_text(" ".join(str(c) for c in cmd) + "\n")
        p = subprocess.Popen([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.more_fabrics.append(p)
        self._wait_ready(p, ready, f"fabric-{k}.log")

    def restart_fabric(self):
        """Kills hcasim-fabric (SIGKILL, as a crash) and starts it again with
        the same sockets: the HCAs reconnect their links, the new SM sweeps.
        The management Ethernet does not come back (QEMU 7.2's -netdev stream
        does not reconnect)."""
        if self.fabric and self.fabric.poll() is None:
            self.fabric.kill()
            self.fabric.wait()
        self.start_fabric()

    def control_socket(self):
        return self.sock_dir / "fabric.ctl"

    def fabric_chardev(self, i):
        """The HCA's cable to its switch port: a socket chardev that
        reconnects every second while the fabric is away (QEMU 7.2 counts
        in seconds, later lines in milliseconds)."""
        if not self.opts.fabric:
            return []
        again = "reconnect=1" if qemu_line() == "7.2" else "reconnect-ms=1000"
        return ["-chardev", f"socket,id=fabric,path={self.fabric_port(i)},{again}"]

    def fabric_port(self, i):
        """Node i's link socket: the daemon whose topology file cables it."""
        for k, f in enumerate(self.topologies):
            n = topology_nodes(f)
            if i < n:
                return self.sock_dir / (f"fabric-{k}" if k else "") / f"port{i + 1}.sock"
            i -= n
        return self.sock_dir / f"port{i + 1}.sock"

    def qemu_cmd(self, i, mode, console_stdio=False):
        a = self.art
        nd = self.run_dir / f"node{i}"
        nd.mkdir(exist_ok=True)
        append = (f"console=ttyS0 root=/dev/vda rw panic=-1 "
                  f"hcasim.node={i} hcasim.nodes={self.opts.nodes} hcasim.mode={mode} {self.opts.extra_append}")
        if self.opts.kernel:
            append += " hcasim.kernel=user"
        if self.opts.kernel and self.opts.initrd:
            # A modular user kernel: the image's initramfs with its modules.
            boot = ["-kernel", self.opts.kernel, "-initrd", self.opts.initrd]
        elif self.opts.kernel:
            # A user kernel without a module tree: the root disk is mounted
            # by the kernel itself (virtio-blk and ext4 built in) and our
            # init runs directly.
            append += " rootfstype=ext4 init=/usr/sbin/hcasim-init"
            boot = ["-kernel", self.opts.kernel]
        else:
            boot = ["-kernel", a["kernel"], "-initrd", a["initrd"]]
        cmd = [
            a["qemu"], "-L", "/usr/share/seabios", "-L", "/usr/share/qemu",
            "-name", f"node{i},debug-threads=on",  # thread names for the post-mortem
            # No default devices: q35's default CD-ROM alone costs 31 s of
            # SeaBIOS probing on QEMU 10.x under TCG (3.8 s to the kernel
            # without it, 35 s with it; 7.2 does not wait).
            "-nodefaults",
            "-machine", f"q35,accel={self.opts.accel}", "-cpu", "max",
            "-smp", str(self.opts.smp or auto_smp(self.opts.nodes)), "-m", self.opts.mem,
            "-display", "none", "-vga", "none", "-nic", "none",
            *boot, "-append", append.strip(),
            "-drive", f"file={a['rootfs']},format=raw,if=virtio,snapshot=on",
            # mapped-xattr: what the guest creates is a regular file on the
            # host whatever it is in the guest (symlink, fifo, device node;
            # owner and mode live in user.virtfs.* xattrs), so the host never
            # follows a guest's link or opens a guest's device.
            "-virtfs", f"local,path={self.run_dir},mount_tag=hcasim,security_model=mapped-xattr,id=hcasim",
            "-netdev", f"stream,id=mgmt,server=off,addr.type=unix,addr.path={self.sock_dir / 'mgmt.sock'}",
            "-device", f"virtio-net-pci,netdev=mgmt,mac=52:54:00:77:00:{i + 1:02x},romfile=",
            *self.fabric_chardev(i),
            "-device", "pcie-root-port,id=rp0,chassis=1,slot=0,x-speed=8,x-width=16",
            "-device", (f"mlx5-hca,id=hca0,bus=rp0,node-guid={node_guid(i)},"
                        f"trace={nd / 'hca.trace'},trace-filter={self.opts.trace_filter}"
                        + (",chardev=fabric" if self.opts.fabric else "")
                        + (f",x-test-fault={self.opts.test_fault}" if self.opts.test_fault else "")
                        + (f",fault={fault.device_property(self.opts.faults)}" if self.opts.faults else "")),
            "-qmp", f"unix:{self.sock_dir / f'node{i}.qmp'},server=on,wait=off",
        ]
        if not self.opts.allow_reboot:
            cmd.append("-no-reboot")
        if console_stdio:
            cmd += ["-chardev", f"stdio,id=con,mux=on,signal=off,logfile={nd / 'console.log'}",
                    "-serial", "chardev:con", "-mon", "chardev=con,mode=readline"]
        else:
            cmd += ["-chardev", f"file,id=con,path={nd / 'console.log'}", "-serial", "chardev:con"]
        return [str(c) for c in cmd + self.opts.qemu_args]

    def start_vm(self, i, mode, console_stdio=False):
        cmd = self.qemu_cmd(i, mode, console_stdio)
        (self.run_dir / f"node{i}" / "qemu-cmdline.txt").write_text(" ".join(cmd) + "\n")
        # Where the node's QMP monitor listens while it runs (./hcasim
        # inspect, fault): host-side, where no guest can redirect it.
        (rundir.host_side(self.run_dir, create=True) / f"node{i}.qmp-socket").write_text(
            f"{self.sock_dir / f'node{i}.qmp'}\n")
        # The HCA's options, for a re-plug (./hcasim fault NODE pci-replug).
        pci_fault.record_device(self.run_dir, i, next(c for c in cmd if c.startswith("mlx5-hca,")))
        if console_stdio:
            p = subprocess.Popen(cmd)
        else:
            log = open(self.run_dir / f"node{i}" / "qemu.log", "w")
            self.logs.append(log)
            p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        self.vms.append(p)
        threading.Thread(target=renice_vcpus, args=(p,), daemon=True).start()
        return p

    # A guest powers itself off once its script has written its exit code:
    # about 5 s of driver shutdown under TCG. One that takes longer (a
    # driver's shutdown path stuck, processes still writing) is stopped
    # after this many seconds: its results are in the run directory already.
    POWEROFF_GRACE = 8.0

    def wait(self, timeout):
        """Waits for every VM; kills those still running at the deadline,
        and those still running POWEROFF_GRACE seconds after their script
        ended. Returns the list of nodes that timed out."""
        deadline = time.monotonic() + timeout
        timed_out = []
        ended = {}
        died = None
        while any(p.poll() is None for p in self.vms):
            now = time.monotonic()
            if died is None:
                died = self._qemu_died()
                if died is not None:
                    # The others would only wait at their barriers until
                    # their budgets run out.
                    for p in self.vms:
                        self._kill(p)
                    break
            for i, p in enumerate(self.vms):
                if p.poll() is not None:
                    continue
                if now >= deadline:
                    timed_out.append(i)
                    # What it was doing, for the runner's clues, before
                    # the kill loses it.
                    postmortem.record(p.pid, self.sock_dir / f"node{i}.qmp", self.run_dir, i)
                    self._kill(p)
                elif os.path.lexists(self.run_dir / f"node{i}" / "exit-code"):
                    if i not in ended:
                        self._sample_cpu(i)
                    ended.setdefault(i, now)
                    if now - ended[i] >= self.POWEROFF_GRACE:
                        self._note(f"node{i}-shutdown.txt", f"still running {self.POWEROFF_GRACE:.0f} s after "
                                   "its script ended: stopped by the harness\n")
                        self._kill(p)
            time.sleep(0.25)
        if died is None:
            # Every QEMU had ended by the time the loop looked (a one-node
            # test whose QEMU aborted while the guest booted): the abort
            # still gets its note, so the test runs once more
            # (testing.boot_panics()).
            self._qemu_died()
        return timed_out

    def _sample_cpu(self, i):
        """Node i's script has ended: its QEMU's CPU time and device
        packets so far, and the fabric's once the last node is done."""
        try:
            self.cpu[i] = hostcpu.qemu_sample(self.vms[i].pid, self.sock_dir / f"node{i}.qmp")
            if len(self.cpu) == len(self.vms) and self.fabric and self.fabric.poll() is None:
                self.fabric_cpu = hostcpu.fabric_sample(self.fabric.pid, self.control_socket())
        except OSError:
            pass

    def cpu_report(self):
        """host-cpu.txt: where the host's CPU went (hostcpu.py); None if
        no node ended its script."""
        if not self.cpu:
            return None
        fabric_cpu, forwarded = self.fabric_cpu or (None, None)
        return hostcpu.report(self.cpu, fabric_cpu, forwarded)

    def _qemu_died(self):
        """The first node whose QEMU ended on a signal (an abort: SIGABRT)
        before its script wrote its exit code; its note
        (nodeN-qemu-died.txt: the signal and QEMU's last line) is written.
        None if there is none. The harness's own kills end on SIGTERM/SIGKILL
        and are not counted."""
        for i, p in enumerate(self.vms):
            rc = p.poll()
            if rc is None or rc >= 0 or -rc in (signal.SIGTERM, signal.SIGKILL):
                continue
            if os.path.lexists(self.run_dir / f"node{i}" / "exit-code"):
                continue
            log = self.run_dir / f"node{i}" / "qemu.log"
            last = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            self._note(f"node{i}-qemu-died.txt", f"QEMU ended on signal {-rc}: {''.join(last)}\n")
            return i
        return None

    def _note(self, name, text):
        """A harness note in the run directory (which the guests own: a new
        file renamed over whatever entry they left there)."""
        fd = rundir.open_dir(self.run_dir)
        try:
            rundir.write_file(fd, name, text.encode())
        except OSError:
            pass
        finally:
            os.close(fd)

    @staticmethod
    def _kill(p):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop(self):
        for p in self.vms:
            self._kill(p)
        if self.fabric:
            self._kill(self.fabric)
        for p in self.more_fabrics:
            self._kill(p)
        for log in self.logs:
            log.close()
        shutil.rmtree(self.sock_dir, ignore_errors=True)


class ControlRelay(threading.Thread):
    """Lets guest scripts drive the fabric: a guest writes a command to
    /hcasim/fabric-requests/<name>.req (the run directory is shared), the
    relay runs it on the control socket and writes <name>.rep.  Two commands
    are the harness's own: `harness fabric-restart` kills and restarts
    hcasim-fabric (at most MAX_RESTARTS times a run), and `harness fault
    node<N> COMMAND` runs a fault command (a spec to arm, list, clear) on
    node N's HCA over QMP (docs/FAULTS.md).

    The guest owns that directory, so the relay opens nothing it did not
    create: it works relative to a directory fd it opened when it made the
    directory, reads requests with O_NOFOLLOW and at most MAX_REQUEST
    bytes, refuses links, fifos, devices and odd names (answering "error
    refused"), and writes replies as new files renamed over the .rep entry."""

    MAX_REQUEST = 4096
    MAX_PER_ROUND = 64
    MAX_RESTARTS = 5
    NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.req")

    def __init__(self, run_dir, sock_path, cluster=None):
        super().__init__(daemon=True)
        self.sock_path = sock_path
        self.cluster = cluster
        self.restarts = 0
        self.stopping = threading.Event()
        self.run_fd = rundir.open_dir(run_dir)
        os.mkdir("fabric-requests", 0o777, dir_fd=self.run_fd)
        os.chmod("fabric-requests", 0o777, dir_fd=self.run_fd, follow_symlinks=False)
        self.dir_fd = rundir.open_dir("fabric-requests", dir_fd=self.run_fd)
        self.log = rundir.create_file(self.run_fd, "fabric-requests.log")

    def run(self):
        while not self.stopping.wait(0.1):
            try:
                self.poll()
            except Exception as e:  # the relay outlives whatever a guest put there
                self._log(f"relay error: {type(e).__name__}: {e}")

    def poll(self):
        names = sorted(n for n in os.listdir(self.dir_fd) if n.endswith(".req"))
        for name in names[:self.MAX_PER_ROUND]:
            self.serve(name)

    def serve(self, name):
        if not self.NAME.fullmatch(name):
            self._log(f"refused request name {name[:120]!r}")
            rundir.remove(self.dir_fd, name)
            return
        try:
            data = rundir.read_file(self.dir_fd, name, self.MAX_REQUEST)
            line = data.decode("ascii").strip()
            if "\n" in line or not line.isprintable():
                raise rundir.Refused(0, f"{name}: not one printable ASCII line")
        except (rundir.Refused, UnicodeDecodeError) as e:
            line, reply = None, f"error refused: {e}\n"
        if line is not None:
            reply = self.execute(line)
        self._log(f"{(line or name)[:200]} -> {reply.strip()[:400]}")
        stem = name[:-len(".req")]
        try:
            rundir.write_file(self.dir_fd, stem + ".rep", reply.encode(), tmp_suffix=".relay-tmp")
        except OSError as e:
            self._log(f"cannot write {stem}.rep: {e}")
        rundir.remove(self.dir_fd, name)

    def execute(self, line):
        words = line.split()
        if words[:2] == ["harness", "fault"] and self.cluster:
            return self.fault(words[2:])
        if words[:1] == ["harness"]:
            if words != ["harness", "fabric-restart"] or not self.cluster:
                return "error the harness knows 'harness fabric-restart' and 'harness fault NODE COMMAND'\n"
            if self.restarts >= self.MAX_RESTARTS:
                return f"error at most {self.MAX_RESTARTS} fabric restarts a run\n"
            self.restarts += 1
            try:
                self.cluster.restart_fabric()
            except (OSError, RuntimeError) as e:
                return f"error restart failed: {e}\n"
            return f"restarted hcasim-fabric (pid {self.cluster.fabric.pid})\nok\n"
        try:
            return fabric_command(self.sock_path, line)
        except OSError as e:
            return f"error {e}\n"

    def fault(self, args):
        if len(args) < 2 or not re.fullmatch(r"node[0-9]", args[0]) or int(args[0][4:]) >= self.cluster.opts.nodes:
            return "error usage: harness fault node<N> KIND[:key=value,...] | list | clear [ID]\n"
        sock = self.cluster.sock_dir / f"{args[0]}.qmp"
        command = " ".join(args[1:])
        try:
            if pci_fault.pci_kind(command):
                ok, text = pci_fault.pci_fault(sock, self.cluster.run_dir, int(args[0][4:]), command)
            elif fault.link_kind(command):
                ok, text = fault.fabric_fault(int(args[0][4:]), command,
                                              lambda line: fabric_command(self.sock_path, line))
            else:
                ok, text = fault.qmp_fault(sock, command)
        except (OSError, inspect_hca.QmpError) as e:
            return f"error QMP: {e}\n"
        if not ok:
            return f"error {text}\n"
        return f"{text.rstrip()}\nok\n" if text.strip() else "ok\n"

    def _log(self, text):
        self.log.write(f"{time.strftime('%H:%M:%S')} {text}\n".encode(errors="replace"))
        self.log.flush()

    def stop(self):
        self.stopping.set()
        if self.is_alive():
            self.join(timeout=5)
        self.log.close()
        os.close(self.dir_fd)
        os.close(self.run_fd)


def make_canary(run_dir):
    """A file outside the run directory with a secret token, next to a
    record of it (<run>.host/canary, canary.stat): 15-harness plants links
    to it and its host check verifies nothing read or changed it.  The
    guests learn its path from host-paths.txt, never its contents."""
    host_dir = rundir.host_side(run_dir, create=True)
    canary = host_dir / "canary"
    canary.write_text(f"hcasim canary {secrets.token_hex(16)}\n")
    st = canary.stat()
    (host_dir / "canary.stat").write_text(f"{st.st_ctime_ns} {st.st_mtime_ns} {st.st_size}\n")
    (run_dir / "host-paths.txt").write_text(f"run_dir={run_dir}\ncanary={canary}\n")


def read_result(run_fd, rel, limit):
    """A guest-written result file, or None if it is missing, not a regular
    file (a planted link, fifo, device) or larger than limit."""
    try:
        return rundir.read_path(run_fd, rel, limit).decode(errors="replace")
    except OSError:
        return None


@dataclass
class NodeResult:
    node: int
    exit_code: int | None  # None: no result (timeout or crash)
    timed_out: bool
    output: str


def stage_modules(run_dir, opts):
    """--modules into the run directory (/hcasim/modules in the guest): the
    driver under test built from source (./hcasim driver build), or with
    --kernel that kernel's whole module tree. A modular user kernel gets an
    initramfs made from its tree (opts.initrd; tools/hcasim/initramfs.py);
    a kernel that could not boot as a guest is refused here, saying why."""
    release = initramfs.kernel_release(opts.kernel) if opts.kernel else ""
    if not opts.modules:
        return
    src = Path(opts.modules)
    tree = initramfs.module_tree(src, release) if release else None
    if release and tree is None:
        raise initramfs.KernelError(f"--modules {src}: no module tree {release}/ (modules.dep, or kernel/ and "
                                    f"modules.order) for kernel {opts.kernel}")
    if tree is None and (not src.is_dir() or not any(src.glob("*/*.ko"))):
        raise RuntimeError(f"--modules {src}: expected <kernel release>/*.ko inside")
    # A copy, not links: the guest may write to its share.
    shutil.copytree(src, run_dir / "modules", symlinks=False)
    if tree is not None:
        staged = run_dir / "modules" / release
        initramfs.depmod(staged, release)
        out = rundir.host_side(run_dir, create=True) / "initrd.img"
        mods = initramfs.build(artifacts(opts.image)["initrd"], staged, release, out)
        opts.initrd = str(out)
        say(f"kernel {release}: initramfs with {len(mods)} modules of its tree")


def drop_module_tree(run_dir, opts):
    """A user kernel's module tree (hundreds of MB) leaves the run directory
    with the guests; a note says where it came from."""
    if opts.initrd and (run_dir / "modules").is_dir():
        shutil.rmtree(run_dir / "modules", ignore_errors=True)
        run_fd = rundir.open_dir(run_dir)
        try:
            rundir.write_file(run_fd, "modules-source.txt", f"kernel {opts.kernel}\nmodules {opts.modules}\n".encode())
        finally:
            os.close(run_fd)


def run_script(script, opts, name="run", quiet=False):
    """Boots opts.nodes guests, runs script in each, collects the results.
    Returns (run_dir, [NodeResult])."""
    run_dir = runs.new(name)
    shutil.copy(script, run_dir / "script.sh")
    # Helper programs of the guest tests, at /hcasim/py in every guest.
    shutil.copytree(ROOT / "testbench" / "guest" / "py", run_dir / "py")
    stage_modules(run_dir, opts)
    # Guest modules of ours (guest-driver/) for the image's kernel, when
    # built: /hcasim/kverbs.
    kverbs = ROOT / "build" / "kverbs" / opts.image
    if kverbs.is_dir():
        shutil.copytree(kverbs, run_dir / "kverbs", ignore=shutil.ignore_patterns("*.o", ".*", "*.mod*", "*.cmd"))
    # Guest test programs of ours (testbench/guest/tools), when built: /hcasim/tools.
    tools = ROOT / "build" / "guest-tools"
    if tools.is_dir():
        shutil.copytree(tools, run_dir / "tools")
    art = artifacts(opts.image)
    shutil.copy(art["manifest"], run_dir / "image-manifest.txt")
    # Debian's QEMU revision the device ran in (./hcasim build --qemu).
    if (art["qemu"].parent / "qemu-version").exists():
        shutil.copy(art["qemu"].parent / "qemu-version", run_dir / "qemu-version")
    make_canary(run_dir)
    cluster = Cluster(run_dir, opts)
    if not quiet:
        say(f"booting {opts.nodes} node(s); run directory {run_dir}")
    t0 = time.monotonic()
    relay = None
    try:
        cluster.start_fabric()
        # The relay serves fault commands with or without a fabric.
        relay = ControlRelay(run_dir, cluster.control_socket(), cluster)
        relay.start()
        for i in range(opts.nodes):
            cluster.start_vm(i, "run")
        timed_out = cluster.wait(opts.timeout)
    finally:
        if relay:
            relay.stop()
        cluster.stop()
        drop_module_tree(run_dir, opts)
    results = []
    run_fd = rundir.open_dir(run_dir)
    try:
        for i in range(opts.nodes):
            code_text = read_result(run_fd, f"node{i}/exit-code", 64)
            code = int(code_text.strip()) if code_text and code_text.strip().lstrip("-").isdigit() else None
            out = read_result(run_fd, f"node{i}/output.log", 64 << 20) or ""
            results.append(NodeResult(i, code, i in timed_out, out))
        rundir.write_file(run_fd, "wall-seconds", f"{time.monotonic() - t0:.1f}\n".encode())
        cpu = cluster.cpu_report()
        if cpu:
            rundir.write_file(run_fd, "host-cpu.txt", cpu.encode())
    finally:
        os.close(run_fd)
    return run_dir, results


def boot_interactive(opts):
    run_dir = runs.new("boot")
    stage_modules(run_dir, opts)
    cluster = Cluster(run_dir, opts)
    say(f"booting {opts.nodes} node(s); node0's console follows (Ctrl-a x quits); run directory {run_dir}")
    try:
        cluster.start_fabric()
        for i in range(1, opts.nodes):
            cluster.start_vm(i, "shell")
        first = cluster.start_vm(0, "shell", console_stdio=True)
        first.wait()
    finally:
        cluster.stop()
        drop_module_tree(run_dir, opts)
    return run_dir

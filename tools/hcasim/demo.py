"""./hcasim demo: build everything, boot two VMs with the virtual ConnectX-5
on the simulated InfiniBand fabric (built-in subnet manager), and show IP
over InfiniBand working between them: the unmodified mlx5_core, mlx5_ib and
ib_ipoib drivers, ping both ways and a short iperf3, with the run's device
traces and fabric capture kept for inspection."""
import os
import re
import subprocess
import textwrap
import time

from hcasim import driver, build, vm
from hcasim.common import BUILD, ROOT, say

SCRIPT = r"""
me=$HCASIM_NODE
peer=$((1 - me))
myip=192.168.77.$((me + 1))
peerip=192.168.77.$((peer + 1))
t0=$(date +%s%N)
modprobe -a mlx5_ib ib_umad ib_uverbs ib_ipoib
echo "DRIVERS loaded in $(( ($(date +%s%N) - t0) / 1000000 )) ms: $(ls /sys/class/infiniband) $(cat /sys/class/infiniband/mlx5_0/fw_ver)"
wait_port_active 120
share active 1
echo "PORT state=$(port_attr state | cut -d' ' -f2) lid=$(($(port_attr lid))) sm_lid=$(($(port_attr sm_lid))) rate=$(port_attr rate)"
ip addr add "$myip/24" dev ib0
ip link set ib0 up
for _ in $(seq 100); do [ "$(cat /sys/class/net/ib0/carrier)" = 1 ] && break; sleep 0.1; done
echo "IB0 $myip carrier=$(cat /sys/class/net/ib0/carrier) mtu=$(cat /sys/class/net/ib0/mtu) mode=$(cat /sys/class/net/ib0/mode)"
# Ready: the first IPoIB reply from the peer (the host reads when this file
# was written, against when it started the VMs).
retry 60 ping -c 1 -W 1 "$peerip" > /dev/null && share pinged 1
barrier up 180
for dir in 0 1; do
    if [ "$me" = "$dir" ]; then
        ping -c 5 -i 0.2 "$peerip" > /tmp/ping.txt 2>&1
        echo "PING $myip -> $peerip: $(grep -o '[0-9]* received, [0-9.]*% packet loss' /tmp/ping.txt); $(grep -o 'rtt.*' /tmp/ping.txt)"
    fi
    barrier ping$dir 60
done
if [ "$me" = 1 ]; then
    iperf3 -s -1 > /dev/null 2>&1 &
    sleep 0.5
    barrier iperf 60
    wait
else
    barrier iperf 60
    retry 10 iperf3 -c "$peerip" -t 5 -J > /tmp/iperf.json 2>/dev/null
    echo "IPERF $(python3 -c 'import json; d = json.load(open("/tmp/iperf.json"))["end"]; print("%.0f Mbit/s over 5 s, %d TCP retransmits" % (d["sum_received"]["bits_per_second"] / 1e6, d["sum_sent"]["retransmits"]))')"
fi
barrier done 120
dmesg | grep -E -- "$MLX5_BAD" | grep -vE -- "$MLX5_EXPECTED" > /tmp/bad.txt
echo "DMESG $(if [ -s /tmp/bad.txt ]; then echo "$(wc -l < /tmp/bad.txt) error/warning lines"; else echo clean; fi)"
"""


def field(output, tag):
    m = re.search(rf"^{tag} (.*)$", output, re.M)
    return m.group(1) if m else "(missing)"


def ready_times(run_dir, t0, nodes):
    """When each node's port went Active and its first IPoIB ping came back,
    in seconds after the harness started the fabric and the VMs (the host's
    clock: the times the guests' files in the shared run directory were
    written); issue 18's goal is both nodes pinging within 15 s."""
    def at(name, n):
        try:
            st = os.stat(run_dir / "shared" / f"{name}.node{n}", follow_symlinks=False)
        except OSError:
            return None
        return st.st_mtime - t0
    active = [at("active", n) for n in range(nodes)]
    pinged = [at("pinged", n) for n in range(nodes)]
    fmt = lambda v: "never" if v is None else f"{v:.1f} s"
    last = None if None in pinged else max(pinged)
    return (f"ready          : ports Active at {', '.join(fmt(v) for v in active)}; IPoIB pinging at "
            f"{', '.join(fmt(v) for v in pinged)}: both ready {fmt(last)} after QEMU started (goal: 15 s)")


def main(a):
    if not a.no_build:
        build.everything(images=[a.image])
    script = BUILD / "demo-script.sh"
    lib = (ROOT / "testbench" / "guest" / "lib.sh").read_text()
    script.write_text(lib + "\n" + textwrap.dedent(SCRIPT))
    opts = vm.VmOptions(nodes=2, smp=a.smp, mem=a.mem, accel=a.accel, trace_filter=a.trace_filter,
                        timeout=a.timeout, modules=driver.resolve_modules(a.modules), kernel=a.kernel or "",
                        test_fault=a.test_fault or "", image=a.image, extra_append=a.append)
    t0 = time.time()
    run_dir, results = vm.run_script(script, opts, name="demo")
    print()
    print("=" * 78)
    print("hcasim demo: two VMs, each with an emulated ConnectX-5, on one simulated")
    print("InfiniBand subnet (hcasim-fabric: switch + subnet manager + SA)")
    info = build.image_manifest(a.image)
    print(f"guest image {a.image}: kernel {info.get('kernel', '?').split()[0]}, "
          f"rdma-core {info.get('package rdma-core', '?')}")
    print("=" * 78)
    ok = True
    for r in results:
        out = r.output
        print(f"node{r.node}:")
        for tag, label in (("DRIVERS", "drivers"), ("PORT", "port 1"), ("IB0", "ib0"), ("PING", "ping"),
                           ("IPERF", "iperf3"), ("DMESG", "dmesg")):
            v = field(out, tag)
            if tag == "IPERF" and r.node != 0:
                continue
            print(f"  {label:8} {v}")
        if r.exit_code != 0:
            ok = False
            say(f"node{r.node}: the demo script failed (exit {r.exit_code}); see {run_dir / f'node{r.node}'}")
        if "0% packet loss" not in field(out, "PING") or field(out, "DMESG") != "clean":
            ok = False
    ready = ready_times(run_dir, t0, len(results))
    print(ready)
    print("-" * 78)
    cap = run_dir / "fabric.pcapng"
    print(f"fabric capture : {cap}  (tshark -r {cap.name} -V: InfiniBand headers)")
    for r in results:
        trace = run_dir / f"node{r.node}" / "hca.trace"
        if trace.exists():
            wqes = cqes = 0
            with trace.open(errors="replace") as f:
                for line in f:
                    parts = line.split(None, 4)
                    if len(parts) > 3:
                        wqes += parts[2] == "wqe" and parts[3] == "fetch"
                        cqes += parts[2] == "cqe"
            print(f"node{r.node} trace    : {trace}  ({wqes} WQEs fetched, {cqes} CQEs written)")
    print("-" * 78)
    print("The first IPoIB ping, from ipoib_send()'s UD SEND WQE to the peer's receive CQE:")
    print(f"$ ./hcasim trace follow {run_dir} --first-ping")
    r = subprocess.run([str(ROOT / "hcasim"), "trace", "follow", str(run_dir), "--first-ping"],
                       capture_output=True, text=True)
    print((r.stdout + r.stderr).rstrip())
    if r.returncode != 0:
        ok = False
    report = run_dir / "report.html"
    r = subprocess.run([str(ROOT / "hcasim"), "trace", "export", str(run_dir), "--html", str(report)],
                       capture_output=True, text=True)
    if r.returncode == 0:
        print(f"timeline report: {report} (open in a browser; works offline)")
    print(f"everything else: {run_dir}")
    print("=" * 78)
    return 0 if ok else 1

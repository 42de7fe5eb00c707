"""./hcasim demo: build everything, boot a guest with the virtual ConnectX-5
and show the unmodified mlx5 driver bringing it up."""
import textwrap

from hcasim import build, vm
from hcasim.common import BUILD, say

SCRIPT = r"""
set -u
echo "== PCI"
lspci -nn -d 15b3:
lspci -vv -d 15b3: | grep -E 'LnkCap:|LnkSta:|MSI-X' | sed 's/^\s*/   /'
echo "== modprobe mlx5_core"
start=$(date +%s%N)
modprobe mlx5_core
echo "modprobe mlx5_core took $(( ($(date +%s%N) - start) / 1000000 )) ms"
sleep 1
echo "== driver messages"
dmesg | grep -E 'mlx5' | sed 's/^\[ *[0-9.]*\] //'
echo "== devlink"
devlink dev info 2>&1 | sed 's/^/   /'
echo "== interrupts"
grep mlx5 /proc/interrupts | awk '{print "   " $NF ": " $2 + $3 " interrupts"}'
echo "== unload"
rmmod mlx5_core && echo "mlx5_core unloaded cleanly"
dmesg | grep -E 'mlx5.*(err|fail|timeout|warn)' -i | grep -v 'vendor specific ID' || echo "no mlx5 errors in dmesg"
"""


def main(a):
    if not a.no_build:
        build.everything()
    script = BUILD / "demo-script.sh"
    script.write_text(textwrap.dedent(SCRIPT))
    opts = vm.VmOptions(nodes=1, smp=a.smp, mem=a.mem, accel=a.accel, trace_filter=a.trace_filter,
                        timeout=a.timeout)
    run_dir, results = vm.run_script(script, opts, name="demo")
    r = results[0]
    print()
    print("=" * 72)
    print("hcasim demo: Debian's mlx5_core on the emulated ConnectX-5 (node0)")
    print("=" * 72)
    print(r.output.rstrip())
    print("=" * 72)
    trace = run_dir / "node0" / "hca.trace"
    cmds = sum(1 for line in trace.open(errors="replace") if " cmd done " in line) if trace.exists() else 0
    print(f"device trace: {trace} ({cmds} firmware commands)")
    print(f"console, dmesg and script output: {run_dir / 'node0'}")
    if r.exit_code != 0:
        say("the demo script failed" if r.exit_code is not None else "the guest did not finish")
        return 1
    return 0

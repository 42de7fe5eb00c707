# hcasim-test: nodes=1 timeout=1500 ci=0
# The faults whose driver reaction takes minutes (docs/FAULTS.md), so
# ./hcasim suite faults runs them and ./hcasim test does not:
#  - firmware still initializing for 25 s after the reset of a recovery:
#    the driver waits and says so, and the recovery succeeds;
#  - a stalled health counter: "health compromised", the fw reporter;
#  - a command that never completes: the driver's 60 s timeout, ETIMEDOUT
#    to the application, the leaked slot;
#  - a command completion whose interrupt is lost: the driver's command-EQ
#    recovery finds the EQE after its timeout and the command succeeds.
dev=$(hca_pci_dev)
dbg=/sys/kernel/debug/mlx5/$dev
check "modprobe mlx5_ib ib_uverbs" modprobe -a mlx5_ib ib_umad ib_uverbs
check "port ACTIVE" wait_port_active 120
since() { dmesg | tail -n +$(($1 + 1)); }

# create_cq: the time ibv_open_device + ibv_create_cq took and the errno
# (0: created).
create_cq() {
    python3 - << 'PY'
import time
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pyverbs_error import PyverbsRDMAError
t = time.monotonic()
try:
    ctx = Context(name="mlx5_0")
    CQ(ctx, 16)
    err = 0
except PyverbsRDMAError as ex:
    err = ex.error_code
print(f"{time.monotonic() - t:.1f} {err}")
PY
}

# 1. Fatal health; the firmware takes 25 s to initialize after its reset.
# (First: a command slot leaked by a timeout makes the 6.1 driver's fatal
# flush spin for ever, docs/FAULTS.md.)
mark=$(dmesg | wc -l)
check "armed init-delay 25000 ms (for the next reset)" hca_fault init-delay:ms=25000
check "armed health-fatal" hca_fault health-fatal
recovered() { since "$mark" | grep -qE 'health recovery (succeeded|failed)'; }
check "the recovery ends" retry 300 recovered
since "$mark" | grep -E 'Fatal error|Issuing FW Reset|Waiting for FW|recovery' | sed 's/^/# /'
# (6.1 says "Waiting for FW initialization"; 6.12 waits in two steps and
# warns in the first, "Waiting for FW pre-initializing".)
check "mlx5_core waited: 'Waiting for FW initialization' (6.1) or 'pre-initializing' (6.12 on)" \
    sh -c "dmesg | tail -n +$((mark + 1)) | grep -qE 'Waiting for FW (initialization|pre-initializing), timeout abort in'"
check "'health recovery succeeded'" sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'health recovery succeeded'"
check "port ACTIVE after the recovery" wait_port_active 180
read -r took err << EOF
$(create_cq)
EOF
check "verbs work after the recovery (ibv_create_cq errno $err)" test "$err" = 0
# 2. The health counter stops; the device works on.
mark=$(dmesg | wc -l)
check "armed health-stall" hca_fault health-stall
stalled() { since "$mark" | grep -q "device's health compromised - reached miss count"; }
check "mlx5_core: 'device's health compromised - reached miss count'" retry 60 stalled
devlink health show "pci/$dev" reporter fw > /tmp/fw.txt 2>&1
sed 's/^/# /' /tmp/fw.txt
check "devlink: the fw reporter counted the error" grep -qE 'error 1' /tmp/fw.txt
check "no recovery was started for a stalled counter" sh -c "! dmesg | tail -n +$((mark + 1)) | grep -q 'starting health recovery flow'"
read -r took err << EOF
$(create_cq)
EOF
check "verbs still work with a stalled counter (ibv_create_cq errno $err)" test "$err" = 0

# 3. CREATE_CQ never completes.
mark=$(dmesg | wc -l)
slots0=$(cat "$dbg/commands/slots_inuse" 2> /dev/null || echo "?")
check "armed cmd-drop on CREATE_CQ" hca_fault cmd-drop:opcode=CREATE_CQ
read -r took err << EOF
$(create_cq)
EOF
echo "# ibv_create_cq: $took s, errno $err"
check "ibv_create_cq fails with ETIMEDOUT after the driver's 60 s (+5 s recovery) wait ($took s)" \
    sh -c "[ $err = 110 ] && awk 'BEGIN { exit !($took >= 60) }'"
since "$mark" | grep -E 'CREATE_CQ' | sed 's/^/# /'
check "mlx5_core: 'CREATE_CQ(0x400) No done completion'" \
    sh -c "dmesg | tail -n +$((mark + 1)) | grep -qE 'cmd\[[0-9]+\]: CREATE_CQ\(0x400\) No done completion'"
check "mlx5_core: 'CREATE_CQ(0x400) timeout. Will cause a leak of a command resource'" \
    sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'CREATE_CQ(0x400) timeout. Will cause a leak of a command resource'"
slots1=$(cat "$dbg/commands/slots_inuse" 2> /dev/null || echo "?")
check "debugfs: the slot stays in use ($slots0 -> $slots1)" test "$slots1" = $((slots0 + 1))
read -r took err << EOF
$(create_cq)
EOF
check "the next CQ is created on another slot (errno $err, $took s)" test "$err" = 0

# 4. A command completes, its interrupt is lost: the driver's cmd EQ
# recovery. The command may be ours or one of the kernel's (the SM's sweep
# makes mlx5_ib issue MAD_IFC); the driver serialises behind it either way.
mark=$(dmesg | wc -l)
check "armed lost-msix for the next command completion" hca_fault lost-msix:event=cmd
read -r took err << EOF
$(create_cq)
EOF
echo "# ibv_open_device + ibv_create_cq: $took s, errno $err"
cmd_recovered() { since "$mark" | grep -qE 'cmd\[[0-9]+\]: [A-Z0-9_]+\(0x[0-9a-f]+\) recovered after timeout'; }
check "mlx5_core: a command 'recovered after timeout'" retry 90 cmd_recovered
since "$mark" | grep -E 'Recovered|recovered' | sed 's/^/# /'
check "mlx5_core: 'Recovered N EQEs on cmd_eq' (the EQE was there, its interrupt was not)" \
    sh -c "dmesg | tail -n +$((mark + 1)) | grep -qE 'Recovered [1-9][0-9]* EQEs on cmd_eq'"
check "the application's CQ is created (errno $err)" test "$err" = 0
check "no command timed out for good" sh -c "! dmesg | tail -n +$((mark + 1)) | grep -q 'No done completion'"

check "no kernel oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|Call Trace|BUG:|Oops'"

# 5. A driver finding (6.1.192; 6.12.118 and 7.2.13 the same, seen
# 2026-12-04): with the slot that step 3 leaked, a fatal error
# never recovers. enter_error_state() -> mlx5_cmd_flush() takes every
# slot's semaphore with down_trylock() in a loop that forced completions
# cannot end: the leaked slot's entry is no longer pending, so
# mlx5_cmd_comp_handler(forced) releases nothing (6.1's cmd.c:1690-1699,
# 6.12's 1700-1710). The kworker spins (cond_resched, no lockup report) and
# the recovery never starts.
mark=$(dmesg | wc -l)
check "armed health-fatal with a command slot leaked" hca_fault health-fatal
fatal_seen() { since "$mark" | grep -q 'Fatal error 5 detected'; }
check "the health poll sees it ('Fatal error 5 detected')" retry 60 fatal_seen
sleep 60
since "$mark" | grep -E 'handling bad device|recovery|Unloading' | sed 's/^/# /'
check "60 s later the recovery has not started (no 'handling bad device here')" \
    sh -c "! dmesg | tail -n +$((mark + 1)) | grep -q 'handling bad device here'"
echo l > /proc/sysrq-trigger
sleep 2
since "$mark" | grep -E 'mlx5_cmd_flush|mlx5_cmd_trigger_completions|enter_error_state|fw_fatal_reporter_err_work' | sed 's/^/# /' | head -8
check "a CPU is in mlx5_cmd_flush() (sysrq-l backtrace)" \
    sh -c "dmesg | tail -n +$((mark + 1)) | grep -qE 'mlx5_cmd_flush|mlx5_cmd_trigger_completions'"
finish

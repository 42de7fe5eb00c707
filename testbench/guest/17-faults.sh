# hcasim-test: nodes=1 timeout=1200 quick-timeout=500
# Fault injection (docs/FAULTS.md) and the unmodified driver's reaction,
# armed from inside the guest through the run's relay and QMP:
#  - verbs-visible faults (pyverbs, fault_verbs.py): a command status, a
#    delivery status and a delay; an error CQE on an RC QP; QP and port
#    events to the owning context;
#  - work that vanishes and objects that fail (pyverbs, fault_events.py):
#    a lost CQE, a lost completion EQE, a delayed completion, a WQE fetch
#    DMA error, a CQ error, the SRQ limit and an SRQ catastrophic error;
#  - mlx5_core's report of the injected command status and the CQ error;
#  - a firmware page request and a page reclaim (debugfs fw_pages_total);
#  - general events: the slot's power, a firmware live patch, a delay drop;
#  - a fatal health syndrome: the health poll's "Fatal error", the
#    fw_fatal devlink reporter's automatic recovery through the software
#    reset handshake, the port Active again and verbs working after it.
dev=$(hca_pci_dev)
check "modprobe mlx5_ib ib_uverbs" modprobe -a mlx5_ib ib_umad ib_uverbs
check "port ACTIVE" wait_port_active 120
mark=$(dmesg | wc -l)

# 1. What a verbs application sees.
python3 /hcasim/py/fault_verbs.py "$HCASIM_NODE" > /tmp/fault-verbs.txt 2>&1
cat /tmp/fault-verbs.txt
check "the pyverbs fault program ran to the end" grep -q 'IBV_EVENT_CLIENT_REREGISTER reached' /tmp/fault-verbs.txt
# The CQ belongs to a user context (DEVX: libmlx5 always asks for one), and
# mlx5_core logs no failure of a command that carries a user's uid
# (cmd_status_print()); its command statistics in debugfs keep it.
stats=$(ls -d /sys/kernel/debug/mlx5/*/commands/CREATE_CQ 2>/dev/null | head -1)
check "debugfs: mlx5_core counted the injected CREATE_CQ status and syndrome ($stats)" \
    sh -c "[ \"\$(cat $stats/last_failed_mbox_status)\" = 9 ] && [ \$((\$(cat $stats/last_failed_syndrome))) = $((0xabc123)) ]"

# 2. Work that vanishes and objects that fail: a lost CQE, a lost
# completion EQE, a WQE the HCA cannot read, a CQ error, SRQ events.
python3 /hcasim/py/fault_events.py "$HCASIM_NODE" > /tmp/fault-events.txt 2>&1
cat /tmp/fault-events.txt
check "the pyverbs event program ran to the end" grep -q 'fault_events.py took' /tmp/fault-events.txt
cqn=$(sed -n 's/^# cqn=\(0x[0-9a-f]*\) (cq-error)$/\1/p' /tmp/fault-events.txt)
check "dmesg: mlx5_core reports the CQ error ('CQ error on CQN $cqn, syndrome 0x1')" \
    sh -c "dmesg | grep -q 'CQ error on CQN $cqn, syndrome 0x1'"

# 3. The firmware asks for 64 more pages, then gives 64 back.
page_roundtrip 64

# 4. General events (MLX5_EVENT_TYPE_GENERAL_EVENT): the slot's power
# changed (mlx5_core reads MPEIN and says what the slot offers), the
# firmware was live-patched (mlx5_core prints the running version), a
# delay drop timeout (mlx5_ib acts on it only on Ethernet ports: silence).
mark=$(dmesg | wc -l)
slot_power_and_live_patch "$mark"
n=$(dmesg | wc -l)
check "armed general-event delay-drop" hca_fault general-event:subtype=delay-drop
sleep 2
check "an IB port ignores a delay drop timeout (no new dmesg line in 2 s)" test "$(dmesg | wc -l)" = "$n"
since_mark | sed 's/^/# /'

# 5. Firmware dies with a fatal health syndrome; the driver recovers it.
mark=$(dmesg | wc -l)
t0=$(uptime_s)
check "armed health-fatal syndrome 0x8" hca_fault health-fatal:syndrome=0x8
fatal_seen() { since_mark | grep -q 'Fatal error 5 detected'; }
check "mlx5_core's health poll: 'Fatal error 5 detected' (FW_SYND_RFR)" retry 60 fatal_seen
check "the health report names the syndrome" sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'synd 0x8: unrecoverable hardware error'"
recovered() { since_mark | grep -q 'health recovery succeeded'; }
check "fw_fatal recovery: 'health recovery succeeded'" retry 600 recovered
t1=$(uptime_s)
echo "# recovery took $(awk "BEGIN { print $t1 - $t0 }") s from arming to 'health recovery succeeded'"
since_mark | grep -E 'Fatal error|health|Issuing FW Reset|recovery|NIC IFC|wait vital' | sed 's/^/# /'
check "the driver asked for the firmware reset ('Issuing FW Reset')" sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'Issuing FW Reset'"
check "no 'health recovery failed'" sh -c "! dmesg | tail -n +$((mark + 1)) | grep -q 'health recovery failed'"
check "port ACTIVE after the recovery" wait_port_active 180
devlink health show "pci/$dev" reporter fw_fatal > /tmp/fw_fatal.txt 2>&1
sed 's/^/# /' /tmp/fw_fatal.txt
check "devlink: fw_fatal counted 1 error and 1 recovery" grep -qE 'error 1 recover 1' /tmp/fw_fatal.txt
ibv_rc_pingpong -d mlx5_0 -n 200 -c > /tmp/pp-server.txt 2>&1 &
sleep 2
ibv_rc_pingpong -d mlx5_0 -n 200 -c localhost > /tmp/pp-client.txt 2>&1
rc=$?
wait
tail -2 /tmp/pp-client.txt | sed 's/^/# /'
check "ibv_rc_pingpong after the recovery (exit $rc, 200 iterations)" grep -q '^200 iters in ' /tmp/pp-client.txt
check "no kernel oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|Call Trace|BUG:|Oops'"
finish

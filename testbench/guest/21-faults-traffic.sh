# hcasim-test: nodes=2 timeout=900
# Device faults under traffic between two VMs (docs/FAULTS.md), armed by
# node 0 on its own HCA in the middle of a workload, with the time until
# traffic works again:
#  1. firmware dies (health-fatal) under IPoIB iperf3: the driver's
#     fw_fatal recovery re-creates mlx5_0 and ib0; ib0 gets its address
#     again, ping and a new iperf3 run work (IPoIB after a health
#     recovery);
#  2. an error CQE on ib_write_bw's RC QP: perftest reports the failed
#     completion and exits non-zero; a new ib_write_bw works;
#  3. the firmware asks for 512 more pages and then gives them back while
#     ib_write_bw runs: traffic is unaffected, fw_pages_total follows;
#  4. PORT_CHANGE events (down, then active) under iperf3 while the port
#     itself stays Active: ib_ipoib flushes (ipoib_event() queues
#     flush_normal, ipoib_ib_dev_down() turns the carrier off) and joins
#     again (carrier on): ib0's carrier_changes grows by 2 for each, and
#     iperf3 goes on;
# and in ./hcasim suite, under ib_write_bw -D:
#  5. a WQE fetch that fails as a DMA error does (wqe-dma-error), and
#  6. a catastrophic QP error (qp-event): the QP is in error, perftest
#     sees its work requests flushed ('Failed status 5') and exits
#     non-zero; a new ib_write_bw works;
#  7. a CQ error (overrun) on perftest's CQ: mlx5_core reports it
#     ('CQ error on CQN'), the CQ takes no more completions, and perftest,
#     which reads no async events, runs out its time with fewer messages
#     and exits 0;
#  8. a lost CQE on perftest's CQ: nothing notices (exit 0);
# and under iperf3:
#  9. CREATE_QP held 3 s (cmd-delay) while IPoIB carries iperf3: the QP
#     comes 3 s late, and IPoIB moves data every second meanwhile (a held
#     command does not hold the data path);
# 10. the health counter stalls (health-stall): mlx5_core reports the
#     missed polls and recovers nothing; iperf3 goes on.
# Node 1 serves.
ipoib_pair_start
# Two iperf3 servers: one for the run the fault breaks, one for after.
if [ "$me" = 1 ]; then
    check "iperf3 servers on $myip" sh -c "iperf3 -s -D -B $myip -p 5201 && iperf3 -s -D -B $myip -p 5202"
fi
barrier ready 120

mark=$(dmesg | wc -l)

# 1. Firmware dies under iperf3.
if [ "$me" = 0 ]; then
    timeout 60 iperf3 -c "$peerip" -p 5201 -t 20 -i 1 > /tmp/iperf-fatal.txt 2>&1 &
    ipid=$!
    sleep 3
    t0=$(now)
    check "armed health-fatal under iperf3" hca_fault health-fatal:syndrome=0x8
    fatal_seen() { since_mark | grep -q 'Fatal error 5 detected'; }
    check "mlx5_core: 'Fatal error 5 detected'" retry 60 fatal_seen
    recovered() { since_mark | grep -q 'health recovery succeeded'; }
    check "fw_fatal recovery: 'health recovery succeeded'" retry 120 recovered
    echo "# recovery health-fatal (driver): $(since "$t0") s to 'health recovery succeeded'"
    check "no 'health recovery failed'" sh -c "! dmesg | tail -n +$((mark + 1)) | grep -q 'health recovery failed'"
    check "port ACTIVE after the recovery" wait_port_active 120
    ib0_back() { [ -e /sys/class/net/ib0 ]; }
    check "ib0 re-created by the recovery" retry 60 ib0_back
    ipoib_up
    check "ib0 carrier after the recovery" retry 60 ipoib_carrier
    check "ping after the recovery" retry 60 ping -c 1 -W 1 "$peerip"
    echo "# recovery health-fatal (IPoIB ping): $(since "$t0") s from arming"
    wait $ipid
    echo "# the iperf3 run the fault hit: exit $?, $(tail -1 /tmp/iperf-fatal.txt)"
    timeout 60 iperf3 -c "$peerip" -p 5202 -t 5 > /tmp/iperf-after.txt 2>&1
    rc=$?
    grep -E 'sender|receiver' /tmp/iperf-after.txt | sed 's/^/# /'
    check "iperf3 over IPoIB after the recovery: exit $rc" test "$rc" = 0
    moved() { grep receiver /tmp/iperf-after.txt | awk '{exit !($7 + 0 > 0)}'; }
    check "iperf3 after the recovery moved data" moved
fi
barrier fatal-done 400
if [ "$me" = 1 ]; then
    pkill iperf3
fi

# A perftest pair whose client is ours to watch: node 1 serves, node 0
# runs CMD against it in the background, FAULT_FN is called with the
# client's QPN once it printed it. Sets PERF_RC (node 0).
perf_with() {
    local name=$1 fault_fn=$2
    shift 2
    if [ "$me" = 1 ]; then
        start_server "$name" 120 "$@"
        barrier "$name" 120
        wait $SERVER_PID
    else
        barrier "$name" 120
        sleep 1
        timeout 120 stdbuf -oL "$@" "$(mgmt_ip 1)" > "/tmp/$name.txt" 2>&1 &
        local pid=$! qpn=""
        for _ in $(seq 100); do
            qpn=$(sed -n 's/.*local address:.*QPN \(0x[0-9a-f]*\).*/\1/p' "/tmp/$name.txt" | head -1)
            [ -n "$qpn" ] && break
            sleep 0.2
        done
        "$fault_fn" "$qpn"
        wait $pid
        PERF_RC=$?
    fi
    barrier "$name-done" 200
}

# 2. An error CQE on ib_write_bw's QP.
arm_error_cqe() {
    echo "# ib_write_bw client QPN: ${1:-none}"
    sleep 2
    check "armed error-cqe on ib_write_bw's QP" hca_fault "error-cqe:qpn=$1,syndrome=0x4"
}
perf_with werr arm_error_cqe ib_write_bw -d mlx5_0 -s 65536 -D 8 -F
if [ "$me" = 0 ]; then
    grep -i -E 'fail|error' /tmp/werr.txt | head -3 | sed 's/^/# /'
    check "ib_write_bw exits non-zero after the error completion (exit $PERF_RC)" test "$PERF_RC" != 0
    check "perftest: 'Failed status 4' (IBV_WC_LOC_PROT_ERR)" grep -q 'Failed status 4' /tmp/werr.txt
fi
client_server wafter 120 ib_write_bw -d mlx5_0 -s 65536 -n 200 -F
rc=$?
[ "$me" = 0 ] && check "a new ib_write_bw after the error completion (exit $rc)" test "$rc" = 0

# 3. Pages asked for and given back under ib_write_bw.
page_requests() { page_roundtrip 512 " under ib_write_bw"; }
perf_with wpages page_requests ib_write_bw -d mlx5_0 -s 65536 -D 10 -F
if [ "$me" = 0 ]; then
    grep -E '^ *65536 ' /tmp/wpages.txt | sed 's/^/# /'
    check "ib_write_bw through page requests: exit $PERF_RC" test "$PERF_RC" = 0
    check "no kernel oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|Call Trace|BUG:|Oops'"
fi
# 4. PORT_CHANGE events under iperf3 (the port stays Active).
if [ "$me" = 1 ]; then
    check "iperf3 server on $myip" iperf3 -s -D -B "$myip" -p 5203
fi
barrier port-events 60
if [ "$me" = 0 ]; then
    timeout 60 iperf3 -c "$peerip" -p 5203 -t 12 > /tmp/iperf-port.txt 2>&1 &
    ipid=$!
    sleep 2
    changes() { cat /sys/class/net/ib0/carrier_changes; }
    for sub in down active; do
        c0=$(changes)
        check "armed port-event $sub under iperf3" hca_fault "port-event:subtype=$sub"
        # ipoib_event() queues flush_normal: carrier off, then on again
        # once the join task finds the port Active and rejoins.
        flipped() { [ "$(changes)" -ge $((c0 + 2)) ] && ipoib_carrier; }
        retry 30 flipped
        check "ib_ipoib: carrier off and on again after the $sub event (carrier_changes $c0 -> $(changes))" flipped
        sleep 2
    done
    check "the port stayed ACTIVE" grep -q ACTIVE /sys/class/infiniband/mlx5_0/ports/1/state
    wait $ipid
    rc=$?
    grep -E 'sender|receiver' /tmp/iperf-port.txt | sed 's/^/# /'
    check "iperf3 through both port events: exit $rc" test "$rc" = 0
    check "ping after the port events" retry 10 ping -c 1 -W 2 "$peerip"
fi
barrier port-events-done 120
[ "$me" = 1 ] && pkill iperf3

# 5.-8. in ./hcasim suite.
if ! quick; then
    # The QP in error under ib_write_bw: its WRs flush.
    arm_dma_error() { sleep 2; check "armed wqe-dma-error on ib_write_bw's QP" hca_fault "wqe-dma-error:qpn=$1"; }
    arm_catastrophic() { sleep 2; check "armed qp-event catastrophic on ib_write_bw's QP" hca_fault "qp-event:qpn=$1,type=catastrophic"; }
    for kind in dma_error catastrophic; do
        what="the WQE's DMA error"
        [ "$kind" = catastrophic ] && what="the catastrophic QP error"
        perf_with "w$kind" "arm_$kind" ib_write_bw -d mlx5_0 -s 65536 -D 6 -F
        if [ "$me" = 0 ]; then
            grep -E 'Failed status' "/tmp/w$kind.txt" | sed 's/^/# /'
            check "ib_write_bw exits non-zero after $what (exit $PERF_RC)" test "$PERF_RC" != 0
            check "perftest: 'Failed status 5' (IBV_WC_WR_FLUSH_ERR: the QP is in error)" \
                grep -q 'Failed status 5' "/tmp/w$kind.txt"
        fi
        client_server "w$kind-after" 120 ib_write_bw -d mlx5_0 -s 65536 -n 200 -F
        rc=$?
        [ "$me" = 0 ] && check "a new ib_write_bw after $what (exit $rc)" test "$rc" = 0
    done
    # The newest CQ of mlx5_core's debugfs: perftest's own (on 6.10 and
    # later, its first MR also makes mlx5_ib create its UMR CQ, before).
    cq_dir=/sys/kernel/debug/mlx5/$(hca_pci_dev)/CQs
    newest_cq() {
        ls "$cq_dir" | while read -r c; do echo "$((c)) $c"; done | sort -n | tail -1 | cut -d' ' -f2
    }
    arm_cq_error() {
        sleep 2
        cqn=$(newest_cq)
        check "armed cq-error overrun on ib_write_bw's CQ $cqn" hca_fault "cq-error:cqn=$cqn,syndrome=overrun"
    }
    mark=$(dmesg | wc -l)
    perf_with wcqerr arm_cq_error ib_write_bw -d mlx5_0 -s 65536 -D 6 -F
    if [ "$me" = 0 ]; then
        grep -E '^ *65536 ' /tmp/wcqerr.txt | sed 's/^/# /'
        check "mlx5_core: 'CQ error on CQN $cqn, syndrome 0x1'" \
            sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'CQ error on CQN $cqn, syndrome 0x1'"
        check "ib_write_bw, which reads no async events, runs out its time: exit $PERF_RC" test "$PERF_RC" = 0
    fi
    arm_lost_cqe() { sleep 2; cqn=$(newest_cq); check "armed lost-cqe on ib_write_bw's CQ $cqn" hca_fault "lost-cqe:cqn=$cqn"; }
    perf_with wlost arm_lost_cqe ib_write_bw -d mlx5_0 -s 65536 -D 6 -F
    if [ "$me" = 0 ]; then
        grep -E '^ *65536 ' /tmp/wlost.txt | sed 's/^/# /'
        check "ib_write_bw with a lost CQE: exit $PERF_RC" test "$PERF_RC" = 0
    fi
fi
# 9.-10. in ./hcasim suite, under iperf3.
if ! quick; then
    if [ "$me" = 1 ]; then
        check "iperf3 server on $myip" iperf3 -s -D -B "$myip" -p 5204
    fi
    barrier held-cmd 60
    if [ "$me" = 0 ]; then
        timeout 90 iperf3 -c "$peerip" -p 5204 -t 30 -i 1 -f m > /tmp/iperf-held.txt 2>&1 &
        ipid=$!
        ip0=$(now)
        sleep 2
        check "armed cmd-delay 3000 ms on CREATE_QP under iperf3" hca_fault "cmd-delay:opcode=CREATE_QP,ms=3000"
        t0=$(now)
        python3 - > /tmp/held-qp.txt 2>&1 << 'PY'
import sys, time
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.qp import QP, QPCap, QPInitAttr
sys.path.insert(0, "/hcasim/py")
from verbs_enums import e  # noqa: E402
ctx = Context(name="mlx5_0")
pd = PD(ctx)
cq = CQ(ctx, 16)
t = time.time()
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4, max_recv_wr=4)))
print(f"create_qp {time.time() - t:.2f} s qpn 0x{qp.qp_num:x} from {t:.3f} to {time.time():.3f}")
PY
        rc=$?
        took=$(since "$t0")
        sed 's/^/# /' /tmp/held-qp.txt
        check "the QP came at least 3 s late (exit $rc, $took s)" \
            sh -c "[ $rc = 0 ] && awk 'BEGIN { exit !($took >= 3) }'"
        # 10. The health counter stalls under the same iperf3.
        mark=$(dmesg | wc -l)
        check "armed health-stall under iperf3" hca_fault health-stall
        stalled() { dmesg | tail -n +$((mark + 1)) | grep -q "device's health compromised - reached miss count"; }
        check "mlx5_core: 'device's health compromised - reached miss count'" retry 30 stalled
        wait $ipid
        rc=$?
        grep -E 'sender|receiver' /tmp/iperf-held.txt | sed 's/^/# /'
        check "iperf3 through the held command and the stalled counter: exit $rc" test "$rc" = 0
        # iperf3's one-second intervals wholly inside the time CREATE_QP
        # was held: each moved data (TCP over IPoIB: the device's doorbells,
        # WQEs and completions went on).
        read -r a b <<< "$(sed -n 's/.* from \([0-9.]*\) to \([0-9.]*\)$/\1 \2/p' /tmp/held-qp.txt)"
        held=$(awk -v a="${a:-0}" -v b="${b:-0}" -v s="$ip0" '/sec .* Mbits\/sec/ && $3 ~ /^[0-9.]+-/ {
                   split($3, t, "-"); if (s + t[1] >= a && s + t[2] <= b) print $7}' /tmp/iperf-held.txt | tr '\n' ' ')
        echo "# iperf3 Mbit/s in the seconds CREATE_QP was held: $held"
        check "IPoIB moved data in each second while CREATE_QP was held ($held)" \
            sh -c "[ -n '$held' ] && echo '$held' | awk '{for (i = 1; i <= NF; i++) if (\$i + 0 <= 0) exit 1}'"
        check "no recovery for a stalled counter" \
            sh -c "! dmesg | tail -n +$((mark + 1)) | grep -q 'starting health recovery flow'"
        check "ping with the counter stalled" ping -q -c 1 -W 2 "$peerip"
    fi
    barrier held-cmd-done 120
    [ "$me" = 1 ] && pkill iperf3
fi
check "no kernel oops or warning at the end" sh -c "! dmesg | grep -qE 'WARNING:|Call Trace|BUG:|Oops'"
barrier done 300
finish

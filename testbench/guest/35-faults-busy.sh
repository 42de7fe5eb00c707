# hcasim-test: nodes=2 timeout=1500 ci=0 append=tsc=reliable
# The faults 21-faults-traffic leaves out, armed while the HCA is busy
# (docs/FAULTS.md): node 0 arms them on its own HCA while it sends IPoIB
# iperf3 and an RC ib_write_bw (--run_infinitely, a bandwidth line every
# 5 s) to node 1, and checks the driver's reaction and that both streams
# kept moving data meanwhile (IPoIB never two seconds without, perftest in
# every period):
#  1. firmware deaths under iperf3: the fw_fatal reporter recovers the
#     first; a second inside its grace period unloads the driver instead;
#     'devlink health recover' then meets firmware still initializing for
#     8 s (init-delay): the recovery takes that much longer than the first
#     in the same run, and IPoIB works after;
#  2. the verbs-visible faults of 17-faults on an application's own
#     objects (fault_verbs.py, fault_events.py: command status, delivery
#     and delay, error CQE, QP events, lost CQE, lost completion EQE, late
#     CQE, WQE DMA error, CQ error, SRQ limit and SRQ catastrophic error;
#     not the ClientReregister, a port event that IPoIB reacts to: 20 and
#     21 check that under iperf3);
#  3. a command status and a delivery status on the driver's own
#     QUERY_Q_COUNTER (a hw_counters read): mlx5_core's error line, the
#     errno the reader gets, debugfs's command statistics;
#  4. general events: the slot's power, a firmware live patch;
#  5. the EQE of a command lost (lost-eqe event=cmd): the driver's 60 s
#     timeout finds nothing to recover ('No done completion');
#  6. a command that never completes (cmd-drop on QUERY_Q_COUNTER): the
#     60 s timeout, ETIMEDOUT to the reader.
# Node 1 serves. The recoveries of 1 come first: 6 leaks a command slot,
# and a fatal error after a leaked slot never recovers (FAULTS.md).
# tsc=reliable: under this load TCG delays the HPET reads of the guest's
# clocksource watchdog, which then marks the TSC unstable and moves the
# guest to the HPET, whose every read is an emulated MMIO access (seen on
# 6.1: perftest printed periods of 0 MB/s from then on).
ipoib_pair_start
mark=$(dmesg | wc -l)
dbg=/sys/kernel/debug/mlx5/$(hca_pci_dev)
if [ "$me" = 1 ]; then
    check "iperf3 servers on $myip" sh -c "iperf3 -s -D -B $myip -p 5201 && iperf3 -s -D -B $myip -p 5202"
fi
barrier ready 120

# flow_secs: seconds between mlx5_core's 'starting health recovery flow'
# and 'health recovery succeeded' since the mark (dmesg's own clock).
flow_secs() {
    since_mark | awk -F'[][]' '/starting health recovery flow/ {a = $2}
                               /health recovery succeeded/ && a != "" {printf "%.1f", $2 - a; exit}'
}
fw_fatal() { devlink health show "pci/$(hca_pci_dev)" reporter fw_fatal 2>&1 | tr -s ' \n' ' '; }

# 1. Two firmware deaths under iperf3: the devlink fw_fatal reporter
# recovers the first; the second comes inside its grace period, so
# mlx5_core unloads instead (mlx5_fw_fatal_reporter_err_work(): 'Driver is
# in error state. Unloading'); the user's 'devlink health recover' then
# meets firmware that says 'initializing' for 8 s.
if [ "$me" = 0 ]; then
    timeout 90 iperf3 -c "$peerip" -p 5201 -t 15 > /tmp/iperf-plain.txt 2>&1 &
    sleep 3
    mark=$(dmesg | wc -l)
    check "armed health-fatal under iperf3" hca_fault health-fatal:syndrome=0x8
    recovered() { since_mark | grep -qE 'health recovery (succeeded|failed)'; }
    check "the fw_fatal reporter's recovery ends" retry 120 recovered
    since_mark | grep -E 'Fatal error|recovery' | sed 's/^/# /'
    check "'health recovery succeeded'" sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'health recovery succeeded'"
    plain=$(flow_secs)
    check "port ACTIVE after the recovery" wait_port_active 120
    ib0_back() { [ -e /sys/class/net/ib0 ]; }
    check "ib0 re-created by the recovery" retry 60 ib0_back
    ipoib_up
    check "ping after the recovery" retry 60 ping -c 1 -W 1 "$peerip"
    wait
    echo "# devlink: $(fw_fatal)"

    timeout 90 iperf3 -c "$peerip" -p 5201 -t 15 > /tmp/iperf-grace.txt 2>&1 &
    sleep 3
    mark=$(dmesg | wc -l)
    check "armed a second health-fatal under iperf3, inside the grace period" hca_fault health-fatal:syndrome=0x8
    unloaded() { since_mark | grep -q 'Driver is in error state. Unloading'; }
    check "mlx5_core: 'Driver is in error state. Unloading'" retry 60 unloaded
    gone() { [ ! -e /sys/class/infiniband/mlx5_0 ]; }
    check "mlx5_0 is gone" retry 30 gone
    sleep 5
    check "no recovery was started" sh -c "! dmesg | tail -n +$((mark + 1)) | grep -q 'starting health recovery flow'"
    st=$(fw_fatal)
    echo "# devlink: $st"
    check "devlink: the fw_fatal reporter is in error (2 errors, 1 recovery)" \
        sh -c "echo '$st' | grep -q 'state error error 2 recover 1 '"
    wait

    mark=$(dmesg | wc -l)
    check "armed init-delay 8000 ms (for the next reset)" hca_fault init-delay:ms=8000
    t0=$(now)
    devlink health recover "pci/$(hca_pci_dev)" reporter fw_fatal > /tmp/recover.txt 2>&1
    rc=$?
    took=$(since "$t0")
    since_mark | grep -E 'Waiting for FW|recovery' | sed 's/^/# /'
    check "devlink health recover: exit $rc after $took s" test "$rc" = 0
    check "'health recovery succeeded'" sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'health recovery succeeded'"
    # (mlx5_core says 'Waiting for FW ...' only after 20 s of it;
    # 18-faults-slow waits that long.)
    slow=$(flow_secs)
    echo "# recovery flow ('starting' to 'succeeded'): $plain s by the reporter, $slow s by hand with the firmware initializing 8 s"
    check "the firmware's 8 s of initializing are in the recovery ($plain s -> $slow s)" \
        awk -v a="${plain:-0}" -v b="${slow:-0}" 'BEGIN { exit !(b - a >= 7) }'
    st=$(fw_fatal)
    echo "# devlink: $st"
    check "devlink: the reporter is healthy again (2 errors, 2 recoveries)" \
        sh -c "echo '$st' | grep -q 'state healthy error 2 recover 2 '"
    check "port ACTIVE after the recovery" wait_port_active 120
    check "ib0 re-created" retry 60 ib0_back
    ipoib_up
    check "ping after the recovery" retry 60 ping -c 1 -W 1 "$peerip"
    timeout 60 iperf3 -c "$peerip" -p 5202 -t 3 > /tmp/iperf-after.txt 2>&1
    rc=$?
    grep -E 'receiver' /tmp/iperf-after.txt | sed 's/^/# /'
    check "iperf3 over IPoIB after the recoveries: exit $rc" test "$rc" = 0
fi
barrier recovered 600

# The busy HCA: node 1 serves ib_write_bw for ever; node 0 sends, and
# iperf3 too, each line stamped with the time it was printed.
stamp() { while IFS= read -r l; do echo "$(now) $l"; done; }
if [ "$me" = 1 ]; then
    start_server wbg 1200 ib_write_bw -d mlx5_0 -s 65536 -F --run_infinitely -D 5
    barrier busy 120
    barrier busy-done 1200
    kill "$SERVER_PID"
    pkill iperf3
else
    barrier busy 120
    sleep 1
    timeout 1200 stdbuf -oL ib_write_bw -d mlx5_0 -s 65536 -F --run_infinitely -D 5 "$(mgmt_ip 1)" 2>&1 |
        stamp > /tmp/wbg.txt &
    timeout 1200 stdbuf -oL iperf3 -c "$peerip" -p 5201 -t 1000 -i 1 -f m --forceflush 2>&1 | stamp > /tmp/ibg.txt &
    busy_t0=$(now)
    sleep 8

    summary() {
        echo "$1" | awk '{ if (NF == 0) { print "none"; exit }
                           min = max = $1; for (i = 1; i <= NF; i++) { s += $i; z += $i + 0 <= 0; if ($i < min) min = $i; if ($i > max) max = $i }
                           printf "%d intervals (%d without data), min %s, mean %.1f, max %s\n", NF, z, min, s / NF, max }'
    }
    # moved NAME A B [M]: IPoIB never went two iperf3 seconds in [A, B]
    # without data (a TCG guest of one vCPU, busy with three programs, may
    # miss one), every perftest period that ended in [A, B + M] (default
    # 5: the period that overlapped B) moved data, and there was at least
    # one of each.
    moved() {
        local name=$1 a=$2 b=$3 m=${4:-5} ip wb
        ip=$(awk -v a="$a" -v b="$b" '$1 >= a && $1 <= b && / Mbits\/sec/ && !/sender|receiver/ {
                 for (i = 2; i < NF; i++) if ($(i + 1) == "Mbits/sec") print $i }' /tmp/ibg.txt | tr '\n' ' ')
        wb=$(awk -v a="$a" -v b="$b" -v m="$m" '$1 >= a && $1 <= b + m && $2 == 65536 { print $5 }' /tmp/wbg.txt | tr '\n' ' ')
        echo "# $name: iperf3 Mbit/s per second: $(summary "$ip")"
        echo "# $name: ib_write_bw MB/s per 5 s: $(summary "$wb")"
        check "$name: IPoIB never went two seconds without data" \
            sh -c "[ -n '$ip' ] && echo '$ip' | awk '{for (i = 2; i <= NF; i++) if (\$i + 0 <= 0 && \$(i - 1) + 0 <= 0) exit 1}'"
        check "$name: ib_write_bw moved data in every period" \
            sh -c "[ -n '$wb' ] && echo '$wb' | awk '{for (i = 1; i <= NF; i++) if (\$i + 0 <= 0) exit 1}'"
        if echo "$wb" | awk '{for (i = 1; i <= NF; i++) if ($i + 0 <= 0) exit 0; exit 1}'; then
            awk -v a="$a" -v b="$b" -v m="$m" '$1 >= a && $1 <= b + m' /tmp/wbg.txt | head -40 | sed 's/^/# ib_write_bw: /'
        fi
    }

    # 2. The verbs-visible faults on an application's own objects.
    t=$(now)
    mark=$(dmesg | wc -l)
    python3 /hcasim/py/fault_verbs.py "$HCASIM_NODE" --no-port-event > /tmp/fault-verbs.txt 2>&1
    python3 /hcasim/py/fault_events.py "$HCASIM_NODE" > /tmp/fault-events.txt 2>&1
    cat /tmp/fault-verbs.txt /tmp/fault-events.txt
    check "the pyverbs fault program ran to the end" grep -q 'fault_verbs.py: done' /tmp/fault-verbs.txt
    check "the pyverbs event program ran to the end" grep -q 'fault_events.py took' /tmp/fault-events.txt
    check "no check of the two pyverbs programs failed" sh -c "! grep -q '^not ok' /tmp/fault-verbs.txt /tmp/fault-events.txt"
    cqn=$(sed -n 's/^# cqn=\(0x[0-9a-f]*\) (cq-error)$/\1/p' /tmp/fault-events.txt)
    check "dmesg: mlx5_core reports the CQ error ('CQ error on CQN $cqn, syndrome 0x1')" \
        sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'CQ error on CQN $cqn, syndrome 0x1'"
    moved "the pyverbs faults" "$t" "$(now)"

    # 3. A command status and a delivery status on QUERY_Q_COUNTER, the
    # query behind a read of the port's hw_counters (mlx5_ib, no user's
    # uid: mlx5_core logs the status).
    t=$(now)
    mark=$(dmesg | wc -l)
    ctr=/sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence
    stats=$dbg/commands/QUERY_Q_COUNTER
    read_ctr() { sleep 0.1; cat "$ctr" 2>&1; }  # ib_core keeps a read for 10 ms
    check "a hw_counters read works ($(read_ctr))" read_ctr
    check "armed cmd-status 0x3 syndrome 0x5a1e on QUERY_Q_COUNTER" \
        hca_fault cmd-status:opcode=QUERY_Q_COUNTER,status=0x3,syndrome=0x5a1e
    out=$(read_ctr)
    echo "# the read: $out"
    check "the read fails with EINVAL (bad parameter)" sh -c "echo '$out' | grep -q 'Invalid argument'"
    check "mlx5_core: 'QUERY_Q_COUNTER(0x773) op_mod(0x0) failed, status bad parameter(0x3), syndrome (0x5a1e)'" \
        sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'QUERY_Q_COUNTER(0x773) op_mod(0x0) failed, status bad parameter(0x3), syndrome (0x5a1e)'"
    check "debugfs: last_failed_mbox_status 3, last_failed_syndrome 0x5a1e" \
        sh -c "[ \"\$(cat $stats/last_failed_mbox_status)\" = 3 ] && [ \$((\$(cat $stats/last_failed_syndrome))) = $((0x5a1e)) ]"
    check "the next read works ($(read_ctr))" read_ctr
    check "armed cmd-delivery FW_INTERNAL_ERR on QUERY_Q_COUNTER" \
        hca_fault cmd-delivery:opcode=QUERY_Q_COUNTER,delivery=FW_INTERNAL_ERR
    out=$(read_ctr)
    echo "# the read: $out"
    check "the read fails with EIO (a delivery error: deliv_status_to_err())" sh -c "echo '$out' | grep -q 'Input/output error'"
    check "debugfs: last_failed_errno 5" sh -c "[ \"\$(cat $stats/last_failed_errno)\" = 5 ]"
    check "the next read works ($(read_ctr))" read_ctr

    # 4. General events.
    slot_power_and_live_patch "$mark"
    sleep 5
    moved "the command statuses and general events" "$t" "$(now)"

    # 5. A command's EQE lost: the next command (our read's, or one of
    # mlx5_ib's MAD_IFCs answering the SM) waits out the 60 s timeout; the
    # command EQ's recovery finds nothing. 6. QUERY_Q_COUNTER never
    # completes.
    for kind in lost-eqe cmd-drop; do
        t=$(now)
        mark=$(dmesg | wc -l)
        if [ "$kind" = lost-eqe ]; then
            check "armed lost-eqe on the next command EQE" hca_fault lost-eqe:event=cmd
        else
            check "armed cmd-drop on QUERY_Q_COUNTER" hca_fault cmd-drop:opcode=QUERY_Q_COUNTER
        fi
        t1=$(now)
        out=$(timeout 100 cat "$ctr" 2>&1)
        took=$(since "$t1")
        echo "# $kind: the read took $took s: $out"
        # (when another command took the lost EQE, its 60 s are still
        # running: the read came back at once)
        nodone() { since_mark | grep -qE 'cmd\[[0-9]+\]: [A-Z_]+\(0x[0-9a-f]+\) No done completion'; }
        retry 90 nodone
        since_mark | grep -E 'timeout|No done|recovered|Recovered' | sed 's/^/# /'
        check "$kind: mlx5_core: 'cmd[N]: ... No done completion'" nodone
        check "$kind: mlx5_core: '... timeout. Will cause a leak of a command resource'" \
            sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'timeout. Will cause a leak of a command resource'"
        if [ "$kind" = cmd-drop ]; then
            check "cmd-drop: the read fails with ETIMEDOUT after the 60 s timeout ($took s)" \
                sh -c "echo '$out' | grep -q 'timed out' && awk 'BEGIN { exit !($took >= 60) }'"
        fi
        check "$kind: the next read works ($(read_ctr))" read_ctr
        moved "$kind" "$t" "$(now)"
    done

    busy=$(since "$busy_t0")
    busy_end=$(now)
    pkill -INT -f 'iperf3 -c'
    pkill -f 'ib_write_bw -d'
    sleep 2
    n_ip=$(grep -c ' Mbits/sec' /tmp/ibg.txt)
    echo "# $busy s busy: $n_ip iperf3 lines, $(awk '$2 == 65536' /tmp/wbg.txt | wc -l) ib_write_bw periods"
    # (what the two print when they are stopped is not counted)
    moved "the whole busy time" "$busy_t0" "$busy_end" 0
    barrier busy-done 1200
fi
check "no kernel oops or warning at the end" sh -c "! dmesg | grep -qE 'WARNING:|Call Trace|BUG:|Oops'"
barrier done 300
finish

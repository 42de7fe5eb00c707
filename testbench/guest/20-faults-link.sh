# hcasim-test: nodes=2 timeout=900 ci=0
# Link faults between two VMs (docs/FAULTS.md, "Link kinds"), armed by
# node 0 on its own switch port with hca_fault (the fabric's control
# socket through the run's relay), under IPoIB iperf3 and RC traffic:
# link down and up (the HCA's port Down and Polling, no carrier), a 2 s
# flap and a retrain (the port's state, carrier, LinkDowned, iperf3
# surviving), ClientReregister (IPoIB joins again), a LID change (the peer
# keeps the old LID until it looks again), P_Key table changes (ib0
# follows index 0 into a partition without a broadcast group and back),
# the subnet manager gone and back (IPoIB keeps its cached paths,
# rdma_cm's route resolution times out, a new SM reregisters everyone), a
# partition (the RC requester's retry counter runs out), loss, duplicates
# and reordering (RC pingpong with data checks and ib_write_bw complete),
# delay and corruption. For each kind that takes the path away, the time
# until ping works again is a "# recovery" line. Node 1 serves.
ipoib_pair_start rdma_ucm
no_carrier() { ! ipoib_carrier; }
barrier ready 120

counter() { cat "/sys/class/infiniband/mlx5_0/ports/1/counters/$1"; }
state_is() { grep -q "$1" /sys/class/infiniband/mlx5_0/ports/1/state; }
phys_is() { grep -q "$1" /sys/class/infiniband/mlx5_0/ports/1/phys_state; }
# recovered KIND T0: waits (up to 120 s) until ping works again and prints
# the time since T0 as a recovery line; fails if it never does.
recovered() {
    local kind=$1 t0=$2
    for _ in $(seq 240); do
        if ping -c 1 -W 1 "$peerip" > /dev/null 2>&1; then
            awk -v a="$t0" -v b="$(now)" -v k="$kind" 'BEGIN {printf "# recovery %s: %.1f s\n", k, b - a}'
            return 0
        fi
    done
    return 1
}
sa_joins() { fabric_ctl stats | sed -n 's/^sa: .* joins=\([0-9]*\).*/\1/p'; }
# downed_since N: LinkDowned has grown past N.
downed_since() { [ "$(counter link_downed)" -gt "$1" ]; }

# iperf3 over IPoIB with a fault in the middle: node 1 serves one test,
# node 0 runs it for SECS and arms FAULT after 3 s. Sets IPERF_RC.
iperf_with() {
    local name=$1 secs=$2 fault=$3
    if [ "$me" = 1 ]; then
        start_server "$name" $((secs + 60)) iperf3 -s -1 -B "$myip"
        barrier "$name" 120
        wait $SERVER_PID
        IPERF_RC=$?
    else
        barrier "$name" 120
        timeout $((secs + 60)) iperf3 -c "$peerip" -t "$secs" -i 1 > "/tmp/$name.txt" 2>&1 &
        local pid=$!
        sleep 3
        check "armed $fault under iperf3" hca_fault "$fault"
        wait $pid
        IPERF_RC=$?
        grep -E 'sender|receiver' "/tmp/$name.txt" | sed 's/^/# /'
    fi
    barrier "$name-done" $((secs + 120))
}
# The last 1-second interval of an iperf3 run moved data: traffic resumed.
last_interval_moved() {
    grep -E '^\[ *[0-9]+\] +[0-9.]+-[0-9.]+ +sec' "/tmp/$1.txt" | grep -v -E 'sender|receiver' | tail -1 |
        awk '{exit !($5 + 0 > 0)}'
}

# 1. Link down and up.
if [ "$me" = 0 ]; then
    downed=$(counter link_downed)
    check "armed link-down" hca_fault link-down
    check "port goes DOWN" retry 20 state_is DOWN
    # The switch's side is Disabled; the HCA's port finds no peer and polls.
    check "phys_state Polling" phys_is Polling
    check "ib0 loses its carrier" retry 20 no_carrier
    check "ping fails while the link is down" sh -c "! ping -c 2 -W 1 $peerip"
    check "LinkDowned counted ($downed -> $(counter link_downed))" downed_since "$downed"
    t0=$(now)
    check "armed link-up" hca_fault link-up
    check "port ACTIVE again" wait_port_active 60
    check "ib0 carrier again" retry 30 ipoib_carrier
    check "ping works again after link-up" recovered link-up "$t0"
fi
barrier link-updown 300

# 2. A 2 s flap under iperf3: TCP rides it out, traffic resumes.
downed=$(counter link_downed)
iperf_with flap 12 link-flap:ms=2000
if [ "$me" = 0 ]; then
    check "iperf3 through a 2 s link flap: exit 0" test "$IPERF_RC" = 0
    check "the flap happened (LinkDowned $downed -> $(counter link_downed))" downed_since "$downed"
    check "iperf3's last interval moved data (traffic resumed)" last_interval_moved flap
    check "port ACTIVE after the flap" wait_port_active 30
fi

# 3. A link retrain: Down, Init, Active in a moment.
if [ "$me" = 0 ]; then
    downed=$(counter link_downed)
    t0=$(now)
    check "armed link-retrain" hca_fault link-retrain
    check "LinkDowned counted" retry 10 downed_since "$downed"
    check "port ACTIVE after the retrain" wait_port_active 60
    check "ping works after the retrain" recovered link-retrain "$t0"
fi
barrier retrain 300

# 4. ClientReregister under iperf3: IPoIB joins its groups again.
[ "$me" = 0 ] && joins=$(sa_joins)
iperf_with rereg 8 client-rereg
if [ "$me" = 0 ]; then
    check "iperf3 through a ClientReregister: exit 0" test "$IPERF_RC" = 0
    rejoined() { [ "$(sa_joins)" -gt "$joins" ]; }
    check "IPoIB joined again after the reregister (SA joins $joins -> $(sa_joins))" retry 20 rejoined
    check "ping after the reregister" ping -c 2 -W 2 "$peerip"
fi
barrier rereg-checked 120

# 4b. A LID change of node 0's port. The driver reports IB_EVENT_LID_CHANGE
# and IPoIB flushes its paths; node 1 is told nothing, so its cached path
# still names the old LID until it looks again (here: a ClientReregister
# of node 1 marks its paths invalid).
if [ "$me" = 0 ]; then
    lid0=$(port_attr lid)
    t0=$(now)
    check "armed lid-change" hca_fault lid-change
    lid_moved() { [ "$(port_attr lid)" != "$lid0" ]; }
    check "node 0's LID changed ($lid0 -> $(port_attr lid))" retry 20 lid_moved
    echo "# LID $lid0 -> $(port_attr lid)"
    check "port ACTIVE with the new LID" wait_port_active 30
    n=$(ping -c 3 -W 1 "$peerip" 2>/dev/null | sed -n 's/.* \([0-9]*\) received.*/\1/p')
    echo "# ping right after the LID change, before node 1 looks again: ${n:-0} of 3 answered"
    check "node 1 reregisters (its IPoIB paths marked invalid)" fabric_ctl harness fault node1 client-rereg
    check "ping after the LID change and node 1's reregister" recovered lid-change "$t0"
    check "armed lid-change (back)" hca_fault lid-change
    lid_back() { [ "$(port_attr lid)" = "$lid0" ]; }
    check "node 0's LID back ($lid0)" retry 20 lid_back
    fabric_ctl harness fault node1 client-rereg > /dev/null
    check "ping with the first LID again" recovered lid-back "$(now)"
fi
barrier lid 300

# 4c. P_Key table changes by the SM. IPoIB's parent interface takes the
# P_Key at index 0: a second P_Key behind it changes nothing; 0x8001 at
# index 0 moves ib0 into partition 0x8001, whose broadcast group the SA
# creates for it (its port is a full member), but the peer is not in it;
# once the SM puts the peer in too, the two talk inside the partition;
# the default back at index 0 brings both home.
pkey_file=/sys/class/infiniband/mlx5_0/ports/1/pkeys
if [ "$me" = 0 ]; then
    check "armed pkey-change:pkeys=0xffff+0x8001" hca_fault pkey-change:pkeys=0xffff+0x8001
    pkey_at() { grep -q "$2" "$pkey_file/$1"; }
    check "P_Key 0x8001 at index 1" retry 20 pkey_at 1 0x8001
    check "ib0 keeps P_Key 0xffff" grep -q 0xffff /sys/class/net/ib0/pkey
    check "ping with a second P_Key in the table" ping -c 2 -W 2 "$peerip"
    mark=$(dmesg | wc -l)
    bad_pkey() { fabric_ctl stats | sed -n 's/^drop bad-pkey=//p'; }
    drops0=$(bad_pkey)
    check "armed pkey-change:pkeys=0x8001+0xffff" hca_fault pkey-change:pkeys=0x8001+0xffff
    ib0_pkey() { grep -q "$1" /sys/class/net/ib0/pkey; }
    check "ib0 takes index 0's P_Key 0x8001 (IPoIB's heavy flush)" retry 30 ib0_pkey 0x8001
    in_group() { fabric_ctl groups | grep -q 'ff12:401b:8001:.*pkey=0x8001'; }
    check "the SA created partition 0x8001's IPoIB broadcast group for it" retry 60 in_group
    check "ib0 has its carrier in partition 0x8001" retry 60 ipoib_carrier
    check "the peer, outside the partition, does not answer" sh -c "! ping -c 3 -W 1 $peerip"
    echo "# fabric: bad-pkey drops ${drops0:-0} -> $(bad_pkey)"
    check "the SM puts the peer in partition 0x8001 too" fabric_ctl sm pkeys $((peer + 1)) 0x8001,0xffff
    t0=$(now)
    check "ping inside partition 0x8001" recovered pkey-partition "$t0"
    fabric_ctl groups | grep -i '8001' | sed 's/^/# /'
    t0=$(now)
    check "armed pkey-change:pkeys=0xffff" hca_fault pkey-change:pkeys=0xffff
    check "the peer back on the default partition" fabric_ctl sm pkeys $((peer + 1)) 0xffff
    check "ib0 back on P_Key 0xffff" retry 30 ib0_pkey 0xffff
    check "ib0 carrier again" retry 60 ipoib_carrier
    check "ping on the default partition again" recovered pkey-back "$t0"
fi
barrier pkey 300

# 5. The subnet manager gone and back.
if [ "$me" = 0 ]; then
    route_error() { timeout 20 rping -c -a "$peerip" -C 1 2>&1 | grep -q RDMA_CM_EVENT_ROUTE_ERROR; }
    check "rdma_cm resolves a route while the SM runs" sh -c "! timeout 20 rping -c -a $peerip -C 1 2>&1 |
        grep -q RDMA_CM_EVENT_ROUTE_ERROR"
    check "armed sm-down" hca_fault sm-down
    sleep 7  # past a sweep interval
    check "port stays ACTIVE without the SM" state_is ACTIVE
    check "IPoIB keeps working without the SM (cached paths)" ping -c 3 -W 2 "$peerip"
    timeout 20 rping -c -a "$peerip" -C 1 > /tmp/rping-nosm.txt 2>&1
    sed 's/^/# /' /tmp/rping-nosm.txt | head -3
    check "rdma_cm: 'RDMA_CM_EVENT_ROUTE_ERROR' without an SA" grep -q RDMA_CM_EVENT_ROUTE_ERROR /tmp/rping-nosm.txt
    t0=$(now)
    check "armed sm-up" hca_fault sm-up
    resolves() { ! route_error; }
    check "rdma_cm resolves routes again" retry 60 resolves
    awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "# recovery sm-up (rdma_cm route): %.1f s\n", b - a}'
    check "ping after the SM came back" recovered sm-up "$t0"
fi
barrier sm 300

# 6. A partition: the links stay up, the path is gone.
if [ "$me" = 0 ]; then
    check "armed partition:with=1" hca_fault partition:with=1
    check "ping fails across the partition" sh -c "! ping -c 2 -W 1 $peerip"
    check "port stays ACTIVE in a partition" state_is ACTIVE
fi
barrier partitioned 120
# The peer's RC requester runs out of retries: a transport retry counter
# exceeded error completion (IBV_WC_RETRY_EXC_ERR, 12).
pair part-rc 30 "ibv_rc_pingpong -d mlx5_0 -n 5" "sleep 2; ibv_rc_pingpong -d mlx5_0 -n 5 $(mgmt_ip 1)"
if [ "$me" = 0 ]; then
    sed 's/^/# /' /tmp/part-rc.txt | grep -i -E 'fail|error' | head -3
    check "RC across the partition: 'transport retry counter exceeded (12)'" \
        grep -q 'transport retry counter exceeded (12)' /tmp/part-rc.txt
    t0=$(now)
    check "armed link-clear" hca_fault link-clear
    check "ping works after the partition" recovered partition "$t0"
fi
barrier partition-off 120

# 7. Loss, duplicates and reordering on node 0's link: RC recovers them.
if [ "$me" = 0 ]; then
    check "armed drop:pct=3" hca_fault drop:pct=3
    check "armed duplicate:pct=10" hca_fault duplicate:pct=10
    check "armed reorder:pct=10" hca_fault reorder:pct=10
fi
barrier lossy 60
pair lossy-pp 240 "ibv_rc_pingpong -d mlx5_0 -n 300 -s 4096 -c" \
    "sleep 1; ibv_rc_pingpong -d mlx5_0 -n 300 -s 4096 -c $(mgmt_ip 1)"
pp_rc=$?
client_server lossy-bw 240 ib_write_bw -d mlx5_0 -s 65536 -n 400 -F
bw_rc=$?
if [ "$me" = 0 ]; then
    tail -2 /tmp/lossy-pp.txt | sed 's/^/# /'
    check "RC pingpong with data checks over loss, duplicates, reordering: exit 0" test "$pp_rc" = 0
    check "pingpong moved 300 iterations" grep -q '300 iters' /tmp/lossy-pp.txt
    check "ib_write_bw over loss, duplicates, reordering: exit 0" test "$bw_rc" = 0
    fabric_ctl ports | grep '^port 1:' | tr ' ' '\n' | grep -E '^fault_(dropped|duplicated|reordered)=' |
        tr '\n' ' ' | sed 's/^/# fabric port 1: /; s/$/\n/'
    reordered() { fabric_ctl ports | grep '^port 1:' | grep -q -E 'fault_reordered=[1-9]'; }
    check "the fabric reordered packets on the way" reordered
    check "armed link-clear" hca_fault link-clear
fi
barrier lossy-off 120

# 8. Delay and corruption.
if [ "$me" = 0 ]; then
    check "armed delay:us=20000" hca_fault delay:us=20000
    rtt=$(ping -c 5 -i 0.3 -W 2 "$peerip" | sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p')
    echo "# ping average RTT with 20 ms towards node 0: ${rtt:-none} ms"
    check "ping RTT at least 20 ms" awk -v r="${rtt:-0}" 'BEGIN {exit !(r >= 20)}'
    check "armed link-clear" hca_fault link-clear
    errs=$(counter port_rcv_errors)
    check "armed corrupt:pct=30" hca_fault corrupt:pct=30
    ping -c 30 -i 0.1 -W 1 "$peerip" > /tmp/corrupt.txt 2>&1
    grep 'packet loss' /tmp/corrupt.txt | sed 's/^/# /'
    check "corrupted packets are lost" sh -c "! grep -q ' 0% packet loss' /tmp/corrupt.txt"
    check "the HCA counted receive errors ($errs -> $(counter port_rcv_errors))" \
        test "$(counter port_rcv_errors)" -gt "$errs"
    t0=$(now)
    check "armed link-clear" hca_fault link-clear
    check "ping after the corruption" recovered corrupt "$t0"
    check "no kernel oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|Call Trace|BUG:|Oops'"
fi
barrier done 300
finish

# hcasim-test: nodes=3 timeout=1200 append=iomem=relaxed ci=0
# A hostile guest next to two honest ones. Node 2 runs hca-hostile
# (testbench/guest/tools): first random WQE bytes posted on real RC and UD
# QPs through libmlx5's direct-verbs view of the send queue, then random
# doorbell and BlueFlame writes over its HCA's UAR pages and random reads
# over all of BAR0 with its driver bound. Meanwhile nodes 0 and 1
# ping each other over IPoIB and run ib_write_bw. Their traffic must lose
# nothing (the fabric drops nothing in this test), node 2's QEMU must
# survive, and after a PCI function reset node 2's driver recovers the
# function, its port becomes Active and it pings node 0.
# (iomem=relaxed: sysfs refuses to map a BAR that a driver holds otherwise.)
me=$HCASIM_NODE
myip=192.168.77.$((me + 1))
SPRAY_S=40
WQES=4000
# The honest nodes' ping and ib_write_bw outlast the spray.
PING_N=$((SPRAY_S * 10))

# The hostile node's driver sees its own queues trashed: its error lines
# are the expected reaction, so only the honest nodes' kernel logs are checked.
ib_setup() {
    modprobe -a mlx5_ib ib_umad ib_uverbs ib_ipoib || return 1
    wait_port_active 120 || return 1
    ip addr add "$myip/24" dev ib0 2> /dev/null
    ip link set ib0 up
}

# honest_phase NAME: node 1 serves ib_write_bw for the spray window, node 0
# pings node 1 over IPoIB and runs the ib_write_bw client; both check.
honest_phase() {
    local name=$1 bw
    if [ "$me" = 1 ]; then
        start_server "$name-bw" $((SPRAY_S + 120)) ib_write_bw -F -D $((SPRAY_S - 10)) -s 65536
        barrier "$name-srv" 120
        wait $SERVER_PID
        check "$name: ib_write_bw server completed" test $? = 0
    else
        barrier "$name-srv" 120
        ping_loss -c $PING_N -i 0.1 -w $((PING_N / 10 + 30)) 192.168.77.2 > /tmp/$name-loss.txt &
        local ping_pid=$!
        timeout $((SPRAY_S + 120)) ib_write_bw -F -D $((SPRAY_S - 10)) -s 65536 "$(mgmt_ip 1)" > /tmp/$name-bw.txt 2>&1
        check "$name: ib_write_bw client completed next to the hostile guest" test $? = 0
        # (The figure is informational: perftest may fail to calibrate its
        # cycle counter on a loaded TCG host and report 0; its exit status
        # says whether every RDMA WRITE completed.)
        bw=$(awk '/^ *65536 +[0-9]+ +[0-9.]+/ {v = $4} END {print v}' /tmp/$name-bw.txt)
        echo "# $name: ib_write_bw 64 KiB: ${bw:-none} MB/s"
        wait $ping_pid
        sed 's/^/# /' /tmp/ping.txt | tail -2
        check "$name: $PING_N IPoIB pings node0 -> node1 during the spray: 0 % loss" test "$(cat /tmp/$name-loss.txt)" = 0
    fi
}

check "node$me: drivers load and port 1 becomes ACTIVE" ib_setup
barrier up 240
bdf=$(hca_pci_dev)

# Phase 1: random WQEs through the provider (the driver is still sound).
barrier spray1 120
if [ "$me" = 2 ]; then
    barrier spray1-srv 120
    timeout $((SPRAY_S + 200)) /hcasim/tools/hca-hostile wqe mlx5_0 $WQES 0x$(date +%s) > /tmp/wqe.txt 2>&1
    rc=$?
    sed 's/^/# /' /tmp/wqe.txt
    check "hca-hostile wqe posted $WQES random WQEs (exit $rc)" test $rc = 0
    errs=$(sed -n 's/.* err_cqes=\([0-9]*\).*/\1/p' /tmp/wqe.txt)
    check "the device answered garbage with error CQEs (${errs:-0})" test "${errs:-0}" -gt 0
else
    honest_phase spray1
fi
barrier spray1-done $((SPRAY_S + 400))

# Phase 2: doorbells, BlueFlame and BAR0 reads. This wrecks node 2's own
# driver (its EQ and CQ doorbells get random consumer indexes, as a buggy
# driver's would): commands and interrupts may stop, as on hardware.
barrier spray2 120
if [ "$me" = 2 ]; then
    barrier spray2-srv 120
    /hcasim/tools/hca-hostile bar0 "/sys/bus/pci/devices/$bdf/resource0" $SPRAY_S 0x$(date +%s) > /tmp/bar0.txt 2>&1
    rc=$?
    sed 's/^/# /' /tmp/bar0.txt
    check "hca-hostile bar0 ran its $SPRAY_S s (exit $rc)" test $rc = 0
    writes=$(sed -n 's/.* writes=\([0-9]*\).*/\1/p' /tmp/bar0.txt)
    check "it sprayed doorbell/BlueFlame writes (${writes:-0}) and read BAR0" test "${writes:-0}" -gt 1000
else
    honest_phase spray2
fi
barrier spray2-done $((SPRAY_S + 300))

# Phase 3: node 2 resets its function under the bound driver, as a
# developer would reset a wedged device. The reset leaves the NIC interface
# disabled; mlx5_core's health poll sees it (a fatal sensor), and the
# driver's own recovery unloads and loads the function again.
if [ "$me" = 2 ]; then
    mark=$(dmesg | wc -l)
    check "PCI function reset of $bdf (sysfs reset, driver bound)" sh -c "echo 1 > /sys/bus/pci/devices/$bdf/reset"
    since_reset() { dmesg | tail -n +$((mark + 1)); }
    recovering() { since_reset | grep -q 'starting health recovery flow'; }
    check "node2: mlx5_core saw the reset and started its recovery" retry 240 recovering
    # The recovery unloads the function and loads it again (mlx5_ib and
    # ib0 are created anew); give it time before looking at the port.
    sleep 10
    since_reset | grep -E 'mlx5' | head -20 | sed 's/^/# /'
    check "node2: no 'health recovery failed'" sh -c "! dmesg | tail -n +$((mark + 1)) | grep -q 'health recovery failed'"
    check "node2: port 1 is ACTIVE again" wait_port_active 180
    check "node2: IPoIB ping to node0 after the recovery" retry 90 sh -c "ip addr add $myip/24 dev ib0 2> /dev/null; ip link set ib0 up; ping -c 2 -i 0.5 -W 5 192.168.77.1"
fi
barrier reprobe 400
[ "$me" = 2 ] || check_dmesg_clean "node$me: no driver error line in dmesg"
finish

# hcasim-test: nodes=2 timeout=900
# Faults on IPoIB's own QP between two VMs (docs/FAULTS.md): node 0 makes
# the next send of ib0's UD QP complete in error. A ConnectX-5 moves a UD
# QP to SQ error on that; ib_ipoib warns ("failed send event"), its
# ipoib_qp_state_validate_work() finds the QP in SQE and moves it back to
# RTS, and traffic goes on. Then a burst of error CQEs (every 5th send for
# 3 s) under a flood ping: each one recovered, no carrier loss, ping
# working after it. Node 1 serves.
ipoib_pair_start
barrier ready 120

if [ "$me" = 0 ]; then
    # The UD QP's number is bytes 1-3 of the IPoIB hardware address.
    qpn=$((0x$(cut -d: -f2-4 /sys/class/net/ib0/address | tr -d :)))
    printf '# ib0 QPN 0x%x\n' "$qpn"
    mark=$(dmesg | wc -l)
    since() { dmesg | tail -n +$((mark + 1)); }
    check "armed error-cqe on ib0's QP" hca_fault "error-cqe:qpn=$qpn,syndrome=0x4"
    ping -c 5 -i 0.3 -W 2 "$peerip" > /tmp/ping1.txt 2>&1
    sed 's/^/# /' /tmp/ping1.txt | tail -2
    moved() { since | grep -q 'moved from IB_QPS_SQE to IB_QPS_RTS'; }
    check "ib_ipoib: 'moved from IB_QPS_SQE to IB_QPS_RTS'" retry 30 moved
    since | grep -E 'ipoib|ib0' | sed 's/^/# /' | head -6
    check "ib_ipoib: 'failed send event (status=4' (local protection)" \
        sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'failed send event (status=4'"
    check "ping works after the recovery (5 of 5)" sh -c "ping -c 5 -i 0.3 -W 2 $peerip | grep -q ' 0% packet loss'"

    mark=$(dmesg | wc -l)
    check "armed error-cqe on every 5th send for 3 s" hca_fault "error-cqe:qpn=$qpn,syndrome=0x4,every=5,for=3000"
    ping -f -c 400 -W 1 "$peerip" > /tmp/flood.txt 2>&1
    sed 's/^/# /' /tmp/flood.txt | tail -2
    n=$(since | grep -c 'moved from IB_QPS_SQE to IB_QPS_RTS')
    echo "# SQE -> RTS recoveries: $n"
    check "ib_ipoib recovered the QP from SQE again ($n times)" test "$n" -ge 1
    check "no carrier loss" ipoib_carrier
    check "ping works after the burst (5 of 5)" sh -c "ping -c 5 -i 0.3 -W 2 $peerip | grep -q ' 0% packet loss'"
    check "no kernel oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|Call Trace|BUG:|Oops'"
fi
barrier done 300
finish

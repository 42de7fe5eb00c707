# hcasim-test: nodes=2 timeout=1500
# RDMA-CM over IPoIB addresses between two VMs (rping, ucmatose, udaddy,
# mckey: address and route resolution through ARP and SA path records,
# connection establishment through ib_cm MADs, multicast joins), then IPoIB
# connected mode (RC QPs under ib_ipoib, MTU 65520): ping and iperf3.
me=$HCASIM_NODE
peer=$((1 - me))
myip=192.168.77.$((me + 1))
srvip=192.168.77.2
check "modprobe mlx5_ib rdma_ucm ib_ipoib" modprobe -a mlx5_ib ib_umad ib_uverbs rdma_ucm ib_ipoib
check "port ACTIVE" wait_port_active 120
ip addr add "$myip/24" dev ib0
ip link set ib0 up
barrier up 180
ping -c 3 -W 5 192.168.77.$((peer + 1)) > /dev/null 2>&1  # ARP both ways

iters=$(reps 1000 300)
pair rping 300 "rping -s -a $srvip -v -C $iters" "rping -c -a $srvip -v -C $iters"
rc=$?
n=$(grep -c 'ping data: rdma-ping-' /tmp/rping.txt)
# The server prints all iterations. The client may miss its last line:
# the server disconnects right after its last SEND, and rping's client
# returns 0 without printing when its CM thread sees DISCONNECTED before its
# CQ thread sees that SEND (rping_test_client() races the two threads).
want=$(( me == 1 ? iters : iters - 1 ))
check "rping -C $iters (exit $rc, $n verbose lines, at least $want)" test "$rc" = 0 -a "$n" -ge "$want"
pair ucmatose 300 "ucmatose" "ucmatose -s $srvip"
rc=$?
tail -2 /tmp/ucmatose.txt | sed 's/^/# /'
check "ucmatose: connections, data, disconnect (exit $rc)" \
    sh -c "test $rc = 0 && grep -q 'test complete' /tmp/ucmatose.txt && grep -q 'return status 0' /tmp/ucmatose.txt"
pair udaddy 300 "udaddy" "udaddy -s $srvip"
rc=$?
tail -2 /tmp/udaddy.txt | sed 's/^/# /'
check "udaddy: UD address exchange and data (exit $rc)" \
    sh -c "test $rc = 0 && grep -q 'test complete' /tmp/udaddy.txt && grep -q 'return status 0' /tmp/udaddy.txt"
# mckey listens on nothing: its server is ready once it says it waits for
# data (line-buffered: its output goes to a file).
SERVER_READY="receiving data transfers" pair mckey 300 "stdbuf -oL mckey -m 239.77.0.1 -b $srvip" "sleep 2; mckey -m 239.77.0.1 -b $myip -s"
rc=$?
tail -2 /tmp/mckey.txt | sed 's/^/# /'
check "mckey: multicast join and data (exit $rc)" \
    sh -c "test $rc = 0 && grep -q 'test complete' /tmp/mckey.txt && grep -q 'return status 0' /tmp/mckey.txt"

# IPoIB connected mode.
ip link set ib0 down
echo connected > /sys/class/net/ib0/mode
check "ib0 in connected mode" grep -q connected /sys/class/net/ib0/mode
ip link set ib0 mtu 65520
check "ib0 MTU 65520" test "$(cat /sys/class/net/ib0/mtu)" = 65520
ip link set ib0 up
for _ in $(seq 100); do [ "$(cat /sys/class/net/ib0/carrier)" = 1 ] && break; sleep 0.1; done
barrier cm-up 120
ping_settled "connected mode: ping -s 30000" 20 0.1 -s 30000 192.168.77.$((peer + 1))
barrier cm-pinged 120
secs=$(reps 10 4)
pair cm-iperf 200 "iperf3 -s -1" "iperf3 -c $srvip -t $secs -J > /tmp/cm-iperf.json; s=\$?; cat /tmp/cm-iperf.json; exit \$s"
rc=$?
if [ "$me" = 0 ]; then
    bps=$(python3 -c 'import json,sys; print(int(json.load(open("/tmp/cm-iperf.json"))["end"]["sum_received"]["bits_per_second"]))' 2> /dev/null)
    echo "# connected-mode iperf3: ${bps:-?} bit/s"
    check "connected mode: iperf3 -t $secs (exit $rc, ${bps:-0} bit/s)" test "$rc" = 0 -a "${bps:-0}" -gt 0
fi
check_grep "ib_ipoib used connected-mode QPs (RC)" 'connected' /sys/class/net/ib0/mode
check_dmesg_clean "clean dmesg"
barrier done 120
finish

# hcasim-test: nodes=2 timeout=900 ci=0
# hcasim-fabric is killed (SIGKILL, as a crash) and started again while both
# guests ping over IPoIB: the HCAs' links drop and reconnect by themselves,
# the new SM sweeps and configures both ports again (same LIDs), IPoIB joins
# the broadcast group of the new SA, and pings resume.  The host does the
# kill/restart when a guest asks through the relay (`harness
# fabric-restart`, tools/hcasim/vm.py); 14-fabric-restart.host checks the
# fabric log shows two daemons.  Coordination is over the 9p run directory
# only: the management Ethernet (QEMU 7.2 -netdev stream) does not reconnect.
me=$HCASIM_NODE
peer=$((1 - me))
myip=192.168.77.$((me + 1))
peerip=192.168.77.$((peer + 1))
port=$((me + 1))

MLX5_EXPECTED="$MLX5_EXPECTED|ipoib_mcast_join_finish:dev_queue_xmit failed to re-queue packet, ret:2"
# While the fabric is gone the SA cannot answer: the multicast join and
# path queries of IPoIB fail until the new SA is there (expected here).
MLX5_EXPECTED="$MLX5_EXPECTED|ib[0-9]+: (multicast join failed|ipoib_mcast_join_task|failed to|.*timing out)|ib0: .*(error|fail)"

wait_carrier() {
    for _ in $(seq $(($1 * 10))); do
        [ "$(cat /sys/class/net/ib0/carrier 2> /dev/null)" = 1 ] && return 0
        sleep 0.1
    done
    return 1
}
# ping_until SECONDS: pings the peer until one reply comes back.
ping_until() {
    local t0=$SECONDS
    while [ $((SECONDS - t0)) -lt "$1" ]; do
        ping -c 1 -W 1 "$peerip" > /dev/null 2>&1 && return 0
    done
    return 1
}

check "modprobe mlx5_ib ib_ipoib" modprobe -a mlx5_ib ib_umad ib_ipoib
check "port ACTIVE" wait_port_active 120
lid0=$(port_attr lid)
barrier active 180
ip addr add "$myip/24" dev ib0
ip link set ib0 up
check "ib0 carrier on" wait_carrier 120
barrier ib0-up 120
ping_settled "ping before the restart" 20 0.1 "$peerip"
barrier pinged 120

# Traffic while the fabric goes away: a ping every 0.2 s for 60 s.
ping -i 0.2 -c 300 -W 1 "$peerip" > /tmp/ping-during.txt 2>&1 &
pid=$!
sleep 3
if [ "$me" = 0 ]; then
    fabric_ctl harness fabric-restart > /tmp/restart.txt 2>&1
    rc=$?
    sed 's/^/# /' /tmp/restart.txt
    check "the host killed and restarted hcasim-fabric" test "$rc" = 0
fi
# The link drops (the HCA sees its socket close) and comes back by itself.
down=0
for _ in $(seq 100); do
    grep -q -v ACTIVE /sys/class/infiniband/mlx5_0/ports/1/state && { down=1; break; }
    [ -f /hcasim/fabric-restarted ] && break
    sleep 0.05
done
[ "$me" = 0 ] && touch /hcasim/fabric-restarted
echo "# port left ACTIVE during the restart: $down"
check "port ACTIVE again after the restart (new SM)" wait_port_active 120
check "same LID as before ($lid0)" test "$(port_attr lid)" = "$lid0"
check "SM LID 1 (the new fabric's SM)" test "$(($(port_attr sm_lid)))" = 1
check "ib0 carrier on again" wait_carrier 60
barrier active-again 240
check "a ping gets through within 60 s" ping_until 60
wait $pid
sed 's/^/# during: /' /tmp/ping-during.txt | tail -2
got=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' /tmp/ping-during.txt)
echo "# pings during the restart: ${got:-0} of 300 answered"
check "pings resumed during the run (${got:-0} of 300 answered)" test "${got:-0}" -gt 50
barrier during-done 120
ping_settled "ping after the restart" 20 0.1 "$peerip"
if [ "$me" = 0 ]; then
    fabric_ctl sm status > /tmp/sm.txt 2>&1
    check "the new fabric answers on the control socket" test $? = 0
    check_grep "the new SM has port 1 Active" '^sm port 1: (Active|Verify) lid=2' /tmp/sm.txt
    check_grep "the new SM has port 2 Active" '^sm port 2: (Active|Verify) lid=3' /tmp/sm.txt
fi
check_dmesg_clean "clean dmesg"
barrier done 120
finish

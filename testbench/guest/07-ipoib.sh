# hcasim-test: nodes=2 timeout=1200 quick-timeout=800
# IPoIB (datagram mode) between two VMs over the simulated fabric: carrier,
# the HCA's IPoIB offloads (checksums, LSO) in use, ping both ways (also
# fragmented and IPv6 link-local), a checksummed 16 MiB TCP transfer,
# iperf3 both ways and in connected mode next to iperf3 over the virtio-net
# management network, 1 % fabric loss, 20 ib0
# down/up and 10 ib_ipoib reload cycles (5 and 3 in ./hcasim test), a fabric
# link unplugged and plugged back, and a subnet manager restart (client
# reregistration).
me=$HCASIM_NODE
peer=$((1 - me))
myip=192.168.77.$((me + 1))
peerip=192.168.77.$((peer + 1))
port=$((me + 1))  # our switch port

ib0_up() {
    ip addr add "$myip/24" dev ib0 2> /dev/null
    ip link set ib0 up
}
wait_carrier() {
    local t=${1:-10}
    for _ in $(seq $((t * 10))); do
        [ "$(cat /sys/class/net/ib0/carrier 2> /dev/null)" = 1 ] && return 0
        sleep 0.1
    done
    return 1
}
# ping_ok COUNT ARGS...: ping until COUNT replies came back with 0 % loss
# A multicast join that completes after "ip link set ib0 down" hands its
# queued packets to the noop qdisc of a down device (NET_XMIT_CN = 2): a
# warning of ib_ipoib's own down/up race, more likely here because an SA
# answer takes milliseconds, not microseconds (docs/STATUS.md).
MLX5_EXPECTED="$MLX5_EXPECTED|ipoib_mcast_join_finish:dev_queue_xmit failed to re-queue packet, ret:2"

check "modprobe mlx5_ib ib_ipoib" modprobe -a mlx5_ib ib_umad ib_uverbs rdma_ucm ib_ipoib
check "port ACTIVE" wait_port_active 120
barrier active 180
ib0_up
check "ib0 carrier on within 5 s of both ports being Active" wait_carrier 5
# (6.1's addrconf also logs "ib0: link becomes ready"; newer kernels do not.)
check "ib0's carrier came up (carrier_up_count $(cat /sys/class/net/ib0/carrier_up_count))" \
    test "$(cat /sys/class/net/ib0/carrier_up_count)" -ge 1
check_grep "ib0 is in datagram mode" datagram /sys/class/net/ib0/mode
check "ib0 MTU 2044 (broadcast group MTU 2048)" test "$(cat /sys/class/net/ib0/mtu)" = 2044
ipoib_offloads_on
barrier ib0-up 120

for dir in 0 1; do
    if [ "$me" = "$dir" ]; then
        # Every loss count here and below is steady state: a first reply,
        # then the count (ping_settled, lib.sh).
        ping_settled "ping $peerip" 100 0.05 "$peerip"
        sed 's/^/# /' /tmp/ping.txt | tail -2
        # 3000 bytes of ICMP data: an IP datagram of 3028 bytes, two
        # fragments at MTU 2044, reassembled by the peer.
        ping_settled "ping -s 3000 (two IP fragments at MTU 2044)" 20 0.1 -s 3000 "$peerip"
        ll=$(shared "$peer" ll)
        ping_settled "IPv6 link-local ping $ll (neighbour discovery over IPoIB multicast)" 20 0.1 -6 "$ll%ib0"
    else
        share ll "$(ip -6 addr show dev ib0 | sed -n 's/.*inet6 \(fe80[^/]*\).*/\1/p' | head -1)"
    fi
    barrier "ping-$dir" 180
done

# 16 MiB of random bytes over TCP (large sends cut by the HCA, checksums
# computed by it and checked by it on receipt), hashed on both sides.
ipoib_tcp_check tcp-16m 16

# iperf3 (iperf_round, lib.sh): node 1 serves; node 0 measures both
# directions on ib0, then in connected mode, and on the management network
# (virtio-net), one after the other in the same run.
secs=$(reps 10 5)
iperf_round ib-tx 192.168.77.2 -t "$secs"
iperf_round ib-rx 192.168.77.2 -t "$secs" -R
# Connected mode: RC QPs, MTU 65520 (ipoib_set_mode() sets it).
echo connected > /sys/class/net/ib0/mode
check "ib0 in connected mode, MTU 65520" sh -c 'grep -q connected /sys/class/net/ib0/mode && test "$(cat /sys/class/net/ib0/mtu)" = 65520'
barrier cm 60
iperf_round ib-cm-tx 192.168.77.2 -t "$secs"
echo datagram > /sys/class/net/ib0/mode
check "ib0 back in datagram mode, MTU 2044" sh -c 'grep -q datagram /sys/class/net/ib0/mode && test "$(cat /sys/class/net/ib0/mtu)" = 2044'
barrier datagram 60
iperf_round eth-tx "$(mgmt_ip 1)" -t "$secs"
iperf_round eth-rx "$(mgmt_ip 1)" -t "$secs" -R
if [ "$me" = 0 ]; then
    for d in tx rx cm-tx; do
        ib=$(shared 0 bps-ib-$d)
        eth=$(shared 0 bps-eth-${d#cm-})
        echo "# iperf3 ${d/cm-/connected-mode }: IPoIB over hcasim $((ib / 1000000)) Mbit/s, virtio-net $((eth / 1000000)) Mbit/s," \
            "ratio $(python3 -c "print(f'{$ib / max($eth, 1):.3f}')")"
    done
    echo "ipoib-tx-bps=$(shared 0 bps-ib-tx) ipoib-rx-bps=$(shared 0 bps-ib-rx) ipoib-cm-tx-bps=$(shared 0 bps-ib-cm-tx) eth-tx-bps=$(shared 0 bps-eth-tx) eth-rx-bps=$(shared 0 bps-eth-rx)" > /hcasim/ipoib-bench.txt
fi

# 1 % loss on every fabric link: ping and TCP still get through.
[ "$me" = 0 ] && check "fabric: drop 1 % on every link" fabric_ctl drop all 1
barrier lossy 60
if [ "$me" = 0 ]; then
    l=$(ping_loss -c 200 -i 0.02 "$peerip")
    echo "# ping with 1 % fabric loss: $l % lost"
    check "ping -c 200 completes with 1 % fabric loss ($l % lost)" test -n "$l"
fi
barrier lossy-ping 120
iperf_round ib-lossy 192.168.77.2 -t "$secs"
[ "$me" = 0 ] && check "fabric: loss off" fabric_ctl drop all 0
barrier lossless 60

# ib0 down/up 20 times, then ib_ipoib reloaded 10 times.
hung=0 n=$(reps 20 5)
for i in $(seq $n); do
    timeout 30 ip link set ib0 down || hung=$((hung + 1))
    timeout 30 ip link set ib0 up || hung=$((hung + 1))
done
check "$n x ib0 down/up without a hang ($hung)" test "$hung" = 0
check "carrier back after the down/up cycles" wait_carrier 20
ok=0 n=$(reps 10 3)
for i in $(seq $n); do
    timeout 60 rmmod ib_ipoib && timeout 60 modprobe ib_ipoib && ok=$((ok + 1))
    for _ in $(seq 50); do [ -e /sys/class/net/ib0 ] && break; sleep 0.1; done
    ib0_up
done
check "$n x rmmod/modprobe ib_ipoib ($ok)" test "$ok" = $n
check "carrier back after the reloads" wait_carrier 30
barrier reloaded 240
# A reloaded ib_ipoib resolves the peer's path anew.
ping_settled "ping after the stress" 20 0.1 "$peerip"
check_no_grep "no 'timing out; N sends N receives not completed'" 'timing out' <(dmesg)
check_dmesg_clean "clean dmesg after the stress"
barrier stress-done 120

# Unplug our fabric link (node 0's first, then node 1's) and plug it back.
for victim in 0 1; do
    if [ "$me" = "$victim" ]; then
        fabric_ctl link "$port" down > /dev/null
        down=0
        for _ in $(seq 100); do
            grep -q DOWN /sys/class/infiniband/mlx5_0/ports/1/state && [ "$(cat /sys/class/net/ib0/carrier)" = 0 ] && { down=1; break; }
            sleep 0.1
        done
        check "link $port unplugged: port DOWN and ib0 carrier off" test "$down" = 1
        fabric_ctl link "$port" up > /dev/null
        check "link $port plugged back: port ACTIVE again" wait_port_active 60
        check "ib0 carrier on again" wait_carrier 30
        ping_settled "ping over the replugged link" 10 0.2 "$peerip"
    fi
    barrier "unplug-$victim" 240
done

# The SM restarts: client reregistration, IPoIB joins its groups again.
if [ "$me" = 0 ]; then
    check "fabric: sm restart" fabric_ctl sm restart
fi
barrier sm-restart 60
check "port ACTIVE after the SM restart" wait_port_active 60
# The SA forgot its groups: IPoIB must join the broadcast group again
# (ClientReregister -> ib_sa -> ipoib), or ARP cannot work.
joined=0
for _ in $(seq 100); do
    fabric_ctl groups > /tmp/groups.txt 2>&1
    sed -n '/ff12:401b:ffff:0000:0000:0000:ffff:ffff/,/^group/p' /tmp/groups.txt | grep -q "member .* port=$port " && { joined=1; break; }
    sleep 0.2
done
check "IPoIB rejoined the broadcast group after the SM restart" test "$joined" = 1
barrier rejoined 120
ip neigh flush dev ib0
# Node 1 lost one of 10 here in two CI runs (698b14f before the first
# reply was awaited; 631f646 after it, replies at 1-6 ms): not reproduced
# in 3 local runs nor in 52 SM restarts of a reproducer (with the link
# replugged first, or the peer flushing its ARP cache up to 2 s later).
# A loss now prints the lost icmp_seq and the counters that moved.
ping_settled "ping after the SM restart (ARP over the rejoined group)" 10 0.2 "$peerip"
check_dmesg_clean "clean dmesg at the end"
barrier done 120
finish

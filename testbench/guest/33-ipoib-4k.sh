# hcasim-test: nodes=2 timeout=600 quick-timeout=400 fabric-arg=--ipoib-mtu=4096
# IPoIB with a 4096-byte broadcast group (the built-in SM's --ipoib-mtu,
# opensm's partitions.conf mtu=5): ib0's datagram MTU is 4092. A ping that
# needs it, the device's offloads at that MTU (a hashed TCP transfer), and
# iperf3 both ways over ib0 next to virtio-net, in the same run.
me=$HCASIM_NODE
peer=$((1 - me))
peerip=192.168.77.$((peer + 1))

check "modprobe mlx5_ib ib_ipoib" modprobe -a mlx5_ib ib_umad ib_uverbs rdma_ucm ib_ipoib
check "port ACTIVE" wait_port_active 120
barrier active 180
ipoib_up
check "ib0 carrier" retry 60 ipoib_carrier
check "ib0 MTU 4092 (broadcast group MTU 4096)" test "$(cat /sys/class/net/ib0/mtu)" = 4092
barrier ib0-up 120
# 4000 bytes of ICMP data: one 4028-byte IP datagram, no fragments.
ping_settled "ping -s 4000 $peerip (one datagram)" 10 0.1 -s 4000 -M do "$peerip"
barrier pinged 120
ipoib_offloads_on
ipoib_tcp_check tcp-8m 8

secs=$(reps 10 5)
iperf_round ib-tx 192.168.77.2 -t "$secs"
iperf_round ib-rx 192.168.77.2 -t "$secs" -R
iperf_round eth-tx "$(mgmt_ip 1)" -t "$secs"
iperf_round eth-rx "$(mgmt_ip 1)" -t "$secs" -R
if [ "$me" = 0 ]; then
    for d in tx rx; do
        ib=$(shared 0 "bps-ib-$d")
        eth=$(shared 0 "bps-eth-$d")
        echo "# iperf3 $d at IPoIB MTU 4092: IPoIB over hcasim $((ib / 1000000)) Mbit/s, virtio-net $((eth / 1000000)) Mbit/s," \
            "ratio $(python3 -c "print(f'{$ib / max($eth, 1):.3f}')")"
    done
    echo "ipoib4k-tx-bps=$(shared 0 bps-ib-tx) ipoib4k-rx-bps=$(shared 0 bps-ib-rx) eth-tx-bps=$(shared 0 bps-eth-tx) eth-rx-bps=$(shared 0 bps-eth-rx)" > /hcasim/ipoib-bench.txt
fi
check_dmesg_clean "clean dmesg"
barrier done 120
finish

# hcasim-test: nodes=16 smp=1 mem=512M timeout=1800 ci=0
# Scale on one machine: 16 VMs (1 vCPU, 512 MiB each) on one switch with the
# fabric's built-in SM (32-scale-16-opensm: opensm in guest 0): every port
# comes up Active with its own LID, the SA lists all 16 HCAs, nodes 0-7 ping
# each other over IPoIB (all 56 pairs), and nodes 8-15 run four ib_write_bw
# pairs at the same time.
me=$HCASIM_NODE
check "modprobe mlx5_ib ib_umad ib_uverbs ib_ipoib" modprobe -a mlx5_ib ib_umad ib_uverbs ib_ipoib
if [ "${HCASIM_OPENSM:-0}" = 1 ] && [ "$me" = 0 ]; then
    check "opensm in guest 0 logs SUBNET UP" start_opensm 600
fi
check "port ACTIVE" wait_port_active 900
share lid "$(($(port_attr lid)))"
barrier active 1200
if [ "$me" = 0 ]; then
    lids=$(for n in $(seq 0 15); do shared "$n" lid; done | sort -nu | grep -c '^[1-9]')
    check "16 distinct non-zero LIDs ($lids)" test "$lids" = 16
    saquery NR > /tmp/nr.txt 2>&1
    cas=$(grep -c 'node_type\.*Channel Adapter' /tmp/nr.txt)
    check "saquery NodeRecords: 16 HCAs ($cas)" test "$cas" = 16
fi

ipoib_up
check "ib0 carrier" retry 120 ipoib_carrier
barrier ipoib 600
if [ "$me" -lt 8 ]; then
    ok=0
    for p in $(seq 0 7); do
        [ "$p" = "$me" ] && continue
        retry 20 ping -c 1 -W 5 "192.168.77.$((p + 1))" > /dev/null && ok=$((ok + 1))
    done
    check "IPoIB: node $me reaches the 7 others of nodes 0-7 ($ok)" test "$ok" = 7
fi
barrier pings 900

# Nodes 8-15: four ib_write_bw pairs at once (8 serves 9, 10 serves 11, ...).
if [ "$me" -ge 8 ] && [ $((me % 2)) = 0 ]; then
    start_server "wbw" 600 ib_write_bw -d mlx5_0 -s 65536 -n 500 -F
    barrier wbw 600
    wait "$SERVER_PID"
elif [ "$me" -ge 8 ]; then
    barrier wbw 600
    retry 10 timeout 600 ib_write_bw -d mlx5_0 -s 65536 -n 500 -F "$(mgmt_ip $((me - 1)))" > /tmp/wbw.txt 2>&1
else
    barrier wbw 600
fi
if [ "$me" -ge 8 ]; then
    grep -E '^ *65536' /tmp/wbw.txt | sed 's/^/# /'
    check "ib_write_bw 64 KiB x 500 (pair $(((me - 8) / 2)) of four at once)" grep -qE '^ *65536 +500 ' /tmp/wbw.txt
fi
barrier wbw-done 900
finish

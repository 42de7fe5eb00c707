# hcasim-test: nodes=2 timeout=900
# Two VMs on the simulated fabric with its built-in SM and SA: every port
# ACTIVE with its own LID, the SA answers saquery, directed-route SMPs reach
# the switch and the other HCA, ibnetdiscover sees the subnet, and
# ibv_ud_pingpong runs 10000 iterations with data checks (plain, GRH, events).
# The same checks run with opensm in guest 0 (06-fabric-opensm.sh).
me=$HCASIM_NODE
peer=$((1 - me))
check "modprobe mlx5_ib ib_umad ib_uverbs rdma_ucm ib_ipoib" modprobe -a mlx5_ib ib_umad ib_uverbs rdma_ucm ib_ipoib
if [ "${HCASIM_OPENSM:-0}" = 1 ] && [ "$me" = 0 ]; then
    check "opensm in guest 0 logs SUBNET UP" start_opensm 120
fi
check "port ACTIVE" wait_port_active 120
lid=$(($(port_attr lid)))
smlid=$(($(port_attr sm_lid)))
share lid "$lid"
barrier active 180
peer_lid=$(shared $peer lid)
check "LIDs are distinct and non-zero ($lid, peer $peer_lid)" test "$lid" -gt 0 -a "$lid" != "$peer_lid"
ibstat > /tmp/ibstat.txt
check_grep "ibstat: State Active" 'State: Active' /tmp/ibstat.txt
check_grep "ibstat: Physical state LinkUp" 'Physical state: LinkUp' /tmp/ibstat.txt
check_grep "ibstat: SM lid $smlid" "SM lid: $smlid" /tmp/ibstat.txt
check_grep "ibv_devinfo: PORT_ACTIVE" 'PORT_ACTIVE' <(ibv_devinfo)
check_grep "ibv_devinfo: active_mtu 4096" 'active_mtu:\s+4096' <(ibv_devinfo)

saquery NR > /tmp/nr.txt 2>&1
check "saquery NodeRecords: the switch and both HCAs ($(grep -c 'NodeRecord dump' /tmp/nr.txt))" \
    test "$(grep -c 'NodeRecord dump' /tmp/nr.txt)" = 3
check_grep "saquery NodeRecord of the switch" 'node_type\.*Switch' /tmp/nr.txt
check_grep "saquery NodeRecord of the peer HCA" "node_guid\.*0x0002c90300a0000$((peer + 1))" /tmp/nr.txt
saquery PR > /tmp/pr.txt 2>&1
check_grep "saquery PathRecord to the peer (dlid $peer_lid)" "dlid\.*$peer_lid\$" /tmp/pr.txt
saquery PIR > /tmp/pir.txt 2>&1
check_grep "saquery PortInfoRecord for our LID" "EndPortLid\.*$lid\$" /tmp/pir.txt
saquery MCMR > /tmp/mcmr.txt 2>&1
check_grep "saquery MCMemberRecord: the IPoIB broadcast group" 'MGID\.*ff12:401b:ffff::ffff:ffff' /tmp/mcmr.txt
smpquery -D nodeinfo 0,1 > /tmp/sw.txt 2>&1
check_grep "smpquery -D nodeinfo 0,1: the switch" 'NodeType:\.*Switch' /tmp/sw.txt
smpquery -D nodeinfo 0,1,$((peer + 1)) > /tmp/pn.txt 2>&1
check_grep "smpquery -D nodeinfo 0,1,$((peer + 1)): the peer HCA" "Guid:\.*0x0002c90300a0000$((peer + 1))" /tmp/pn.txt
smpquery nodeinfo "$peer_lid" > /tmp/pl.txt 2>&1
check_grep "smpquery nodeinfo by LID $peer_lid (LID-routed)" "Guid:\.*0x0002c90300a0000$((peer + 1))" /tmp/pl.txt
ibnetdiscover > /tmp/ibnd.txt 2>&1
check_grep "ibnetdiscover: the switch" '^Switch\s+[0-9]+ "S-0002c90300ffff00"' /tmp/ibnd.txt
check "ibnetdiscover: both HCAs ($(grep -c '^Ca' /tmp/ibnd.txt))" test "$(grep -c '^Ca' /tmp/ibnd.txt)" = 2
check_no_grep "ibnetdiscover: no MAD errors" 'bad status|timeout|failed' /tmp/ibnd.txt
perfquery "$peer_lid" 1 > /tmp/pq.txt 2>&1
check_grep "perfquery of the peer's port" 'PortRcvPkts:\.*[0-9]' /tmp/pq.txt
# The switch's own PMA: the counters of the switch port this node hangs off
# (the port the switch heard the DR SMP on), as `fabric_ctl ports` shows them.
# The switch's LID is its port 0's (not the SM's: opensm runs in a guest in 06).
swport=$(sed -n 's/^LocalPort:\.*\([0-9]*\).*/\1/p' /tmp/sw.txt)
swlid=$(smpquery -D portinfo 0,1 0 2>/dev/null | sed -n 's/^Lid:\.*\([0-9]*\).*/\1/p')
perfquery "$swlid" "$swport" > /tmp/pqs.txt 2>&1
sed 's/^/# /' /tmp/pqs.txt | grep -E 'Port(Xmit|Rcv)Pkts|PortXmitWait|PortXmitDiscards|^# [a-z]'
check_grep "perfquery of switch LID ${swlid:-?} port ${swport:-?}: packets it sent this node" \
    'PortXmitPkts:\.*[1-9]' /tmp/pqs.txt
check_grep "perfquery of the switch port: PortXmitWait (flow control) is reported" 'PortXmitWait:\.*[0-9]' /tmp/pqs.txt
perfquery -x "$swlid" "$swport" > /tmp/pqx.txt 2>&1
check_grep "perfquery -x of the switch port: 64-bit data counters" 'PortXmitData:\.*[1-9]' /tmp/pqx.txt

# ibv_ud_pingpong: node 1 serves, node 0 connects over the management network.
pingpong() {
    local name=$1
    shift
    if [ "$me" = 1 ]; then
        timeout 300 ibv_ud_pingpong -d mlx5_0 -c -n 10000 "$@" > /tmp/$name.txt 2>&1 &
        local pid=$!
        sleep 1
        barrier "$name" 60
        wait $pid
        echo $? >> /tmp/$name.txt
    else
        barrier "$name" 60
        retry 20 timeout 300 ibv_ud_pingpong -d mlx5_0 -c -n 10000 "$@" "$(mgmt_ip 1)" > /tmp/$name.txt 2>&1
        echo $? >> /tmp/$name.txt
    fi
    sed 's/^/# /' /tmp/$name.txt | tail -4
    check "ibv_ud_pingpong $*: 10000 iterations" grep -qE '^[0-9]+ iters in .* = ' /tmp/$name.txt
    check_no_grep "ibv_ud_pingpong $*: no invalid data, no failure" 'invalid data|Failed|Couldn|error' /tmp/$name.txt
    barrier "$name-done" 120
}
pingpong ud-plain
pingpong ud-grh -g 0
pingpong ud-events -e
check_dmesg_clean "clean dmesg"
finish

# hcasim-test: nodes=2 timeout=900 sm=0 topology=fat-tree env=HCASIM_OPENSM=1
# Two VMs on a two-level fat tree of four switches (testbench/guest/
# topologies/fat-tree.topo: node 0 on leaf0, node 1 on leaf1, both leaves
# cabled to both spines), managed by opensm in guest 0: it discovers and
# routes the four switches, ibnetdiscover shows them, ibtracert shows the
# leaf-spine-leaf path, IPoIB pings and ibv_rc_pingpong checks its data
# across it; the host side finds one packet recorded by three switches.
# 29-fabric-fattree-sm runs the same checks with the fabric's built-in SM
# (and LMC 1: the two LIDs of a port take different spines).
me=$HCASIM_NODE
peer=$((1 - me))
check "modprobe mlx5_ib ib_umad ib_uverbs ib_ipoib" modprobe -a mlx5_ib ib_umad ib_uverbs ib_ipoib
if [ "${HCASIM_OPENSM:-0}" = 1 ] && [ "$me" = 0 ]; then
    check "opensm in guest 0 logs SUBNET UP" start_opensm 120
    grep -E 'SUBNET UP|ERR' /var/log/opensm.log | sed 's/^/# /' | head -5
fi
check "port ACTIVE" wait_port_active 180
lid=$(($(port_attr lid)))
share lid "$lid"
barrier active 240
peer_lid=$(shared $peer lid)
check "LIDs are distinct and non-zero ($lid, peer $peer_lid)" test "$lid" -gt 0 -a "$lid" != "$peer_lid"

ibnetdiscover > /tmp/ibnd.txt 2>&1
check "ibnetdiscover: four switches ($(grep -c '^Switch' /tmp/ibnd.txt))" test "$(grep -c '^Switch' /tmp/ibnd.txt)" = 4
for s in leaf0 leaf1 spine0 spine1; do
    check_grep "ibnetdiscover: switch $s" "^Switch.*\"hcasim switch $s\"" /tmp/ibnd.txt
done
check "ibnetdiscover: both HCAs ($(grep -c '^Ca' /tmp/ibnd.txt))" test "$(grep -c '^Ca' /tmp/ibnd.txt)" = 2
# Each leaf has three cables (an HCA, two spines), each spine two.
check "ibnetdiscover: 5 inter-switch cables seen from both ends and 2 HCA cables ($(grep -c '^\[' /tmp/ibnd.txt) port lines)" \
    test "$(grep -c '^\[' /tmp/ibnd.txt)" = 12
check_no_grep "ibnetdiscover: no MAD errors" 'bad status|timeout|failed' /tmp/ibnd.txt

ibtracert "$lid" "$peer_lid" > /tmp/trace.txt 2>&1
sed 's/^/# /' /tmp/trace.txt
check "ibtracert $lid -> $peer_lid: three switches on the path ($(grep -c 'switch port' /tmp/trace.txt))" \
    test "$(grep -c 'switch port' /tmp/trace.txt)" = 3
check_grep "ibtracert: first hop our leaf (leaf$me)" "^\[1\] -> switch port .*\"hcasim switch leaf$me\"" /tmp/trace.txt
check_grep "ibtracert: through a spine" '"hcasim switch spine[01]"' /tmp/trace.txt
check_grep "ibtracert: the peer's leaf (leaf$peer)" "\"hcasim switch leaf$peer\"" /tmp/trace.txt
check_grep "ibtracert: ends at the peer HCA" "^To ca .* lid $peer_lid-" /tmp/trace.txt
lmc=$(cat /sys/class/infiniband/mlx5_0/ports/1/lid_mask_count)
if [ "$lmc" = 1 ]; then
    # The peer's second LID (base + 1) is routed through the other spine.
    ibtracert "$lid" "$((peer_lid + 1))" > /tmp/trace2.txt 2>&1
    sed 's/^/# /' /tmp/trace2.txt
    s1=$(grep -o '"hcasim switch spine[01]"' /tmp/trace.txt)
    s2=$(grep -o '"hcasim switch spine[01]"' /tmp/trace2.txt)
    check "LMC 1: LID $peer_lid goes through $s1, LID $((peer_lid + 1)) through $s2" \
        test -n "$s1" -a -n "$s2" -a "$s1" != "$s2"
fi
smpquery -D nodeinfo 0,1,7 > /tmp/sp.txt 2>&1
check_grep "smpquery -D nodeinfo 0,1,7: a spine, two hops away" 'NodeType:\.*Switch' /tmp/sp.txt

ipoib_and_rc_across "the fat tree"
check_dmesg_clean "clean dmesg"
finish

# hcasim-test: nodes=2 timeout=900 topology=two-daemons-east,two-daemons-west
# One subnet across two hcasim-fabric daemons joined by an inter-switch link
# over TCP on 127.0.0.1 (testbench/guest/topologies/two-daemons-*.topo): node
# 0 on switch east (the first daemon, with the built-in SM), node 1 on
# switch west (the second daemon, no SM). The SM configures west and node
# 1's HCA through the TCP link; ibnetdiscover and ibtracert see both
# switches; IPoIB, an RC pingpong with data checks and ib_write_bw cross it.
me=$HCASIM_NODE
peer=$((1 - me))
check "modprobe mlx5_ib ib_umad ib_uverbs ib_ipoib" modprobe -a mlx5_ib ib_umad ib_uverbs ib_ipoib
check "port ACTIVE" wait_port_active 180
lid=$(($(port_attr lid)))
smlid=$(($(port_attr sm_lid)))
share lid "$lid"
barrier active 240
peer_lid=$(shared $peer lid)
check "LIDs are distinct and non-zero ($lid, peer $peer_lid)" test "$lid" -gt 0 -a "$lid" != "$peer_lid"
check "the SM is the first daemon's (SM LID $smlid)" test "$smlid" = 1

ibnetdiscover > /tmp/ibnd.txt 2>&1
check "ibnetdiscover: two switches ($(grep -c '^Switch' /tmp/ibnd.txt))" test "$(grep -c '^Switch' /tmp/ibnd.txt)" = 2
check_grep "ibnetdiscover: switch east" '^Switch.*"hcasim switch east"' /tmp/ibnd.txt
check_grep "ibnetdiscover: switch west" '^Switch.*"hcasim switch west"' /tmp/ibnd.txt
check "ibnetdiscover: both HCAs ($(grep -c '^Ca' /tmp/ibnd.txt))" test "$(grep -c '^Ca' /tmp/ibnd.txt)" = 2
check_no_grep "ibnetdiscover: no MAD errors" 'bad status|timeout|failed' /tmp/ibnd.txt
names=(east west)
ibtracert "$lid" "$peer_lid" > /tmp/trace.txt 2>&1
sed 's/^/# /' /tmp/trace.txt
check "ibtracert $lid -> $peer_lid: two switches on the path ($(grep -c 'switch port' /tmp/trace.txt))" \
    test "$(grep -c 'switch port' /tmp/trace.txt)" = 2
check_grep "ibtracert: first our switch (${names[$me]}), then the other daemon's" \
    "\"hcasim switch ${names[$me]}\"" /tmp/trace.txt
check_grep "ibtracert: ... (${names[$peer]})" "\"hcasim switch ${names[$peer]}\"" /tmp/trace.txt

ipoib_and_rc_across "two daemons"
client_server wbw 180 ib_write_bw -d mlx5_0 -s 65536 -n 2000 -F
grep -E '^ *65536' /tmp/wbw.txt | sed 's/^/# /'
check "ib_write_bw 64 KiB x 2000 across the TCP link" grep -qE '^ *65536 +2000 ' /tmp/wbw.txt
check_dmesg_clean "clean dmesg"
finish

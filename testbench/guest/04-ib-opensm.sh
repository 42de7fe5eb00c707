# hcasim-test: nodes=1 timeout=900 sm=0
# mlx5_ib registers mlx5_0 with the user-space stack on top; a real opensm in
# the guest (the fabric's own SM is off) brings the port ACTIVE through the
# device's SMA; diagnostics decode what the SMA answers; 20 driver reload
# cycles with opensm restarted (3 in ./hcasim test).
check "modprobe mlx5_ib ib_umad ib_uverbs rdma_ucm ib_ipoib" modprobe -a mlx5_ib ib_umad ib_uverbs rdma_ucm ib_ipoib
sleep 2
check_dmesg_clean "registration: no mlx5/ib error or warning lines"
ibv_devices > /tmp/devices.txt 2>&1
check_grep "ibv_devices lists mlx5_0" '^\s*mlx5_0\s+0002c90300a00001' /tmp/devices.txt
ibv_devinfo -v > /tmp/devinfo.txt 2>&1
check_grep "vendor_id 0x02c9" 'vendor_id:\s+0x02c9' /tmp/devinfo.txt
check_grep "vendor_part_id 4119" 'vendor_part_id:\s+4119' /tmp/devinfo.txt
check_grep "fw_ver 16.35.2000" 'fw_ver:\s+16\.35\.2000' /tmp/devinfo.txt
check_grep "link_layer InfiniBand" 'link_layer:\s+InfiniBand' /tmp/devinfo.txt
check_grep "phys_port_cnt 1" 'phys_port_cnt:\s+1' /tmp/devinfo.txt
check_grep "max_qp from log_max_qp (2^18)" 'max_qp:\s+262144' /tmp/devinfo.txt
check_grep "atomic capability (8-byte CAS/FAA)" 'atomic_cap:\s+ATOMIC_HCA' /tmp/devinfo.txt
check_grep "MEM_MGT_EXTENSIONS (UMR fast registration)" 'MEM_MGT_EXTENSIONS' /tmp/devinfo.txt
check_grep "max_pkeys from PartitionCap 128" 'max_pkeys:\s+128' /tmp/devinfo.txt
check_grep "gid table of GUIDCap 8" 'GID\[\s*0\]:\s+fe80' /tmp/devinfo.txt
d=/sys/class/infiniband/mlx5_0
check "sysfs fw_ver" test "$(cat $d/fw_ver)" = 16.35.2000
check "sysfs board_id" test "$(cat $d/board_id)" = MT_0000000010
check "sysfs node_guid" test "$(cat $d/node_guid)" = 0002:c903:00a0:0001
check "sysfs hca_type" test "$(cat $d/hca_type)" = MT4119
check "an IPoIB netdev (ib0) exists" test -d /sys/class/net/ib0
check "port is INIT with the link up before any SM" grep -q "2: INIT" $d/ports/1/state
check "physical state LinkUp" grep -q "5: LinkUp" $d/ports/1/phys_state

guid=0x$(cat $d/ports/1/gids/0 | tr -d : | cut -c17-)
check "opensm -g $guid -B logs SUBNET UP" start_opensm
check "port becomes ACTIVE" wait_port_active 30
ibstat > /tmp/ibstat.txt
check_grep "ibstat: State Active" 'State: Active' /tmp/ibstat.txt
check_grep "ibstat: Physical state LinkUp" 'Physical state: LinkUp' /tmp/ibstat.txt
lid=$(sed -n 's/.*Base lid: //p' /tmp/ibstat.txt)
smlid=$(sed -n 's/.*SM lid: //p' /tmp/ibstat.txt)
check "ibstat: non-zero LID ($lid)" test "${lid:-0}" -gt 0
check "ibstat: SM lid is our own LID ($smlid)" test "$smlid" = "$lid"
check_grep "ibstat: capability mask has IsSM (0x2) set" 'Capability mask: 0x[0-9a-f]*[2367abef]$' /tmp/ibstat.txt
check_grep "ibv_devinfo shows PORT_ACTIVE" 'PORT_ACTIVE' <(ibv_devinfo)
smpquery -D nodeinfo 0 > /tmp/ni.txt 2>&1
check_grep "smpquery nodeinfo: channel adapter" 'NodeType:\.*Channel Adapter' /tmp/ni.txt
check_grep "smpquery nodeinfo: node GUID" 'Guid:\.*0x0002c90300a00001' /tmp/ni.txt
check_grep "smpquery nodeinfo: vendor 0x0002c9" 'VendorId:\.*0x0002c9' /tmp/ni.txt
check_grep "smpquery nodeinfo: device 0x1017" 'DevId:\.*0x1017' /tmp/ni.txt
smpquery -D portinfo 0 1 > /tmp/pi.txt 2>&1
check_grep "smpquery portinfo: LID $lid" "^Lid:\.*$lid\$" /tmp/pi.txt
check_grep "smpquery portinfo: Active" 'LinkState:\.*Active' /tmp/pi.txt
check_grep "smpquery portinfo: 4X QDR" 'LinkSpeedActive:\.*10\.0 Gbps' /tmp/pi.txt
smpquery -D pkeys 0 1 > /tmp/pk.txt 2>&1
check_grep "smpquery pkeys: 0xffff" '0xffff' /tmp/pk.txt
smpquery -D GI 0 > /tmp/gu.txt 2>&1
check_grep "smpquery GUIDInfo: port GUID at index 0" '^\s*0: 0x0002c90300a00001' /tmp/gu.txt
smpquery -D nodedesc 0 > /tmp/nd.txt 2>&1
check_grep "smpquery nodedesc" 'Node Description:\.*\S' /tmp/nd.txt
perfquery > /tmp/pq.txt 2>&1
check_grep "perfquery answers with counters" 'PortXmitPkts:\.*[0-9]' /tmp/pq.txt
check "perfquery: the port has sent packets" test "$(sed -n 's/^PortXmitPkts:\.*//p' /tmp/pq.txt)" -gt 0
check_dmesg_clean "after opensm: clean dmesg"

ok=0 n=$(reps 20 3)
for i in $(seq $n); do
    pkill -x opensm
    sleep 0.5
    rmmod ib_ipoib mlx5_ib mlx5_core || { echo "# rmmod failed in cycle $i"; continue; }
    modprobe -a mlx5_core mlx5_ib ib_ipoib || continue
    sleep 1
    start_opensm || { echo "# cycle $i: no SUBNET UP"; continue; }
    wait_port_active 30 || { echo "# cycle $i: port not active"; continue; }
    ok=$((ok + 1))
done
check "$n reload cycles with opensm restarted reach ACTIVE ($ok/$n)" test "$ok" = $n
check_dmesg_clean "after the reload cycles: clean dmesg"
finish

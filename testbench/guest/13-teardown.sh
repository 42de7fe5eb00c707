# hcasim-test: nodes=2 timeout=2700 reboot=1 ci=0
# The driver goes away under traffic, and the device must not care: node 0
# reboots in the middle of iperf3; it unloads its driver stack (ib_ipoib,
# mlx5_ib, mlx5_core) 10 times while ib_write_bw writes to node 1 and 10
# times while iperf3 runs over IPoIB, then probes cleanly and passes
# traffic; its function is reset through sysfs (FLR) while node 1 keeps
# sending to it. Node 1 keeps its driver and serves throughout.
#
# Each unload and load of mlx5_ib destroys and rebuilds its MR cache (about
# 6100 DESTROY_MKEY / CREATE_MKEY commands), so a cycle takes minutes on a
# busy TCG host: rmmod gets 300 s (a killed rmmod leaves mlx5_core loaded).
me=$HCASIM_NODE
boot=$(boot_number)
dev=$(hca_pci_dev)
myip=192.168.77.$((me + 1))
peerip=192.168.77.$((1 - me + 1))
STACK="ib_ipoib mlx5_ib mlx5_core"
CYCLES=$(reps 10 2)  # ./hcasim test --only 13: 2 and 2

ib0_up() {
    for _ in $(seq 50); do [ -e /sys/class/net/ib0 ] && break; sleep 0.1; done
    ip addr add "$myip/24" dev ib0 2> /dev/null
    ip link set ib0 up
}
wait_carrier() {
    for _ in $(seq $((${1:-30} * 10))); do
        [ "$(cat /sys/class/net/ib0/carrier 2> /dev/null)" = 1 ] && return 0
        sleep 0.1
    done
    return 1
}
port_and_carrier() {
    wait_port_active 60 && ib0_up && wait_carrier 30
}
load_stack() {
    modprobe -a mlx5_ib ib_umad ib_uverbs ib_ipoib && port_and_carrier
}
# grows FILE: the counter in FILE increases within 20 s (traffic flows).
grows() {
    local a b
    a=$(cat "$1" 2> /dev/null) || return 1
    for _ in $(seq 80); do
        sleep 0.25
        b=$(cat "$1" 2> /dev/null) || return 1
        [ "$b" -gt "$a" ] && return 0
    done
    return 1
}
# unload_under PID COUNTER: once COUNTER grows (PID's traffic flows), the
# stack is removed under it. Counts the cycles in flowing/unloaded.
unload_under() {
    local pid=$1 counter=$2
    grows "$counter" && flowing=$((flowing + 1))
    timeout 300 rmmod $STACK && unloaded=$((unloaded + 1))
    for _ in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
    load_stack && reloaded=$((reloaded + 1))
}
# A kernel complaint or a command the device never answered, since MARK.
check_no_trouble() {
    dmesg | sed -n "/hcasim-mark $2/,\$p" | grep -E 'WARNING:|Call Trace|BUG:|Oops|timeout|Timeout|health compromised|FW pages counter' > /tmp/trouble.txt
    if [ -s /tmp/trouble.txt ]; then
        sed 's/^/# /' /tmp/trouble.txt | head -20
        check "$1" false
    else
        check "$1" true
    fi
}
mark() { echo "hcasim-mark $1" > /dev/kmsg; }
XMIT=/sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data

# The reboot comes first: QEMU 7.2's TCG keeps every translated block
# across a system reset, and after the cycles below (driver reloads,
# minutes of traffic) the rebooted kernel crawls clearing pages that held
# them (docs/STATUS.md, "QEMU 7.2 after a long run"), which is QEMU's
# trouble, not the device's.
if [ "$boot" = 1 ]; then
    check "driver stack loads, port ACTIVE, ib0 carrier" load_stack
    barrier up 180

    # Node 1: servers for every cycle at once (a fresh port each, so a client
    # that vanished never blocks the next one).
    BW_PORTS="18530 18540 18541 18600"
    IPERF_PORTS="5299 5301 5302"
    if [ "$me" = 1 ]; then
        for i in $(seq $CYCLES); do
            BW_PORTS="$BW_PORTS $((18515 + i))"
            IPERF_PORTS="$IPERF_PORTS $((5200 + i))"
        done
        for p in $BW_PORTS; do
            d=30  # the cycles' clients are unloaded mid-run; the checks' run 2 s
            case $p in 18530 | 18541 | 18600) d=2 ;; esac
            timeout 900 ib_write_bw -d mlx5_0 -p $p -D $d -F > /tmp/bw-server-$p.txt 2>&1 &
        done
        for p in $IPERF_PORTS; do
            timeout 900 iperf3 -s -1 -p $p > /dev/null 2>&1 &
        done
        n=$(echo $BW_PORTS $IPERF_PORTS | wc -w)
        for _ in $(seq 600); do
            [ "$(ss -ltnH | grep -cE ':(18[56][0-9][0-9]|5[23][0-9][0-9]) ')" -ge "$n" ] && break
            sleep 0.1
        done
        check "node 1: $n servers listening" test "$(ss -ltnH | grep -cE ':(18[56][0-9][0-9]|5[23][0-9][0-9]) ')" -ge "$n"
    fi
    barrier servers 120

    # Reboot in the middle of iperf3 (the shutdown path, then a QEMU reset).
    if [ "$me" = 0 ]; then
        timeout 120 iperf3 -c "$peerip" -p 5301 -t 60 > /tmp/iperf-reboot.txt 2>&1 &
        grows /sys/class/net/ib0/statistics/tx_bytes
        check "traffic flowing before the reboot" test $? = 0
        echo "# rebooting under iperf3"
        reboot_now
    fi
else
    # Node 0 rebooted in the middle of iperf3 (QEMU reset the device).
    check "node 0 came back after the reboot" test "$me" = 0
    check "driver stack loads after the reboot, port ACTIVE, ib0 carrier" load_stack
    check_dmesg_clean "after reboot: clean probe"
fi
barrier rebooted 600
if [ "$me" = 0 ]; then
    check "iperf3 over IPoIB after the reboot" retry 10 timeout 60 iperf3 -c "$peerip" -p 5302 -t 3
    check "ib_write_bw after the reboot" retry 10 timeout 60 ib_write_bw -d mlx5_0 -p 18600 -D 2 -F "$(mgmt_ip 1)"
fi
barrier after-reboot 300

if [ "$me" = 0 ]; then
    mark cycles
    flowing=0 unloaded=0 reloaded=0
    for i in $(seq $CYCLES); do
        timeout 120 ib_write_bw -d mlx5_0 -p $((18515 + i)) -D 30 -F "$(mgmt_ip 1)" > /tmp/bw-$i.txt 2>&1 &
        unload_under $! $XMIT
    done
    echo "# ib_write_bw: $flowing of $CYCLES unloads with traffic flowing, $unloaded unloaded, $reloaded reloaded"
    check "$CYCLES rmmod of the stack under ib_write_bw: traffic flowing each time ($flowing)" test $flowing = $CYCLES
    check "$CYCLES rmmod of the stack under ib_write_bw succeed ($unloaded) and reload ($reloaded)" \
        test $unloaded = $CYCLES -a $reloaded = $CYCLES
    flowing=0 unloaded=0 reloaded=0
    for i in $(seq $CYCLES); do
        timeout 120 iperf3 -c "$peerip" -p $((5200 + i)) -t 60 > /tmp/iperf-$i.txt 2>&1 &
        unload_under $! /sys/class/net/ib0/statistics/tx_bytes
    done
    echo "# iperf3 over IPoIB: $flowing of $CYCLES unloads with traffic flowing, $unloaded unloaded, $reloaded reloaded"
    check "$CYCLES rmmod of the stack under iperf3 over IPoIB: traffic flowing each time ($flowing)" test $flowing = $CYCLES
    check "$CYCLES rmmod of the stack under iperf3 succeed ($unloaded) and reload ($reloaded)" \
        test $unloaded = $CYCLES -a $reloaded = $CYCLES
    check_no_trouble "$((2 * CYCLES)) unloads under traffic: no kernel warning, no command timeout" cycles

    # A clean probe after all that, and traffic that passes.
    rmmod $STACK
    dmesg -C
    check "clean reload: stack loads, port ACTIVE, ib0 carrier" load_stack
    check_dmesg_clean "clean reload: no error line"
    check "ib_write_bw after the cycles" retry 10 timeout 60 ib_write_bw -d mlx5_0 -p 18530 -D 2 -F "$(mgmt_ip 1)"
    check "iperf3 over IPoIB after the cycles" timeout 60 iperf3 -c "$peerip" -p 5299 -t 3
fi
barrier cycles-done 900

# Function Level Reset under traffic: node 1 pings node 0 over IPoIB all
# along (its UD packets keep reaching node 0's port), node 0 runs
# ib_write_bw to node 1, lets go of the function (mlx5_core has no
# reset_prepare/reset_done hooks: a reset under the bound driver would
# leave it waiting for commands the reset function never answers), resets
# it through sysfs and binds the driver again.
if [ "$me" = 1 ]; then
    timeout 300 ping -i 0.05 "$peerip" > /tmp/ping-flr.txt 2>&1 &
    ping_pid=$!
fi
barrier flr-start 120
if [ "$me" = 0 ]; then
    check "the function advertises FLR (DevCap FLReset+)" sh -c "lspci -vv -s $dev | grep -q 'FLReset+'"
    check_grep "the kernel resets it by FLR first" '^flr' /sys/bus/pci/devices/$dev/reset_method
    timeout 120 ib_write_bw -d mlx5_0 -p 18540 -D 30 -F "$(mgmt_ip 1)" > /tmp/bw-flr-load.txt 2>&1 &
    pid=$!
    grows $XMIT
    check "ib_write_bw and node 1's pings flowing before the reset" grows /sys/class/net/ib0/statistics/rx_packets
    mark flr
    echo "$dev" > /sys/bus/pci/drivers/mlx5_core/unbind
    check "FLR through sysfs under traffic" sh -c "echo 1 > /sys/bus/pci/devices/$dev/reset"
    kill $pid 2> /dev/null
    wait $pid 2> /dev/null
    echo "$dev" > /sys/bus/pci/drivers/mlx5_core/bind
    check "driver binds again after the FLR, port ACTIVE, ib0 carrier" port_and_carrier
    check_no_trouble "FLR: no kernel warning, no command timeout" flr
    check "ib_write_bw after the FLR" retry 10 timeout 60 ib_write_bw -d mlx5_0 -p 18541 -D 2 -F "$(mgmt_ip 1)"
fi
barrier flr-done 300
if [ "$me" = 1 ]; then
    kill $ping_pid 2> /dev/null
    check "node 1 reaches node 0 over IPoIB after its FLR" retry 20 ping -c 1 -W 2 "$peerip"
fi
barrier flr-checked 120

if [ "$me" = 1 ]; then
    check "node 1 stayed up: port ACTIVE" wait_port_active 10
    check_dmesg_clean "node 1: clean dmesg"
    kill $(jobs -p) 2> /dev/null
fi
finish

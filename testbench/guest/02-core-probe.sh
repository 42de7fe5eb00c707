# hcasim-test: nodes=1 timeout=420 reboot=1
# mlx5_core probes cleanly, reloads 20 times (5 in ./hcasim test), survives PCI remove/rescan and
# a reboot through the driver's shutdown path.
boot=$(boot_number)
dev=$(hca_pci_dev)

if [ "$boot" = 1 ]; then
    check "modprobe mlx5_core" modprobe mlx5_core
    sleep 1
    check_grep "firmware version line" 'mlx5_core .*firmware version: 16\.35\.2000' <(dmesg)
    check_dmesg_clean "probe: no mlx5 error or warning lines"
    grep mlx5 /proc/interrupts > /tmp/irq.txt
    check_grep "async EQ vector requested" 'mlx5_async[0-9]+@pci' /tmp/irq.txt
    if ! grep -q 'mlx5_comp0@pci' /tmp/irq.txt; then
        # Newer mlx5_core (6.12, 7.2; not 6.1) makes a completion EQ (and asks for its
        # vector) when the first CQ wants it (mlx5_comp_eqn_get), not at
        # probe: mlx5_ib's MAD agents make CQs on vector 0.
        echo "# no completion vector after probe (created on first use); mlx5_ib makes CQs"
        modprobe mlx5_ib && sleep 1 && grep mlx5 /proc/interrupts > /tmp/irq.txt && rmmod mlx5_ib
    fi
    check_grep "completion EQ vectors requested" 'mlx5_comp0@pci' /tmp/irq.txt
    check "async vector took interrupts (command completions)" \
        awk '/mlx5_async/ {n = 0; for (i = 2; i <= NF - 3; i++) n += $i; exit !(n > 0)}' /tmp/irq.txt
    devlink dev info > /tmp/devlink.txt 2>&1
    check_grep "devlink shows the running firmware 16.35.2000" 'fw.version 16\.35\.2000' /tmp/devlink.txt
    check_grep "devlink shows the PSID (board id)" 'fw.psid MT_0000000010' /tmp/devlink.txt

    ok=0 reloads=$(reps 20 5)
    for i in $(seq $reloads); do
        rmmod mlx5_core && modprobe mlx5_core && ok=$((ok + 1))
    done
    check "$reloads rmmod/modprobe cycles succeed ($ok)" test "$ok" = $reloads
    sleep 1
    check "driver bound after the cycles" test -e /sys/bus/pci/drivers/mlx5_core/$dev
    check_dmesg_clean "reload cycles: no timeout, no page complaint, no warning"

    echo 1 > /sys/bus/pci/devices/$dev/remove
    check "PCI remove unbinds the device" test ! -e /sys/bus/pci/devices/$dev
    echo 1 > /sys/bus/pci/rescan
    sleep 2
    check "PCI rescan re-probes mlx5_core" test -e /sys/bus/pci/drivers/mlx5_core/$dev
    check_dmesg_clean "remove/rescan: clean dmesg"
    n=$(dmesg | grep -c 'firmware version: 16.35.2000')
    check "$((reloads + 2)) probes so far: 1 + $reloads reloads + rescan ($n)" test "$n" = $((reloads + 2))
    echo "# rebooting"
    reboot_now
fi

# Second boot: the machine was reset; the driver shut down on the way.
check "guest came back after reboot" test "$boot" = 2
check "modprobe mlx5_core after reboot" modprobe mlx5_core
sleep 1
check_grep "probe after reboot" 'mlx5_core .*firmware version: 16\.35\.2000' <(dmesg)
check_dmesg_clean "after reboot: clean dmesg"
finish

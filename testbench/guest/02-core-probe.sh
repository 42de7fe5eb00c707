# hcasim-test: nodes=1 timeout=420 reboot=1
# mlx5_core probes cleanly, reloads 20 times (5 in ./hcasim test), survives PCI remove/rescan
# (10 times, 3 in ./hcasim test) and a reboot through the driver's shutdown path.
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

    # PCI remove and rescan, while the other vCPU keeps writing to the run
    # directory over virtio-9p: the rescan sizes and moves the HCA's BARs,
    # and a QEMU 10.x without qemu-device/patches' physmem fix sent a
    # virtio-9p kick made during such a change to another region; the guest
    # then waited for that request forever (CI, 1 rescan in about 8 here
    # with a busy host).
    io=/hcasim/node$HCASIM_NODE/rescan-io
    touch /tmp/rescan-io
    (n=0; while [ -e /tmp/rescan-io ]; do echo $n > $io; n=$((n + 1)); done; echo $n > $io.done) &
    rescans=$(reps 10 3) removed=0 probed=0
    for i in $(seq $rescans); do
        echo 1 > /sys/bus/pci/devices/$dev/remove
        [ -e /sys/bus/pci/devices/$dev ] || removed=$((removed + 1))
        echo 1 > /sys/bus/pci/rescan
        for _ in $(seq 50); do
            [ -e /sys/bus/pci/drivers/mlx5_core/$dev ] && break
            sleep 0.1
        done
        [ -e /sys/bus/pci/drivers/mlx5_core/$dev ] && probed=$((probed + 1))
    done
    rm /tmp/rescan-io
    wait
    check "PCI remove unbinds the device ($removed of $rescans)" test $removed = $rescans
    check "PCI rescan re-probes mlx5_core ($probed of $rescans)" test $probed = $rescans
    check "the 9p writer beside the rescans went on ($(cat $io.done 2> /dev/null) writes)" \
        test "$(cat $io.done 2> /dev/null || echo 0)" -gt 0
    check_dmesg_clean "remove/rescan: clean dmesg"
    n=$(dmesg | grep -c 'firmware version: 16.35.2000')
    check "$((reloads + rescans + 1)) probes so far: 1 + $reloads reloads + $rescans rescans ($n)" \
        test "$n" = $((reloads + rescans + 1))
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

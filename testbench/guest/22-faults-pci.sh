# hcasim-test: nodes=2 timeout=900 ci=0
# PCI faults between two VMs (docs/FAULTS.md), on node 0's HCA:
#  1. AER errors, correctable (QEMU 8.0 and later forward it), non-fatal
#     and fatal, under IPoIB ping: the guest's AER
#     driver and mlx5_core's pci_error_handlers (error_detected unloads,
#     slot_reset waits for vital signs, resume loads); traffic resumes;
#  2. pci-unplug under ib_write_bw and an application waiting for events:
#     the driver's remove() with user contexts open (uverbs disassociates
#     them: IBV_EVENT_DEVICE_FATAL, EIO from the next verb; ib_write_bw
#     ends instead of hanging), mlx5_0 and ib0 go away, the function
#     leaves the bus;
#  3. pci-replug: the new function is enumerated and probed, the port
#     goes Active, ib0 is back; ping, iperf3 and ib_write_bw work again;
#  4. pci-gone under iperf3, a surprise removal: the function stops
#     answering (reads return all ones) and a new one is there 8 s later;
#     the health poll sees the PCI error, the recovery waits for PCI
#     reads to work again and reloads; traffic resumes.
# Node 1 serves.
ipoib_pair_start
if [ "$me" = 1 ]; then
    check "iperf3 server on $myip" iperf3 -s -D -B "$myip" -p 5201
fi
barrier ready 120

mark=$(dmesg | wc -l)
hca_present() { grep -q 0x1017 /sys/bus/pci/devices/*/device 2> /dev/null; }
# dmesg_time PATTERN: the kernel timestamp of the last line since the mark
# that matches PATTERN.
dmesg_time() { since_mark | grep -E "$1" | tail -1 | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'; }
ib0_back() { [ -e /sys/class/net/ib0 ]; }

# 1. AER errors.
aer_step() {
    local severity=$1 received=$2 t0
    mark=$(dmesg | wc -l)
    t0=$(now)
    check "pci-aer severity=$severity" hca_fault "pci-aer:severity=$severity"
    # 6.1 says "Uncorrected (...)", 6.12 on "Uncorrectable (...)".
    got() { since_mark | grep -qE "AER: Uncorrect(ed|able) $received error message received from $(hca_pci_dev)"; }
    check "AER: 'Uncorrected/Uncorrectable $severity error message received'" retry 30 got
    detected() { since_mark | grep -q 'mlx5_pci_err_detected Device state = .* Exit, result = 3, need reset'; }
    check "mlx5_pci_err_detected: the driver unloads and asks for a reset ('need reset')" retry 60 detected
    reset_ok() { since_mark | grep -q 'mlx5_pci_slot_reset Device state = .* Exit, err = 0, result = 5, recovered'; }
    check "mlx5_pci_slot_reset: the function shows vital signs ('recovered')" retry 60 reset_ok
    resumed() { since_mark | grep -q 'mlx5_pci_resume Device state = .* Done, err = 0, device recovered'; }
    check "mlx5_pci_resume: the driver loads again ('device recovered')" retry 120 resumed
    check "AER: 'device recovery successful'" retry 30 sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'AER: device recovery successful'"
    since_mark | grep -E 'AER|mlx5_pci|wait vital' | head -14 | sed 's/^/# /'
    echo "# AER $severity: detected at $(dmesg_time 'error message received'), device recovered at $(dmesg_time 'device recovered') (guest uptime)"
    if [ "$severity" = fatal ]; then
        # QEMU 7.2's injection zeroes half the Link Capabilities; the link
        # reset of a fatal error restores them (mlx5_hca_reset()).
        check "after the link reset the driver sees an x16 link again" \
            sh -c "dmesg | tail -n +$((mark + 1)) | grep -q '126.016 Gb/s available PCIe bandwidth'"
    fi
    check "port ACTIVE after the $severity error" wait_port_active 120
    check "ib0 back after the $severity error" retry 60 ib0_back
    ipoib_up
    check "ping after the $severity error" retry 60 ping -c 1 -W 1 "$peerip"
    echo "# AER $severity: ping works $(since "$t0") s after the injection"
}
if [ "$me" = 0 ]; then
    dev=$(hca_pci_dev)
    rp=$(basename "$(dirname "$(readlink -f "/sys/bus/pci/devices/$dev")")")
    check "the guest's AER driver serves the HCA's root port ($rp)" sh -c "dmesg | grep -q '$rp: AER: enabled with IRQ'"
    # What platform firmware sets on real machines and SeaBIOS does not:
    # - the HCA's Device Control error reporting enables: Linux 6.1 sets
    #   them on ports only (aer.c set_device_error_reporting()), drivers
    #   that want endpoint reporting call pci_enable_pcie_error_reporting()
    #   and mlx5_core does not (6.4 and later enable them for every device);
    # - SERR# Enable in PCI_COMMAND, on the HCA and its root port: QEMU 7.2
    #   forwards an uncorrectable error message from a function only with
    #   it set, at each hop (hw/pci/pcie_aer.c pcie_aer_msg_alldev(); PCIe
    #   also accepts the Device Control bits alone, which QEMU 8.0 learned).
    serr_on() { setpci -s "$dev" CAP_EXP+8.w=0007:0007 && setpci -s "$dev" COMMAND=0100:0100; }
    serr_all() { serr_on && setpci -s "$rp" COMMAND=0100:0100; }
    check "error reporting enabled on $dev, SERR# on $dev and $rp" serr_all
    # A correctable error: the AER driver reports it and nothing recovers.
    # QEMU 8.0 and later forward it; 7.2 never does (pcie_aer_msg_alldev()).
    case "$(cat /hcasim/qemu-version 2> /dev/null)" in
    1:7.*) echo "# QEMU 7.2 forwards no correctable AER message: that step is left out" ;;
    *)
        mark=$(dmesg | wc -l)
        check "pci-aer severity=correctable" hca_fault "pci-aer:severity=correctable"
        # 6.1 says "Corrected ...", 6.12 on "Correctable ...".
        cor() { since_mark | grep -qE "AER: Correct(ed|able) error message received from $dev"; }
        check "AER: 'Corrected/Correctable error message received' from the HCA" retry 30 cor
        check "the error is decoded as a bad TLP" sh -c "dmesg | tail -n +$((mark + 1)) | grep -q BadTLP"
        sleep 2
        check "no recovery for a correctable error (no mlx5_pci_err_detected)" \
            sh -c "! dmesg | tail -n +$((mark + 1)) | grep -q mlx5_pci_err_detected"
        check "ping right after the correctable error" ping -c 3 -W 1 "$peerip"
        ;;
    esac
    ping -i 0.5 -W 1 "$peerip" > /tmp/ping-aer.txt 2>&1 &
    ppid=$!
    aer_step nonfatal '\(Non-Fatal\)'
    serr_on  # the driver's recovery restored the registers it saved at probe
    aer_step fatal '\(Fatal\)'
    kill $ppid 2> /dev/null
fi
barrier aer-done 600

# 2. The HCA leaves its slot under ib_write_bw (and an IPoIB ping).
if [ "$me" = 1 ]; then
    start_server wunplug 120 ib_write_bw -d mlx5_0 -s 65536 -D 15 -F
    barrier wunplug 120
    wait $SERVER_PID
    echo "# the ib_write_bw server: exit $?"
else
    barrier wunplug 120
    sleep 1
    timeout 120 stdbuf -oL ib_write_bw -d mlx5_0 -s 65536 -D 15 -F "$(mgmt_ip 1)" > /tmp/wunplug.txt 2>&1 &
    wpid=$!
    ping -i 0.2 -W 1 "$peerip" > /tmp/ping-unplug.txt 2>&1 &
    ppid=$!
    python3 /hcasim/py/wait_fatal.py 90 > /tmp/wait-fatal.txt 2>&1 &
    fpid=$!
    sleep 4
    check "an application waits for mlx5_0's events" retry 25 grep -q ready /tmp/wait-fatal.txt
    grep '^# open' /tmp/wait-fatal.txt | sort | uniq -c | sed 's/^/# /' 
    t0=$(now)
    check "pci-unplug under ib_write_bw" hca_fault pci-unplug
    gone() { [ ! -e /sys/class/infiniband/mlx5_0 ]; }
    check "mlx5_0 is gone" retry 60 gone
    echo "# mlx5_0 gone $(since "$t0") s after the unplug request"
    check "ib_write_bw ends (no hang) once its device is gone" retry 60 sh -c "! kill -0 $wpid 2> /dev/null"
    wait $wpid
    rc=$?
    echo "# ib_write_bw: exit $rc (its completions stop, it reports what it moved at the end of -D 15)"
    tail -3 /tmp/wunplug.txt | sed 's/^/# /'
    wait $fpid
    sed 's/^/# /' /tmp/wait-fatal.txt
    check "the application got IBV_EVENT_DEVICE_FATAL (8)" grep -qx 'event 8' /tmp/wait-fatal.txt
    check "its next verb failed with EIO" grep -qx 'next verb: errno 5' /tmp/wait-fatal.txt
    check "ib0 is gone" sh -c "! [ -e /sys/class/net/ib0 ]"
    check "the function left the bus (no 15b3:1017 in sysfs)" retry 30 sh -c "! grep -q 0x1017 /sys/bus/pci/devices/*/device"
    echo "# off the bus $(since "$t0") s after the unplug request"
    check "mlx5_core and mlx5_ib stay loaded, with no device" sh -c "[ -d /sys/module/mlx5_core ] && [ -d /sys/module/mlx5_ib ]"
    kill $ppid 2> /dev/null
    since_mark | grep -iE 'pciehp|acpiphp|mlx5|ib0|slot' | head -20 | sed 's/^/# /'
    check "no kernel oops or warning after the unplug" sh -c "! dmesg | grep -qE 'WARNING:|Call Trace|BUG:|Oops'"

    # 3. A new HCA in the slot.
    mark=$(dmesg | wc -l)
    t1=$(now)
    check "pci-replug" retry 30 hca_fault pci-replug
    check "the new function is on the bus" retry 60 hca_present
    probed() { [ -e /sys/class/infiniband/mlx5_0 ]; }
    check "mlx5_core and mlx5_ib probed it: mlx5_0" retry 120 probed
    echo "# mlx5_0 back $(since "$t1") s after the re-plug"
    check "port ACTIVE after the re-plug" wait_port_active 120
    echo "# port Active $(since "$t1") s after the re-plug"
    check "ib0 re-created" retry 60 ib0_back
    ipoib_up
    check "ib0 carrier after the re-plug" retry 60 ipoib_carrier
    check "ping after the re-plug" retry 60 ping -c 1 -W 1 "$peerip"
    echo "# ping works $(since "$t1") s after the re-plug"
    since_mark | grep -iE 'pciehp|acpiphp|mlx5_core.*(firmware|Port|PCIe)|slot' | head -12 | sed 's/^/# /'
    timeout 60 iperf3 -c "$peerip" -p 5201 -t 5 > /tmp/iperf-replug.txt 2>&1
    rc=$?
    grep -E 'sender|receiver' /tmp/iperf-replug.txt | sed 's/^/# /'
    check "iperf3 over IPoIB after the re-plug: exit $rc" test "$rc" = 0

    # 4. A surprise removal under IPoIB iperf3: the function falls off the
    # bus (its reads return all ones) and 8 s later a new one answers.
    mark=$(dmesg | wc -l)
    timeout 90 iperf3 -c "$peerip" -p 5201 -t 30 -i 5 > /tmp/iperf-gone.txt 2>&1 &
    ipid=$!
    sleep 3
    t2=$(now)
    check "armed pci-gone ms=8000 under iperf3" hca_fault pci-gone:ms=8000
    # An empty slot: configuration reads complete with all ones too.
    vid=$(setpci -s "$(hca_pci_dev)" VENDOR_ID.w 2>&1)
    check "configuration space of the removed function reads all ones (vendor ID '$vid')" test "$vid" = ffff
    comm_err() { since_mark | grep -q 'Fatal error 1 detected'; }
    check "mlx5_core's health poll: 'Fatal error 1 detected' (PCI reads return all ones)" retry 30 comm_err
    echo "# 'Fatal error 1 detected' $(since "$t2") s after pci-gone"
    check "print_health_info: 'PCI slot is unavailable'" \
        sh -c "dmesg | tail -n +$((mark + 1)) | grep -q 'PCI slot is unavailable'"
    recovered() { since_mark | grep -q 'health recovery succeeded'; }
    check "the recovery waits for PCI reads, then 'health recovery succeeded'" retry 150 recovered
    echo "# 'health recovery succeeded' $(since "$t2") s after pci-gone (the function was back after 8 s)"
    t_err=$(dmesg_time 'Fatal error 1 detected')
    t_start=$(dmesg_time 'starting health recovery flow')
    t_ok=$(dmesg_time 'health recovery succeeded')
    echo "# pci-gone (guest uptime): 'Fatal error 1' $t_err, 'starting health recovery flow' $t_start, 'succeeded' $t_ok"
    waited() { awk -v a="$t_err" -v b="$t_start" 'BEGIN { exit !(b != "" && b - a >= 4) }'; }
    check "the recovery waited for PCI reads to work again ($t_err -> $t_start: the function is back 8 s after it left)" waited
    check "no 'health recovery failed' or 'aborted'" \
        sh -c "! dmesg | tail -n +$((mark + 1)) | grep -qE 'health recovery (failed|flow aborted)'"
    since_mark | grep -E 'Fatal error|health|recovery|Not issuing|PCI' | head -12 | sed 's/^/# /'
    check "port ACTIVE after the surprise removal" wait_port_active 120
    check "ib0 back" retry 60 ib0_back
    ipoib_up
    check "ping after the surprise removal" retry 60 ping -c 1 -W 1 "$peerip"
    echo "# ping works $(since "$t2") s after pci-gone"
    wait $ipid
    echo "# the iperf3 run the removal hit: exit $?, $(tail -1 /tmp/iperf-gone.txt)"
    devlink health show "pci/$(hca_pci_dev)" reporter fw_fatal 2>&1 | sed 's/^/# /'
fi
barrier replugged 400
if [ "$me" = 1 ]; then
    pkill iperf3
fi
client_server wafter 120 ib_write_bw -d mlx5_0 -s 65536 -n 200 -F
rc=$?
[ "$me" = 0 ] && check "ib_write_bw on the new HCA (exit $rc)" test "$rc" = 0
[ "$me" = 0 ] && check "no kernel oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|Call Trace|BUG:|Oops'"
barrier done 300
finish

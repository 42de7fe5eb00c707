# hcasim-test: nodes=1 timeout=240
# Foundation: the virtual ConnectX-5 is on the PCI bus, its init segment is
# live (health counter ticking), and mlx5_core reads it.
dev=$(hca_pci_dev)
lspci -nn > /tmp/lspci.txt
check_grep "lspci shows the ConnectX-5 [15b3:1017]" '\[15b3:1017\]' /tmp/lspci.txt
check_grep "class is InfiniBand controller [0207]" 'Infiniband controller \[0207\].*15b3:1017' /tmp/lspci.txt
lspci -vv -s "$dev" > /tmp/lspci-vv.txt
check_grep "PCIe link 8GT/s x16" 'LnkSta:.*Speed 8GT/s.*Width x16' /tmp/lspci-vv.txt
check_grep "MSI-X with 64 vectors" 'MSI-X: Enable. Count=64' /tmp/lspci-vv.txt

res=/sys/bus/pci/devices/$dev/resource0
echo 1 > "/sys/bus/pci/devices/$dev/enable"
fw=$(bar0_read32 "$res" 0x0)
check "fw_rev reads 16.35 (major in the low half)" test "$((fw & 0xffff)).$((fw >> 16))" = "16.35"
rev=$(bar0_read32 "$res" 0x4)
check "cmdif revision 5" test $((rev >> 16)) = 5
lsz=$(bar0_read32 "$res" 0x14)
# nic_interface (bits 10:8) reads 1, disabled, until the driver sets up its
# command interface: the state firmware leaves after a reset.
check "cmdq log size/stride 0x56, nic_interface 1 (disabled) before the driver" test $((lsz & 0x7ff)) = $((0x156))
c0=$(bar0_read32 "$res" 0x1010)
sleep 3
c1=$(bar0_read32 "$res" 0x1010)
echo "# health_counter $c0 -> $c1 over 3 s"
check "health_counter advances (3 s apart)" test "$c1" -gt "$c0"
echo 0 > "/sys/bus/pci/devices/$dev/enable"

modprobe mlx5_core
sleep 1
dmesg > /tmp/dmesg.txt
check_grep "driver prints the firmware version line" 'mlx5_core .*firmware version: 16\.35\.2000' /tmp/dmesg.txt
check_grep "driver prints the PCIe bandwidth line" 'mlx5_core .*126\.016 Gb/s available PCIe bandwidth \(8\.0 GT/s PCIe x16 link\)' /tmp/dmesg.txt
finish

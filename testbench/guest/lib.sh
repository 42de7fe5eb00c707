# Helpers for guest tests (prepended to every testbench/guest/*.sh).
# Each check prints one TAP line; ./hcasim test counts them.
set -u
_tap_n=0
_tap_failed=0

# Where a test's time goes: ./hcasim test reads these lines (guest uptime
# in seconds) and prints boot / driver / workload per test.
uptime_s() { cut -d' ' -f1 /proc/uptime; }
# now: the wall clock in seconds (fractional); since T: seconds from T
# to now, one decimal; since_mark: the dmesg lines after line $mark.
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
since_mark() { dmesg | tail -n +$((mark + 1)); }
# (Not in a test's NN-name.host check, which runs on the host.)
[ -z "${HCASIM_NODE:-}" ] || echo "# hcasim-time start $(uptime_s)"
if [ -n "${HCASIM_NODE:-}" ]; then
    # For the harness's post-mortem of a guest that runs out of time: SysRq
    # (stacks of blocked tasks and of every CPU, asked for through the
    # keyboard) and where the kernel's text lies (KASLR), to place the
    # vCPUs' instruction pointers in it.
    echo 1 > /proc/sys/kernel/sysrq 2> /dev/null
    awk '$3 == "_text" {print "# hcasim-ktext " $1; exit}' /proc/kallsyms 2> /dev/null
fi
_time_active=0

# reps FULL QUICK: how many cycles a stress loop runs. ./hcasim suite runs
# the full count; ./hcasim test (CI's quick, representative set) exports
# HCASIM_DEPTH=quick and gets the small one.
reps() {
    if quick; then echo "$2"; else echo "$1"; fi
}

# quick: true in ./hcasim test's quick, representative set.
quick() {
    [ "${HCASIM_DEPTH:-full}" = quick ]
}

# full COMMAND...: runs COMMAND in ./hcasim suite only (a variant that
# ./hcasim test's quick, representative set leaves to the suite).
full() {
    quick || "$@"
}

# check DESCRIPTION COMMAND...: ok if COMMAND succeeds.
check() {
    local desc=$1
    shift
    _tap_n=$((_tap_n + 1))
    if "$@"; then
        echo "ok $_tap_n - $desc"
    else
        echo "not ok $_tap_n - $desc"
        _tap_failed=1
    fi
}

# check_grep DESCRIPTION PATTERN FILE: ok if FILE has a line matching PATTERN.
check_grep() {
    check "$1" grep -qE -- "$2" "$3"
}

# check_no_grep DESCRIPTION PATTERN FILE: ok if no line of FILE matches.
check_no_grep() {
    local desc=$1 pattern=$2 file=$3
    if grep -E -- "$pattern" "$file"; then
        check "$desc" false
    else
        check "$desc" true
    fi
}

# The guest image this runs on (debian12, debian13, unstable: the last word
# of the first line of its manifest) and that image's expected outcomes of
# its own rdma-core test suite.
image_name() { awk 'NR == 1 {print $NF}' /hcasim/image-manifest.txt; }
rdma_core_expected() { echo "/hcasim/py/rdma-core-expected.$(image_name).txt"; }

# Reads a 32-bit big-endian register of the HCA's BAR0 (before a driver
# claims the region).
bar0_read32() {
    python3 - "$1" "$2" << 'PY'
import mmap, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_SYNC)
m = mmap.mmap(fd, 8 << 20, mmap.MAP_SHARED, mmap.PROT_READ)
off = int(sys.argv[2], 0)
print(struct.unpack(">I", m[off:off + 4])[0])
PY
}

hca_pci_dev() {
    basename "$(dirname "$(grep -l 0x1017 /sys/bus/pci/devices/*/device | head -1)")"
}

finish() {
    # Runs with a driver under test (--modules): the modules the kernel
    # loaded are the ones given, and a line the user expects from their
    # patched driver (--expect-dmesg) was printed.
    # With a user kernel (--kernel) /hcasim/modules holds its whole tree,
    # which the guest uses as /lib/modules/<release>.
    if [ -d /hcasim/modules ]; then
        local m f want=/updates/hcasim/
        [ -f "/hcasim/modules/$(uname -r)/modules.dep" ] && want="^/lib/modules/$(uname -r)/kernel/"
        for m in mlx5_core mlx5_ib ib_ipoib; do
            [ -d /sys/module/$m ] || continue
            f=$(modinfo -F filename $m 2>/dev/null)
            check "driver under test: $m from $f" sh -c "echo '$f' | grep -q '$want'"
        done
    fi
    if [ -n "${HCASIM_EXPECT_DMESG:-}" ]; then
        dmesg | grep -E -m1 -- "$HCASIM_EXPECT_DMESG" | sed 's/^/# /'
        check "dmesg shows the expected line /$HCASIM_EXPECT_DMESG/" \
            sh -c 'dmesg | grep -qE -- "$HCASIM_EXPECT_DMESG"'
    fi
    echo "# hcasim-time end $(uptime_s)"
    exit $_tap_failed
}

# Boot counting for tests that reboot the guest (header: reboot=1): the
# run directory survives the reboot, so the count lives there.
boot_number() {
    local f=/hcasim/node$HCASIM_NODE/boot-count n=0
    [ -f "$f" ] && n=$(cat "$f")
    n=$((n + 1))
    echo $n > "$f"
    echo $n
}

# Reboots through the kernel's shutdown path (reboot(2): device_shutdown()
# runs every driver's shutdown hook), after saving the TAP lines so far.
reboot_now() {
    sync
    busybox reboot -f
    sleep 30
}

# mlx5 lines in dmesg that are expected (features we do not advertise;
# docs/STATUS.md lists each with its reason).
MLX5_EXPECTED='Failed to get valid vendor specific ID'
# A driver under test built with ./hcasim driver build is not signed with
# Debian's key; the kernel says so once when it loads the first of them.
[ -d /hcasim/modules ] && MLX5_EXPECTED="$MLX5_EXPECTED|module verification failed: signature and/or required key missing"

# Lines that must never appear.
MLX5_BAD='mlx5.*(error|err |fail|timeout|Timeout|WARN|warn|health compromised|FW pages counter|Recovered|leak)|(infiniband|ib[0-9]+|ib_ipoib|ib_core|ib_mad|ib_cm|ib_sa|ipoib).*(error|fail|timed out|timing out|not completed)|WARNING:|Call Trace|BUG:|Oops'

# check_dmesg_clean DESCRIPTION: no unexpected bad line in the kernel log.
check_dmesg_clean() {
    dmesg | grep -E -- "$MLX5_BAD" | grep -vE -- "$MLX5_EXPECTED" > /tmp/dmesg-bad.txt
    if [ -s /tmp/dmesg-bad.txt ]; then
        sed 's/^/# /' /tmp/dmesg-bad.txt
        check "$1" false
    else
        check "$1" true
    fi
}

# fabric_ctl COMMAND...: runs a command on the fabric's control socket (via
# the host relay of ./hcasim run) and prints the reply; fails on "error".
fabric_ctl() {
    local dir=/hcasim/fabric-requests name
    name="node${HCASIM_NODE}-$(date +%s%N)"
    if [ ! -d "$dir" ]; then
        echo "error: no fabric relay in this run" >&2
        return 1
    fi
    echo "$*" > "$dir/$name.tmp" && mv "$dir/$name.tmp" "$dir/$name.req"
    for _ in $(seq 200); do
        if [ -f "$dir/$name.rep" ]; then
            cat "$dir/$name.rep"
            ! grep -q '^error' "$dir/$name.rep"
            return
        fi
        sleep 0.1
    done
    echo "error: no reply from the fabric relay" >&2
    return 1
}

# hca_fault COMMAND: arms a fault on this node's HCA (docs/FAULTS.md), or
# "list" / "clear [ID]", through the host relay and QMP; prints the armed
# faults; fails if the device refused it.
hca_fault() {
    local out rc
    out=$(fabric_ctl harness fault "node${HCASIM_NODE}" "$*")
    rc=$?
    printf '%s\n' "$out" | sed 's/^/# fault: /'
    return $rc
}

# page_roundtrip N [WHEN]: the firmware asks for N more pages (fault
# page-request), then gives them back; four checks that debugfs
# fw_pages_total follows (the driver's give_pages() / reclaim_pages()).
page_roundtrip() {
    local n=$1 when=${2:-} pages p0
    pages=/sys/kernel/debug/mlx5/$(hca_pci_dev)/pages/fw_pages_total
    p0=$(cat "$pages")
    echo "# fw_pages_total before: $p0"
    check "armed page-request npages=$n$when" hca_fault "page-request:npages=$n"
    check "the driver gave $n pages$when (fw_pages_total $p0 -> $((p0 + n)))" retry 30 _pages_are "$pages" $((p0 + n))
    check "armed page-request npages=-$n$when" hca_fault "page-request:npages=-$n"
    check "the driver took the $n pages back$when" retry 30 _pages_are "$pages" "$p0"
}
_pages_are() { [ "$(cat "$1")" -eq "$2" ]; }

# slot_power_and_live_patch MARK: general events (MLX5_EVENT_TYPE_GENERAL_
# EVENT): the slot's power changed (mlx5_core reads MPEIN and says what the
# slot offers), the firmware was live-patched (mlx5_core prints the running
# version); six checks on dmesg after line MARK.
slot_power_and_live_patch() {
    local mark=$1
    _after() { dmesg | tail -n +$((mark + 1)) | grep -q "$1"; }
    check "armed general-event pci-power insufficient 25 W" hca_fault general-event:subtype=pci-power,power=insufficient,watts=25
    check "mlx5_core: 'Detected insufficient power on the PCIe slot (25W).'" \
        retry 30 _after 'Detected insufficient power on the PCIe slot (25W)'
    check "armed general-event pci-power sufficient 75 W" hca_fault general-event:subtype=pci-power,power=sufficient,watts=75
    check "mlx5_core: 'PCIe slot advertised sufficient power (75W).'" \
        retry 30 _after 'PCIe slot advertised sufficient power (75W)'
    check "armed general-event fw-live-patch" hca_fault general-event:subtype=fw-live-patch
    check "mlx5_core: 'Live patch updated firmware version: 16.35.2000'" \
        retry 30 _after 'Live patch updated firmware version: 16.35.2000'
}

# ping_loss ARGS...: runs ping ARGS and prints its loss percentage (the
# output is kept in /tmp/ping.txt, the last one's if several run at once).
# Without a deadline ping gives up two round trips after its last request,
# so one reply a busy 2-core TCG host holds back for 200 ms counted as lost
# (07 and 11, full runs of 2026-12-02: the device trace shows the reply
# sent, late). Zero-loss checks pass -w SECONDS: ping then waits for every
# reply until the deadline.
ping_loss() {
    ping "$@" 2>&1 | tee /tmp/ping.txt | sed -n 's/.* \([0-9.]*\)% packet loss.*/\1/p'
}

# ping_settled WHAT COUNT INTERVAL [PING_ARGS...] DEST: IPoIB loss once the
# path is known. First a reply (ARP or neighbour discovery, then the SA's
# path record: ib_ipoib keeps only IPOIB_MAX_PATH_REC_QUEUE = 3 packets
# while it asks, ipoib_main.c, so a 10/s ping on a busy 2-core TCG host can
# lose one there; seen in 07 on 6.12 after a stress, an ib_ipoib reload and
# an SM restart), then COUNT pings every INTERVAL s with a 30 s deadline and
# 0 % loss. Two checks; the ping output is printed when one was lost.
ping_settled() {
    local what=$1 n=$2 i=$3 l before
    shift 3
    check "$what: a first reply (path resolved)" retry 30 ping -c 1 -W 2 "$@"
    before=$(loss_context)
    l=$(ping_loss -c "$n" -i "$i" -w 30 "$@")
    if [ "$l" != 0 ]; then
        sed 's/^/# /' /tmp/ping.txt
        echo "# lost icmp_seq $(lost_seqs /tmp/ping.txt); changed: $(loss_changes "$before" "$(loss_context)")"
    fi
    check "$what: $n pings, 0 % loss" test "$l" = 0
}

# loss_context: KEY=VALUE words of where an IPoIB packet can be lost: ib0's
# drop counters, the port's receive and discard counters, the fabric
# switch's drops and its ports' errors, discards and injected drops, the
# SM's sweeps and SMP timeouts and the SA's joins (a late ClientReregister
# makes ib_ipoib flush its paths and groups).
loss_context() {
    local c=/sys/class/infiniband/mlx5_0/ports/1 k
    for k in /sys/class/net/ib0/statistics/tx_dropped /sys/class/net/ib0/statistics/rx_dropped \
        $c/hw_counters/out_of_buffer $c/counters/port_rcv_errors $c/counters/port_xmit_discards; do
        [ -r "$k" ] && printf '%s=%s ' "${k##*/}" "$(cat "$k")"
    done
    { fabric_ctl stats && fabric_ctl ports; } 2> /dev/null | awk '
        /^switch: / { for (i = 2; i <= NF; i++) if ($i ~ /^dropped=/) printf "switch_%s ", $i }
        /^drop / { printf "drop_%s ", $2 }
        /^port [0-9]+: / { k = $2; sub(":", "", k)
            for (i = 3; i <= NF; i++) if ($i ~ /^(rcv_errors|xmit_discards|link_downed|fault_dropped)=/) printf "port%s_%s ", k, $i }
        /^sm: / { for (i = 2; i <= NF; i++) if ($i ~ /^(sweeps|timeouts)=/) printf "sm_%s ", $i }
        /^sa: / { for (i = 2; i <= NF; i++) if ($i ~ /^(joins|leaves)=/) printf "sa_%s ", $i }'
}

# loss_changes BEFORE AFTER: the words of two loss_context lines whose
# values differ, as KEY OLD->NEW ("nothing" when none did).
loss_changes() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, w, " "); for (i = 1; i <= n; i++) { split(w[i], kv, "="); old[kv[1]] = kv[2] }
        n = split(b, w, " "); for (i = 1; i <= n; i++) { split(w[i], kv, "=")
            o = (kv[1] in old) ? old[kv[1]] : 0
            if (o != kv[2]) { printf "%s%s %s->%s", (c++ ? ", " : ""), kv[1], o, kv[2] } }
        if (!c) printf "nothing" }'
}

# lost_seqs FILE: the icmp_seq numbers a ping output FILE has no reply for.
lost_seqs() {
    awk '/icmp_seq=/ { sub(/.*icmp_seq=/, ""); got[$1 + 0] = 1 }
         /packets transmitted/ { sent = $1 }
         END { for (k = 1; k <= sent; k++) if (!(k in got)) printf "%s%d", (n++ ? "," : ""), k; if (!n) printf "none" }' "$1"
}

# The two-VM IPoIB tests' addresses: 192.168.77.<node + 1>/24 on ib0.
ipoib_carrier() { [ "$(cat /sys/class/net/ib0/carrier 2> /dev/null)" = 1 ]; }
ipoib_up() {
    ip addr add "192.168.77.$((HCASIM_NODE + 1))/24" dev ib0 2> /dev/null
    ip link set ib0 up
}

# ipoib_tcp_check NAME MIB: (two-VM IPoIB tests, ib0 up on both) node 0
# sends MIB MiB of random bytes over TCP on ib0 to node 1, which hashes
# what it receives: the SHA-256 must be the sender's (the device's large
# sends and checksums carry the data intact), and node 0's ib0 work
# requests must average more than its MTU (ib_ipoib counts completed work
# requests, one per LSO; at most the MTU without LSO). Two checks on node
# 0; both nodes call it.
ipoib_tcp_check() {
    local name=$1 mib=$2
    local sink='import hashlib, pathlib, socket, sys
s = socket.create_server((sys.argv[1], 5301))
pathlib.Path(sys.argv[2]).touch()
c, _ = s.accept()
h, n = hashlib.sha256(), 0
while b := c.recv(1 << 16):
    h.update(b)
    n += len(b)
print(n, h.hexdigest())'
    if [ "$HCASIM_NODE" = 1 ]; then
        rm -f "/tmp/$name.listening"
        timeout 120 python3 -c "$sink" 192.168.77.2 "/tmp/$name.listening" > "/tmp/$name.txt" 2>&1 &
        local pid=$!
        # The sender connects right after the barrier: only once this
        # side listens (Python's start alone may take a second or two
        # under TCG; a refused connection is not what this checks).
        retry 30 test -e "/tmp/$name.listening"
        barrier "$name" 60
        wait $pid
        share "$name" "$(cat "/tmp/$name.txt")"
    else
        head -c "${mib}M" /dev/urandom > "/tmp/$name.bin"
        barrier "$name" 60
        local st=/sys/class/net/ib0/statistics mtu
        mtu=$(cat /sys/class/net/ib0/mtu)
        local p0 b0
        p0=$(cat $st/tx_packets) b0=$(cat $st/tx_bytes)
        timeout 120 python3 -c 'import socket, sys
s = socket.create_connection((sys.argv[1], 5301))
s.sendall(open(sys.argv[2], "rb").read())
s.close()' 192.168.77.2 "/tmp/$name.bin"
        local pkts=$(($(cat $st/tx_packets) - p0)) bytes=$(($(cat $st/tx_bytes) - b0))
        echo "# $name: ib0 sent $bytes bytes in $pkts work requests ($((bytes / (pkts + 1))) bytes each, MTU $mtu)"
        check "$name: large sends, ib0's work requests average more than its MTU" test $((bytes / (pkts + 1))) -gt "$mtu"
    fi
    barrier "$name-done" 150
    if [ "$HCASIM_NODE" = 0 ]; then
        local want got
        want="$((mib * 1048576)) $(sha256sum < "/tmp/$name.bin" | cut -d' ' -f1)"
        got=$(shared 1 "$name")
        check "$name: the receiver got the $mib MiB intact (sha256 $got)" test "$got" = "$want"
    fi
}

# iperf_round NAME SERVER-ADDRESS [CLIENT OPTIONS]: (two-VM tests) node 1
# serves one iperf3 run, node 0 runs the client against SERVER-ADDRESS and
# checks that it completed with data; its received bit/s is shared as
# bps-NAME (0 if none). Both nodes call it.
iperf_round() {  # NAME SERVER-ADDRESS [CLIENT OPTIONS]
    local name=$1 addr=$2
    shift 2
    if [ "$HCASIM_NODE" = 1 ]; then
        iperf3 -s -1 > "/tmp/$name-server.txt" 2>&1 &
        local pid=$!
        sleep 0.5
        barrier "$name" 60
        wait $pid
    else
        barrier "$name" 60
        retry 10 timeout 120 iperf3 -c "$addr" -J "$@" > "/tmp/$name.json" 2> "/tmp/$name.err"
        local rc=$?
        local bps
        bps=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(int(d["end"]["sum_received"]["bits_per_second"]))' "/tmp/$name.json" 2> /dev/null)
        echo "# $name: ${bps:-?} bit/s (iperf3 exit $rc)"
        if [ -z "$bps" ]; then  # what iperf3 said instead (it once exited 0 without a result)
            tail -c 800 "/tmp/$name.err" "/tmp/$name.json" | sed 's/^/# /'
        fi
        check "iperf3 $name completes with data (${bps:-0} bit/s)" test "$rc" = 0 -a "${bps:-0}" -gt 0
        share "bps-$name" "${bps:-0}"
    fi
    barrier "$name-done" 120
}

# ipoib_offloads_on: ib_ipoib turned on the features the device's
# ipoib_basic_offloads gives it (IB_DEVICE_UD_IP_CSUM, IBK_UD_TSO).
ipoib_offloads_on() {
    local f
    ethtool -k ib0 > /tmp/features.txt 2>&1
    for f in "tcp-segmentation-offload: on" "tx-checksum-ipv4: on" "rx-checksumming: on"; do
        check_grep "ib0 offload $f" "^[[:space:]]*$f" /tmp/features.txt
    done
}

# ipoib_pair_start [MODULE...]: how the two-VM fault tests begin: the
# drivers (and MODULEs), an Active port on both nodes, ib0 up with its
# address, its carrier and a ping of the peer (four checks). Sets me, peer,
# myip and peerip.
ipoib_pair_start() {
    me=$HCASIM_NODE
    peer=$((1 - me))
    myip=192.168.77.$((me + 1))
    peerip=192.168.77.$((peer + 1))
    check "modprobe mlx5_ib ib_ipoib $*" modprobe -a mlx5_ib ib_umad ib_uverbs ib_ipoib "$@"
    check "port ACTIVE" wait_port_active 120
    barrier active 180
    ipoib_up
    check "ib0 carrier" retry 60 ipoib_carrier
    check "ping $peerip" retry 30 ping -c 1 -W 2 "$peerip"
}

# start_opensm [SECONDS]: starts opensm (as a daemon) on port 1 of mlx5_0
# and waits (default 60 s) until its log says SUBNET UP. opensm buffers its
# log; force_log_flush makes SUBNET UP visible as it happens.
start_opensm() {
    local guid i
    guid=0x$(tr -d : < /sys/class/infiniband/mlx5_0/ports/1/gids/0 | cut -c17-)
    echo "force_log_flush TRUE" > /tmp/opensm.conf
    rm -f /var/log/opensm.log
    opensm -g "$guid" -B -F /tmp/opensm.conf -f /var/log/opensm.log > /dev/null 2>&1
    for i in $(seq $((${1:-60} * 2))); do
        grep -q "SUBNET UP" /var/log/opensm.log 2>/dev/null && return 0
        sleep 0.5
    done
    return 1
}

# wait_port_active [SECONDS]: waits until port 1 of mlx5_0 is ACTIVE.
wait_port_active() {
    local t=${1:-60}
    for _ in $(seq $((t * 4))); do
        if grep -q ACTIVE /sys/class/infiniband/mlx5_0/ports/1/state 2>/dev/null; then
            [ $_time_active = 1 ] || echo "# hcasim-time active $(uptime_s)"
            _time_active=1
            return 0
        fi
        sleep 0.25
    done
    return 1
}

# barrier NAME [SECONDS]: waits until every node of the run reached NAME
# (the run directory is shared by all nodes at /hcasim).
barrier() {
    local name=$1 t=${2:-120} dir=/hcasim/barriers/$1
    if [ -e "$dir/node$HCASIM_NODE" ]; then
        echo "# barrier $name: used twice (barrier names must be unique)"
        return 1
    fi
    mkdir -p "$dir"
    touch "$dir/node$HCASIM_NODE"
    for _ in $(seq $((t * 10))); do
        [ "$(ls "$dir" | wc -l)" -ge "$HCASIM_NODES" ] && return 0
        sleep 0.1
    done
    echo "# barrier $name: timed out after ${t}s ($(ls "$dir" | tr '\n' ' '))"
    return 1
}

# share NAME VALUE / shared NODE NAME: small values exchanged between nodes.
share() {
    mkdir -p /hcasim/shared
    echo "$2" > "/hcasim/shared/$1.node$HCASIM_NODE.tmp" && mv "/hcasim/shared/$1.node$HCASIM_NODE.tmp" "/hcasim/shared/$1.node$HCASIM_NODE"
}
shared() {
    cat "/hcasim/shared/$2.node$1" 2>/dev/null
}

# mgmt_ip NODE: the node's address on the virtio-net management network.
mgmt_ip() {
    echo "10.77.0.$(($1 + 1))"
}

# port_attr ATTR: a sysfs attribute of mlx5_0 port 1 (lid, sm_lid, state, ...).
port_attr() {
    cat "/sys/class/infiniband/mlx5_0/ports/1/$1"
}

# retry SECONDS COMMAND...: reruns COMMAND until it succeeds (a client whose
# server is still starting).
retry() {
    local t=$1 i
    shift
    for i in $(seq "$t"); do
        "$@" && return 0
        sleep 1
    done
    return 1
}

# listeners: how many TCP listening sockets and RDMA-CM listening IDs exist
# (a server has started once this grows).
listeners() {
    echo $(($(ss -ltnH | wc -l) + $(rdma res show cm_id 2> /dev/null | grep -c LISTEN)))
}

# start_server NAME SECONDS COMMAND...: starts COMMAND in the background
# with output in /tmp/NAME.txt and waits (up to 20 s) until it listens, or,
# with SERVER_READY=PATTERN (a server that listens on nothing, e.g. mckey),
# until its output matches PATTERN. Sets SERVER_PID.
start_server() {
    local name=$1 t=$2 before end=$((SECONDS + 20))
    shift 2
    before=$(listeners)
    timeout "$t" "$@" > "/tmp/$name.txt" 2>&1 &
    SERVER_PID=$!
    # Bounded by the clock: one look at the listeners costs up to 0.3 s
    # under TCG (ss and rdma), so a count of looks would wait far longer.
    while [ "$SECONDS" -le "$end" ]; do
        if [ -n "${SERVER_READY:-}" ]; then
            grep -qE -- "$SERVER_READY" "/tmp/$name.txt" && return 0
        elif [ "$(listeners)" -gt "$before" ]; then
            return 0
        fi
        kill -0 $SERVER_PID 2> /dev/null || return 1
        sleep 0.1
    done
    if [ -n "${SERVER_READY:-}" ]; then
        echo "# $name: the server did not print \"$SERVER_READY\" within 20 s"
    else
        echo "# $name: the server did not start listening within 20 s"
    fi
    return 1
}

# client_server NAME SECONDS CMD ARGS...: node 1 runs "CMD ARGS" as the
# server, node 0 runs "CMD ARGS <node 1's management address>" as the client
# once the server listens (the pingpongs, perftest, iperf3 -s/-c style).
# Output in /tmp/NAME.txt on each node; returns CMD's exit status.
client_server() {
    local name=$1 t=$2 rc
    shift 2
    if [ "$HCASIM_NODE" = 1 ]; then
        start_server "$name" "$t" "$@"
        barrier "$name" 120
        wait $SERVER_PID
        rc=$?
    elif [ "$HCASIM_NODE" = 0 ]; then
        barrier "$name" 120
        timeout "$t" "$@" "$(mgmt_ip 1)" > "/tmp/$name.txt" 2>&1
        rc=$?
    else
        barrier "$name" 120
        rc=0
    fi
    barrier "$name-done" $((t + 60))
    return $rc
}

# pair NAME SECONDS SERVER-COMMAND CLIENT-COMMAND: like client_server, with
# the two command lines given whole (bash -c); node 1 serves.
pair() {
    local name=$1 t=$2 srv=$3 cli=$4 rc
    if [ "$HCASIM_NODE" = 1 ]; then
        start_server "$name" "$t" bash -c "$srv"
        barrier "$name" 120
        wait $SERVER_PID
        rc=$?
    else
        barrier "$name" 120
        timeout "$t" bash -c "$cli" > "/tmp/$name.txt" 2>&1
        rc=$?
    fi
    barrier "$name-done" $((t + 60))
    return $rc
}

# check_capture_hops CAPTURE: (host side of a topology test) every switch of
# the fat tree has records in the capture, and more than 1000 packets were
# recorded by exactly three switches, leaf, spine and leaf, under one id.
check_capture_hops() {
    local cap=$1 s three
    check "the run left a capture ($cap)" test -s "$cap"
    tshark -r "$cap" -T fields -e frame.comment 2> /dev/null > /tmp/hcasim-comments.$$
    for s in leaf0 leaf1 spine0 spine1; do
        check "the capture has records of switch $s" grep -q "switch=$s " /tmp/hcasim-comments.$$
    done
    three=$(sed -n 's/^id=\(0x[0-9a-f]*\) port=[0-9]* switch=\([a-z0-9]*\) fwd=.*/\1 \2/p' /tmp/hcasim-comments.$$ |
            sort -u | awk '{n[$1]++; s[$1] = s[$1] " " $2} END {for (i in n) if (n[i] == 3) print i s[i]}' |
            grep -c 'leaf.*spine\|spine.*leaf')
    echo "# $three packets crossed leaf, spine and leaf"
    check "packets recorded at leaf, spine and leaf with one id ($three)" test "$three" -gt 1000
    rm -f /tmp/hcasim-comments.$$
}

# ipoib_and_rc_across WHAT: (two nodes) ib0 up, 50 IPoIB pings of the peer
# without loss, and 2000 RC pingpongs of 4 KiB with data checks.
ipoib_and_rc_across() {
    ipoib_up
    check "ib0 carrier" retry 60 ipoib_carrier
    barrier ipoib 120
    ping_settled "IPoIB across $1" 50 0.05 "192.168.77.$((1 - HCASIM_NODE + 1))"
    client_server rc 120 ibv_rc_pingpong -d mlx5_0 -g 0 -n 2000 -s 4096 -c
    sed 's/^/# /' /tmp/rc.txt | tail -2
    check "ibv_rc_pingpong -s 4096 -c across $1: 2000 iterations with data checks" \
        grep -qE '^[0-9]+ iters in .* = ' /tmp/rc.txt
    check_no_grep "ibv_rc_pingpong: no failure" 'invalid data|Failed|Couldn|error' /tmp/rc.txt
}

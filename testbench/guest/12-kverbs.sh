# hcasim-test: nodes=1 timeout=300
# guest-driver/kverbs: our kernel module posts work requests through
# ib_post_send()/ib_post_recv() on mlx5_0 the way kernel ULPs do (RC and UD
# through the port's own LID: every opcode, inline and gathered data,
# fences, unsignalled WRs, chains, immediate data, REG_MR, LOCAL_INV,
# SEND_WITH_INV, and the driver's error returns) and reports KTAP; every
# KTAP result becomes one TAP line here. The fabric's built-in SM makes the
# port ACTIVE.
# kverbs.ko is built for each image's kernel (tools/hcasim/build.py).
ko=/hcasim/kverbs/kverbs.ko
dbg=/sys/kernel/debug/kverbs

check "modprobe mlx5_ib" modprobe mlx5_ib
check "port ACTIVE" wait_port_active 120
check "kverbs.ko was built (build/kverbs/)" test -f $ko
check "insmod kverbs.ko" insmod $ko

status=missing
for _ in $(seq 240); do
    status=$(cat $dbg/status 2> /dev/null || echo missing)
    case $status in done | aborted | missing) break ;; esac
    sleep 0.5
done
check "kverbs ran to the end (status: $status)" test "$status" = done
cat $dbg/results > /tmp/ktap.txt 2> /dev/null
sed 's/^/# /' /tmp/ktap.txt

# KTAP v1: the version line, the plan, then "ok N name" / "not ok N name".
plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' /tmp/ktap.txt | head -1)
check "KTAP version line" grep -qx 'KTAP version 1' /tmp/ktap.txt
check "KTAP plan (1..${plan:-none})" test -n "$plan"
n=0
in_order=1
while read -r line; do
    case $line in
        "ok "* | "not ok "*) ;;
        *) continue ;;
    esac
    result=${line%% [0-9]*}
    rest=${line#"$result "}
    num=${rest%% *}
    name=${rest#"$num "}
    n=$((n + 1))
    [ "$num" = "$n" ] || in_order=0
    check "kverbs $num: $name" test "$result" = ok
done < /tmp/ktap.txt
check "$n KTAP results, numbered 1..$n, as planned (${plan:-none})" test "$n" = "${plan:--1}" -a "$in_order" = 1

# The module's QPs exist while it is loaded and are gone after rmmod.
check "rdma res lists the kverbs QPs" test "$(rdma res show qp | grep -c '\[kverbs\]')" -ge 4
check "rmmod kverbs" timeout 60 rmmod kverbs
check "no kverbs resource left after rmmod" test "$(rdma res show | grep -c kverbs)" = 0

# Two cases provoke a remote access error on purpose (a write through an
# invalidated rkey); mlx5_ib logs each error completion with a CQE dump.
rae='WC error: 10, Message: remote access error'
check "mlx5_ib logged the 2 remote access errors kverbs provoked" test "$(dmesg | grep -c "$rae")" = 2
MLX5_EXPECTED="$MLX5_EXPECTED|$rae|mlx5_0: dump_cqe:[0-9]+:\(pid [0-9]+\): dump error cqe"
check_dmesg_clean "clean dmesg"
finish

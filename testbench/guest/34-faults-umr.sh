# hcasim-test: nodes=1 timeout=300 ci=0 images=debian13,unstable
# A driver finding, reproduced (docs/FAULTS.md, "a CQ error on mlx5_ib's
# UMR CQ"): since 6.10 mlx5_ib creates its UMR resources on the first user
# MR, so that MR adds exactly one CQ to mlx5_core's debugfs, the UMR CQ
# (6.1 creates it when mlx5_ib loads, among its other CQs: images=). A CQ
# error (overrun) on it: mlx5_core reports it, the CQ takes no more
# completions, and nothing in mlx5_ib handles it, so the next memory-key
# change waits for its UMR completion for good in
# mlx5r_umr_post_send_wait() (wait_for_completion(), no timeout): the
# process is in state D and SIGKILL does not end it. The guest is left
# that way; the harness powers it off.
check "modprobe mlx5_ib ib_uverbs" modprobe -a mlx5_ib ib_umad ib_uverbs
check "port ACTIVE" wait_port_active 120
cq_dir=/sys/kernel/debug/mlx5/$(hca_pci_dev)/CQs
cat > /tmp/mr.py << 'PY'
import sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
sys.path.insert(0, "/hcasim/py")
from verbs_enums import e  # noqa: E402
ctx = Context(name="mlx5_0")
pd = PD(ctx)
mr = MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
print("registered", flush=True)
mr.close()
print("deregistered", flush=True)
pd.close()
ctx.close()
PY
before=$(ls "$cq_dir" | sort)
timeout 60 python3 /tmp/mr.py > /tmp/first.txt 2>&1
rc=$?
check "a user MR registered and deregistered (exit $rc)" grep -q deregistered /tmp/first.txt
umr=$(comm -13 <(echo "$before") <(ls "$cq_dir" | sort))
echo "# CQs before: $(echo $before); new: ${umr:-none}"
check "the first user MR made mlx5_ib create one CQ, its UMR CQ (${umr:-none})" test "$(echo "$umr" | wc -w)" = 1
mark=$(dmesg | wc -l)
check "armed cq-error overrun on the UMR CQ $umr" hca_fault "cq-error:cqn=$umr,syndrome=overrun"
reported() { dmesg | tail -n +$((mark + 1)) | grep -q "CQ error on CQN $umr, syndrome 0x1"; }
check "mlx5_core: 'CQ error on CQN $umr, syndrome 0x1'" retry 10 reported
python3 /tmp/mr.py > /tmp/second.txt 2>&1 &
pid=$!
sleep 10
state() { awk '{print $3}' "/proc/$pid/stat" 2> /dev/null; }
sed 's/^/# /' /tmp/second.txt
sed 's/^/# stack: /' "/proc/$pid/stack" 2> /dev/null | head -8
check "the next MR program is in state D after 10 s ($(state))" test "$(state)" = D
check "it waits in mlx5r_umr_post_send_wait" grep -q mlx5r_umr_post_send_wait "/proc/$pid/stack"
kill -9 "$pid"
sleep 2
check "SIGKILL does not end it (still $(state))" test "$(state)" = D
finish

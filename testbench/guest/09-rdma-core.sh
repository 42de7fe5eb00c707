# hcasim-test: nodes=1 timeout=1800 quick-timeout=600
# The rdma-core test suite (pyverbs, run_tests.py --dev mlx5_0) on the
# virtual HCA with the port ACTIVE (fabric SM) and an IPoIB address for the
# RDMA-CM tests: every test must have the outcome py/rdma-core-expected.<image>.txt
# gives it (pass, skip for a named reason, or a known suite defect); one
# check per test expected to pass.
# test_mlx5_devx_async_events (rdma-core 65) overruns a DEVX CQ on purpose
# to get its CQ error event; mlx5_core logs the event (as on hardware).
MLX5_EXPECTED="$MLX5_EXPECTED|cq_err_event_notifier:.*CQ error on CQN 0x[0-9a-f]+, syndrome 0x1"
check "modprobe mlx5_ib ib_uverbs rdma_ucm ib_ipoib" modprobe -a mlx5_ib ib_umad ib_uverbs rdma_ucm ib_ipoib
check "port ACTIVE" wait_port_active 120
ip addr add 192.168.77.1/24 dev ib0
ip link set ib0 up
echo 64 > /proc/sys/vm/nr_hugepages  # the huge-page tests need 2M pages
sleep 2
cd /opt/rdma-tests || exit 1
# ./hcasim test (quick) runs a representative third of the suite: device
# and PD queries, CQs, QP creation and state machine, the new post-send
# API over RC/UD/XRC, atomics, mlx5 CQ variants, completion timestamps,
# memory windows, device memory, on-demand paging, DEVX memory keys
# (mlx5dv_create_mkey: KLM lists, interleaved), a DEVX QP carrying traffic,
# tag matching (eager, unexpected, no-tag, rendezvous).
# ./hcasim suite runs all.
only=$(reps "" "tests.test_device.,tests.test_pd.,tests.test_cq.,tests.test_qp.,tests.test_qpex.,tests.test_atomic.,tests.test_mlx5_cq.,tests.test_addr.,tests.test_mlx5_timestamp.,tests.test_phc_timestamp.,tests.test_mr.MWTest.,tests.test_mr.DeviceMemory,tests.test_odp.,tests.test_mlx5_mkey.,tests.test_mlx5_devx.,tests.test_tag_matching.")
kargs=()
for p in ${only//,/ }; do kargs+=(-k "$p"); done
timeout "$(reps 1500 400)" python3 run_tests.py --dev mlx5_0 -v "${kargs[@]}" > /tmp/rdma-core.txt 2>&1
echo "# run_tests.py exit status $?"
cp /tmp/rdma-core.txt /hcasim/node$HCASIM_NODE/rdma-core-tests.txt
python3 /hcasim/py/rdma_core_check.py ${only:+--only "$only"} /tmp/rdma-core.txt "$(rdma_core_expected)"
check_dmesg_clean "clean dmesg after the suite"
finish

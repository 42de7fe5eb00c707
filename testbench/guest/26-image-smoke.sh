# hcasim-test: nodes=2 timeout=900 quick-timeout=600
# One guest image's whole stack on the device: its own kernel with its stock
# mlx5_core, mlx5_ib and ib_ipoib, its own rdma-core (libmlx5, the
# pingpongs, perftest, pyverbs). ./hcasim test runs this on every image
# (build.IMAGES); the full set of guest tests runs on the default one.
# Probe, an Active port, IPoIB (its offloads, a hashed TCP transfer), RC/UD/SRQ pingpongs with data checks, an
# RDMA WRITE bandwidth run and a representative part of the image's own
# rdma-core test suite against that image's expected outcomes.
me=$HCASIM_NODE
peerip=192.168.77.$((2 - me))
read -r _ _ _ key image < /hcasim/image-manifest.txt  # "hcasim guest image KEY NAME"
kernel=$(awk '$1 == "kernel" {print $2}' /hcasim/image-manifest.txt)
rdma=$(awk '$1 == "package" && $2 == "rdma-core" {print $3}' /hcasim/image-manifest.txt)
echo "# image $image ($key): kernel $kernel, rdma-core $rdma"
check "the image's kernel runs ($kernel)" test "$(uname -r)" = "$kernel"
check "the image's rdma-core is installed ($rdma)" \
    test "$(dpkg-query -W -f '${Version}\n' rdma-core libibverbs1 ibverbs-providers | sort -u)" = "$rdma"
check "modprobe mlx5_ib ib_ipoib" modprobe -a mlx5_ib ib_umad ib_uverbs rdma_ucm ib_ipoib
if [ -d "/hcasim/modules/$kernel" ]; then
    # --modules: the driver under test (lib.sh's finish checks all three).
    check "mlx5_core is the driver under test" sh -c "modinfo -n mlx5_core | grep -q '/updates/hcasim/'"
else
    check "mlx5_core is the image's module" sh -c "modinfo -n mlx5_core | grep -q '/lib/modules/$kernel/kernel/'"
fi
check "port ACTIVE" wait_port_active 120
check "ibv_devinfo: mlx5_0, PORT_ACTIVE, link layer InfiniBand" \
    sh -c "ibv_devinfo -d mlx5_0 > /tmp/devinfo.txt && grep -q 'state:.*PORT_ACTIVE' /tmp/devinfo.txt && grep -q 'link_layer:.*InfiniBand' /tmp/devinfo.txt"
# A BlueFlame UAR is mlx5_ib's only after the kernel's write-combining
# test passed (6.1: mlx5_ib on a UD QP; 6.12 and later: mlx5_core on an
# SQ object); without it libmlx5 gets no BlueFlame registers at all.
check "a BlueFlame UAR can be allocated (the kernel's write-combining test passed)" python3 -c '
from pyverbs.providers.mlx5.mlx5dv import Mlx5UAR, Mlx5Context, Mlx5DVContextAttr
from pyverbs.providers.mlx5.mlx5_enums import _MLX5DV_UAR_ALLOC_TYPE_BF
ctx = Mlx5Context(Mlx5DVContextAttr(), name="mlx5_0")
uar = Mlx5UAR(ctx, _MLX5DV_UAR_ALLOC_TYPE_BF)
uar.close()
ctx.close()'
barrier active 180
ipoib_up
check "ib0 carrier" retry 60 ipoib_carrier
ping_settled "IPoIB ping of $peerip" 10 0.2 "$peerip"
# The image's ib_ipoib on the device's IPoIB offloads: features on, a TCP
# transfer cut into large sends arrives intact.
ipoib_offloads_on
ipoib_tcp_check tcp-4m 4
for pp in rc ud srq; do
    client_server "$pp" 300 "ibv_${pp}_pingpong" -d mlx5_0 -c -n 500
    rc=$?
    if [ "$me" = 0 ]; then
        sed 's/^/# /' "/tmp/$pp.txt" | tail -1
        check "ibv_${pp}_pingpong -c -n 500 (exit $rc)" test "$rc" = 0
        check "$pp: 500 iterations, no invalid data" \
            sh -c "grep -qE '^500 iters in ' /tmp/$pp.txt && ! grep -qiE 'invalid data|failed' /tmp/$pp.txt"
    fi
done
client_server bw 300 ib_write_bw -d mlx5_0 -n 500 -s 65536 -F
rc=$?
if [ "$me" = 0 ]; then
    row=$(awk '$1 == 65536 && $2 == 500 {print}' /tmp/bw.txt)
    echo "# ib_write_bw 64 KiB: ${row:-no result row}"
    check "ib_write_bw 64 KiB x 500 (exit $rc), a result row with a bandwidth" \
        sh -c "[ $rc = 0 ] && echo '$row' | awk '{exit !(\$4 > 0)}'"
fi
barrier traffic-done 300
if [ "$me" = 0 ]; then
    # The image's own suite (tests as its rdma-core ships them), a
    # representative part, against py/rdma-core-expected.<image>.txt;
    # the timestamp tests check the CQEs' clock against the PHC (rdma-core
    # 65's test_phc_timestamp; older ones have no such module), the window
    # tests bind, use and invalidate memory windows of type 1 and 2.
    echo 64 > /proc/sys/vm/nr_hugepages
    only="tests.test_device.,tests.test_pd.,tests.test_cq.,tests.test_qp.,tests.test_mlx5_timestamp.,tests.test_phc_timestamp.,tests.test_mr.MWTest."
    kargs=()
    for p in ${only//,/ }; do kargs+=(-k "$p"); done
    (cd /opt/rdma-tests && timeout 400 python3 run_tests.py --dev mlx5_0 -v "${kargs[@]}") > /tmp/rdma-core.txt 2>&1
    echo "# run_tests.py exit status $?; $(grep -E '^Ran ' /tmp/rdma-core.txt)"
    cp /tmp/rdma-core.txt "/hcasim/node$me/rdma-core-tests.txt"
    python3 /hcasim/py/rdma_core_check.py --only "$only" /tmp/rdma-core.txt "$(rdma_core_expected)"
fi
barrier suite-done 500
check_dmesg_clean "clean dmesg"
finish

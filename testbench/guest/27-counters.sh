# hcasim-test: nodes=2 timeout=600
# The HCA's Q counters through the unmodified driver: mlx5_ib allocates a
# set for the port (ALLOC_Q_COUNTER) and puts every QP in it at RST2INIT;
# port 1's hw_counters and `rdma statistic` read it (QUERY_Q_COUNTER).
# py/counters.py makes things happen on RC QPs through the port's own LID
# and checks each count moved by what happened: error completions of
# every kind (exactly), RNR NAKs and RNR retries exceeded, and a QP bound
# to a counter of its own (an RTS2RTS with COUNTER_SET_ID). Then loss on
# the fabric between the two nodes: a data-checked RC pingpong with 3 % of
# the requests dropped, and the out-of-sequence requests, sequence NAKs
# and ACK timeouts it caused on either side.
me=$HCASIM_NODE
check "modprobe mlx5_ib ib_uverbs" modprobe -a mlx5_ib ib_umad ib_uverbs
check "port ACTIVE" wait_port_active 120

counters() {  # SCENARIO: py/counters.py's TAP lines become ours
    python3 /hcasim/py/counters.py "$1" > "/tmp/counters-$1.txt" 2>&1
    local rc=$?
    while IFS= read -r line; do
        case $line in
        "ok "*) check "$1: ${line#ok * - }" true ;;
        "not ok "*) check "$1: ${line#not ok * - }" false ;;
        *) echo "# $line" ;;
        esac
    done < <(grep -E '^(ok|not ok) [0-9]+ - |^#|Traceback|Error' "/tmp/counters-$1.txt")
    check "counters.py $1 ran to its end (exit $rc)" test "$rc" = 0
}
hw=/sys/class/infiniband/mlx5_0/ports/1/hw_counters
if [ "$me" = 0 ]; then
    ls "$hw" | tr '\n' ' ' | sed 's/^/# hw_counters: /; s/$/\n/'
    # The driver lists a count when its capability bit is set: the basic ones,
    # out_of_seq_cnt, retransmission_q_counters, enhanced_error_q_counters.
    missing=
    for c in rx_write_requests rx_read_requests rx_atomic_requests out_of_buffer out_of_sequence \
        duplicate_request rnr_nak_retry_err packet_seq_err implied_nak_seq_err local_ack_timeout_err \
        resp_local_length_error resp_cqe_error req_cqe_error req_remote_invalid_request \
        req_remote_access_errors resp_remote_access_errors resp_cqe_flush_error req_cqe_flush_error; do
        [ -r "$hw/$c" ] || missing="$missing $c"
    done
    check "hw_counters lists the Q counters${missing:+ (missing:$missing)}" test -z "$missing"
    check "rdma statistic show link mlx5_0/1 reads them" sh -c "rdma statistic show link mlx5_0/1 | grep -q 'out_of_sequence [0-9]'"
    counters errors
    counters rnr
    counters bound
fi
barrier local-done 300

# Loss between the nodes. snap: the counts that loss moves.
snap() {
    for c in out_of_sequence duplicate_request packet_seq_err local_ack_timeout_err req_cqe_error \
        req_transport_retries_exceeded; do
        [ -r "$hw/$c" ] && echo "$c $(cat "$hw/$c")"
    done
}
snap > /tmp/before.txt
# Requests only: ibv_rc_pingpong has no closing handshake, so a lost final
# ACK would leave one side retrying to a peer that has exited (TESTING.md).
[ "$me" = 0 ] && check "fabric: drop 3 % of the requests" fabric_ctl drop all 3 requests
barrier drop-armed 60
iters=$(reps 200 80)
client_server lossy 300 ibv_rc_pingpong -d mlx5_0 -n "$iters" -s 16384 -c
rc=$?
snap > /tmp/after.txt
share moved "$(awk 'NR == FNR {b[$1] = $2; next} {printf "%s=%d ", $1, $2 - b[$1]}' /tmp/before.txt /tmp/after.txt)"
barrier counted 60
if [ "$me" = 0 ]; then
    check "fabric: no more loss" fabric_ctl drop all 0
    tail -2 /tmp/lossy.txt | sed 's/^/# /'
    check "RC pingpong over 3 % request loss, data checked: exit $rc" test "$rc" = 0
    check "the pingpong did its $iters iterations" grep -q "^$iters iters" /tmp/lossy.txt
    sum() { echo $(($(shared 0 moved | tr ' ' '\n' | sed -n "s/^$1=//p") + $(shared 1 moved | tr ' ' '\n' | sed -n "s/^$1=//p"))); }
    echo "# node 0 moved: $(shared 0 moved)"
    echo "# node 1 moved: $(shared 1 moved)"
    check "out_of_sequence moved (responders saw gaps: $(sum out_of_sequence))" test "$(sum out_of_sequence)" -gt 0
    check "the requesters recovered by sequence NAKs or ACK timeouts ($(sum packet_seq_err) + $(sum local_ack_timeout_err))" \
        test $(($(sum packet_seq_err) + $(sum local_ack_timeout_err))) -gt 0
    check "no more sequence NAKs taken than gaps seen" test "$(sum packet_seq_err)" -le "$(sum out_of_sequence)"
    check "no error completion on either side (req_cqe_error $(sum req_cqe_error))" test "$(sum req_cqe_error)" = 0
fi
check_dmesg_clean "clean dmesg"
barrier done 60
finish

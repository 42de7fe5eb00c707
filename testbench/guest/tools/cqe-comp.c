/*
 * CQE compression as a direct-verbs program sees it.
 *
 * libmlx5's own poll does not read compressed CQEs: a program that asks for
 * them (mlx5dv_create_cq with MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE, as
 * DPDK and UCX do) reads the CQ ring itself. This one does, the way mlx5e
 * does: a CQE whose format (op_own 3:2) is 3 is a session's title, its byte
 * count the number of CQEs in the session; arrays of 8 mini CQEs follow at
 * the title's index + 1, then + 8, + 16, ...; each CQE is the title with a
 * mini CQE's byte count and, by format, its checksum or hash and stride
 * index (the WQE counter is counted on from the title's otherwise).
 *
 * For each mini CQE format (the last with 128-byte CQEs) a burst of SENDs
 * on a loopback RC pair, posted as one chain (one doorbell): every receive
 * must come back in order with its opcode, QP, byte count and WQE counter,
 * at least one session must be compressed, the data must be what was sent,
 * and the send CQ (not compressing) must have every completion. Before
 * that, the device must offer what the kernel reports (cqe_comp_caps, the
 * 128-byte CQE compression flag). Prints TAP; exit status 1 if a check
 * failed.
 *
 *     cqe-comp [DEVICE]
 */
#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { BURST = 40, SLOT = 256, CQE_RESP_SEND = 2, FORMAT_COMPRESSED = 3 };

static int checks, failed;

static void check(int ok, const char *what, const char *name)
{
	printf("%s %d - %s: %s\n", ok ? "ok" : "not ok", ++checks, name, what);
	fflush(stdout);
	failed += !ok;
}

/* The CQ ring as the device writes it. */
struct ring {
	uint8_t *buf;
	uint32_t cnt, size, ci;
	volatile __be32 *dbrec;
	unsigned int sessions;
};

struct cqe {
	uint8_t opcode;
	uint32_t qpn, bytes;
	uint16_t wqe;
};

static uint8_t *ring_cqe(struct ring *r, uint32_t i)
{
	return r->buf + (size_t)(i & (r->cnt - 1)) * r->size + r->size - 64;
}

static uint32_t be32_at(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static uint16_t be16_at(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return be16toh(v);
}

/*
 * The session's indexes back to the device: invalid for this lap (a mini
 * CQE array's last byte is data, not an owner bit), as
 * mlx5e_cqes_update_owner() does; then the consumer index on.
 */
static void ring_release(struct ring *r, uint32_t n)
{
	for (uint32_t i = r->ci; i < r->ci + n; i++)
		ring_cqe(r, i)[63] = 0xf0 | ((i / r->cnt) & 1);
	r->ci += n;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	r->dbrec[0] = htobe32(r->ci & 0xffffff);
}

/* The CQEs at the consumer index, decompressed, into out (room entries);
 * 0 if none is ready, -1 if a session does not fit. */
static int ring_poll(struct ring *r, int hw_format, struct cqe *out, int room)
{
	const uint8_t *t = ring_cqe(r, r->ci);
	uint8_t op_own = __atomic_load_n(&t[63], __ATOMIC_ACQUIRE);
	struct cqe title;
	uint32_t n;

	if ((op_own >> 4) == 0xf || (op_own & 1) != ((r->ci / r->cnt) & 1))
		return 0;
	title.opcode = op_own >> 4;
	title.qpn = be32_at(t + 56) & 0xffffff;
	title.bytes = be32_at(t + 44);
	title.wqe = be16_at(t + 60);
	if (((op_own >> 2) & 3) != FORMAT_COMPRESSED) {
		if (room < 1)
			return -1;
		out[0] = title;
		ring_release(r, 1);
		return 1;
	}
	n = title.bytes;
	if (n < 2 || n > (uint32_t)room)
		return -1;
	r->sessions++;
	const uint8_t *minis = NULL;
	for (uint32_t i = 0; i < n; i++) {
		if (i % 8 == 0)
			minis = ring_cqe(r, r->ci + (i ? i : 1));
		const uint8_t *m = minis + (i % 8) * 8;

		out[i] = title;
		out[i].bytes = be32_at(m + 4);
		out[i].wqe = hw_format == 3 ? be16_at(m + 2) : (uint16_t)(title.wqe + i);
	}
	ring_release(r, n);
	return (int)n;
}

static int to_rts(struct ibv_qp *qp, uint32_t dest, uint16_t lid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint8_t pattern(int msg, int k)
{
	return (uint8_t)(msg * 7 + k);
}

static void burst(struct ibv_context *ctx, struct ibv_pd *pd, uint16_t lid, const char *name, uint8_t dv_format,
		  int hw_format, int cqe_size)
{
	struct mlx5dv_cq_init_attr dv = {
		.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE, .cqe_comp_res_format = dv_format,
	};
	struct ibv_cq_init_attr_ex cq_attr = { .cqe = 255 };
	struct ibv_cq_ex *ccq;
	struct ibv_cq *scq;
	struct ibv_qp *a, *b;
	struct ibv_mr *src_mr, *dst_mr;
	uint8_t *src, *dst;
	struct ring ring = { 0 };
	struct cqe got[BURST];
	struct ibv_send_wr wrs[BURST], *bad;
	struct ibv_sge sges[BURST];
	int lens[BURST], n = 0, sends = 0, ok;

	if (cqe_size) {
		dv.comp_mask |= MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
		dv.cqe_size = cqe_size;
	}
	ccq = mlx5dv_create_cq(ctx, &cq_attr, &dv);
	check(ccq != NULL, "mlx5dv_create_cq with compression", name);
	if (!ccq)
		return;
	scq = ibv_create_cq(ctx, 255, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = {
		.send_cq = scq, .recv_cq = scq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	a = ibv_create_qp(pd, &qa);
	qa.recv_cq = ibv_cq_ex_to_cq(ccq);
	b = ibv_create_qp(pd, &qa);
	src = calloc(BURST, SLOT);
	dst = calloc(BURST, SLOT);
	src_mr = ibv_reg_mr(pd, src, BURST * SLOT, IBV_ACCESS_LOCAL_WRITE);
	dst_mr = ibv_reg_mr(pd, dst, BURST * SLOT, IBV_ACCESS_LOCAL_WRITE);
	if (!scq || !a || !b || !src_mr || !dst_mr || to_rts(a, b->qp_num, lid) || to_rts(b, a->qp_num, lid)) {
		check(0, "QPs, CQ and MRs set up", name);
		return;
	}
	struct mlx5dv_cq dvcq;
	struct mlx5dv_obj obj = { .cq = { .in = ibv_cq_ex_to_cq(ccq), .out = &dvcq } };
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ)) {
		check(0, "mlx5dv_init_obj of the CQ", name);
		return;
	}
	ring.buf = dvcq.buf;
	ring.cnt = dvcq.cqe_cnt;
	ring.size = dvcq.cqe_size;
	ring.dbrec = dvcq.dbrec;

	for (int i = 0; i < BURST; i++) {
		struct ibv_sge rs = { (uintptr_t)(dst + i * SLOT), SLOT, dst_mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = i, .sg_list = &rs, .num_sge = 1 }, *rbad;

		lens[i] = 16 + i;
		for (int k = 0; k < lens[i]; k++)
			src[i * SLOT + k] = pattern(i, k);
		if (ibv_post_recv(b, &rw, &rbad)) {
			check(0, "receives posted", name);
			return;
		}
		sges[i] = (struct ibv_sge){ (uintptr_t)(src + i * SLOT), lens[i], src_mr->lkey };
		wrs[i] = (struct ibv_send_wr){ .wr_id = i, .next = i + 1 < BURST ? &wrs[i + 1] : NULL,
					       .sg_list = &sges[i], .num_sge = 1, .opcode = IBV_WR_SEND,
					       .send_flags = IBV_SEND_SIGNALED };
	}
	/* One chain, one doorbell: the device takes the burst in one run. */
	if (ibv_post_send(a, wrs, &bad)) {
		check(0, "the SENDs posted", name);
		return;
	}
	double deadline = now() + 20;
	while (n < BURST && now() < deadline) {
		int k = ring_poll(&ring, hw_format, got + n, BURST - n);

		if (k < 0)
			break;
		n += k;
	}
	while (sends < BURST && now() < deadline) {
		struct ibv_wc wc[16];
		int k = ibv_poll_cq(scq, 16, wc);

		for (int i = 0; i < k; i++)
			sends += wc[i].status == IBV_WC_SUCCESS;
	}
	printf("# %s: %d receive CQEs in %u compressed sessions, %d send completions\n", name, n, ring.sessions,
	       sends);
	ok = n == BURST;
	for (int i = 0; ok && i < n; i++)
		ok = got[i].opcode == CQE_RESP_SEND && got[i].qpn == b->qp_num;
	check(ok, "every receive completed, a SEND to the receiving QP", name);
	ok = n == BURST;
	for (int i = 0; ok && i < n; i++) {
		ok = got[i].bytes == (uint32_t)lens[i] && got[i].wqe == i;
		if (!ok)
			printf("# CQE %d: %u bytes, WQE counter %u; expected %d, %d\n", i, got[i].bytes, got[i].wqe,
			       lens[i], i);
	}
	check(ok, "byte counts and WQE counters in order", name);
	check(ring.sessions >= 1, "at least one compressed session", name);
	ok = 1;
	for (int i = 0; ok && i < BURST; i++)
		for (int k = 0; ok && k < lens[i]; k++)
			ok = dst[i * SLOT + k] == pattern(i, k);
	check(ok, "the data arrived", name);
	check(sends == BURST, "every SEND completed on the (uncompressed) send CQ", name);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_destroy_cq(ibv_cq_ex_to_cq(ccq));
	ibv_destroy_cq(scq);
	ibv_dereg_mr(src_mr);
	ibv_dereg_mr(dst_mr);
	free(src);
	free(dst);
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : "mlx5_0";
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct mlx5dv_context attrs = { .comp_mask = MLX5DV_CONTEXT_MASK_CQE_COMPRESION };
	struct ibv_port_attr port;

	for (int i = 0; list && list[i] && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			ctx = ibv_open_device(list[i]);
	if (!ctx || mlx5dv_query_device(ctx, &attrs) || ibv_query_port(ctx, 1, &port)) {
		printf("not ok 1 - %s opened and queried\n", want);
		return 1;
	}
	const uint32_t formats = MLX5DV_CQE_RES_FORMAT_HASH | MLX5DV_CQE_RES_FORMAT_CSUM |
				 MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX;
	printf("# cqe_comp_caps: max_num %u, supported_format 0x%x; flags 0x%" PRIx64 "\n",
	       attrs.cqe_comp_caps.max_num, attrs.cqe_comp_caps.supported_format, (uint64_t)attrs.flags);
	check(attrs.cqe_comp_caps.max_num == 64 && (attrs.cqe_comp_caps.supported_format & formats) == formats,
	      "max_num 64; hash, checksum and stride index formats", "cqe_comp_caps");
	check(!!(attrs.flags & MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP), "compression of 128-byte CQEs offered",
	      "flags");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	burst(ctx, pd, port.lid, "checksum format", MLX5DV_CQE_RES_FORMAT_CSUM, 1, 0);
	burst(ctx, pd, port.lid, "hash format", MLX5DV_CQE_RES_FORMAT_HASH, 0, 0);
	burst(ctx, pd, port.lid, "stride index format, 128-byte CQEs", MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX, 3, 128);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return failed ? 1 : 0;
}

// hca-hostile: a guest program that behaves like a broken or malicious
// driver towards its HCA, for the hostile-guest test (16-hostile.sh).
//
//   hca-hostile bar0 RESOURCE0 SECONDS SEED
//       Random doorbell and BlueFlame writes over the UAR pages of BAR0 and
//       random reads over all of BAR0, for SECONDS, while the driver is
//       bound (the guest boots with iomem=relaxed so sysfs lets us map it).
//   hca-hostile wqe DEVICE COUNT SEED
//       COUNT random WQEs posted on real RC and UD QPs of DEVICE through
//       libmlx5's direct-verbs view of the send queue (buffer, doorbell
//       record, BlueFlame register), bypassing every check of ibv_post_send.
//       A QP that completes in error or stops answering is reset and
//       brought back to RTS.
//
// Both print one "hostile: key=value ..." summary line that the guest test
// parses. Randomness comes from SEED (xorshift), so a run can be replayed.
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// UAR page offsets the device decodes (hca-model/src/objects/uar.h): CQ doorbell,
// EQ arm and update doorbells, and the BlueFlame registers from 0x800.
static uint32_t uar_offset(void)
{
	static const uint32_t known[] = { 0x20, 0x40, 0x48, 0x800, 0x900, 0xa00, 0xb00 };

	switch (rnd() % 4) {
	case 0:
		return rnd() & 0xff8; // anywhere in the page
	case 1:
		return 0x800 + (rnd() & 0x7f8); // inside a BlueFlame buffer
	default:
		return known[rnd() % (sizeof(known) / sizeof(known[0]))];
	}
}

static int spray_bar0(const char *path, double seconds)
{
	uint64_t writes = 0, bf_writes = 0, reads = 0, sum = 0;
	struct stat st;
	int fd = open(path, O_RDWR | O_SYNC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(path);
		return 1;
	}
	size_t size = st.st_size;
	volatile uint8_t *bar = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (bar == MAP_FAILED) {
		perror("mmap BAR0");
		return 1;
	}
	// UAR pages start at page 3 (pages 0-2: the initialization segment,
	// which this program never writes: the driver must keep its commands).
	size_t pages = size / 4096;
	size_t uar_pages = pages > 3 + 256 ? 256 : pages - 3;
	double end = now_s() + seconds;

	while (now_s() < end) {
		for (int i = 0; i < 256; i++) {
			size_t page = 3 + (rnd() % 8 == 0 ? rnd() % uar_pages : rnd() % 16);
			uint32_t off = uar_offset();
			volatile uint8_t *p = bar + page * 4096 + off;

			switch (rnd() % 8) {
			case 0: // a 64-byte BlueFlame copy of random bytes
				if (off >= 0x800 && off <= 0xfc0) {
					off &= ~0x3fu;
					p = bar + page * 4096 + off;
					for (int q = 0; q < 8; q++)
						((volatile uint64_t *)p)[q] = rnd();
					bf_writes++;
					break;
				}
				/* fall through */
			case 1:
			case 2:
				*(volatile uint32_t *)((uintptr_t)p & ~3ul) = (uint32_t)rnd();
				writes++;
				break;
			case 3: { // a random read anywhere in BAR0, any width
				size_t off0 = rnd() % size & ~7ul;

				sum += rnd() & 1 ? *(volatile uint32_t *)(bar + off0) :
						   *(volatile uint64_t *)(bar + off0);
				reads++;
				break;
			}
			default:
				*(volatile uint64_t *)((uintptr_t)p & ~7ul) = rnd();
				writes++;
				break;
			}
		}
	}
	printf("hostile: mode=bar0 writes=%" PRIu64 " bf_writes=%" PRIu64 " reads=%" PRIu64
	       " bar0_bytes=%zu uar_pages=%zu sum=%" PRIx64 "\n",
	       writes, bf_writes, reads, size, uar_pages, sum);
	return 0;
}

struct victim {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct mlx5dv_qp dv;
	enum ibv_qp_type type;
	uint16_t lid;
	uint32_t pi; // our send-queue producer counter (WQEBBs)
	unsigned resets;
};

static int to_rts(struct victim *v)
{
	struct ibv_qp_attr a;
	int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	int rtr_mask = IBV_QP_STATE;
	int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (v->type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		init_mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC;
		init_mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(v->qp, &a, init_mask))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (v->type == IBV_QPT_RC) {
		// Connected to itself: its requests come back to its own responder.
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = v->qp->qp_num;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 1;
		a.ah_attr.dlid = v->lid;
		a.ah_attr.port_num = 1;
		rtr_mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	if (ibv_modify_qp(v->qp, &a, rtr_mask))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	if (v->type == IBV_QPT_RC) {
		a.timeout = 8;
		a.retry_cnt = 1;
		a.rnr_retry = 1;
		a.max_rd_atomic = 1;
		rts_mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(v->qp, &a, rts_mask))
		return -1;
	v->pi = 0;
	return 0;
}

// One random WQE of 1-4 WQEBBs at the producer index: sometimes a
// well-formed control segment with random contents behind it, sometimes
// random bytes throughout. CE is set so the device has to answer.
static void post_random(struct victim *v)
{
	unsigned nbb = 1 + rnd() % 4, cnt = v->dv.sq.wqe_cnt;
	uint8_t *buf = v->dv.sq.buf;
	uint64_t ctrl0 = 0;

	for (unsigned b = 0; b < nbb; b++) {
		uint64_t *q = (uint64_t *)(buf + ((v->pi + b) & (cnt - 1)) * 64);

		for (int i = 0; i < 8; i++)
			q[i] = rnd();
	}
	uint32_t *ctrl = (uint32_t *)(buf + (v->pi & (cnt - 1)) * 64);

	if (rnd() % 4) {
		static const uint8_t ops[] = { 0x00, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x10, 0x11,
					       0x12, 0x14, 0x18, 0x19, 0x1a, 0x25, 0x27 };
		uint8_t op = rnd() % 8 ? ops[rnd() % sizeof(ops)] : (uint8_t)rnd();
		unsigned ds = rnd() % 8 ? nbb * 4 : rnd() % 64;

		ctrl[0] = htobe32((v->pi & 0xffff) << 8 | op);
		ctrl[1] = htobe32(v->qp->qp_num << 8 | (ds & 0x3f));
		ctrl[2] = htobe32(0x08 | (rnd() % 4 ? 0 : (uint32_t)rnd() & 0xf7));
	}
	memcpy(&ctrl0, ctrl, 8);
	v->pi += nbb;
	__sync_synchronize();
	v->dv.dbrec[MLX5_SND_DBR] = htobe32(v->pi & 0xffff);
	__sync_synchronize();
	*(volatile uint64_t *)v->dv.bf.reg = ctrl0;
	__sync_synchronize();
}

static int make_victim(struct ibv_context *ctx, struct ibv_pd *pd, enum ibv_qp_type type,
		       uint16_t lid, struct victim *v)
{
	struct ibv_qp_init_attr ia;
	struct mlx5dv_obj obj;

	memset(v, 0, sizeof(*v));
	v->type = type;
	v->lid = lid;
	v->cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	if (!v->cq)
		return -1;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = v->cq;
	ia.recv_cq = v->cq;
	ia.qp_type = type;
	ia.cap.max_send_wr = 64;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 1;
	v->qp = ibv_create_qp(pd, &ia);
	if (!v->qp)
		return -1;
	obj.qp.in = v->qp;
	obj.qp.out = &v->dv;
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP))
		return -1;
	return to_rts(v);
}

struct wqe_stats {
	uint64_t posted, cqes, err_cqes, resets, stuck;
	uint64_t by_status[32];
};

// Posts a small batch, then waits up to 50 ms for its completions; a QP
// that answered in error or not at all is recycled through RESET.
static int run_batch(struct victim *v, struct wqe_stats *s)
{
	unsigned n = 1 + rnd() % 4;
	struct ibv_wc wc[16];
	int bad = 0, got = 0;

	for (unsigned i = 0; i < n; i++)
		post_random(v);
	s->posted += n;
	double end = now_s() + 0.05;

	while (now_s() < end && got < (int)n) {
		int k = ibv_poll_cq(v->cq, 16, wc);

		if (k < 0)
			return -1;
		for (int i = 0; i < k; i++) {
			s->cqes++;
			if (wc[i].status != IBV_WC_SUCCESS) {
				s->err_cqes++;
				s->by_status[wc[i].status & 31]++;
				bad = 1;
			}
		}
		got += k;
		if (bad)
			break;
	}
	if (!got)
		s->stuck++;
	if (bad || !got || v->pi > 0x8000) {
		s->resets++;
		// Drain what is left, then recycle the QP.
		while (ibv_poll_cq(v->cq, 16, wc) > 0)
			;
		if (to_rts(v))
			return -1;
		while (ibv_poll_cq(v->cq, 16, wc) > 0)
			;
	}
	return 0;
}

static int post_wqes(const char *dev_name, long count)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct ibv_port_attr port;
	struct wqe_stats s;
	struct victim v[2];

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			ctx = ibv_open_device(list[i]);
	if (!ctx || ibv_query_port(ctx, 1, &port)) {
		fprintf(stderr, "hostile: cannot open %s port 1\n", dev_name);
		return 1;
	}
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	if (!pd || make_victim(ctx, pd, IBV_QPT_RC, port.lid, &v[0]) ||
	    make_victim(ctx, pd, IBV_QPT_UD, port.lid, &v[1])) {
		fprintf(stderr, "hostile: setting up the QPs failed: %s\n", strerror(errno));
		return 1;
	}
	memset(&s, 0, sizeof(s));
	while ((long)s.posted < count) {
		if (run_batch(&v[rnd() % 2], &s)) {
			fprintf(stderr, "hostile: a verbs call failed after %" PRIu64 " WQEs: %s\n",
				s.posted, strerror(errno));
			return 1;
		}
	}
	printf("hostile: mode=wqe posted=%" PRIu64 " cqes=%" PRIu64 " err_cqes=%" PRIu64
	       " resets=%" PRIu64 " no_answer=%" PRIu64 " rc_qpn=0x%x ud_qpn=0x%x",
	       s.posted, s.cqes, s.err_cqes, s.resets, s.stuck, v[0].qp->qp_num, v[1].qp->qp_num);
	for (int i = 0; i < 32; i++)
		if (s.by_status[i])
			printf(" status%d=%" PRIu64, i, s.by_status[i]);
	printf("\n");
	for (int i = 0; i < 2; i++) {
		ibv_destroy_qp(v[i].qp);
		ibv_destroy_cq(v[i].cq);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s bar0 RESOURCE0 SECONDS SEED | wqe DEVICE COUNT SEED\n", argv[0]);
		return 2;
	}
	rng_state = strtoull(argv[4], NULL, 0) | 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "bar0"))
		return spray_bar0(argv[2], atof(argv[3]));
	if (!strcmp(argv[1], "wqe"))
		return post_wqes(argv[2], atol(argv[3]));
	fprintf(stderr, "%s: unknown mode %s\n", argv[0], argv[1]);
	return 2;
}

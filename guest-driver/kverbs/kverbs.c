// SPDX-License-Identifier: GPL-2.0
/*
 * kverbs - exercises the kernel verbs post path of mlx5_ib.
 *
 * An IB client. On the first mlx5 device it waits for port 1 to become
 * ACTIVE, creates a PD, a send CQ and a receive CQ, a pair of RC QPs
 * connected to each other and a pair of UD QPs, all addressed through the
 * port's own LID (the HCA loops the packets back), and runs one case per
 * feature of ib_post_send() and ib_post_recv() as kernel ULPs use them:
 * every opcode on RC and UD, inline and gathered data, fences, signalled
 * and unsignalled WRs, chains, immediate data, fast registration and
 * invalidation, and the error returns of mlx5_ib_post_send() and
 * mlx5_ib_post_recv() (drivers/infiniband/hw/mlx5/wr.c). Every case checks
 * the data byte for byte and each work completion, or the exact errno and
 * bad_wr the driver returns.
 *
 * The results are KTAP, in the kernel log ("kverbs: " prefix) and in
 * /sys/kernel/debug/kverbs/results; /sys/kernel/debug/kverbs/status reads
 * "waiting" (no mlx5 device yet), "running", "done" or "aborted" (the
 * device went away before the end). Everything is released when the
 * device goes away or the module is removed.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <asm/unaligned.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#define KV_PORT			1
#define KV_BUF_SIZE		(32 * 1024)
#define KV_CQ_SIZE		256
#define KV_RC_SEND_WR		64
#define KV_RC_RECV_WR		64
#define KV_RC_SEND_SGE		16
#define KV_RC_RECV_SGE		8
#define KV_RC_INLINE		256
#define KV_UD_WR		16
#define KV_UD_SEND_SGE		4
#define KV_QKEY			0x11111111
#define KV_GRH_SIZE		40
#define KV_MAX_SGE		64
#define KV_FRMR_PAGES		2
#define KV_POLL_MS		5000
#define KV_IDLE_MS		50
#define KV_PORT_WAIT_MS		60000
#define KV_LOG_SIZE		(64 * 1024)
#define KV_LINE_SIZE		256

/* Fill bytes of the two buffers at the start of every case. */
#define KV_LFILL		0x11
#define KV_RFILL		0x22
#define KV_MFILL		0x33

/* The wc_flags the cases compare. */
#define KV_WC_FLAGS	(IB_WC_GRH | IB_WC_WITH_IMM | IB_WC_WITH_INVALIDATE)

struct kv_buf {
	u8 *va;
	u64 dma;
	size_t len;
};

struct kv_ctx {
	struct ib_device *dev;
	struct work_struct work;
	bool stopping;

	u32 lid;
	union ib_gid gid;

	struct ib_pd *pd;
	struct ib_cq *scq;		/* send completions of every QP */
	struct ib_cq *rcq;		/* receive completions of every QP */
	struct ib_qp *rc_a;		/* RC requester */
	struct ib_qp *rc_b;		/* RC responder */
	struct ib_qp *ud_a;		/* UD sender */
	struct ib_qp *ud_b;		/* UD receiver */
	struct ib_ah *ah;		/* our own LID */
	struct ib_ah *ah_grh;		/* our own LID, with a GRH to our GID */
	struct ib_qp_cap rc_cap;	/* as ib_create_qp() returned them */
	struct ib_qp_cap ud_cap;
	u32 rc_max_recv_sge;		/* ib_query_qp(): the RQs' real limits */
	u32 rc_max_recv_wr;

	struct kv_buf lbuf;		/* requester memory */
	struct kv_buf rbuf;		/* responder memory */
	u8 *want;			/* expected contents */

	struct ib_mr *mr;		/* fast-registration MR */
	struct page *mr_pages[KV_FRMR_PAGES];
	struct scatterlist mr_sg[KV_FRMR_PAGES];
	int mr_nents;			/* DMA-mapped entries, 0: not mapped */
	bool mr_valid;			/* registered and not invalidated */

	/* Scratch WR lists, big enough for a full SQ or RQ plus one. */
	struct ib_rdma_wr *wrs;
	struct ib_recv_wr *rwrs;
	struct ib_sge *rsges;
	struct ib_sge *sges;
	struct ib_wc *wcs;
	unsigned int nwrs;

	wait_queue_head_t cq_wait;
	atomic_t rcq_events;
	atomic_t scq_events;
	atomic_t async_events;
	int last_async_event;
	struct ib_qp *last_async_qp;
};

struct kv_want {
	struct ib_qp *qp;
	u64 wr_id;
	enum ib_wc_status status;
	enum ib_wc_opcode opcode;
	u32 byte_len;			/* 0: not checked */
	int flags;			/* wc_flags & KV_WC_FLAGS */
	u32 ex;				/* immediate (host order) or rkey */
	u32 src_qp;			/* UD: 0: not checked */
};

#define KV_WANT(...) (&(const struct kv_want){ __VA_ARGS__ })

/* A case fails at its first unmet expectation. */
#define KV_CHECK(cond, fmt, ...)					\
	do {								\
		if (!(cond)) {						\
			kv_diag("%s:%d: " fmt, __func__, __LINE__,	\
				##__VA_ARGS__);				\
			return -EIO;					\
		}							\
	} while (0)

#define KV_TRY(expr)							\
	do {								\
		int __err = (expr);					\
									\
		if (__err)						\
			return __err;					\
	} while (0)

static DEFINE_SPINLOCK(kv_log_lock);
static char *kv_log;
static size_t kv_log_len;
static const char *kv_status = "waiting";
static struct dentry *kv_dir;
static struct workqueue_struct *kv_wq;
static struct kv_ctx *kv_active;

static struct ib_client kv_client;

static __printf(1, 2) void kv_out(const char *fmt, ...)
{
	char line[KV_LINE_SIZE];
	unsigned long flags;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vscnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	pr_info("%s\n", line);
	line[n++] = '\n';
	spin_lock_irqsave(&kv_log_lock, flags);
	if (kv_log && kv_log_len + n <= KV_LOG_SIZE) {
		memcpy(kv_log + kv_log_len, line, n);
		kv_log_len += n;
	}
	spin_unlock_irqrestore(&kv_log_lock, flags);
}

#define kv_diag(fmt, ...) kv_out("# " fmt, ##__VA_ARGS__)

/* Buffers and data patterns */

static int kv_buf_alloc(struct kv_ctx *c, struct kv_buf *b, size_t len)
{
	b->va = kzalloc(len, GFP_KERNEL);
	if (!b->va)
		return -ENOMEM;
	b->dma = ib_dma_map_single(c->dev, b->va, len, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(c->dev, b->dma)) {
		kfree(b->va);
		b->va = NULL;
		return -ENOMEM;
	}
	b->len = len;
	return 0;
}

static void kv_buf_free(struct kv_ctx *c, struct kv_buf *b)
{
	if (!b->va)
		return;
	ib_dma_unmap_single(c->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
	kfree(b->va);
	b->va = NULL;
}

static void kv_to_dev(struct kv_ctx *c, struct kv_buf *b)
{
	ib_dma_sync_single_for_device(c->dev, b->dma, b->len,
				      DMA_BIDIRECTIONAL);
}

static void kv_to_cpu(struct kv_ctx *c, struct kv_buf *b)
{
	ib_dma_sync_single_for_cpu(c->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
}

static void kv_mr_to_dev(struct kv_ctx *c)
{
	int i;

	for (i = 0; i < c->mr_nents; i++)
		ib_dma_sync_single_for_device(c->dev,
					      sg_dma_address(&c->mr_sg[i]),
					      PAGE_SIZE, DMA_BIDIRECTIONAL);
}

static void kv_mr_to_cpu(struct kv_ctx *c)
{
	int i;

	for (i = 0; i < c->mr_nents; i++)
		ib_dma_sync_single_for_cpu(c->dev,
					   sg_dma_address(&c->mr_sg[i]),
					   PAGE_SIZE, DMA_BIDIRECTIONAL);
}

static u8 *kv_mr_page(struct kv_ctx *c, int i)
{
	return page_address(c->mr_pages[i]);
}

static void kv_mr_fill(struct kv_ctx *c)
{
	int i;

	for (i = 0; i < KV_FRMR_PAGES; i++)
		memset(kv_mr_page(c, i), KV_MFILL, PAGE_SIZE);
	kv_mr_to_dev(c);
}

static void kv_fill(u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = seed + i * 13 + (i >> 8);
}

static int kv_cmp(const char *what, const u8 *got, const u8 *want, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (got[i] != want[i]) {
			kv_diag("%s: byte %zu of %zu is 0x%02x, want 0x%02x",
				what, i, len, got[i], want[i]);
			return -EIO;
		}
	}
	return 0;
}

static int kv_untouched(const char *what, const u8 *got, u8 fill, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (got[i] != fill) {
			kv_diag("%s: byte %zu was written (0x%02x)", what, i,
				got[i]);
			return -EIO;
		}
	}
	return 0;
}

/* Every case starts from known buffer contents. */
static void kv_clear_bufs(struct kv_ctx *c)
{
	memset(c->lbuf.va, KV_LFILL, c->lbuf.len);
	memset(c->rbuf.va, KV_RFILL, c->rbuf.len);
	kv_to_dev(c, &c->lbuf);
	kv_to_dev(c, &c->rbuf);
}

static struct ib_sge kv_sge(struct kv_ctx *c, struct kv_buf *b, size_t off,
			    u32 len)
{
	return (struct ib_sge){
		.addr = b->dma + off,
		.length = len,
		.lkey = c->pd->local_dma_lkey,
	};
}

static u64 kv_raddr(struct kv_ctx *c, size_t off)
{
	return c->rbuf.dma + off;
}

/* Posting */

static int kv_post(struct ib_qp *qp, const struct ib_send_wr *wr)
{
	const struct ib_send_wr *bad = NULL;
	int ret;

	ret = ib_post_send(qp, wr, &bad);
	if (ret)
		kv_diag("ib_post_send(qp 0x%x, wr_id %llu): %d at wr_id %lld",
			qp->qp_num, wr->wr_id, ret,
			bad ? (long long)bad->wr_id : -1LL);
	return ret;
}

static int kv_post_recv(struct kv_ctx *c, struct ib_qp *qp, u64 wr_id,
			struct kv_buf *b, size_t off, u32 len)
{
	struct ib_sge sge;
	struct ib_recv_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = b ? 1 : 0,
	};
	const struct ib_recv_wr *bad = NULL;
	int ret;

	if (b)
		sge = kv_sge(c, b, off, len);
	ret = ib_post_recv(qp, &wr, &bad);
	if (ret)
		kv_diag("ib_post_recv(qp 0x%x, wr_id %llu): %d", qp->qp_num,
			wr_id, ret);
	return ret;
}

/* Completions */

static const char *kv_qp_name(struct kv_ctx *c, struct ib_qp *qp)
{
	if (qp == c->rc_a)
		return "rc_a";
	if (qp == c->rc_b)
		return "rc_b";
	if (qp == c->ud_a)
		return "ud_a";
	if (qp == c->ud_b)
		return "ud_b";
	return "?";
}

static void kv_show_wc(struct kv_ctx *c, const char *what,
		       const struct ib_wc *wc)
{
	kv_diag("%s: qp %s wr_id %llu status %d (%s) opcode %d byte_len %u flags 0x%x",
		what, kv_qp_name(c, wc->qp), wc->wr_id, wc->status,
		ib_wc_status_msg(wc->status), wc->opcode, wc->byte_len,
		wc->wc_flags);
}

/* Collects exactly n completions of cq, waiting KV_POLL_MS at most. */
static int kv_poll(struct kv_ctx *c, struct ib_cq *cq, struct ib_wc *wc,
		   int n, const char *what)
{
	unsigned long end = jiffies + msecs_to_jiffies(KV_POLL_MS);
	int got = 0;
	int ret;

	memset(wc, 0, n * sizeof(*wc));
	while (got < n) {
		ret = ib_poll_cq(cq, n - got, wc + got);
		if (ret < 0) {
			kv_diag("%s: ib_poll_cq: %d", what, ret);
			return ret;
		}
		got += ret;
		if (got == n)
			break;
		if (time_after(jiffies, end)) {
			kv_diag("%s: %d of %d completions after %d ms", what,
				got, n, KV_POLL_MS);
			return -ETIMEDOUT;
		}
		usleep_range(200, 1000);
	}
	return 0;
}

static int kv_check_wc(struct kv_ctx *c, const char *what,
		       const struct ib_wc *wc, const struct kv_want *w)
{
	u32 ex = 0;

	if (wc->qp != w->qp || wc->wr_id != w->wr_id ||
	    wc->status != w->status) {
		kv_show_wc(c, what, wc);
		kv_diag("%s: want qp %s wr_id %llu status %d (%s)", what,
			kv_qp_name(c, w->qp), w->wr_id, w->status,
			ib_wc_status_msg(w->status));
		return -EIO;
	}
	/* Only status, wr_id and qp are valid in an error completion. */
	if (w->status != IB_WC_SUCCESS)
		return 0;
	if (wc->opcode != w->opcode ||
	    (w->byte_len && wc->byte_len != w->byte_len) ||
	    (wc->wc_flags & KV_WC_FLAGS) != w->flags) {
		kv_show_wc(c, what, wc);
		kv_diag("%s: want opcode %d byte_len %u flags 0x%x", what,
			w->opcode, w->byte_len, w->flags);
		return -EIO;
	}
	if (w->flags & IB_WC_WITH_IMM)
		ex = be32_to_cpu(wc->ex.imm_data);
	else if (w->flags & IB_WC_WITH_INVALIDATE)
		ex = wc->ex.invalidate_rkey;
	if (ex != w->ex) {
		kv_diag("%s: %s 0x%x, want 0x%x", what,
			w->flags & IB_WC_WITH_IMM ? "imm_data" :
			"invalidate_rkey", ex, w->ex);
		return -EIO;
	}
	if (w->src_qp && (wc->src_qp != w->src_qp || wc->slid != c->lid ||
			  wc->sl != 0 || wc->pkey_index != 0)) {
		kv_diag("%s: src_qp 0x%x slid %u sl %u pkey_index %u, want src_qp 0x%x slid %u sl 0 pkey_index 0",
			what, wc->src_qp, wc->slid, wc->sl, wc->pkey_index,
			w->src_qp, c->lid);
		return -EIO;
	}
	return 0;
}

/* Polls one completion from cq and checks it. */
static int kv_expect(struct kv_ctx *c, struct ib_cq *cq, const char *what,
		     const struct kv_want *w)
{
	struct ib_wc wc;

	KV_TRY(kv_poll(c, cq, &wc, 1, what));
	return kv_check_wc(c, what, &wc, w);
}

/* No completion is left on either CQ a moment later. */
static int kv_idle(struct kv_ctx *c)
{
	struct ib_wc wc;
	int err = 0;

	msleep(KV_IDLE_MS);
	while (ib_poll_cq(c->scq, 1, &wc) > 0) {
		kv_show_wc(c, "unexpected send completion", &wc);
		err = -EIO;
	}
	while (ib_poll_cq(c->rcq, 1, &wc) > 0) {
		kv_show_wc(c, "unexpected receive completion", &wc);
		err = -EIO;
	}
	return err;
}

static void kv_comp(struct ib_cq *cq, void *ctx)
{
	struct kv_ctx *c = ctx;

	atomic_inc(cq == c->rcq ? &c->rcq_events : &c->scq_events);
	wake_up(&c->cq_wait);
}

static void kv_async_event(struct ib_event *ev, void *ctx, struct ib_qp *qp)
{
	struct kv_ctx *c = ctx;

	c->last_async_event = ev->event;
	c->last_async_qp = qp;
	/* Pairs with the smp_rmb() of kv_write_rejected(). */
	smp_wmb();
	atomic_inc(&c->async_events);
	wake_up(&c->cq_wait);
}

static void kv_cq_event(struct ib_event *ev, void *ctx)
{
	kv_async_event(ev, ctx, NULL);
}

static void kv_qp_event(struct ib_event *ev, void *ctx)
{
	kv_async_event(ev, ctx, ev->element.qp);
}

/* QP state */

static int kv_modify(struct ib_qp *qp, struct ib_qp_attr *attr, int mask,
		     const char *to)
{
	int ret = ib_modify_qp(qp, attr, mask);

	if (ret)
		kv_diag("ib_modify_qp(qp 0x%x, %s): %d", qp->qp_num, to, ret);
	return ret;
}

static int kv_reset(struct ib_qp *qp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_RESET };

	return kv_modify(qp, &attr, IB_QP_STATE, "RESET");
}

static int kv_rc_connect(struct kv_ctx *c, struct ib_qp *qp, u32 dest_qpn)
{
	u8 rd_atom = min_t(int, 4, c->dev->attrs.max_qp_rd_atom);
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = KV_PORT,
		.qp_access_flags = IB_ACCESS_REMOTE_WRITE |
				   IB_ACCESS_REMOTE_READ |
				   IB_ACCESS_REMOTE_ATOMIC,
	};

	KV_TRY(kv_modify(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
			 IB_QP_PORT | IB_QP_ACCESS_FLAGS, "INIT"));

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = dest_qpn;
	attr.rq_psn = 0x1000 + dest_qpn;
	attr.max_dest_rd_atomic = rd_atom;
	attr.min_rnr_timer = 1;
	attr.ah_attr.type = rdma_ah_find_type(c->dev, KV_PORT);
	rdma_ah_set_dlid(&attr.ah_attr, c->lid);
	rdma_ah_set_sl(&attr.ah_attr, 0);
	rdma_ah_set_port_num(&attr.ah_attr, KV_PORT);
	KV_TRY(kv_modify(qp, &attr, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			 IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			 IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER,
			 "RTR"));

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = 0x1000 + qp->qp_num;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = rd_atom;
	return kv_modify(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN |
			 IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			 IB_QP_MAX_QP_RD_ATOMIC, "RTS");
}

static int kv_ud_activate(struct ib_qp *qp)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = KV_PORT,
		.qkey = KV_QKEY,
	};

	KV_TRY(kv_modify(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
			 IB_QP_PORT | IB_QP_QKEY, "INIT"));
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	KV_TRY(kv_modify(qp, &attr, IB_QP_STATE, "RTR"));
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = qp->qp_num;
	return kv_modify(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN, "RTS");
}

static int kv_connect_all(struct kv_ctx *c)
{
	KV_TRY(kv_rc_connect(c, c->rc_a, c->rc_b->qp_num));
	KV_TRY(kv_rc_connect(c, c->rc_b, c->rc_a->qp_num));
	KV_TRY(kv_ud_activate(c->ud_a));
	return kv_ud_activate(c->ud_b);
}

/*
 * Back to a clean slate: every QP through RESET (mlx5_ib drops their
 * completions from the CQs and empties their queues) and connected again.
 */
static int kv_recover(struct kv_ctx *c)
{
	struct ib_wc wc;
	int drained = 0;

	KV_TRY(kv_reset(c->rc_a));
	KV_TRY(kv_reset(c->rc_b));
	KV_TRY(kv_reset(c->ud_a));
	KV_TRY(kv_reset(c->ud_b));
	while (ib_poll_cq(c->scq, 1, &wc) > 0 || ib_poll_cq(c->rcq, 1, &wc) > 0)
		drained++;
	if (drained)
		kv_diag("recovery: %d completions left after RESET", drained);
	return kv_connect_all(c);
}

/* Fast registration */

/* A REG_MR work request for c->mr under a fresh key. */
static int kv_reg_wr(struct kv_ctx *c, struct ib_reg_wr *reg, u64 wr_id,
		     int send_flags)
{
	int n;

	ib_update_fast_reg_key(c->mr, ib_inc_rkey(c->mr->rkey));
	n = ib_map_mr_sg(c->mr, c->mr_sg, c->mr_nents, NULL, PAGE_SIZE);
	KV_CHECK(n == c->mr_nents, "ib_map_mr_sg: %d of %d entries", n,
		 c->mr_nents);
	KV_CHECK(c->mr->length == KV_FRMR_PAGES * PAGE_SIZE &&
		 c->mr->iova == sg_dma_address(&c->mr_sg[0]),
		 "MR length %llu iova 0x%llx", c->mr->length, c->mr->iova);
	*reg = (struct ib_reg_wr){
		.wr = {
			.wr_id = wr_id,
			.opcode = IB_WR_REG_MR,
			.send_flags = send_flags,
		},
		.mr = c->mr,
		.key = c->mr->rkey,
		.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			  IB_ACCESS_REMOTE_READ,
	};
	return 0;
}

/* Registers c->mr through rc_b (signalled) and fills its pages. */
static int kv_register(struct kv_ctx *c, u64 wr_id)
{
	struct ib_reg_wr reg;

	kv_mr_fill(c);
	KV_TRY(kv_reg_wr(c, &reg, wr_id, IB_SEND_SIGNALED));
	KV_TRY(kv_post(c->rc_b, &reg.wr));
	KV_TRY(kv_expect(c, c->scq, "REG_MR",
			 KV_WANT(.qp = c->rc_b, .wr_id = wr_id,
				 .opcode = IB_WC_REG_MR)));
	c->mr_valid = true;
	return 0;
}

/*
 * An RDMA WRITE through an rkey that is no longer valid fails remotely: a
 * remote access error completes it on the requester, and the responder's
 * QP gets a Local Access Violation Work Queue Error (IB_EVENT_QP_ACCESS_ERR,
 * the affiliated asynchronous error of IBA 11.6.3).
 */
static int kv_write_rejected(struct kv_ctx *c, u32 rkey, u64 wr_id)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 64);
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = wr_id,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = c->mr->iova,
		.rkey = rkey,
	};
	int events = atomic_read(&c->async_events);
	int i;

	kv_fill(c->lbuf.va, 64, 0x5a);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post(c->rc_a, &wr.wr));
	KV_TRY(kv_expect(c, c->scq, "write through the invalidated rkey",
			 KV_WANT(.qp = c->rc_a, .wr_id = wr_id,
				 .status = IB_WC_REM_ACCESS_ERR)));
	kv_mr_to_cpu(c);
	for (i = 0; i < KV_FRMR_PAGES; i++)
		KV_TRY(kv_untouched("MR page after the rejected write",
				    kv_mr_page(c, i), KV_MFILL, PAGE_SIZE));
	wait_event_timeout(c->cq_wait, atomic_read(&c->async_events) != events,
			   msecs_to_jiffies(KV_POLL_MS));
	msleep(KV_IDLE_MS);
	events = atomic_read(&c->async_events) - events;
	/* The event's details were written before the count went up. */
	smp_rmb();
	KV_CHECK(events == 1 && c->last_async_qp == c->rc_b &&
		 c->last_async_event == IB_EVENT_QP_ACCESS_ERR,
		 "%d async events (last: %s on %s), want 1: %s on rc_b", events,
		 events ? ib_event_msg(c->last_async_event) : "none",
		 events ? kv_qp_name(c, c->last_async_qp) : "-",
		 ib_event_msg(IB_EVENT_QP_ACCESS_ERR));
	return 0;
}

/* Cases */

static int kv_case_port_active(struct kv_ctx *c)
{
	unsigned long end = jiffies + msecs_to_jiffies(KV_PORT_WAIT_MS);
	struct ib_port_attr pa;
	int ret;

	for (;;) {
		ret = ib_query_port(c->dev, KV_PORT, &pa);
		KV_CHECK(!ret, "ib_query_port: %d", ret);
		if (pa.state == IB_PORT_ACTIVE)
			break;
		KV_CHECK(!time_after(jiffies, end) && !READ_ONCE(c->stopping),
			 "port %d state %d, not ACTIVE after %d s", KV_PORT,
			 pa.state, KV_PORT_WAIT_MS / 1000);
		msleep(250);
	}
	KV_CHECK(pa.lid != 0, "port ACTIVE without a LID");
	c->lid = pa.lid;
	ret = rdma_query_gid(c->dev, KV_PORT, 0, &c->gid);
	KV_CHECK(!ret, "rdma_query_gid: %d", ret);
	kv_diag("port %d ACTIVE: lid %u sm_lid %u active_mtu %d gid %pI6",
		KV_PORT, pa.lid, pa.sm_lid, ib_mtu_enum_to_int(pa.active_mtu),
		c->gid.raw);
	return 0;
}

static struct ib_qp *kv_create_qp(struct kv_ctx *c, enum ib_qp_type type,
				  struct ib_qp_cap *cap)
{
	struct ib_qp_init_attr init = {
		.event_handler = kv_qp_event,
		.qp_context = c,
		.send_cq = c->scq,
		.recv_cq = c->rcq,
		.cap = *cap,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = type,
	};
	struct ib_qp *qp = ib_create_qp(c->pd, &init);

	if (IS_ERR(qp)) {
		kv_diag("ib_create_qp(type %d): %ld", type, PTR_ERR(qp));
		return NULL;
	}
	*cap = init.cap;
	return qp;
}

static struct ib_ah *kv_create_ah(struct kv_ctx *c, bool grh)
{
	struct rdma_ah_attr attr = {};
	struct ib_ah *ah;

	attr.type = rdma_ah_find_type(c->dev, KV_PORT);
	rdma_ah_set_dlid(&attr, c->lid);
	rdma_ah_set_sl(&attr, 0);
	rdma_ah_set_port_num(&attr, KV_PORT);
	if (grh)
		rdma_ah_set_grh(&attr, &c->gid, 0, 0, 64, 0);
	ah = rdma_create_ah(c->pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
	if (IS_ERR(ah)) {
		kv_diag("rdma_create_ah(grh %d): %ld", grh, PTR_ERR(ah));
		return NULL;
	}
	return ah;
}

static int kv_case_setup(struct kv_ctx *c)
{
	struct ib_cq_init_attr cq_attr = { .cqe = KV_CQ_SIZE };
	struct ib_qp_init_attr init;
	struct ib_qp_cap cap_b;
	struct ib_qp_attr qattr;
	struct ib_cq *cq;
	struct ib_pd *pd;
	int i, ret;

	/*
	 * Remote access to plain kernel memory through the PD's global rkey,
	 * as ULPs without memory registration do; the fast-registration
	 * cases use their own MR.
	 */
	pd = ib_alloc_pd(c->dev, IB_PD_UNSAFE_GLOBAL_RKEY);
	KV_CHECK(!IS_ERR(pd), "ib_alloc_pd: %ld", PTR_ERR(pd));
	c->pd = pd;
	cq = ib_create_cq(c->dev, kv_comp, kv_cq_event, c, &cq_attr);
	KV_CHECK(!IS_ERR(cq), "ib_create_cq: %ld", PTR_ERR(cq));
	c->scq = cq;
	cq = ib_create_cq(c->dev, kv_comp, kv_cq_event, c, &cq_attr);
	KV_CHECK(!IS_ERR(cq), "ib_create_cq: %ld", PTR_ERR(cq));
	c->rcq = cq;

	c->rc_cap = (struct ib_qp_cap){
		.max_send_wr = KV_RC_SEND_WR,
		.max_recv_wr = KV_RC_RECV_WR,
		.max_send_sge = KV_RC_SEND_SGE,
		.max_recv_sge = KV_RC_RECV_SGE,
		.max_inline_data = KV_RC_INLINE,
	};
	cap_b = c->rc_cap;
	c->rc_a = kv_create_qp(c, IB_QPT_RC, &c->rc_cap);
	c->rc_b = kv_create_qp(c, IB_QPT_RC, &cap_b);
	KV_CHECK(c->rc_a && c->rc_b, "RC QPs");
	KV_CHECK(!memcmp(&c->rc_cap, &cap_b, sizeof(cap_b)),
		 "the two RC QPs got different capabilities");
	KV_CHECK(c->rc_cap.max_send_sge >= KV_RC_SEND_SGE &&
		 c->rc_cap.max_inline_data >= KV_RC_INLINE &&
		 c->rc_cap.max_send_wr >= KV_RC_SEND_WR,
		 "RC caps below the request");
	/* The RQ's limits as the driver enforces them (rq.max_gs, wqe_cnt). */
	ret = ib_query_qp(c->rc_b, &qattr, IB_QP_CAP, &init);
	KV_CHECK(!ret, "ib_query_qp: %d", ret);
	c->rc_max_recv_sge = qattr.cap.max_recv_sge;
	c->rc_max_recv_wr = qattr.cap.max_recv_wr;
	KV_CHECK(c->rc_max_recv_sge >= KV_RC_RECV_SGE &&
		 c->rc_max_recv_sge <= 2 * KV_RC_RECV_SGE &&
		 c->rc_max_recv_wr >= KV_RC_RECV_WR,
		 "RQ max_recv_sge %u max_recv_wr %u", c->rc_max_recv_sge,
		 c->rc_max_recv_wr);
	KV_CHECK(c->rc_cap.max_send_sge < KV_MAX_SGE, "max_send_sge %u",
		 c->rc_cap.max_send_sge);
	kv_diag("rc: qpn 0x%x and 0x%x max_send_wr %u max_send_sge %u max_inline_data %u max_recv_wr %u max_recv_sge %u",
		c->rc_a->qp_num, c->rc_b->qp_num, c->rc_cap.max_send_wr,
		c->rc_cap.max_send_sge, c->rc_cap.max_inline_data,
		c->rc_max_recv_wr, c->rc_max_recv_sge);

	c->ud_cap = (struct ib_qp_cap){
		.max_send_wr = KV_UD_WR,
		.max_recv_wr = KV_UD_WR,
		.max_send_sge = KV_UD_SEND_SGE,
		.max_recv_sge = 1,
	};
	cap_b = c->ud_cap;
	c->ud_a = kv_create_qp(c, IB_QPT_UD, &c->ud_cap);
	c->ud_b = kv_create_qp(c, IB_QPT_UD, &cap_b);
	KV_CHECK(c->ud_a && c->ud_b, "UD QPs");
	KV_CHECK(c->ud_cap.max_send_sge + 1 < KV_MAX_SGE, "UD max_send_sge %u",
		 c->ud_cap.max_send_sge);
	kv_diag("ud: qpn 0x%x and 0x%x max_send_wr %u max_send_sge %u",
		c->ud_a->qp_num, c->ud_b->qp_num, c->ud_cap.max_send_wr,
		c->ud_cap.max_send_sge);
	c->ah = kv_create_ah(c, false);
	c->ah_grh = kv_create_ah(c, true);
	KV_CHECK(c->ah && c->ah_grh, "address handles");

	KV_CHECK(!kv_buf_alloc(c, &c->lbuf, KV_BUF_SIZE) &&
		 !kv_buf_alloc(c, &c->rbuf, KV_BUF_SIZE), "buffers");
	c->want = kzalloc(KV_BUF_SIZE, GFP_KERNEL);
	c->nwrs = max(c->rc_cap.max_send_wr, c->rc_max_recv_wr) + 1;
	c->wrs = kcalloc(c->nwrs, sizeof(*c->wrs), GFP_KERNEL);
	c->rwrs = kcalloc(c->nwrs, sizeof(*c->rwrs), GFP_KERNEL);
	c->rsges = kcalloc(c->nwrs, sizeof(*c->rsges), GFP_KERNEL);
	c->sges = kcalloc(KV_MAX_SGE, sizeof(*c->sges), GFP_KERNEL);
	c->wcs = kcalloc(c->nwrs, sizeof(*c->wcs), GFP_KERNEL);
	KV_CHECK(c->want && c->wrs && c->rwrs && c->rsges && c->sges &&
		 c->wcs, "scratch memory");

	/* Two separate pages, so the MR's translation is not the identity. */
	sg_init_table(c->mr_sg, KV_FRMR_PAGES);
	for (i = 0; i < KV_FRMR_PAGES; i++) {
		c->mr_pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		KV_CHECK(c->mr_pages[i], "MR pages");
		sg_set_page(&c->mr_sg[i], c->mr_pages[i], PAGE_SIZE, 0);
	}
	ret = ib_dma_map_sg(c->dev, c->mr_sg, KV_FRMR_PAGES,
			    DMA_BIDIRECTIONAL);
	KV_CHECK(ret == KV_FRMR_PAGES, "ib_dma_map_sg: %d", ret);
	c->mr_nents = ret;
	c->mr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, KV_FRMR_PAGES);
	if (IS_ERR(c->mr)) {
		ret = PTR_ERR(c->mr);
		c->mr = NULL;
		KV_CHECK(0, "ib_alloc_mr: %d", ret);
	}

	return kv_connect_all(c);
}

static int kv_case_rc_send(struct kv_ctx *c)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 1000);
	struct ib_send_wr wr = {
		.wr_id = 11,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &sge,
		.num_sge = 1,
	};

	kv_fill(c->lbuf.va, 1000, 1);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post_recv(c, c->rc_b, 10, &c->rbuf, 0, 1000));
	KV_TRY(kv_post(c->rc_a, &wr));
	KV_TRY(kv_expect(c, c->scq, "send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 11,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 10,
				 .opcode = IB_WC_RECV, .byte_len = 1000)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va, c->lbuf.va, 1000));
	KV_TRY(kv_untouched("past the message", c->rbuf.va + 1000, KV_RFILL,
			    64));
	return kv_idle(c);
}

static int kv_case_rc_send_imm(struct kv_ctx *c)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 100, 700);
	struct ib_send_wr wr = {
		.wr_id = 21,
		.opcode = IB_WR_SEND_WITH_IMM,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &sge,
		.num_sge = 1,
		.ex.imm_data = cpu_to_be32(0x1234abcd),
	};

	kv_fill(c->lbuf.va + 100, 700, 2);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post_recv(c, c->rc_b, 20, &c->rbuf, 64, 1024));
	KV_TRY(kv_post(c->rc_a, &wr));
	KV_TRY(kv_expect(c, c->scq, "send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 21,
				 .opcode = IB_WC_SEND,
				 .flags = IB_WC_WITH_IMM, .ex = 0)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 20,
				 .opcode = IB_WC_RECV, .byte_len = 700,
				 .flags = IB_WC_WITH_IMM, .ex = 0x1234abcd)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va + 64, c->lbuf.va + 100, 700));
	KV_TRY(kv_untouched("past the message", c->rbuf.va + 764, KV_RFILL,
			    64));
	return kv_idle(c);
}

static int kv_case_rc_rdma_write(struct kv_ctx *c)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 3000);
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = 31,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = kv_raddr(c, 101),
		.rkey = c->pd->unsafe_global_rkey,
	};

	kv_fill(c->lbuf.va, 3000, 3);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post(c->rc_a, &wr.wr));
	KV_TRY(kv_expect(c, c->scq, "write",
			 KV_WANT(.qp = c->rc_a, .wr_id = 31,
				 .opcode = IB_WC_RDMA_WRITE)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("written", c->rbuf.va + 101, c->lbuf.va, 3000));
	KV_TRY(kv_untouched("before the target", c->rbuf.va, KV_RFILL, 101));
	KV_TRY(kv_untouched("past the target", c->rbuf.va + 3101, KV_RFILL,
			    64));
	return kv_idle(c);
}

static int kv_case_rc_rdma_write_imm(struct kv_ctx *c)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 2000);
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = 41,
			.opcode = IB_WR_RDMA_WRITE_WITH_IMM,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge,
			.num_sge = 1,
			.ex.imm_data = cpu_to_be32(0xfeed0001),
		},
		.remote_addr = kv_raddr(c, 4096),
		.rkey = c->pd->unsafe_global_rkey,
	};

	kv_fill(c->lbuf.va, 2000, 4);
	kv_to_dev(c, &c->lbuf);
	/* The immediate consumes a receive WR; it needs no buffer. */
	KV_TRY(kv_post_recv(c, c->rc_b, 40, NULL, 0, 0));
	KV_TRY(kv_post(c->rc_a, &wr.wr));
	KV_TRY(kv_expect(c, c->scq, "write",
			 KV_WANT(.qp = c->rc_a, .wr_id = 41,
				 .opcode = IB_WC_RDMA_WRITE,
				 .flags = IB_WC_WITH_IMM, .ex = 0)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 40,
				 .opcode = IB_WC_RECV_RDMA_WITH_IMM,
				 .byte_len = 2000, .flags = IB_WC_WITH_IMM,
				 .ex = 0xfeed0001)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("written", c->rbuf.va + 4096, c->lbuf.va, 2000));
	KV_TRY(kv_untouched("past the target", c->rbuf.va + 6096, KV_RFILL,
			    64));
	return kv_idle(c);
}

static int kv_case_rc_rdma_read(struct kv_ctx *c)
{
	struct ib_sge sge[2] = {
		kv_sge(c, &c->lbuf, 0, 3000),
		kv_sge(c, &c->lbuf, 8192, 2000),
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = 51,
			.opcode = IB_WR_RDMA_READ,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = sge,
			.num_sge = 2,
		},
		.remote_addr = kv_raddr(c, 512),
		.rkey = c->pd->unsafe_global_rkey,
	};

	kv_fill(c->rbuf.va + 512, 5000, 5);
	kv_to_dev(c, &c->rbuf);
	KV_TRY(kv_post(c->rc_a, &wr.wr));
	KV_TRY(kv_expect(c, c->scq, "read",
			 KV_WANT(.qp = c->rc_a, .wr_id = 51,
				 .opcode = IB_WC_RDMA_READ,
				 .byte_len = 5000)));
	kv_to_cpu(c, &c->lbuf);
	KV_TRY(kv_cmp("read, first SGE", c->lbuf.va, c->rbuf.va + 512, 3000));
	KV_TRY(kv_cmp("read, second SGE", c->lbuf.va + 8192,
		      c->rbuf.va + 3512, 2000));
	KV_TRY(kv_untouched("between the SGEs", c->lbuf.va + 3000, KV_LFILL,
			    8192 - 3000));
	KV_TRY(kv_untouched("past the second SGE", c->lbuf.va + 10192,
			    KV_LFILL, 64));
	return kv_idle(c);
}

static int kv_case_rc_send_inline(struct kv_ctx *c)
{
	u32 len = c->rc_cap.max_inline_data;
	u32 l0 = 100, l1 = 1, l2 = len - l0 - l1;
	/* Inline data is copied by the CPU: the SGEs carry virtual addresses. */
	struct ib_sge sge[3] = {
		{ .addr = (uintptr_t)c->lbuf.va, .length = l0 },
		{ .addr = (uintptr_t)c->lbuf.va + 1000, .length = l1 },
		{ .addr = (uintptr_t)c->lbuf.va + 2000, .length = l2 },
	};
	struct ib_send_wr wr = {
		.wr_id = 61,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE,
		.sg_list = sge,
		.num_sge = 3,
	};

	kv_fill(c->want, len, 6);
	memcpy(c->lbuf.va, c->want, l0);
	memcpy(c->lbuf.va + 1000, c->want + l0, l1);
	memcpy(c->lbuf.va + 2000, c->want + l0 + l1, l2);
	KV_TRY(kv_post_recv(c, c->rc_b, 60, &c->rbuf, 0, 1024));
	KV_TRY(kv_post(c->rc_a, &wr));
	/* The data is in the WQE now: the source may change at once. */
	memset(c->lbuf.va, 0xee, 3000);
	KV_TRY(kv_expect(c, c->scq, "send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 61,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 60,
				 .opcode = IB_WC_RECV, .byte_len = len)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va, c->want, len));
	KV_TRY(kv_untouched("past the message", c->rbuf.va + len, KV_RFILL,
			    64));
	kv_diag("max_inline_data %u bytes in 3 SGEs", len);
	return kv_idle(c);
}

static int kv_case_rc_rdma_write_inline(struct kv_ctx *c)
{
	struct ib_sge sge = { .addr = (uintptr_t)c->lbuf.va, .length = 77 };
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = 71,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = kv_raddr(c, 300),
		.rkey = c->pd->unsafe_global_rkey,
	};

	kv_fill(c->want, 77, 7);
	memcpy(c->lbuf.va, c->want, 77);
	KV_TRY(kv_post(c->rc_a, &wr.wr));
	memset(c->lbuf.va, 0xee, 77);
	KV_TRY(kv_expect(c, c->scq, "write",
			 KV_WANT(.qp = c->rc_a, .wr_id = 71,
				 .opcode = IB_WC_RDMA_WRITE)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("written", c->rbuf.va + 300, c->want, 77));
	KV_TRY(kv_untouched("before the target", c->rbuf.va, KV_RFILL, 300));
	KV_TRY(kv_untouched("past the target", c->rbuf.va + 377, KV_RFILL,
			    64));
	return kv_idle(c);
}

static u32 kv_gather_len(int i)
{
	/* SGE 5 is empty: mlx5_ib leaves zero-length SGEs out of the WQE. */
	return i == 5 ? 0 : 1 + (i * 37) % 120;
}

static int kv_case_rc_send_gather(struct kv_ctx *c)
{
	int n = c->rc_cap.max_send_sge;
	struct ib_send_wr wr = {
		.wr_id = 81,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = c->sges,
		.num_sge = n,
	};
	u32 total = 0;
	int i;

	for (i = 0; i < n; i++) {
		/* Scattered, descending, unaligned pieces of lbuf. */
		size_t off = (n - i) * 512 + i;
		u32 len = kv_gather_len(i);

		kv_fill(c->lbuf.va + off, len, 8 + i);
		memcpy(c->want + total, c->lbuf.va + off, len);
		c->sges[i] = kv_sge(c, &c->lbuf, off, len);
		total += len;
	}
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post_recv(c, c->rc_b, 80, &c->rbuf, 0, 4096));
	KV_TRY(kv_post(c->rc_a, &wr));
	KV_TRY(kv_expect(c, c->scq, "send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 81,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 80,
				 .opcode = IB_WC_RECV, .byte_len = total)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va, c->want, total));
	KV_TRY(kv_untouched("past the message", c->rbuf.va + total, KV_RFILL,
			    64));
	kv_diag("%d SGEs (max_send_sge), %u bytes", n, total);
	return kv_idle(c);
}

static int kv_case_rc_recv_scatter(struct kv_ctx *c)
{
	int n = c->rc_max_recv_sge;
	struct ib_recv_wr rwr = {
		.wr_id = 90,
		.sg_list = c->sges,
		.num_sge = n,
	};
	const struct ib_recv_wr *bad = NULL;
	struct ib_sge sge;
	struct ib_send_wr wr = {
		.wr_id = 91,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &sge,
		.num_sge = 1,
	};
	u32 total = 0, len;
	int i, ret;

	for (i = 0; i < n; i++) {
		len = 50 + i * 30;
		c->sges[i] = kv_sge(c, &c->rbuf, (n - i) * 1024 + i, len);
		total += len;
	}
	kv_fill(c->lbuf.va, total, 9);
	kv_to_dev(c, &c->lbuf);
	sge = kv_sge(c, &c->lbuf, 0, total);
	ret = ib_post_recv(c->rc_b, &rwr, &bad);
	KV_CHECK(!ret, "ib_post_recv with %d SGEs: %d", n, ret);
	KV_TRY(kv_post(c->rc_a, &wr));
	KV_TRY(kv_expect(c, c->scq, "send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 91,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 90,
				 .opcode = IB_WC_RECV, .byte_len = total)));
	kv_to_cpu(c, &c->rbuf);
	total = 0;
	for (i = 0; i < n; i++) {
		u8 *seg = c->rbuf.va + (n - i) * 1024 + i;

		len = 50 + i * 30;
		KV_TRY(kv_cmp("scattered piece", seg, c->lbuf.va + total, len));
		KV_TRY(kv_untouched("past the piece", seg + len, KV_RFILL, 16));
		total += len;
	}
	kv_diag("%d SGEs (the RQ's max_gs), %u bytes", n, total);
	return kv_idle(c);
}

static int kv_case_rc_unsignaled(struct kv_ctx *c)
{
	struct ib_sge sge[5];
	struct ib_rdma_wr wr;
	int i;

	kv_fill(c->lbuf.va, 5 * 256, 10);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post_recv(c, c->rc_b, 100, &c->rbuf, 8192, 256));
	/* Four unsignalled writes, each in its own post call, then a send. */
	for (i = 0; i < 5; i++) {
		sge[i] = kv_sge(c, &c->lbuf, i * 256, 256);
		wr = (struct ib_rdma_wr){
			.wr = {
				.wr_id = 101 + i,
				.opcode = i < 4 ? IB_WR_RDMA_WRITE : IB_WR_SEND,
				.send_flags = i < 4 ? 0 : IB_SEND_SIGNALED,
				.sg_list = &sge[i],
				.num_sge = 1,
			},
			.remote_addr = kv_raddr(c, i * 512),
			.rkey = c->pd->unsafe_global_rkey,
		};
		KV_TRY(kv_post(c->rc_a, &wr.wr));
	}
	KV_TRY(kv_expect(c, c->scq, "the one signalled send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 105,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 100,
				 .opcode = IB_WC_RECV, .byte_len = 256)));
	kv_to_cpu(c, &c->rbuf);
	for (i = 0; i < 4; i++) {
		KV_TRY(kv_cmp("unsignalled write", c->rbuf.va + i * 512,
			      c->lbuf.va + i * 256, 256));
		KV_TRY(kv_untouched("past the write", c->rbuf.va + i * 512 + 256,
				    KV_RFILL, 256));
	}
	KV_TRY(kv_cmp("send", c->rbuf.va + 8192, c->lbuf.va + 1024, 256));
	return kv_idle(c);
}

static int kv_case_rc_chain(struct kv_ctx *c)
{
	static const struct {
		enum ib_wr_opcode op;
		u32 loff, len, roff;
		enum ib_wc_opcode wc;
		int flags;
	} ops[] = {
		{ IB_WR_RDMA_WRITE, 0, 1500, 0, IB_WC_RDMA_WRITE, 0 },
		{ IB_WR_SEND, 2000, 600, 0, IB_WC_SEND, 0 },
		{ IB_WR_RDMA_WRITE_WITH_IMM, 3000, 700, 4096, IB_WC_RDMA_WRITE,
		  IB_WC_WITH_IMM },
		{ IB_WR_RDMA_READ, 8192, 900, 8192, IB_WC_RDMA_READ, 0 },
		{ IB_WR_SEND_WITH_IMM, 4000, 100, 0, IB_WC_SEND,
		  IB_WC_WITH_IMM },
	};
	struct ib_sge sge[ARRAY_SIZE(ops)];
	struct ib_rdma_wr *w = c->wrs;
	int i;

	for (i = 0; i < ARRAY_SIZE(ops); i++) {
		if (ops[i].op == IB_WR_RDMA_READ)
			kv_fill(c->rbuf.va + ops[i].roff, ops[i].len, 20 + i);
		else
			kv_fill(c->lbuf.va + ops[i].loff, ops[i].len, 20 + i);
		sge[i] = kv_sge(c, &c->lbuf, ops[i].loff, ops[i].len);
		w[i] = (struct ib_rdma_wr){
			.wr = {
				.next = i + 1 < ARRAY_SIZE(ops) ?
					&w[i + 1].wr : NULL,
				.wr_id = 110 + i,
				.opcode = ops[i].op,
				.send_flags = IB_SEND_SIGNALED,
				.sg_list = &sge[i],
				.num_sge = 1,
				.ex.imm_data = cpu_to_be32(0xc0de0000 + i),
			},
			.remote_addr = kv_raddr(c, ops[i].roff),
			.rkey = c->pd->unsafe_global_rkey,
		};
	}
	kv_to_dev(c, &c->lbuf);
	kv_to_dev(c, &c->rbuf);
	KV_TRY(kv_post_recv(c, c->rc_b, 120, &c->rbuf, 12288, 1024));
	KV_TRY(kv_post_recv(c, c->rc_b, 121, NULL, 0, 0));
	KV_TRY(kv_post_recv(c, c->rc_b, 122, &c->rbuf, 16384, 1024));
	KV_TRY(kv_post(c->rc_a, &w[0].wr));
	for (i = 0; i < ARRAY_SIZE(ops); i++)
		KV_TRY(kv_expect(c, c->scq, "chained WR",
				 KV_WANT(.qp = c->rc_a, .wr_id = 110 + i,
					 .opcode = ops[i].wc,
					 .byte_len = ops[i].wc == IB_WC_RDMA_READ ?
						     ops[i].len : 0,
					 .flags = ops[i].flags)));
	KV_TRY(kv_expect(c, c->rcq, "recv of the send",
			 KV_WANT(.qp = c->rc_b, .wr_id = 120,
				 .opcode = IB_WC_RECV, .byte_len = 600)));
	KV_TRY(kv_expect(c, c->rcq, "recv of the write's immediate",
			 KV_WANT(.qp = c->rc_b, .wr_id = 121,
				 .opcode = IB_WC_RECV_RDMA_WITH_IMM,
				 .byte_len = 700, .flags = IB_WC_WITH_IMM,
				 .ex = 0xc0de0002)));
	KV_TRY(kv_expect(c, c->rcq, "recv of the send with immediate",
			 KV_WANT(.qp = c->rc_b, .wr_id = 122,
				 .opcode = IB_WC_RECV, .byte_len = 100,
				 .flags = IB_WC_WITH_IMM, .ex = 0xc0de0004)));
	kv_to_cpu(c, &c->lbuf);
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("write", c->rbuf.va, c->lbuf.va, 1500));
	KV_TRY(kv_cmp("send", c->rbuf.va + 12288, c->lbuf.va + 2000, 600));
	KV_TRY(kv_cmp("write with immediate", c->rbuf.va + 4096,
		      c->lbuf.va + 3000, 700));
	KV_TRY(kv_cmp("read", c->lbuf.va + 8192, c->rbuf.va + 8192, 900));
	KV_TRY(kv_cmp("send with immediate", c->rbuf.va + 16384,
		      c->lbuf.va + 4000, 100));
	return kv_idle(c);
}

static int kv_case_rc_fence(struct kv_ctx *c)
{
	struct ib_sge rsge = kv_sge(c, &c->lbuf, 0, 2048);
	struct ib_sge ssge = kv_sge(c, &c->lbuf, 0, 2048);
	struct ib_send_wr send = {
		.wr_id = 131,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED | IB_SEND_FENCE,
		.sg_list = &ssge,
		.num_sge = 1,
	};
	struct ib_rdma_wr read = {
		.wr = {
			.next = &send,
			.wr_id = 130,
			.opcode = IB_WR_RDMA_READ,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &rsge,
			.num_sge = 1,
		},
		.remote_addr = kv_raddr(c, 0),
		.rkey = c->pd->unsafe_global_rkey,
	};

	/*
	 * The send's source is the read's destination: only a fence makes
	 * it carry the data read rather than what was there before.
	 */
	kv_fill(c->rbuf.va, 2048, 30);
	kv_fill(c->lbuf.va, 2048, 31);
	kv_to_dev(c, &c->lbuf);
	kv_to_dev(c, &c->rbuf);
	KV_TRY(kv_post_recv(c, c->rc_b, 132, &c->rbuf, 4096, 2048));
	KV_TRY(kv_post(c->rc_a, &read.wr));
	KV_TRY(kv_expect(c, c->scq, "read",
			 KV_WANT(.qp = c->rc_a, .wr_id = 130,
				 .opcode = IB_WC_RDMA_READ,
				 .byte_len = 2048)));
	KV_TRY(kv_expect(c, c->scq, "fenced send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 131,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 132,
				 .opcode = IB_WC_RECV, .byte_len = 2048)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("fenced send carries the data read", c->rbuf.va + 4096,
		      c->rbuf.va, 2048));
	return kv_idle(c);
}

static int kv_case_rc_solicited(struct kv_ctx *c)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 128);
	struct ib_send_wr wr = {
		.wr_id = 141,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &sge,
		.num_sge = 1,
	};
	int before = atomic_read(&c->rcq_events);
	int ret;

	kv_fill(c->lbuf.va, 128, 40);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post_recv(c, c->rc_b, 140, &c->rbuf, 0, 128));
	KV_TRY(kv_post_recv(c, c->rc_b, 142, &c->rbuf, 1024, 128));
	ret = ib_req_notify_cq(c->rcq, IB_CQ_SOLICITED);
	KV_CHECK(ret == 0, "ib_req_notify_cq(IB_CQ_SOLICITED): %d", ret);

	/* A message without the solicited bit raises no event. */
	KV_TRY(kv_post(c->rc_a, &wr));
	KV_TRY(kv_expect(c, c->scq, "send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 141,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 140,
				 .opcode = IB_WC_RECV, .byte_len = 128)));
	msleep(KV_IDLE_MS);
	KV_CHECK(atomic_read(&c->rcq_events) == before,
		 "completion event for an unsolicited message");

	wr.wr_id = 143;
	wr.send_flags |= IB_SEND_SOLICITED;
	KV_TRY(kv_post(c->rc_a, &wr));
	KV_TRY(kv_expect(c, c->scq, "solicited send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 143,
				 .opcode = IB_WC_SEND)));
	wait_event_timeout(c->cq_wait, atomic_read(&c->rcq_events) != before,
			   msecs_to_jiffies(KV_POLL_MS));
	KV_CHECK(atomic_read(&c->rcq_events) == before + 1,
		 "%d completion events for the solicited message, want 1",
		 atomic_read(&c->rcq_events) - before);
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 142,
				 .opcode = IB_WC_RECV, .byte_len = 128)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va + 1024, c->lbuf.va, 128));
	return kv_idle(c);
}

/* What the owner of an MR sends its peer, as ULPs advertise buffers. */
struct kv_adv {
	__be64 iova;
	__be32 rkey;
	__be32 len;
};

static int kv_case_rc_reg_mr(struct kv_ctx *c)
{
	struct kv_adv *adv = (struct kv_adv *)(c->rbuf.va + 16384);
	struct kv_adv *got = (struct kv_adv *)(c->lbuf.va + 16384);
	struct ib_sge adv_sge = kv_sge(c, &c->rbuf, 16384, sizeof(*adv));
	struct ib_send_wr send = {
		.wr_id = 151,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &adv_sge,
		.num_sge = 1,
	};
	struct ib_sge sge;
	struct ib_rdma_wr wr;
	struct ib_reg_wr reg;
	const size_t woff = PAGE_SIZE - 96;	/* crosses into page 2 */
	u8 *p0 = kv_mr_page(c, 0), *p1 = kv_mr_page(c, 1);

	kv_mr_fill(c);
	kv_fill(p0, 200, 50);
	kv_mr_to_dev(c);

	/* rc_b registers (unsignalled) and advertises the MR in one post. */
	KV_TRY(kv_reg_wr(c, &reg, 150, 0));
	reg.wr.next = &send;
	adv->iova = cpu_to_be64(c->mr->iova);
	adv->rkey = cpu_to_be32(c->mr->rkey);
	adv->len = cpu_to_be32(c->mr->length);
	kv_to_dev(c, &c->rbuf);
	KV_TRY(kv_post_recv(c, c->rc_a, 152, &c->lbuf, 16384, 64));
	KV_TRY(kv_post(c->rc_b, &reg.wr));
	KV_TRY(kv_expect(c, c->scq, "advertisement (REG_MR unsignalled)",
			 KV_WANT(.qp = c->rc_b, .wr_id = 151,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "advertisement received",
			 KV_WANT(.qp = c->rc_a, .wr_id = 152,
				 .opcode = IB_WC_RECV,
				 .byte_len = sizeof(*adv))));
	c->mr_valid = true;
	kv_to_cpu(c, &c->lbuf);
	KV_TRY(kv_cmp("advertisement", (u8 *)got, (u8 *)adv, sizeof(*adv)));

	/* rc_a writes across the page boundary through the new rkey... */
	kv_fill(c->lbuf.va, 300, 51);
	kv_to_dev(c, &c->lbuf);
	sge = kv_sge(c, &c->lbuf, 0, 300);
	wr = (struct ib_rdma_wr){
		.wr = {
			.wr_id = 153,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = be64_to_cpu(got->iova) + woff,
		.rkey = be32_to_cpu(got->rkey),
	};
	KV_TRY(kv_post(c->rc_a, &wr.wr));
	KV_TRY(kv_expect(c, c->scq, "write through the MR",
			 KV_WANT(.qp = c->rc_a, .wr_id = 153,
				 .opcode = IB_WC_RDMA_WRITE)));
	kv_mr_to_cpu(c);
	KV_TRY(kv_cmp("written, page 1", p0 + woff, c->lbuf.va, 96));
	KV_TRY(kv_cmp("written, page 2", p1, c->lbuf.va + 96, 204));
	KV_TRY(kv_untouched("page 1 before the write", p0 + 200, KV_MFILL,
			    woff - 200));
	KV_TRY(kv_untouched("page 2 past the write", p1 + 204, KV_MFILL,
			    PAGE_SIZE - 204));

	/* ...and reads back from it. */
	sge = kv_sge(c, &c->lbuf, 4096, 200);
	wr.wr.wr_id = 154;
	wr.wr.opcode = IB_WR_RDMA_READ;
	wr.remote_addr = be64_to_cpu(got->iova);
	KV_TRY(kv_post(c->rc_a, &wr.wr));
	KV_TRY(kv_expect(c, c->scq, "read through the MR",
			 KV_WANT(.qp = c->rc_a, .wr_id = 154,
				 .opcode = IB_WC_RDMA_READ,
				 .byte_len = 200)));
	kv_to_cpu(c, &c->lbuf);
	KV_TRY(kv_cmp("read", c->lbuf.va + 4096, p0, 200));
	kv_diag("MR rkey 0x%x iova 0x%llx length %llu over %d pages",
		c->mr->rkey, c->mr->iova, c->mr->length, c->mr_nents);
	return kv_idle(c);
}

static int kv_case_rc_local_inv(struct kv_ctx *c)
{
	struct ib_send_wr inv = {
		.wr_id = 161,
		.opcode = IB_WR_LOCAL_INV,
		.send_flags = IB_SEND_SIGNALED,
		.ex.invalidate_rkey = 0,
	};

	if (!c->mr_valid)
		KV_TRY(kv_register(c, 160));
	kv_mr_fill(c);
	inv.ex.invalidate_rkey = c->mr->rkey;
	KV_TRY(kv_post(c->rc_b, &inv));
	KV_TRY(kv_expect(c, c->scq, "LOCAL_INV",
			 KV_WANT(.qp = c->rc_b, .wr_id = 161,
				 .opcode = IB_WC_LOCAL_INV)));
	c->mr_valid = false;
	KV_TRY(kv_write_rejected(c, c->mr->rkey, 162));
	return 0;
}

static int kv_case_rc_send_with_inv(struct kv_ctx *c)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 200);
	struct ib_send_wr wr = {
		.wr_id = 172,
		.opcode = IB_WR_SEND_WITH_INV,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &sge,
		.num_sge = 1,
	};
	u32 rkey;

	KV_TRY(kv_register(c, 170));
	rkey = c->mr->rkey;
	wr.ex.invalidate_rkey = rkey;
	kv_fill(c->lbuf.va, 200, 60);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post_recv(c, c->rc_b, 171, &c->rbuf, 0, 256));
	KV_TRY(kv_post(c->rc_a, &wr));
	KV_TRY(kv_expect(c, c->scq, "send with invalidate",
			 KV_WANT(.qp = c->rc_a, .wr_id = 172,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 171,
				 .opcode = IB_WC_RECV, .byte_len = 200,
				 .flags = IB_WC_WITH_INVALIDATE, .ex = rkey)));
	c->mr_valid = false;
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va, c->lbuf.va, 200));
	KV_TRY(kv_write_rejected(c, rkey, 173));
	return 0;
}

static int kv_ud_send(struct kv_ctx *c, bool grh)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 512);
	struct ib_ud_wr wr = {
		.wr = {
			.wr_id = grh ? 191 : 181,
			.opcode = grh ? IB_WR_SEND_WITH_IMM : IB_WR_SEND,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge,
			.num_sge = 1,
			.ex.imm_data = cpu_to_be32(0xabad1dea),
		},
		.ah = grh ? c->ah_grh : c->ah,
		.remote_qpn = c->ud_b->qp_num,
		.remote_qkey = KV_QKEY,
	};
	u8 *h = c->rbuf.va;

	kv_fill(c->lbuf.va, 512, grh ? 71 : 70);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post_recv(c, c->ud_b, wr.wr.wr_id - 1, &c->rbuf, 0,
			    KV_GRH_SIZE + 1024));
	KV_TRY(kv_post(c->ud_a, &wr.wr));
	KV_TRY(kv_expect(c, c->scq, "send",
			 KV_WANT(.qp = c->ud_a, .wr_id = wr.wr.wr_id,
				 .opcode = IB_WC_SEND,
				 .flags = grh ? IB_WC_WITH_IMM : 0)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->ud_b, .wr_id = wr.wr.wr_id - 1,
				 .opcode = IB_WC_RECV,
				 .byte_len = KV_GRH_SIZE + 512,
				 .flags = grh ? IB_WC_GRH | IB_WC_WITH_IMM : 0,
				 .ex = grh ? 0xabad1dea : 0,
				 .src_qp = c->ud_a->qp_num)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va + KV_GRH_SIZE, c->lbuf.va, 512));
	KV_TRY(kv_untouched("past the message",
			    c->rbuf.va + KV_GRH_SIZE + 512, KV_RFILL, 64));
	if (grh) {
		/* IPVer 6, payload BTH + DETH + ImmDt + 512 + ICRC, NxtHdr IBA. */
		KV_CHECK(h[0] >> 4 == 6, "GRH IPVer %d", h[0] >> 4);
		KV_CHECK(get_unaligned_be16(h + 4) == 12 + 8 + 4 + 512 + 4,
			 "GRH PayLen %u", get_unaligned_be16(h + 4));
		KV_CHECK(h[6] == 0x1b, "GRH NxtHdr 0x%x", h[6]);
		KV_TRY(kv_cmp("GRH SGID", h + 8, c->gid.raw, 16));
		KV_TRY(kv_cmp("GRH DGID", h + 24, c->gid.raw, 16));
	}
	return kv_idle(c);
}

static int kv_case_ud_send(struct kv_ctx *c)
{
	return kv_ud_send(c, false);
}

static int kv_case_ud_send_imm_grh(struct kv_ctx *c)
{
	return kv_ud_send(c, true);
}

/*
 * mlx5_ib has no kernel atomics: handle_qpt_rc() refuses them with
 * -EOPNOTSUPP after the WQE was begun. Posted alone, as a failure after
 * the first WR would ring the doorbell with that unfinished WQE's control
 * segment.
 */
static int kv_atomic_rejected(struct kv_ctx *c, enum ib_wr_opcode op)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 8);
	struct ib_atomic_wr wr = {
		.wr = {
			.wr_id = 200 + op,
			.opcode = op,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = kv_raddr(c, 64),
		.compare_add = 0x2222222222222222ULL,
		.swap = 0x0123456789abcdefULL,
		.rkey = c->pd->unsafe_global_rkey,
	};
	const struct ib_send_wr *bad = NULL;
	int ret;

	ret = ib_post_send(c->rc_a, &wr.wr, &bad);
	KV_CHECK(ret == -EOPNOTSUPP && bad == &wr.wr,
		 "ib_post_send: %d, bad_wr %s; want -EOPNOTSUPP (%d) at the atomic",
		 ret, bad == &wr.wr ? "the atomic" : bad ? "another WR" : "unset",
		 -EOPNOTSUPP);
	KV_TRY(kv_idle(c));
	kv_to_cpu(c, &c->rbuf);
	kv_to_cpu(c, &c->lbuf);
	KV_TRY(kv_untouched("atomic target", c->rbuf.va + 64, KV_RFILL, 8));
	KV_TRY(kv_untouched("atomic result buffer", c->lbuf.va, KV_LFILL, 8));
	return 0;
}

static int kv_case_err_atomic_cmp_swp(struct kv_ctx *c)
{
	return kv_atomic_rejected(c, IB_WR_ATOMIC_CMP_AND_SWP);
}

static int kv_case_err_atomic_fetch_add(struct kv_ctx *c)
{
	return kv_atomic_rejected(c, IB_WR_ATOMIC_FETCH_AND_ADD);
}

/* set_data_inl_seg(): more than max_inline_data is -ENOMEM. */
static int kv_case_err_inline_too_long(struct kv_ctx *c)
{
	struct ib_sge sge = {
		.addr = (uintptr_t)c->lbuf.va,
		.length = c->rc_cap.max_inline_data + 1,
	};
	struct ib_send_wr wr = {
		.wr_id = 210,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE,
		.sg_list = &sge,
		.num_sge = 1,
	};
	const struct ib_send_wr *bad = NULL;
	int ret;

	KV_TRY(kv_post_recv(c, c->rc_b, 211, &c->rbuf, 0, 1024));
	ret = ib_post_send(c->rc_a, &wr, &bad);
	KV_CHECK(ret == -ENOMEM && bad == &wr,
		 "%u bytes inline: %d, bad_wr %s; want -ENOMEM (%d)",
		 sge.length, ret, bad == &wr ? "set" : "wrong", -ENOMEM);
	return kv_idle(c);
}

/*
 * A chain of three sends whose middle one mlx5_ib_post_send() refuses
 * before building its WQE: the first goes out, the third does not.
 */
static int kv_chain_refused(struct kv_ctx *c, struct ib_send_wr *bad_one,
			    int want_err, const char *why)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 100);
	struct ib_send_wr first = {
		.next = bad_one,
		.wr_id = 221,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &sge,
		.num_sge = 1,
	};
	struct ib_send_wr third = first;
	const struct ib_send_wr *bad = NULL;
	int ret, i;

	third.next = NULL;
	third.wr_id = 223;
	bad_one->next = &third;
	bad_one->wr_id = 222;
	kv_fill(c->lbuf.va, 100, 80);
	kv_to_dev(c, &c->lbuf);
	for (i = 0; i < 3; i++)
		KV_TRY(kv_post_recv(c, c->rc_b, 224 + i, &c->rbuf, i * 1024,
				    1024));
	ret = ib_post_send(c->rc_a, &first, &bad);
	KV_CHECK(ret == want_err && bad == bad_one,
		 "%s: %d, bad_wr %s; want %d at the second WR", why, ret,
		 bad == bad_one ? "the second WR" : bad ? "another WR" : "unset",
		 want_err);
	KV_TRY(kv_expect(c, c->scq, "the WR before",
			 KV_WANT(.qp = c->rc_a, .wr_id = 221,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->rc_b, .wr_id = 224,
				 .opcode = IB_WC_RECV, .byte_len = 100)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va, c->lbuf.va, 100));
	return kv_idle(c);
}

static int kv_case_err_send_too_many_sge(struct kv_ctx *c)
{
	int n = c->rc_cap.max_send_sge + 1, i;
	struct ib_send_wr wr = {
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = c->sges,
		.num_sge = n,
	};

	for (i = 0; i < n; i++)
		c->sges[i] = kv_sge(c, &c->lbuf, 4096 + i * 8, 8);
	return kv_chain_refused(c, &wr, -EINVAL, "num_sge max_send_sge + 1");
}

static int kv_case_err_send_bad_opcode(struct kv_ctx *c)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 100);
	/* The first value past mlx5_ib's opcode table (MLX5_IB_WR_UMR). */
	struct ib_send_wr wr = {
		.opcode = IB_WR_RESERVED2,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &sge,
		.num_sge = 1,
	};

	return kv_chain_refused(c, &wr, -EINVAL, "opcode IB_WR_RESERVED2");
}

static int kv_case_err_ud_too_many_sge(struct kv_ctx *c)
{
	struct ib_sge sge = kv_sge(c, &c->lbuf, 0, 64);
	struct ib_ud_wr bad_one = {
		.wr = {
			.wr_id = 232,
			.opcode = IB_WR_SEND,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = c->sges,
			.num_sge = c->ud_cap.max_send_sge + 1,
		},
		.ah = c->ah,
		.remote_qpn = c->ud_b->qp_num,
		.remote_qkey = KV_QKEY,
	};
	struct ib_ud_wr first = bad_one;
	const struct ib_send_wr *bad = NULL;
	int ret, i;

	first.wr.next = &bad_one.wr;
	first.wr.wr_id = 231;
	first.wr.sg_list = &sge;
	first.wr.num_sge = 1;
	for (i = 0; i < bad_one.wr.num_sge; i++)
		c->sges[i] = kv_sge(c, &c->lbuf, 4096 + i * 8, 8);
	kv_fill(c->lbuf.va, 64, 90);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post_recv(c, c->ud_b, 230, &c->rbuf, 0, 1024));
	ret = ib_post_send(c->ud_a, &first.wr, &bad);
	KV_CHECK(ret == -EINVAL && bad == &bad_one.wr,
		 "UD num_sge %d: %d, bad_wr %s; want -EINVAL (%d) at the second WR",
		 bad_one.wr.num_sge, ret,
		 bad == &bad_one.wr ? "the second WR" : bad ? "another WR" :
		 "unset", -EINVAL);
	KV_TRY(kv_expect(c, c->scq, "the WR before",
			 KV_WANT(.qp = c->ud_a, .wr_id = 231,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv",
			 KV_WANT(.qp = c->ud_b, .wr_id = 230,
				 .opcode = IB_WC_RECV,
				 .byte_len = KV_GRH_SIZE + 64,
				 .src_qp = c->ud_a->qp_num)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va + KV_GRH_SIZE, c->lbuf.va, 64));
	return kv_idle(c);
}

/*
 * mlx5r_wq_overflow(): an empty SQ takes max_send_wr WRs; the next one in
 * the same chain gets -ENOMEM and is bad_wr, the ones before it go out.
 */
static int kv_case_err_sq_full(struct kv_ctx *c)
{
	u32 n = c->rc_cap.max_send_wr, i;
	const struct ib_send_wr *bad = NULL;
	struct ib_rdma_wr *w = c->wrs;
	int ret;

	kv_fill(c->lbuf.va, (n + 1) * 8, 100);
	kv_to_dev(c, &c->lbuf);
	for (i = 0; i <= n; i++) {
		c->rsges[i] = kv_sge(c, &c->lbuf, i * 8, 8);
		w[i] = (struct ib_rdma_wr){
			.wr = {
				.next = i < n ? &w[i + 1].wr : NULL,
				.wr_id = 1000 + i,
				.opcode = IB_WR_RDMA_WRITE,
				.send_flags = IB_SEND_SIGNALED,
				.sg_list = &c->rsges[i],
				.num_sge = 1,
			},
			.remote_addr = kv_raddr(c, i * 8),
			.rkey = c->pd->unsafe_global_rkey,
		};
	}
	ret = ib_post_send(c->rc_a, &w[0].wr, &bad);
	KV_CHECK(ret == -ENOMEM && bad == &w[n].wr,
		 "%u WRs on an empty SQ of %u: %d, bad_wr wr_id %lld; want -ENOMEM (%d) at wr_id %u",
		 n + 1, n, ret, bad ? (long long)bad->wr_id : -1LL, -ENOMEM,
		 1000 + n);
	KV_TRY(kv_poll(c, c->scq, c->wcs, n, "the WRs that fit"));
	for (i = 0; i < n; i++)
		KV_TRY(kv_check_wc(c, "write", &c->wcs[i],
				   KV_WANT(.qp = c->rc_a, .wr_id = 1000 + i,
					   .opcode = IB_WC_RDMA_WRITE)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("written", c->rbuf.va, c->lbuf.va, n * 8));
	KV_TRY(kv_untouched("the refused WR's target", c->rbuf.va + n * 8,
			    KV_RFILL, 8));
	kv_diag("max_send_wr %u: WR %u refused", n, n);
	return kv_idle(c);
}

/* mlx5_ib_post_recv(): num_sge above the RQ's max_gs is -EINVAL. */
static int kv_case_err_recv_too_many_sge(struct kv_ctx *c)
{
	struct ib_sge sge = kv_sge(c, &c->rbuf, 0, 256);
	struct ib_recv_wr second = {
		.wr_id = 241,
		.sg_list = c->sges,
		.num_sge = c->rc_max_recv_sge + 1,
	};
	struct ib_recv_wr first = {
		.next = &second,
		.wr_id = 240,
		.sg_list = &sge,
		.num_sge = 1,
	};
	const struct ib_recv_wr *bad = NULL;
	struct ib_sge ssge = kv_sge(c, &c->lbuf, 0, 100);
	struct ib_send_wr wr = {
		.wr_id = 242,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &ssge,
		.num_sge = 1,
	};
	int ret, i;

	for (i = 0; i < second.num_sge; i++)
		c->sges[i] = kv_sge(c, &c->rbuf, 4096 + i * 64, 64);
	ret = ib_post_recv(c->rc_b, &first, &bad);
	KV_CHECK(ret == -EINVAL && bad == &second,
		 "recv num_sge %d: %d, bad_wr %s; want -EINVAL (%d) at the second WR",
		 second.num_sge, ret,
		 bad == &second ? "the second WR" : bad ? "another WR" : "unset",
		 -EINVAL);
	/* The first receive WR was posted. */
	kv_fill(c->lbuf.va, 100, 110);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post(c->rc_a, &wr));
	KV_TRY(kv_expect(c, c->scq, "send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 242,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv into the first WR",
			 KV_WANT(.qp = c->rc_b, .wr_id = 240,
				 .opcode = IB_WC_RECV, .byte_len = 100)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va, c->lbuf.va, 100));
	KV_TRY(kv_untouched("the refused WR's buffers", c->rbuf.va + 4096,
			    KV_RFILL, second.num_sge * 64));
	return kv_idle(c);
}

/* mlx5r_wq_overflow() on the RQ: max_recv_wr fit, the next is -ENOMEM. */
static int kv_case_err_rq_full(struct kv_ctx *c)
{
	u32 n = c->rc_max_recv_wr, i;
	struct ib_recv_wr *w = c->rwrs;
	const struct ib_recv_wr *bad = NULL;
	struct ib_sge ssge = kv_sge(c, &c->lbuf, 0, 32);
	struct ib_send_wr wr = {
		.wr_id = 251,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &ssge,
		.num_sge = 1,
	};
	int ret;

	for (i = 0; i <= n; i++) {
		c->rsges[i] = kv_sge(c, &c->rbuf, (i % 64) * 64, 64);
		w[i] = (struct ib_recv_wr){
			.next = i < n ? &w[i + 1] : NULL,
			.wr_id = 2000 + i,
			.sg_list = &c->rsges[i],
			.num_sge = 1,
		};
	}
	ret = ib_post_recv(c->rc_b, &w[0], &bad);
	KV_CHECK(ret == -ENOMEM && bad == &w[n],
		 "%u receive WRs on an empty RQ of %u: %d, bad_wr wr_id %lld; want -ENOMEM (%d) at wr_id %u",
		 n + 1, n, ret, bad ? (long long)bad->wr_id : -1LL, -ENOMEM,
		 2000 + n);
	kv_fill(c->lbuf.va, 32, 120);
	kv_to_dev(c, &c->lbuf);
	KV_TRY(kv_post(c->rc_a, &wr));
	KV_TRY(kv_expect(c, c->scq, "send",
			 KV_WANT(.qp = c->rc_a, .wr_id = 251,
				 .opcode = IB_WC_SEND)));
	KV_TRY(kv_expect(c, c->rcq, "recv into the first WR",
			 KV_WANT(.qp = c->rc_b, .wr_id = 2000,
				 .opcode = IB_WC_RECV, .byte_len = 32)));
	kv_to_cpu(c, &c->rbuf);
	KV_TRY(kv_cmp("received", c->rbuf.va, c->lbuf.va, 32));
	kv_diag("max_recv_wr %u: WR %u refused", n, n);
	return kv_idle(c);
}

enum {
	KV_SETUP	= BIT(0),	/* the cases after it need it */
	KV_FRESH	= BIT(1),	/* runs on freshly reset QPs */
	KV_RESET_AFTER	= BIT(2),	/* leaves QPs in error or WRs posted */
};

static const struct kv_case {
	const char *name;
	int (*run)(struct kv_ctx *c);
	unsigned int flags;
} kv_cases[] = {
	{ "port_active", kv_case_port_active, KV_SETUP },
	{ "setup", kv_case_setup, KV_SETUP },
	{ "rc_send", kv_case_rc_send },
	{ "rc_send_with_imm", kv_case_rc_send_imm },
	{ "rc_rdma_write", kv_case_rc_rdma_write },
	{ "rc_rdma_write_with_imm", kv_case_rc_rdma_write_imm },
	{ "rc_rdma_read", kv_case_rc_rdma_read },
	{ "rc_send_inline_max", kv_case_rc_send_inline },
	{ "rc_rdma_write_inline", kv_case_rc_rdma_write_inline },
	{ "rc_send_gather_max_sge", kv_case_rc_send_gather },
	{ "rc_recv_scatter_max_sge", kv_case_rc_recv_scatter },
	{ "rc_unsignaled_then_signaled", kv_case_rc_unsignaled },
	{ "rc_chain", kv_case_rc_chain },
	{ "rc_fence_after_read", kv_case_rc_fence },
	{ "rc_solicited_event", kv_case_rc_solicited },
	{ "rc_reg_mr", kv_case_rc_reg_mr },
	{ "rc_local_inv", kv_case_rc_local_inv, KV_RESET_AFTER },
	{ "rc_send_with_inv", kv_case_rc_send_with_inv, KV_RESET_AFTER },
	{ "ud_send", kv_case_ud_send },
	{ "ud_send_with_imm_grh", kv_case_ud_send_imm_grh },
	{ "err_atomic_cmp_swp_eopnotsupp", kv_case_err_atomic_cmp_swp },
	{ "err_atomic_fetch_add_eopnotsupp", kv_case_err_atomic_fetch_add },
	{ "err_inline_too_long_enomem", kv_case_err_inline_too_long,
	  KV_RESET_AFTER },
	{ "err_send_too_many_sge_einval", kv_case_err_send_too_many_sge,
	  KV_RESET_AFTER },
	{ "err_send_bad_opcode_einval", kv_case_err_send_bad_opcode,
	  KV_RESET_AFTER },
	{ "err_ud_send_too_many_sge_einval", kv_case_err_ud_too_many_sge },
	{ "err_sq_full_enomem", kv_case_err_sq_full, KV_FRESH },
	{ "err_recv_too_many_sge_einval", kv_case_err_recv_too_many_sge,
	  KV_RESET_AFTER },
	{ "err_rq_full_enomem", kv_case_err_rq_full,
	  KV_FRESH | KV_RESET_AFTER },
};

static void kv_set_status(const char *s)
{
	WRITE_ONCE(kv_status, s);
}

static void kv_run(struct work_struct *work)
{
	struct kv_ctx *c = container_of(work, struct kv_ctx, work);
	int i, err, pass = 0;
	bool ready = true;

	kv_set_status("running");
	kv_out("KTAP version 1");
	kv_out("# kverbs: ib_post_send/ib_post_recv on %s port %d",
	       dev_name(&c->dev->dev), KV_PORT);
	kv_out("1..%zu", ARRAY_SIZE(kv_cases));
	for (i = 0; i < ARRAY_SIZE(kv_cases); i++) {
		const struct kv_case *k = &kv_cases[i];

		if (READ_ONCE(c->stopping)) {
			kv_diag("not run: the device is going away");
			err = -ENODEV;
		} else if (!ready) {
			kv_diag("not run: an earlier setup step failed");
			err = -ENODEV;
		} else {
			err = 0;
			if (k->flags & KV_FRESH)
				err = kv_recover(c);
			if (!err) {
				if (!(k->flags & KV_SETUP))
					kv_clear_bufs(c);
				err = k->run(c);
			}
		}
		kv_out("%sok %d %s", err ? "not " : "", i + 1, k->name);
		if (!err)
			pass++;
		if (!ready || READ_ONCE(c->stopping))
			continue;
		if (err && (k->flags & KV_SETUP)) {
			ready = false;
		} else if (err || (k->flags & KV_RESET_AFTER)) {
			if (kv_recover(c)) {
				kv_diag("recovery failed: the remaining cases cannot run");
				ready = false;
			}
		}
	}
	kv_out("# kverbs: pass:%d fail:%zu skip:0 total:%zu", pass,
	       ARRAY_SIZE(kv_cases) - pass, ARRAY_SIZE(kv_cases));
	kv_set_status("done");
}

static void kv_teardown(struct kv_ctx *c)
{
	struct ib_qp **qps[] = { &c->rc_a, &c->rc_b, &c->ud_a, &c->ud_b };
	int i, ret;

	for (i = 0; i < ARRAY_SIZE(qps); i++) {
		if (!*qps[i])
			continue;
		ret = ib_destroy_qp(*qps[i]);
		if (ret)
			pr_warn("ib_destroy_qp: %d\n", ret);
		*qps[i] = NULL;
	}
	if (c->ah_grh)
		rdma_destroy_ah(c->ah_grh, RDMA_DESTROY_AH_SLEEPABLE);
	if (c->ah)
		rdma_destroy_ah(c->ah, RDMA_DESTROY_AH_SLEEPABLE);
	if (c->mr) {
		ret = ib_dereg_mr(c->mr);
		if (ret)
			pr_warn("ib_dereg_mr: %d\n", ret);
	}
	if (c->mr_nents)
		ib_dma_unmap_sg(c->dev, c->mr_sg, KV_FRMR_PAGES,
				DMA_BIDIRECTIONAL);
	for (i = 0; i < KV_FRMR_PAGES; i++)
		if (c->mr_pages[i])
			__free_page(c->mr_pages[i]);
	if (c->scq)
		ib_destroy_cq(c->scq);
	if (c->rcq)
		ib_destroy_cq(c->rcq);
	kv_buf_free(c, &c->lbuf);
	kv_buf_free(c, &c->rbuf);
	if (c->pd)
		ib_dealloc_pd(c->pd);
	kfree(c->want);
	kfree(c->wrs);
	kfree(c->rwrs);
	kfree(c->rsges);
	kfree(c->sges);
	kfree(c->wcs);
}

static int kv_add(struct ib_device *dev)
{
	struct kv_ctx *c;

	/* The first mlx5 device only. */
	if (dev->ops.driver_id != RDMA_DRIVER_MLX5 || kv_active)
		return -EOPNOTSUPP;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	c->dev = dev;
	INIT_WORK(&c->work, kv_run);
	init_waitqueue_head(&c->cq_wait);
	atomic_set(&c->rcq_events, 0);
	atomic_set(&c->scq_events, 0);
	atomic_set(&c->async_events, 0);
	kv_active = c;
	ib_set_client_data(dev, &kv_client, c);
	/* The port may take seconds to become ACTIVE: not in our caller. */
	queue_work(kv_wq, &c->work);
	return 0;
}

static void kv_remove(struct ib_device *dev, void *client_data)
{
	struct kv_ctx *c = client_data;

	WRITE_ONCE(c->stopping, true);
	cancel_work_sync(&c->work);
	if (strcmp(READ_ONCE(kv_status), "done"))
		kv_set_status("aborted");
	kv_teardown(c);
	if (kv_active == c)
		kv_active = NULL;
	kfree(c);
}

static struct ib_client kv_client = {
	.name = "kverbs",
	.add = kv_add,
	.remove = kv_remove,
};

static ssize_t kv_results_read(struct file *file, char __user *ubuf,
			       size_t count, loff_t *ppos)
{
	unsigned long flags;
	size_t len;

	spin_lock_irqsave(&kv_log_lock, flags);
	len = kv_log_len;
	spin_unlock_irqrestore(&kv_log_lock, flags);
	/* The log only grows: its first len bytes are stable. */
	return simple_read_from_buffer(ubuf, count, ppos, kv_log, len);
}

static ssize_t kv_status_read(struct file *file, char __user *ubuf,
			      size_t count, loff_t *ppos)
{
	char buf[16];
	int n = scnprintf(buf, sizeof(buf), "%s\n", READ_ONCE(kv_status));

	return simple_read_from_buffer(ubuf, count, ppos, buf, n);
}

static const struct file_operations kv_results_fops = {
	.owner = THIS_MODULE,
	.read = kv_results_read,
	.llseek = default_llseek,
};

static const struct file_operations kv_status_fops = {
	.owner = THIS_MODULE,
	.read = kv_status_read,
	.llseek = default_llseek,
};

static int __init kv_init(void)
{
	int ret;

	kv_log = vzalloc(KV_LOG_SIZE);
	if (!kv_log)
		return -ENOMEM;
	kv_wq = alloc_ordered_workqueue("kverbs", 0);
	if (!kv_wq) {
		vfree(kv_log);
		return -ENOMEM;
	}
	kv_dir = debugfs_create_dir("kverbs", NULL);
	debugfs_create_file("results", 0444, kv_dir, NULL, &kv_results_fops);
	debugfs_create_file("status", 0444, kv_dir, NULL, &kv_status_fops);
	ret = ib_register_client(&kv_client);
	if (ret) {
		debugfs_remove_recursive(kv_dir);
		destroy_workqueue(kv_wq);
		vfree(kv_log);
	}
	return ret;
}

static void __exit kv_exit(void)
{
	ib_unregister_client(&kv_client);
	debugfs_remove_recursive(kv_dir);
	destroy_workqueue(kv_wq);
	vfree(kv_log);
}

module_init(kv_init);
module_exit(kv_exit);

MODULE_DESCRIPTION("Kernel verbs post-send/post-recv exerciser for mlx5_ib");
MODULE_LICENSE("GPL");

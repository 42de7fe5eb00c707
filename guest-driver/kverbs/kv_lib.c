// SPDX-License-Identifier: GPL-2.0
/* kverbs: buffers, posting, polling and checking completions, QP state changes, the setup cases. */
#include "kverbs.h"

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

void kv_buf_free(struct kv_ctx *c, struct kv_buf *b)
{
	if (!b->va)
		return;
	ib_dma_unmap_single(c->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
	kfree(b->va);
	b->va = NULL;
}

void kv_to_dev(struct kv_ctx *c, struct kv_buf *b)
{
	ib_dma_sync_single_for_device(c->dev, b->dma, b->len,
				      DMA_BIDIRECTIONAL);
}

void kv_to_cpu(struct kv_ctx *c, struct kv_buf *b)
{
	ib_dma_sync_single_for_cpu(c->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
}

void kv_mr_to_dev(struct kv_ctx *c)
{
	int i;

	for (i = 0; i < c->mr_nents; i++)
		ib_dma_sync_single_for_device(c->dev,
					      sg_dma_address(&c->mr_sg[i]),
					      PAGE_SIZE, DMA_BIDIRECTIONAL);
}

void kv_mr_to_cpu(struct kv_ctx *c)
{
	int i;

	for (i = 0; i < c->mr_nents; i++)
		ib_dma_sync_single_for_cpu(c->dev,
					   sg_dma_address(&c->mr_sg[i]),
					   PAGE_SIZE, DMA_BIDIRECTIONAL);
}

u8 *kv_mr_page(struct kv_ctx *c, int i)
{
	return page_address(c->mr_pages[i]);
}

void kv_mr_fill(struct kv_ctx *c)
{
	int i;

	for (i = 0; i < KV_FRMR_PAGES; i++)
		memset(kv_mr_page(c, i), KV_MFILL, PAGE_SIZE);
	kv_mr_to_dev(c);
}

void kv_fill(u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = seed + i * 13 + (i >> 8);
}

int kv_cmp(const char *what, const u8 *got, const u8 *want, size_t len)
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

int kv_untouched(const char *what, const u8 *got, u8 fill, size_t len)
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
void kv_clear_bufs(struct kv_ctx *c)
{
	memset(c->lbuf.va, KV_LFILL, c->lbuf.len);
	memset(c->rbuf.va, KV_RFILL, c->rbuf.len);
	kv_to_dev(c, &c->lbuf);
	kv_to_dev(c, &c->rbuf);
}

struct ib_sge kv_sge(struct kv_ctx *c, struct kv_buf *b, size_t off,
		     u32 len)
{
	return (struct ib_sge){
		.addr = b->dma + off,
		.length = len,
		.lkey = c->pd->local_dma_lkey,
	};
}

u64 kv_raddr(struct kv_ctx *c, size_t off)
{
	return c->rbuf.dma + off;
}

/* Posting */

int kv_post(struct ib_qp *qp, const struct ib_send_wr *wr)
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

int kv_post_recv(struct kv_ctx *c, struct ib_qp *qp, u64 wr_id,
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
int kv_poll(struct kv_ctx *c, struct ib_cq *cq, struct ib_wc *wc,
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

int kv_check_wc(struct kv_ctx *c, const char *what,
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
int kv_expect(struct kv_ctx *c, struct ib_cq *cq, const char *what,
	      const struct kv_want *w)
{
	struct ib_wc wc;

	KV_TRY(kv_poll(c, cq, &wc, 1, what));
	return kv_check_wc(c, what, &wc, w);
}

/* No completion is left on either CQ a moment later. */
int kv_idle(struct kv_ctx *c)
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
int kv_recover(struct kv_ctx *c)
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
int kv_reg_wr(struct kv_ctx *c, struct ib_reg_wr *reg, u64 wr_id,
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
int kv_register(struct kv_ctx *c, u64 wr_id)
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
int kv_write_rejected(struct kv_ctx *c, u32 rkey, u64 wr_id)
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

int kv_case_port_active(struct kv_ctx *c)
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

/* The two RC QPs, with the capabilities the cases rely on. */
static int kv_setup_rc(struct kv_ctx *c)
{
	struct ib_qp_init_attr init;
	struct ib_qp_cap cap_b;
	struct ib_qp_attr qattr;
	int ret;

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
	return 0;
}

/* The two UD QPs and their address handles (without and with a GRH). */
static int kv_setup_ud(struct kv_ctx *c)
{
	struct ib_qp_cap cap_b;

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
	return 0;
}

/* The buffers, the scratch arrays and the fast-registration MR. */
static int kv_setup_memory(struct kv_ctx *c)
{
	int i, ret;

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
	return 0;
}

int kv_case_setup(struct kv_ctx *c)
{
	struct ib_cq_init_attr cq_attr = { .cqe = KV_CQ_SIZE };
	struct ib_cq *cq;
	struct ib_pd *pd;
	int ret;

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

	ret = kv_setup_rc(c);
	if (ret)
		return ret;
	ret = kv_setup_ud(c);
	if (ret)
		return ret;
	ret = kv_setup_memory(c);
	if (ret)
		return ret;
	return kv_connect_all(c);
}

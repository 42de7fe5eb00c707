/* SPDX-License-Identifier: GPL-2.0 */
/* kverbs: what its files share (see kv_main.c for what the module does). */
#ifndef KVERBS_H
#define KVERBS_H

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
/* <linux/unaligned.h> since 6.12; <asm/unaligned.h> before (6.1). */
#if __has_include(<linux/unaligned.h>)
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif
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

__printf(1, 2) void kv_out(const char *fmt, ...);
#define kv_diag(fmt, ...) kv_out("# " fmt, ##__VA_ARGS__)

void kv_buf_free(struct kv_ctx *c, struct kv_buf *b);
void kv_to_dev(struct kv_ctx *c, struct kv_buf *b);
void kv_to_cpu(struct kv_ctx *c, struct kv_buf *b);
void kv_mr_to_dev(struct kv_ctx *c);
void kv_mr_to_cpu(struct kv_ctx *c);
u8 *kv_mr_page(struct kv_ctx *c, int i);
void kv_mr_fill(struct kv_ctx *c);
void kv_fill(u8 *p, size_t len, u8 seed);
int kv_cmp(const char *what, const u8 *got, const u8 *want, size_t len);
int kv_untouched(const char *what, const u8 *got, u8 fill, size_t len);
void kv_clear_bufs(struct kv_ctx *c);
struct ib_sge kv_sge(struct kv_ctx *c, struct kv_buf *b, size_t off,
		     u32 len);
u64 kv_raddr(struct kv_ctx *c, size_t off);
int kv_post(struct ib_qp *qp, const struct ib_send_wr *wr);
int kv_post_recv(struct kv_ctx *c, struct ib_qp *qp, u64 wr_id,
		 struct kv_buf *b, size_t off, u32 len);
int kv_poll(struct kv_ctx *c, struct ib_cq *cq, struct ib_wc *wc,
	    int n, const char *what);
int kv_check_wc(struct kv_ctx *c, const char *what,
		const struct ib_wc *wc, const struct kv_want *w);
int kv_expect(struct kv_ctx *c, struct ib_cq *cq, const char *what,
	      const struct kv_want *w);
int kv_idle(struct kv_ctx *c);
int kv_recover(struct kv_ctx *c);
int kv_reg_wr(struct kv_ctx *c, struct ib_reg_wr *reg, u64 wr_id,
	      int send_flags);
int kv_register(struct kv_ctx *c, u64 wr_id);
int kv_write_rejected(struct kv_ctx *c, u32 rkey, u64 wr_id);
int kv_case_port_active(struct kv_ctx *c);
int kv_case_setup(struct kv_ctx *c);
int kv_case_rc_send(struct kv_ctx *c);
int kv_case_rc_send_imm(struct kv_ctx *c);
int kv_case_rc_rdma_write(struct kv_ctx *c);
int kv_case_rc_rdma_write_imm(struct kv_ctx *c);
int kv_case_rc_rdma_read(struct kv_ctx *c);
int kv_case_rc_send_inline(struct kv_ctx *c);
int kv_case_rc_rdma_write_inline(struct kv_ctx *c);
int kv_case_rc_send_gather(struct kv_ctx *c);
int kv_case_rc_recv_scatter(struct kv_ctx *c);
int kv_case_rc_unsignaled(struct kv_ctx *c);
int kv_case_rc_chain(struct kv_ctx *c);
int kv_case_rc_fence(struct kv_ctx *c);
int kv_case_rc_solicited(struct kv_ctx *c);
int kv_case_rc_reg_mr(struct kv_ctx *c);
int kv_case_rc_local_inv(struct kv_ctx *c);
int kv_case_rc_send_with_inv(struct kv_ctx *c);
int kv_case_ud_send(struct kv_ctx *c);
int kv_case_ud_send_imm_grh(struct kv_ctx *c);
int kv_case_err_atomic_cmp_swp(struct kv_ctx *c);
int kv_case_err_atomic_fetch_add(struct kv_ctx *c);
int kv_case_err_inline_too_long(struct kv_ctx *c);
int kv_case_err_send_too_many_sge(struct kv_ctx *c);
int kv_case_err_send_bad_opcode(struct kv_ctx *c);
int kv_case_err_ud_too_many_sge(struct kv_ctx *c);
int kv_case_err_sq_full(struct kv_ctx *c);
int kv_case_err_recv_too_many_sge(struct kv_ctx *c);
int kv_case_err_rq_full(struct kv_ctx *c);

#endif /* KVERBS_H */

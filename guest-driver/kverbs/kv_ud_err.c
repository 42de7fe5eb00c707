// SPDX-License-Identifier: GPL-2.0
/* kverbs: the UD cases and the error returns of mlx5_ib_post_send()/mlx5_ib_post_recv(). */
#include "kverbs.h"

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

int kv_case_ud_send(struct kv_ctx *c)
{
	return kv_ud_send(c, false);
}

int kv_case_ud_send_imm_grh(struct kv_ctx *c)
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

int kv_case_err_atomic_cmp_swp(struct kv_ctx *c)
{
	return kv_atomic_rejected(c, IB_WR_ATOMIC_CMP_AND_SWP);
}

int kv_case_err_atomic_fetch_add(struct kv_ctx *c)
{
	return kv_atomic_rejected(c, IB_WR_ATOMIC_FETCH_AND_ADD);
}

/* set_data_inl_seg(): more than max_inline_data is -ENOMEM. */
int kv_case_err_inline_too_long(struct kv_ctx *c)
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

int kv_case_err_send_too_many_sge(struct kv_ctx *c)
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

int kv_case_err_send_bad_opcode(struct kv_ctx *c)
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

int kv_case_err_ud_too_many_sge(struct kv_ctx *c)
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
int kv_case_err_sq_full(struct kv_ctx *c)
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
int kv_case_err_recv_too_many_sge(struct kv_ctx *c)
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
int kv_case_err_rq_full(struct kv_ctx *c)
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

// SPDX-License-Identifier: GPL-2.0
/* kverbs: the RC cases (every opcode, inline, gather/scatter, chains, fences, solicited events, registration and invalidation). */
#include "kverbs.h"

int kv_case_rc_send(struct kv_ctx *c)
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

int kv_case_rc_send_imm(struct kv_ctx *c)
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

int kv_case_rc_rdma_write(struct kv_ctx *c)
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

int kv_case_rc_rdma_write_imm(struct kv_ctx *c)
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

int kv_case_rc_rdma_read(struct kv_ctx *c)
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

int kv_case_rc_send_inline(struct kv_ctx *c)
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

int kv_case_rc_rdma_write_inline(struct kv_ctx *c)
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

int kv_case_rc_send_gather(struct kv_ctx *c)
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

int kv_case_rc_recv_scatter(struct kv_ctx *c)
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

int kv_case_rc_unsignaled(struct kv_ctx *c)
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

int kv_case_rc_chain(struct kv_ctx *c)
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

int kv_case_rc_fence(struct kv_ctx *c)
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

int kv_case_rc_solicited(struct kv_ctx *c)
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

int kv_case_rc_reg_mr(struct kv_ctx *c)
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

int kv_case_rc_local_inv(struct kv_ctx *c)
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

int kv_case_rc_send_with_inv(struct kv_ctx *c)
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

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

#include "kverbs.h"

static DEFINE_SPINLOCK(kv_log_lock);
static char *kv_log;
static size_t kv_log_len;
static const char *kv_status = "waiting";
static struct dentry *kv_dir;
static struct workqueue_struct *kv_wq;
static struct kv_ctx *kv_active;

static struct ib_client kv_client;

void kv_out(const char *fmt, ...)
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

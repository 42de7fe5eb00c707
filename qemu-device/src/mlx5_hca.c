/*
 * hcasim: emulated Mellanox ConnectX-5 (mlx5) InfiniBand HCA
 *
 * This file is only the QEMU side: QOM registration, PCI config space,
 * BAR0 (initialization segment, UAR pages and device memory), MSI-X in
 * its own BAR, DMA
 * through pci_dma_read/write, the bottom half and timer the model asks for,
 * and the device properties.  Everything the HCA does lives in the hcasim
 * model library (hca-model/), reached through hcasim/hca_model.h.
 *
 * Usage:
 *   -device pcie-root-port,id=rp0,chassis=1,x-speed=8,x-width=16
 *   -device mlx5-hca,bus=rp0[,node-guid=<u64>][,trace=<file>]
 *           [,trace-filter=<categories>][,trace-max-bytes=<n>]
 *           [,chardev=<socket chardev to hcasim-fabric's switch port>]
 *           [,fault=<fault>[;<fault>...]]  (armed at power-on)
 *           [,x-test-fault=cqe-opcode]  (test-only: a deliberate device bug)
 *
 * Faults (docs/FAULTS.md) are armed at run time by setting the "fault"
 * property (QMP qom-set; "clear" clears them) and listed by reading it.
 *
 * Without "chardev" the port's link is always up (a subnet manager in the
 * guest can configure it; traffic to its own LID loops back). With it, the
 * port is cabled to a switch port of hcasim-fabric through a socket
 * chardev, e.g.
 *   -chardev socket,id=fab0,path=<fabric port socket>,reconnect-ms=1000
 * This file only carries its bytes: the model frames and unframes the
 * stream, queues what it sends and says hello first
 * (hca-model/iba/include/iba/link.h).  The link follows the connection;
 * the chardev's reconnect option brings it back after the fabric restarts.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "qemu/log.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "hw/pci/pci.h"
#include "hw/pci/pcie.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "chardev/char-fe.h"
#include "qom/object.h"
#include "trace.h"

#include "hca_model.h"
#include "mlx5_hca_compat.h"

#define TYPE_MLX5_HCA "mlx5-hca"
OBJECT_DECLARE_SIMPLE_TYPE(Mlx5HcaState, MLX5_HCA)

#define MLX5_HCA_BAR0 0
#define MLX5_HCA_MSIX_BAR 2
#define MLX5_HCA_PCIE_CAP_OFFSET 0x60
/* Advanced Error Reporting, the first extended capability. */
#define MLX5_HCA_AER_OFFSET 0x100

/* The cable to the fabric's switch port: a byte pipe (the chardev). */
typedef struct Mlx5HcaLink {
    bool up;
    /*
     * The connection went away; the model learns it from the bottom half,
     * never from inside its own transmit path.
     */
    bool lost;
    guint watch;    /* waiting for the chardev to take more bytes */
} Mlx5HcaLink;

struct Mlx5HcaState {
    PCIDevice parent_obj;

    MemoryRegion bar0;
    QEMUBH *bh;
    QEMUTimer *timer;
    HcaModel *model;

    /* properties */
    uint64_t node_guid;
    char *trace_path;
    char *trace_filter;
    uint64_t trace_max_bytes;
    Mlx5HcaChrFe chr;    /* the fabric link */
    char *test_fault;
    char *faults;   /* armed at realize, ';'-separated */

    Mlx5HcaLink link;
    Error *migration_blocker;
};

static void mlx5_hca_link_flush(Mlx5HcaState *s);

/* Host services for the model */

static bool mlx5_hca_dma_read(void *opaque, uint64_t addr, void *buf,
                              size_t len)
{
    Mlx5HcaState *s = opaque;
    MemTxResult r = pci_dma_read(PCI_DEVICE(s), addr, buf, len);

    if (r != MEMTX_OK) {
        trace_mlx5_hca_dma_error("read", addr, len);
    }
    return r == MEMTX_OK;
}

static bool mlx5_hca_dma_write(void *opaque, uint64_t addr, const void *buf,
                               size_t len)
{
    Mlx5HcaState *s = opaque;
    MemTxResult r = pci_dma_write(PCI_DEVICE(s), addr, buf, len);

    if (r != MEMTX_OK) {
        trace_mlx5_hca_dma_error("write", addr, len);
    }
    return r == MEMTX_OK;
}

static void mlx5_hca_msix_notify(void *opaque, unsigned vector)
{
    PCIDevice *pdev = PCI_DEVICE(opaque);

    if (!msix_enabled(pdev) || vector >= HCA_MODEL_MSIX_VECTORS) {
        trace_mlx5_hca_msix_dropped(vector);
        return;
    }
    trace_mlx5_hca_msix(vector, msix_is_masked(pdev, vector));
    msix_notify(pdev, vector);
}

static void mlx5_hca_schedule(void *opaque)
{
    Mlx5HcaState *s = opaque;

    qemu_bh_schedule(s->bh);
}

static void mlx5_hca_timer_mod(void *opaque, int64_t deadline_ns)
{
    Mlx5HcaState *s = opaque;

    if (deadline_ns < 0) {
        timer_del(s->timer);
    } else {
        timer_mod(s->timer, deadline_ns);
    }
}

static int64_t mlx5_hca_clock_ns(void *opaque)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

/* Fabric link */

static const char *mlx5_hca_link_name(Mlx5HcaState *s)
{
    Chardev *chr = qemu_chr_fe_get_driver(&s->chr);

    return chr ? chr->label : "";
}

/*
 * The connection went away.  This can happen inside qemu_chr_fe_write(),
 * while the model transmits: queue the loss like a received frame and let
 * the bottom half tell the model.
 */
static void mlx5_hca_link_lost(Mlx5HcaState *s)
{
    Mlx5HcaLink *l = &s->link;

    if (l->watch) {
        g_source_remove(l->watch);
        l->watch = 0;
    }
    if (!l->up) {
        return;
    }
    l->up = false;
    l->lost = true;
    trace_mlx5_hca_link_down(mlx5_hca_link_name(s));
    qemu_bh_schedule(s->bh);
}

static int mlx5_hca_link_can_read(void *opaque)
{
    Mlx5HcaState *s = opaque;

    /*
     * The model buffers a partial frame itself; it takes nothing while it
     * is behind with what it received (port_rx_ready says when to go on),
     * so the fabric holds the sender back instead of dropping.
     */
    if (!s->link.up) {
        return 0;
    }
    return MIN(hca_model_port_rx_room(s->model, 1), 65536);
}

static void mlx5_hca_link_read(void *opaque, const uint8_t *buf, int size)
{
    Mlx5HcaState *s = opaque;

    if (!s->link.up || hca_model_port_rx(s->model, 1, buf, size)) {
        return;
    }
    trace_mlx5_hca_link_bad_stream(mlx5_hca_link_name(s));
    /* The chardev reconnects if it was told to (reconnect-ms). */
    qemu_chr_fe_disconnect(&s->chr);
}

static gboolean mlx5_hca_link_writable(void *do_not_use, GIOCondition cond,
                                       void *opaque)
{
    Mlx5HcaState *s = opaque;

    s->link.watch = 0;
    mlx5_hca_link_flush(s);
    return G_SOURCE_REMOVE;
}

/* Write what the model queued for the fabric, as far as the chardev takes. */
static void mlx5_hca_link_flush(Mlx5HcaState *s)
{
    Mlx5HcaLink *l = &s->link;
    const void *bytes;
    size_t len;
    int n;

    while (l->up && !l->watch &&
           (len = hca_model_port_tx_peek(s->model, 1, &bytes)) != 0) {
        n = qemu_chr_fe_write(&s->chr, bytes, MIN(len, INT_MAX));
        if (n < 0 && errno == EAGAIN) {
            l->watch = qemu_chr_fe_add_watch(&s->chr, G_IO_OUT | G_IO_HUP,
                                             mlx5_hca_link_writable, s);
            if (!l->watch) {
                mlx5_hca_link_lost(s);
            }
            return;
        }
        if (n <= 0) {
            /*
             * A socket chardev may stay connected after a failed write
             * until its read handler runs: end the connection now.
             */
            mlx5_hca_link_lost(s);
            qemu_chr_fe_disconnect(&s->chr);
            return;
        }
        hca_model_port_tx_done(s->model, 1, n);
    }
}

static void mlx5_hca_link_event(void *opaque, QEMUChrEvent event)
{
    Mlx5HcaState *s = opaque;
    Mlx5HcaLink *l = &s->link;

    switch (event) {
    case CHR_EVENT_OPENED:
        if (l->up) {
            return;
        }
        trace_mlx5_hca_link_up(mlx5_hca_link_name(s));
        l->up = true;
        if (l->lost) {
            l->lost = false;
            hca_model_port_link(s->model, 1, false);
        }
        /* The model says hello; the link comes up when the fabric says so. */
        hca_model_port_connected(s->model, 1);
        mlx5_hca_link_flush(s);
        break;
    case CHR_EVENT_CLOSED:
        mlx5_hca_link_lost(s);
        break;
    default:
        break;
    }
}

static void mlx5_hca_port_tx_ready(void *opaque, unsigned port)
{
    mlx5_hca_link_flush(opaque);
}

static void mlx5_hca_port_rx_ready(void *opaque, unsigned port)
{
    Mlx5HcaState *s = opaque;

    if (s->link.up) {
        qemu_chr_fe_accept_input(&s->chr);
    }
}

/* The model also writes these to its own trace (category guest_err). */
static void mlx5_hca_guest_error(void *opaque, const char *msg)
{
    qemu_log_mask(LOG_GUEST_ERROR, "mlx5-hca: %s\n", msg);
}

static const HcaHostOps mlx5_hca_host_ops = {
    .dma_read = mlx5_hca_dma_read,
    .dma_write = mlx5_hca_dma_write,
    .msix_notify = mlx5_hca_msix_notify,
    .schedule = mlx5_hca_schedule,
    .timer_mod = mlx5_hca_timer_mod,
    .clock_ns = mlx5_hca_clock_ns,
    .port_tx_ready = mlx5_hca_port_tx_ready,
    .guest_error = mlx5_hca_guest_error,
    .port_rx_ready = mlx5_hca_port_rx_ready,
};

static void mlx5_hca_bh(void *opaque)
{
    Mlx5HcaState *s = opaque;

    if (s->link.lost) {
        s->link.lost = false;
        hca_model_port_link(s->model, 1, false);
    }
    /* One bounded slice of work; the model reschedules itself for more. */
    hca_model_run(s->model);
}

static void mlx5_hca_timer(void *opaque)
{
    Mlx5HcaState *s = opaque;

    hca_model_timer(s->model);
}

/* BAR0: initialization segment at 0, UAR page N at N * 4 KiB */

static uint64_t mlx5_hca_bar0_read(void *opaque, hwaddr addr, unsigned size)
{
    Mlx5HcaState *s = opaque;
    uint8_t buf[8];
    uint64_t val;

    /*
     * An access through a vCPU's TLB entry made before an unplug may still
     * come after it (until that vCPU flushes): the model is gone by then.
     */
    if (!s->model) {
        return UINT64_MAX;
    }
    hca_model_mmio_read(s->model, addr, buf, size);
    val = ldn_le_p(buf, size);
    trace_mlx5_hca_bar0_read(addr, size, val);
    return val;
}

static void mlx5_hca_bar0_write(void *opaque, hwaddr addr, uint64_t val,
                                unsigned size)
{
    Mlx5HcaState *s = opaque;
    uint8_t buf[8];

    trace_mlx5_hca_bar0_write(addr, size, val);
    if (!s->model) {
        return;  /* unplugged (see mlx5_hca_bar0_read()) */
    }
    stn_le_p(buf, size, val);
    hca_model_mmio_write(s->model, addr, buf, size);
}

/*
 * The driver uses ioread32be/iowrite32be, 8-bit reads of the health buffer
 * and 64-bit doorbell stores of pre-swapped data: keep every access whole
 * and hand the model the bytes in guest memory order.
 */
static const MemoryRegionOps mlx5_hca_bar0_ops = {
    .read = mlx5_hca_bar0_read,
    .write = mlx5_hca_bar0_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 1,
        .max_access_size = 8,
    },
    .impl = {
        .min_access_size = 1,
        .max_access_size = 8,
    },
};

/* PCI Express link as on a real ConnectX-5 slot: 8 GT/s, x16 */
static void mlx5_hca_init_link(PCIDevice *pdev)
{
    uint8_t *exp = pdev->config + pdev->exp.exp_cap;

    pci_long_test_and_clear_mask(exp + PCI_EXP_LNKCAP,
                                 PCI_EXP_LNKCAP_MLW | PCI_EXP_LNKCAP_SLS);
    pci_long_test_and_set_mask(exp + PCI_EXP_LNKCAP,
                               QEMU_PCI_EXP_LNKCAP_MLW(QEMU_PCI_EXP_LNK_X16) |
                               QEMU_PCI_EXP_LNKCAP_MLS(QEMU_PCI_EXP_LNK_8GT));
    pci_set_word(exp + PCI_EXP_LNKSTA,
                 QEMU_PCI_EXP_LNKSTA_NLW(QEMU_PCI_EXP_LNK_X16) |
                 QEMU_PCI_EXP_LNKSTA_CLS(QEMU_PCI_EXP_LNK_8GT));
    pci_set_long(exp + PCI_EXP_LNKCAP2,
                 PCI_EXP_LNKCAP2_SLS_2_5GB | PCI_EXP_LNKCAP2_SLS_5_0GB |
                 PCI_EXP_LNKCAP2_SLS_8_0GB);
}

/* The model, and the migration blocker that comes with it. */
static bool mlx5_hca_new_model(Mlx5HcaState *s, Error **errp)
{
    HcaModelConfig cfg = {
        .node_guid = s->node_guid,
        .trace_path = s->trace_path,
        .trace_filter = s->trace_filter,
        .trace_max_bytes = s->trace_max_bytes,
        .fabric = qemu_chr_fe_backend_connected(&s->chr),
        .test_fault = s->test_fault,
        .faults = s->faults,
    };
    char err[256] = "";

    /*
     * The HCA's state lives in the model (objects, queues, timers, packets
     * in flight) and at the fabric's end of the link; none of it is
     * migrated, so migration and savevm are refused while the device is
     * present.
     */
    error_setg(&s->migration_blocker,
               "mlx5-hca: the HCA model's state (queue pairs, memory keys, "
               "packets in flight, the fabric link) cannot be migrated; "
               "unplug the device first");
    if (mlx5_hca_add_blocker(&s->migration_blocker, errp) < 0) {
        return false;
    }
    s->model = hca_model_new(&mlx5_hca_host_ops, s, &cfg, err, sizeof(err));
    if (!s->model) {
        error_setg(errp, "mlx5-hca: %s", err);
        mlx5_hca_del_blocker(&s->migration_blocker);
        return false;
    }
    return true;
}

static void mlx5_hca_realize(PCIDevice *pdev, Error **errp)
{
    Mlx5HcaState *s = MLX5_HCA(pdev);
    unsigned i;

    pci_config_set_vendor_id(pdev->config, HCA_MODEL_PCI_VENDOR_ID);
    pci_config_set_device_id(pdev->config, HCA_MODEL_PCI_DEVICE_ID);
    pci_config_set_class(pdev->config, HCA_MODEL_PCI_CLASS);
    pci_config_set_revision(pdev->config, 0);
    pci_set_word(pdev->config + PCI_SUBSYSTEM_VENDOR_ID,
                 HCA_MODEL_PCI_VENDOR_ID);
    pci_set_word(pdev->config + PCI_SUBSYSTEM_ID, HCA_MODEL_PCI_SUBSYS_ID);
    pci_config_set_interrupt_pin(pdev->config, 1);

    if (!mlx5_hca_new_model(s, errp)) {
        return;
    }
    s->bh = qemu_bh_new_guarded(mlx5_hca_bh, s,
                                &DEVICE(pdev)->mem_reentrancy_guard);
    s->timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, mlx5_hca_timer, s);

    memory_region_init_io(&s->bar0, OBJECT(s), &mlx5_hca_bar0_ops, s,
                          "mlx5-hca-bar0", HCA_MODEL_BAR0_SIZE);
    pci_register_bar(pdev, MLX5_HCA_BAR0,
                     PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64 |
                     PCI_BASE_ADDRESS_MEM_PREFETCH, &s->bar0);

    if (pcie_endpoint_cap_init(pdev, MLX5_HCA_PCIE_CAP_OFFSET) < 0) {
        error_setg(errp, "mlx5-hca: cannot add the PCI Express capability");
        goto fail;
    }
    mlx5_hca_init_link(pdev);
    /* Device Control's error reporting enables are the OS's to set. */
    pcie_cap_deverr_init(pdev);
    /* Function Level Reset (DEVCAP.FLR; DEVCTL.BCR_FLR -> device reset). */
    pcie_cap_flr_init(pdev);
    /*
     * AER, as a ConnectX-5 has: errors injected with the monitor's
     * pcie_aer_inject_error reach the guest's AER driver and mlx5_core's
     * pci_error_handlers (docs/FAULTS.md).
     */
    if (pcie_aer_init(pdev, PCI_ERR_VER, MLX5_HCA_AER_OFFSET,
                      PCI_ERR_SIZEOF, errp) < 0) {
        goto fail;
    }

    if (msix_init_exclusive_bar(pdev, HCA_MODEL_MSIX_VECTORS,
                                MLX5_HCA_MSIX_BAR, errp)) {
        goto fail;
    }
    /* Any vector may be named by an EQ (eqc.intr). */
    for (i = 0; i < HCA_MODEL_MSIX_VECTORS; i++) {
        msix_vector_use(pdev, i);
    }

    /* OPENED now if the chardev is connected already, else when it is. */
    qemu_chr_fe_set_handlers(&s->chr, mlx5_hca_link_can_read,
                             mlx5_hca_link_read, mlx5_hca_link_event, NULL,
                             s, NULL, true);
    return;

fail:
    pcie_aer_exit(pdev);
    timer_free(s->timer);
    qemu_bh_delete(s->bh);
    hca_model_free(s->model);
    s->model = NULL;
    mlx5_hca_del_blocker(&s->migration_blocker);
}

static void mlx5_hca_exit(PCIDevice *pdev)
{
    Mlx5HcaState *s = MLX5_HCA(pdev);

    /*
     * Unplugged: the fabric sees the cable pulled, as it would see a card
     * go.  The chardev stays (and reconnects if told to) for a re-plug.
     */
    if (s->link.watch) {
        g_source_remove(s->link.watch);
        s->link.watch = 0;
    }
    qemu_chr_fe_disconnect(&s->chr);
    qemu_chr_fe_deinit(&s->chr, false);
    msix_unuse_all_vectors(pdev);
    msix_uninit_exclusive_bar(pdev);
    pcie_aer_exit(pdev);
    timer_free(s->timer);
    qemu_bh_delete(s->bh);
    hca_model_free(s->model);
    s->model = NULL;
    mlx5_hca_del_blocker(&s->migration_blocker);
}

/*
 * A function off the bus (the pci-gone fault) leaves an empty slot behind:
 * configuration reads complete with all ones, as the root port answers a
 * request nobody claims, and writes go nowhere.
 */
static uint32_t mlx5_hca_read_config(PCIDevice *pdev, uint32_t addr, int len)
{
    Mlx5HcaState *s = MLX5_HCA(pdev);

    if (s->model && !hca_model_on_bus(s->model)) {
        trace_mlx5_hca_config_gone(addr, len, false);
        return len == 4 ? UINT32_MAX : (1u << (len * 8)) - 1;
    }
    return pci_default_read_config(pdev, addr, len);
}

static void mlx5_hca_write_config(PCIDevice *pdev, uint32_t addr,
                                  uint32_t val, int len)
{
    Mlx5HcaState *s = MLX5_HCA(pdev);

    if (s->model && !hca_model_on_bus(s->model)) {
        trace_mlx5_hca_config_gone(addr, len, true);
        return;
    }
    pci_default_write_config(pdev, addr, val, len);
    pcie_cap_flr_write_config(pdev, addr, val, len);
    pcie_aer_write_config(pdev, addr, val, len);
}

/*
 * System reset, PCI bus reset and FLR: the model drops every object and
 * timer; deferred work, the model's timer and the packets the old function
 * queued for the fabric go with them, so nothing of it runs, DMAs or
 * reaches the wire afterwards.  All of it is the device's own state, so it
 * is the enter phase of the reset; the device drives no line that a hold
 * or exit phase would have to settle.
 */
static void mlx5_hca_reset_enter(Object *obj, ResetType type)
{
    Mlx5HcaState *s = MLX5_HCA(obj);
    PCIDevice *pdev = PCI_DEVICE(obj);
    bool flr = pci_get_word(pdev->config + pdev->exp.exp_cap +
                            PCI_EXP_DEVCTL) & PCI_EXP_DEVCTL_BCR_FLR;

    trace_mlx5_hca_reset(flr);
    pcie_cap_deverr_reset(pdev);
    /*
     * Link Capabilities are read-only, but QEMU 7.2's AER injection of an
     * uncorrectable error writes Device Status as 32 bits and zeroes their
     * low half (hw/pci/pcie_aer.c pcie_aer_inject_uncor_error()): a reset
     * at least brings the hardwired values back.
     */
    mlx5_hca_init_link(pdev);
    qemu_bh_cancel(s->bh);
    timer_del(s->timer);
    hca_model_reset(s->model);
    if (s->link.lost) {
        s->link.lost = false;
        hca_model_port_link(s->model, 1, false);
    }
}

static char *mlx5_hca_get_info(Object *obj, Error **errp)
{
    Mlx5HcaState *s = MLX5_HCA(obj);

    if (!s->model) {
        error_setg(errp, "mlx5-hca: device not realized");
        return NULL;
    }
    return hca_model_info(s->model);
}

static char *mlx5_hca_get_trace_filter(Object *obj, Error **errp)
{
    Mlx5HcaState *s = MLX5_HCA(obj);

    return g_strdup(s->trace_filter ? s->trace_filter : "");
}

static void mlx5_hca_set_trace_filter(Object *obj, const char *value,
                                      Error **errp)
{
    Mlx5HcaState *s = MLX5_HCA(obj);

    if (s->model && !hca_model_set_trace_filter(s->model, value)) {
        error_setg(errp, "mlx5-hca: bad trace filter '%s'", value);
        return;
    }
    g_free(s->trace_filter);
    s->trace_filter = g_strdup(value);
}

static char *mlx5_hca_get_fault(Object *obj, Error **errp)
{
    Mlx5HcaState *s = MLX5_HCA(obj);

    if (!s->model) {
        return g_strdup(s->faults ? s->faults : "");
    }
    return hca_model_fault(s->model, "list");
}

/* Before realize: remembered for power-on. After: one fault command. */
static void mlx5_hca_set_fault(Object *obj, const char *value, Error **errp)
{
    Mlx5HcaState *s = MLX5_HCA(obj);
    char *reply;

    if (!s->model) {
        char *all = s->faults ? g_strdup_printf("%s;%s", s->faults, value)
                              : g_strdup(value);

        g_free(s->faults);
        s->faults = all;
        return;
    }
    reply = hca_model_fault(s->model, value);
    if (g_str_has_prefix(reply, "error")) {
        g_strchomp(reply);
        error_setg(errp, "mlx5-hca: fault '%s': %s", value, reply + 6);
    }
    free(reply);
}

static MLX5_HCA_PROPERTY mlx5_hca_properties[] = {
    DEFINE_PROP_UINT64("node-guid", Mlx5HcaState, node_guid, 0),
    DEFINE_PROP_STRING("trace", Mlx5HcaState, trace_path),
    DEFINE_PROP_UINT64("trace-max-bytes", Mlx5HcaState, trace_max_bytes, 0),
    DEFINE_PROP_CHR("chardev", Mlx5HcaState, chr),
    /* Test-only: a deliberate device bug the test runner must catch. */
    DEFINE_PROP_STRING("x-test-fault", Mlx5HcaState, test_fault),
    MLX5_HCA_PROP_END
};

static void mlx5_hca_instance_init(Object *obj)
{
    object_property_add_str(obj, "info", mlx5_hca_get_info, NULL);
    object_property_set_description(obj, "info",
        "Device state: EQs, CQs, QPs, memory keys and counters");
    object_property_add_str(obj, "trace-filter", mlx5_hca_get_trace_filter,
                            mlx5_hca_set_trace_filter);
    object_property_set_description(obj, "trace-filter",
        "Trace categories, e.g. 'all', 'cmd,eq' (settable at run time)");
    object_property_add_str(obj, "fault", mlx5_hca_get_fault,
                            mlx5_hca_set_fault);
    object_property_set_description(obj, "fault",
        "Arm a fault, e.g. 'cmd-status:opcode=CREATE_CQ,status=BAD_PARAM', "
        "or 'clear'; reading lists the armed faults (docs/FAULTS.md)");
}

static void mlx5_hca_class_init(ObjectClass *klass, Mlx5HcaClassData data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *pc = PCI_DEVICE_CLASS(klass);
    ResettableClass *rc = RESETTABLE_CLASS(klass);

    pc->realize = mlx5_hca_realize;
    pc->exit = mlx5_hca_exit;
    pc->config_read = mlx5_hca_read_config;
    pc->config_write = mlx5_hca_write_config;
    pc->vendor_id = HCA_MODEL_PCI_VENDOR_ID;
    pc->device_id = HCA_MODEL_PCI_DEVICE_ID;
    pc->class_id = HCA_MODEL_PCI_CLASS;
    pc->subsystem_vendor_id = HCA_MODEL_PCI_VENDOR_ID;
    pc->subsystem_id = HCA_MODEL_PCI_SUBSYS_ID;
    dc->desc = "Mellanox ConnectX-5 InfiniBand HCA (hcasim)";
    rc->phases.enter = mlx5_hca_reset_enter;
    device_class_set_props(dc, mlx5_hca_properties);
    object_class_property_set_description(klass, "node-guid",
        "Node and port GUID (0: derived from the instance)");
    object_class_property_set_description(klass, "trace",
        "File for the model's device trace (./hcasim trace reads it)");
    object_class_property_set_description(klass, "trace-max-bytes",
        "Cap of the trace file and its rotation in bytes (0: 256 MiB)");
    object_class_property_set_description(klass, "chardev",
        "Socket chardev to an hcasim-fabric switch port (reconnect-ms=1000 "
        "recommended); without it the port's link is up with nothing "
        "behind it");
    object_class_property_set_description(klass, "x-test-fault",
        "Test-only: a deliberate device bug ('cqe-opcode')");
    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
}

static const TypeInfo mlx5_hca_info = {
    .name = TYPE_MLX5_HCA,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(Mlx5HcaState),
    .instance_init = mlx5_hca_instance_init,
    .class_init = mlx5_hca_class_init,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_PCIE_DEVICE },
        { }
    },
};

static void mlx5_hca_register_types(void)
{
    type_register_static(&mlx5_hca_info);
}

type_init(mlx5_hca_register_types)

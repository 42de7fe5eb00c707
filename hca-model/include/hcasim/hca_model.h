/*
 * hcasim HCA model: the C interface between a host and the model.
 *
 * The model is a ConnectX-5 (mlx5) InfiniBand HCA with no knowledge of QEMU.
 * A host (the QEMU PCI device, the test bench, a fuzzer) provides guest
 * memory access, MSI-X, deferred work and a clock through HcaHostOps, and
 * forwards BAR0 accesses and fabric packets to the model.  All calls for one
 * model instance must be serialised by the host (QEMU: the BQL).
 *
 * MMIO data is passed as bytes in guest memory order: a guest store of the
 * 32-bit big-endian value 0x00000001 arrives as {0, 0, 0, 1}.
 */
#ifndef HCASIM_HCA_MODEL_H
#define HCASIM_HCA_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCA_MODEL_PCI_VENDOR_ID 0x15b3 /* Mellanox */
#define HCA_MODEL_PCI_DEVICE_ID 0x1017 /* ConnectX-5 PF */
#define HCA_MODEL_PCI_CLASS 0x0207     /* network controller: InfiniBand */
#define HCA_MODEL_PCI_SUBSYS_ID 0x0007
/*
 * BAR0: the model's registers (init segment, UAR pages) in its first
 * HCA_MODEL_BAR0_MMIO_SIZE bytes; device memory (MEMIC) at
 * HCA_MODEL_MEMIC_BAR_OFFSET. The host forwards accesses to all of it to
 * hca_model_mmio_read/_write.
 */
#define HCA_MODEL_BAR0_SIZE (16u << 20)
#define HCA_MODEL_BAR0_MMIO_SIZE (8u << 20) /* init segment + 2045 UAR pages */
#define HCA_MODEL_MEMIC_BAR_OFFSET (8u << 20)
#define HCA_MODEL_MEMIC_SIZE (128u << 10)
#define HCA_MODEL_MSIX_VECTORS 64

typedef struct HcaModel HcaModel;

typedef struct HcaHostOps {
    /* Copy between guest memory and buf. False if any byte is not
     * accessible (the model then reports an error, never retries). */
    bool (*dma_read)(void *opaque, uint64_t addr, void *buf, size_t len);
    bool (*dma_write)(void *opaque, uint64_t addr, const void *buf,
                      size_t len);
    /* Raise MSI-X vector (the host applies masking and pending bits). */
    void (*msix_notify)(void *opaque, unsigned vector);
    /* Request one call of hca_model_run() soon, outside the MMIO path. */
    void (*schedule)(void *opaque);
    /* Request hca_model_timer() at deadline_ns on the host clock; replaces
     * any earlier request. A negative deadline cancels. */
    void (*timer_mod)(void *opaque, int64_t deadline_ns);
    /* Monotonic clock in nanoseconds (QEMU: the virtual clock). */
    int64_t (*clock_ns)(void *opaque);
    /* Bytes for port's fabric stream are waiting: the host writes what
     * hca_model_port_tx_peek() shows and reports what it wrote with
     * hca_model_port_tx_done(). NULL: no fabric. */
    void (*port_tx_ready)(void *opaque, unsigned port);
    /* A guest programming error (a bad doorbell, WQE, command field...):
     * one line without a newline, at most 100 a second, whether or not
     * the model's trace records it (QEMU: LOG_GUEST_ERROR). NULL: none. */
    void (*guest_error)(void *opaque, const char *msg);
    /* hca_model_port_rx_room() was 0 and the model has room again: the
     * host reads port's stream again (QEMU: qemu_chr_fe_accept_input).
     * NULL: the host polls hca_model_port_rx_room() itself. */
    void (*port_rx_ready)(void *opaque, unsigned port);
} HcaHostOps;

typedef struct HcaModelConfig {
    uint64_t node_guid;        /* 0: derived from the instance */
    const char *trace_path;    /* NULL or "": no trace file */
    const char *trace_filter;  /* categories, e.g. "cmd,eq" or "all" */
    uint64_t trace_max_bytes;  /* cap of the trace file(s); 0: default */
    bool fabric;               /* a fabric link is attached: the port's
                                * physical link follows hca_model_port_link();
                                * without one the link is always up */
    const char *test_fault;    /* NULL/"": none; a deliberate device bug for
                                * testing the test runner: "cqe-opcode"
                                * (requester CQEs carry a wrong opcode) */
    const char *faults;        /* NULL/"": none; faults armed at power-on,
                                * ';'-separated (see hca_model_fault) */
} HcaModelConfig;

/* Returns NULL and a message in err on a configuration error. */
HcaModel *hca_model_new(const HcaHostOps *ops, void *opaque,
                        const HcaModelConfig *cfg, char *err, size_t errlen);
void hca_model_free(HcaModel *m);
/* Power-on / PCI reset (system reset, bus reset, FLR): every object,
 * timer, queued doorbell and packet and all state is dropped. The host
 * drops its pending hca_model_run() and timer request with it (the model
 * asks again when it has work). */
void hca_model_reset(HcaModel *m);

/* BAR0 accesses; size is 1, 2, 4 or 8. */
void hca_model_mmio_read(HcaModel *m, uint64_t offset, void *data,
                         unsigned size);
void hca_model_mmio_write(HcaModel *m, uint64_t offset, const void *data,
                          unsigned size);

/* False while the function is off the bus (the pci-gone fault, a surprise
 * removal): the host answers its configuration space with all ones and
 * drops writes to it, as for a slot with nothing in it. Asking after the
 * removal's time is up finds a new function, as an MMIO access does. */
bool hca_model_on_bus(HcaModel *m);

/* Deferred work requested by schedule(), and the timer of timer_mod(). */
void hca_model_run(HcaModel *m);
void hca_model_timer(HcaModel *m);

/*
 * The fabric link of port is a byte stream (a unix socket to the fabric's
 * switch port) that the host only carries: the model frames, unframes and
 * queues it (iba/link.h) and says hello first.
 *
 * hca_model_port_connected: the host opened the stream; the model queues
 * its hello. The physical link comes up when the fabric says so.
 * hca_model_port_rx: bytes read from the stream, in any pieces. False: the
 * stream is broken (a bad frame length); the host closes it and reports
 * hca_model_port_link(m, port, false).
 * hca_model_port_tx_peek/_done: the bytes waiting to be written (valid
 * until the next call into the model) and how many of them were written.
 * While many bytes wait, the model's send queues wait too (flow control:
 * a link that cannot write slows the device down instead of losing
 * packets).
 * hca_model_port_rx_room: how many more bytes the model takes now; 0
 * while it is behind with what it received (the host stops reading the
 * stream, so the fabric holds the sender back, until port_rx_ready).
 * hca_model_port_link: down: the stream was lost (its queue is dropped);
 * without a fabric, tests force the physical link up or down.
 */
void hca_model_port_connected(HcaModel *m, unsigned port);
bool hca_model_port_rx(HcaModel *m, unsigned port, const void *bytes,
                       size_t len);
size_t hca_model_port_tx_peek(HcaModel *m, unsigned port,
                              const void **bytes);
void hca_model_port_tx_done(HcaModel *m, unsigned port, size_t n);
size_t hca_model_port_rx_room(HcaModel *m, unsigned port);
void hca_model_port_link(HcaModel *m, unsigned port, bool up);

/* Change the trace categories at run time (same syntax as trace_filter). */
bool hca_model_set_trace_filter(HcaModel *m, const char *filter);

/*
 * Fault injection (docs/FAULTS.md): command is a fault to arm,
 * "KIND[:key=value,...]" (e.g. "cmd-status:opcode=CREATE_CQ,status=BAD_PARAM"),
 * or "list", "clear", "clear ID", "kinds". The reply (caller frees with
 * free()) starts with "ok" or "error", and a fault armed, fired or cleared
 * is a line of the trace's "fault" category.
 */
char *hca_model_fault(HcaModel *m, const char *command);

/* A human-readable dump of the device state (caller frees with free()). */
char *hca_model_info(HcaModel *m);

#ifdef __cplusplus
}
#endif

#endif /* HCASIM_HCA_MODEL_H */

/*
 * QTest for the mlx5-hca device (hcasim's emulated ConnectX-5)
 *
 * Drives the device the way mlx5_core starts to: PCI enumeration and BAR
 * layout, the initialization segment, commands through the command queue
 * (inline and through mailboxes), the firmware's page requests, an event
 * queue that receives the command-completion event and raises its MSI-X
 * vector, the migration blocker, and the fabric link (a socket chardev:
 * the device's hello, and a broken stream dropping the connection).
 * Layouts are those of include/linux/mlx5/mlx5_ifc.h and device.h (bytes,
 * big-endian).
 *
 * Copyright (c) 2026 hcasim authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <sys/socket.h>
#include <sys/un.h>
#include "qemu/bswap.h"
#include "qemu/units.h"
#include "libqtest.h"
#include "libqos/pci-pc.h"
#include "libqos/malloc-pc.h"
#include "hw/pci/pci_regs.h"
#if QEMU_VERSION_MAJOR >= 10
#include "qobject/qdict.h"
#else
#include "qapi/qmp/qdict.h"
#endif

#define MLX5_DEVFN QPCI_DEVFN(4, 0)
#define MLX5_ARGS "-machine q35 -nodefaults -device mlx5-hca,addr=04.0"

/* Initialization segment (struct mlx5_init_seg) */
#define ISEG_FW_REV 0x000
#define ISEG_CMDIF_REV 0x004
#define ISEG_CMDQ_ADDR_H 0x010
#define ISEG_CMDQ_ADDR_L_SZ 0x014
#define ISEG_CMD_DBELL 0x018
#define ISEG_INITIALIZING 0x1fc
#define ISEG_HEALTH_COUNTER 0x1010

/* Command queue entry (struct mlx5_cmd_layout) and mailbox block */
#define CMD_TYPE_PCIE 0x7
#define CMD_INLEN 0x04
#define CMD_IN_PTR 0x08
#define CMD_IN 0x10
#define CMD_OUT 0x20
#define CMD_OUT_PTR 0x30
#define CMD_OUTLEN 0x38
#define CMD_TOKEN 0x3c
#define CMD_STATUS_OWN 0x3f
#define MBOX_DATA 512
#define MBOX_NEXT 0x230
#define MBOX_BLOCK_NUM 0x238
#define MBOX_TOKEN 0x23d
#define MBOX_SIZE 0x400
#define TOKEN 0x5a

#define OP_INIT_HCA 0x102
#define OP_ENABLE_HCA 0x104
#define OP_QUERY_PAGES 0x107
#define OP_MANAGE_PAGES 0x108
#define OP_NOP 0x80d
#define OP_CREATE_EQ 0x301
#define OP_ALLOC_UAR 0x802

#define STATUS_OK 0x00
#define STATUS_BAD_OP 0x02
#define STATUS_BAD_SYS_STATE 0x04
#define STATUS_BAD_INPUT_LEN 0x50

#define INIT_HCA_INLEN 0x20

#define EVENT_CMD 0x0a
#define EQ_ARM_DOORBELL 0x40
#define EQE_SIZE 64
#define PAGE 4096

typedef struct Mlx5Test {
    QTestState *qts;
    QGuestAllocator alloc;
    QPCIBus *bus;
    QPCIDevice *dev;
    QPCIBar bar0;
    uint64_t bar0_size;
    uint64_t cmdq;
} Mlx5Test;

static uint32_t iseg_read(Mlx5Test *t, uint64_t off)
{
    return be32_to_cpu(qpci_io_readl(t->dev, t->bar0, off));
}

static void iseg_write(Mlx5Test *t, uint64_t off, uint32_t val)
{
    qpci_io_writel(t->dev, t->bar0, off, cpu_to_be32(val));
}

static uint64_t alloc_aligned(Mlx5Test *t, size_t size, size_t align)
{
    uint64_t a = guest_alloc(&t->alloc, size + align);

    a = QEMU_ALIGN_UP(a, align);
    qtest_memset(t->qts, a, 0, size);
    return a;
}

static void mlx5_start(Mlx5Test *t)
{
    t->qts = qtest_init(MLX5_ARGS);
    pc_alloc_init(&t->alloc, t->qts, 0);
    t->bus = qpci_new_pc(t->qts, &t->alloc);
    t->dev = qpci_device_find(t->bus, MLX5_DEVFN);
    g_assert(t->dev);
    qpci_device_enable(t->dev);
    t->bar0 = qpci_iomap(t->dev, 0, &t->bar0_size);
}

static void mlx5_stop(Mlx5Test *t)
{
    qpci_iounmap(t->dev, t->bar0);
    g_free(t->dev);
    qpci_free_pc(t->bus);
    alloc_destroy(&t->alloc);
    qtest_quit(t->qts);
}

/* Firmware ready, command queue at a fresh page, full-driver interface. */
static void mlx5_open_cmdq(Mlx5Test *t)
{
    int i;

    for (i = 0; i < 100 && (iseg_read(t, ISEG_INITIALIZING) >> 31); i++) {
        qtest_clock_step(t->qts, 1000 * 1000);
    }
    g_assert_cmpuint(iseg_read(t, ISEG_INITIALIZING) >> 31, ==, 0);
    t->cmdq = alloc_aligned(t, PAGE, PAGE);
    iseg_write(t, ISEG_CMDQ_ADDR_H, t->cmdq >> 32);
    iseg_write(t, ISEG_CMDQ_ADDR_L_SZ, (uint32_t)t->cmdq);
}

/* A chain of mailboxes for len bytes beyond the 16 inline ones. */
static uint64_t mbox_chain(Mlx5Test *t, const uint8_t *data, uint32_t len)
{
    uint32_t n = len > 16 ? DIV_ROUND_UP(len - 16, MBOX_DATA) : 0;
    uint64_t first = 0, prev = 0;
    uint32_t i;

    for (i = 0; i < n; i++) {
        uint64_t b = alloc_aligned(t, MBOX_SIZE, MBOX_SIZE);
        uint32_t at = 16 + i * MBOX_DATA;
        uint64_t next_be;
        uint32_t num_be = cpu_to_be32(i);
        uint8_t token = TOKEN;

        if (data) {
            qtest_memwrite(t->qts, b, data + at, MIN(MBOX_DATA, len - at));
        }
        qtest_memwrite(t->qts, b + MBOX_BLOCK_NUM, &num_be, 4);
        qtest_memwrite(t->qts, b + MBOX_TOKEN, &token, 1);
        if (prev) {
            next_be = cpu_to_be64(b);
            qtest_memwrite(t->qts, prev + MBOX_NEXT, &next_be, 8);
        } else {
            first = b;
        }
        prev = b;
    }
    return first;
}

/*
 * One command in slot 0: in/out are whole command buffers (header
 * included).  Returns the command's status byte; the delivery status must
 * be OK and ownership must come back.
 */
static uint8_t mlx5_cmd(Mlx5Test *t, const uint8_t *in, uint32_t inlen,
                        uint8_t *out, uint32_t outlen)
{
    uint8_t e[64] = { 0 };
    uint64_t in_mbox = mbox_chain(t, in, inlen);
    uint64_t out_mbox = mbox_chain(t, NULL, outlen);
    uint64_t p;
    uint32_t i, at;
    int tries;

    e[0] = CMD_TYPE_PCIE;
    stl_be_p(e + CMD_INLEN, inlen);
    stq_be_p(e + CMD_IN_PTR, in_mbox);
    memcpy(e + CMD_IN, in, MIN(inlen, 16));
    stq_be_p(e + CMD_OUT_PTR, out_mbox);
    stl_be_p(e + CMD_OUTLEN, outlen);
    e[CMD_TOKEN] = TOKEN;
    e[CMD_STATUS_OWN] = 1;
    qtest_memwrite(t->qts, t->cmdq, e, sizeof(e));
    iseg_write(t, ISEG_CMD_DBELL, 1);

    for (tries = 0; tries < 1000; tries++) {
        qtest_memread(t->qts, t->cmdq, e, sizeof(e));
        if (!(e[CMD_STATUS_OWN] & 1)) {
            break;
        }
        qtest_clock_step(t->qts, 1000);
    }
    g_assert_cmpuint(e[CMD_STATUS_OWN] & 1, ==, 0);
    g_assert_cmpuint(e[CMD_STATUS_OWN] >> 1, ==, 0);
    memcpy(out, e + CMD_OUT, MIN(outlen, 16));
    for (i = 0, p = out_mbox, at = 16; at < outlen; i++, at += MBOX_DATA) {
        uint8_t next[8];

        qtest_memread(t->qts, p, out + at, MIN(MBOX_DATA, outlen - at));
        qtest_memread(t->qts, p + MBOX_NEXT, next, 8);
        p = ldq_be_p(next);
    }
    return out[0];
}

/* A command of inlen bytes (at most 64) that are zero but for its header. */
static uint8_t mlx5_cmd_op(Mlx5Test *t, uint16_t opcode, uint16_t op_mod,
                           uint32_t inlen, uint8_t *out)
{
    uint8_t in[64] = { 0 };

    g_assert_cmpuint(inlen, <=, sizeof(in));
    stw_be_p(in, opcode);
    stw_be_p(in + 6, op_mod);
    return mlx5_cmd(t, in, inlen, out, 16);
}

static uint8_t mlx5_cmd_simple(Mlx5Test *t, uint16_t opcode, uint16_t op_mod,
                               uint8_t *out)
{
    return mlx5_cmd_op(t, opcode, op_mod, 16, out);
}

/* QUERY_PAGES for op_mod (1 boot, 2 init), then MANAGE_PAGES gives them. */
static void mlx5_give_pages(Mlx5Test *t, uint16_t op_mod)
{
    uint8_t out[16];
    g_autofree uint8_t *in = NULL;
    int32_t n, i;

    g_assert_cmphex(mlx5_cmd_simple(t, OP_QUERY_PAGES, op_mod, out), ==,
                    STATUS_OK);
    n = (int32_t)ldl_be_p(out + 0x0c);
    g_assert_cmpint(n, >, 0);
    g_assert_cmpint(n, <=, 4096);
    in = g_malloc0(16 + 8 * n);
    stw_be_p(in, OP_MANAGE_PAGES);
    stw_be_p(in + 6, 1); /* give */
    stl_be_p(in + 0x0c, n);
    for (i = 0; i < n; i++) {
        stq_be_p(in + 16 + 8 * i, alloc_aligned(t, PAGE, PAGE));
    }
    g_assert_cmphex(mlx5_cmd(t, in, 16 + 8 * n, out, 16), ==, STATUS_OK);
}

static void test_pci(void)
{
    Mlx5Test t;
    uint8_t msix, exp;

    mlx5_start(&t);
    g_assert_cmphex(qpci_config_readw(t.dev, PCI_VENDOR_ID), ==, 0x15b3);
    g_assert_cmphex(qpci_config_readw(t.dev, PCI_DEVICE_ID), ==, 0x1017);
    g_assert_cmphex(qpci_config_readw(t.dev, PCI_CLASS_DEVICE), ==, 0x0207);
    /*
     * BAR0: 64-bit prefetchable memory, 16 MiB (init segment + UARs in the
     * first 8 MiB, the device memory at 8 MiB)
     */
    g_assert_cmphex(qpci_config_readl(t.dev, PCI_BASE_ADDRESS_0) &
                    ~PCI_BASE_ADDRESS_MEM_MASK, ==,
                    PCI_BASE_ADDRESS_MEM_TYPE_64 |
                    PCI_BASE_ADDRESS_MEM_PREFETCH);
    g_assert_cmphex(t.bar0_size, ==, 16 * MiB);
    /* The device memory: what is stored there reads back. */
    qpci_io_writel(t.dev, t.bar0, 8 * MiB + 0x40, 0x12345678);
    qpci_io_writeq(t.dev, t.bar0, 8 * MiB + 128 * KiB - 8,
                   0x0102030405060708ULL);
    g_assert_cmphex(qpci_io_readl(t.dev, t.bar0, 8 * MiB + 0x40), ==,
                    0x12345678);
    g_assert_cmphex(qpci_io_readq(t.dev, t.bar0, 8 * MiB + 128 * KiB - 8),
                    ==, 0x0102030405060708ULL);
    /* MSI-X with 64 vectors, PCI Express with Function Level Reset */
    msix = qpci_find_capability(t.dev, PCI_CAP_ID_MSIX, 0);
    g_assert_cmphex(msix, !=, 0);
    g_assert_cmpuint((qpci_config_readw(t.dev, msix + PCI_MSIX_FLAGS) &
                      PCI_MSIX_FLAGS_QSIZE) + 1, ==, 64);
    exp = qpci_find_capability(t.dev, PCI_CAP_ID_EXP, 0);
    g_assert_cmphex(exp, !=, 0);
    g_assert_cmphex(qpci_config_readl(t.dev, exp + PCI_EXP_DEVCAP) &
                    PCI_EXP_DEVCAP_FLR, !=, 0);
    mlx5_stop(&t);
}

static void test_init_segment(void)
{
    Mlx5Test t;
    uint32_t fw, hc;

    mlx5_start(&t);
    /* Firmware 16.35.2000, command interface revision 5. */
    fw = iseg_read(&t, ISEG_FW_REV);
    g_assert_cmpuint(fw & 0xffff, ==, 16);
    g_assert_cmpuint(fw >> 16, ==, 35);
    g_assert_cmpuint(iseg_read(&t, ISEG_CMDIF_REV) >> 16, ==, 5);
    g_assert_cmpuint(iseg_read(&t, ISEG_CMDIF_REV) & 0xffff, ==, 2000);
    /* Still initializing at power-on; ready within the driver's wait. */
    g_assert_cmpuint(iseg_read(&t, ISEG_INITIALIZING) >> 31, ==, 1);
    /* 32 command slots of 64 bytes. */
    g_assert_cmpuint((iseg_read(&t, ISEG_CMDQ_ADDR_L_SZ) >> 4) & 0xf, ==, 5);
    g_assert_cmpuint(iseg_read(&t, ISEG_CMDQ_ADDR_L_SZ) & 0xf, ==, 6);
    /* The health counter moves with time. */
    hc = iseg_read(&t, ISEG_HEALTH_COUNTER);
    mlx5_open_cmdq(&t);
    qtest_clock_step(t.qts, 2000 * 1000 * 1000);
    g_assert_cmpuint(iseg_read(&t, ISEG_HEALTH_COUNTER), !=, hc);
    mlx5_stop(&t);
}

static void test_command(void)
{
    Mlx5Test t;
    uint8_t out[16];

    mlx5_start(&t);
    mlx5_open_cmdq(&t);
    g_assert_cmphex(mlx5_cmd_simple(&t, OP_ENABLE_HCA, 0, out), ==,
                    STATUS_OK);
    /* An opcode the device does not have, and one that needs pages. */
    g_assert_cmphex(mlx5_cmd_simple(&t, 0x7ff, 0, out), ==, STATUS_BAD_OP);
    g_assert_cmphex(ldl_be_p(out + 4), !=, 0); /* a syndrome */
    g_assert_cmphex(mlx5_cmd_simple(&t, OP_INIT_HCA, 0, out), ==,
                    STATUS_BAD_INPUT_LEN);
    g_assert_cmphex(mlx5_cmd_op(&t, OP_INIT_HCA, 0, INIT_HCA_INLEN, out), ==,
                    STATUS_BAD_SYS_STATE);
    mlx5_stop(&t);
}

static void test_eq_interrupt(void)
{
    Mlx5Test t;
    uint8_t out[16];
    uint8_t in[0x110 + 8] = { 0 };
    uint8_t eqe[EQE_SIZE];
    uint32_t uar, eqn;
    uint64_t eq;
    int i;

    mlx5_start(&t);
    mlx5_open_cmdq(&t);
    g_assert_cmphex(mlx5_cmd_simple(&t, OP_ENABLE_HCA, 0, out), ==,
                    STATUS_OK);
    mlx5_give_pages(&t, 1);
    mlx5_give_pages(&t, 2);
    g_assert_cmphex(mlx5_cmd_op(&t, OP_INIT_HCA, 0, INIT_HCA_INLEN, out), ==,
                    STATUS_OK);
    g_assert_cmphex(mlx5_cmd_simple(&t, OP_ALLOC_UAR, 0, out), ==, STATUS_OK);
    uar = ldl_be_p(out + 8) & 0xffffff;

    /* An EQ of 64 entries (one page), owner bits set, on MSI-X vector 0. */
    eq = alloc_aligned(&t, PAGE, PAGE);
    for (i = 0; i < PAGE / EQE_SIZE; i++) {
        uint8_t owner = 1;

        qtest_memwrite(t.qts, eq + i * EQE_SIZE + EQE_SIZE - 1, &owner, 1);
    }
    stw_be_p(in, OP_CREATE_EQ);
    stl_be_p(in + 0x10 + 0x0c, 6u << 24 | uar);   /* log_eq_size, uar_page */
    stl_be_p(in + 0x10 + 0x14, 0);                /* intr */
    stq_be_p(in + 0x58, 1ull << EVENT_CMD);       /* event_bitmask[0] */
    stq_be_p(in + 0x110, eq);                     /* pas[0] */
    g_assert_cmphex(mlx5_cmd(&t, in, sizeof(in), out, 16), ==, STATUS_OK);
    eqn = out[0x0b];

    /* MSI-X on with vector 0 masked: the interrupt shows as pending. */
    qpci_msix_enable(t.dev);
    g_assert_true(qpci_msix_masked(t.dev, 0));
    g_assert_false(qpci_msix_pending(t.dev, 0));
    qpci_io_writel(t.dev, t.bar0, (uint64_t)uar * PAGE + EQ_ARM_DOORBELL,
                   cpu_to_be32(eqn << 24));

    /* A NOP completes with an EQE of type command on that EQ. */
    g_assert_cmphex(mlx5_cmd_simple(&t, OP_NOP, 0, out), ==, STATUS_OK);
    for (i = 0; i < 100 && !qpci_msix_pending(t.dev, 0); i++) {
        qtest_clock_step(t.qts, 1000);
    }
    g_assert_true(qpci_msix_pending(t.dev, 0));
    qtest_memread(t.qts, eq, eqe, sizeof(eqe));
    g_assert_cmphex(eqe[1], ==, EVENT_CMD);
    g_assert_cmphex(eqe[EQE_SIZE - 1] & 1, ==, 0);
    g_assert_cmphex(ldl_be_p(eqe + 0x20) & 1, ==, 1); /* slot 0 */
    qpci_msix_disable(t.dev);
    mlx5_stop(&t);
}

static void test_migration_blocked(void)
{
    Mlx5Test t;
    QDict *rsp, *err;

    mlx5_start(&t);
    rsp = qtest_qmp(t.qts, "{ 'execute': 'migrate', 'arguments': "
                    "{ 'uri': 'exec:cat > /dev/null' } }");
    g_assert(qdict_haskey(rsp, "error"));
    err = qdict_get_qdict(rsp, "error");
    g_assert_nonnull(strstr(qdict_get_str(err, "desc"),
                            "mlx5-hca: the HCA model's state"));
    qobject_unref(rsp);
    mlx5_stop(&t);
}

/* Link frames (hca-model/iba/include/iba/link.h): be32 length, then frame */
#define LINK_HEADER 12
#define LINK_HELLO 2
#define LINK_STATE 3
#define LINK_HELLO_BODY 17
#define FABRIC_GUID 0x0002c90300a1b2c3ULL

static void read_full(int fd, uint8_t *buf, size_t len)
{
    while (len) {
        ssize_t n = read(fd, buf, len);

        g_assert_cmpint(n, >, 0);
        buf += n;
        len -= n;
    }
}

static void test_fabric_link(void)
{
    g_autofree char *dir = g_dir_make_tmp("mlx5-hca-test-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "port", NULL);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct timeval tv = { .tv_sec = 30 };
    uint8_t hello[4 + LINK_HEADER + LINK_HELLO_BODY];
    uint8_t state[4 + LINK_HEADER + 1] = { 0 };
    uint8_t broken[4] = { 0 };  /* a zero length breaks the stream */
    QTestState *qts;
    int lfd, fd;

    g_assert(dir);
    g_assert_cmpuint(strlen(path), <, sizeof(sa.sun_path));
    strcpy(sa.sun_path, path);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    g_assert_cmpint(lfd, >=, 0);
    g_assert_cmpint(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(listen(lfd, 1), ==, 0);

    qts = qtest_initf("-machine q35 -nodefaults "
                      "-chardev socket,id=fab,path=%s "
                      "-device mlx5-hca,addr=04.0,node-guid=0x%" PRIx64
                      ",chardev=fab", path, (uint64_t)FABRIC_GUID);
    fd = accept(lfd, NULL, NULL);
    g_assert_cmpint(fd, >=, 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

    /* The device speaks first: its hello, for port 1. */
    read_full(fd, hello, sizeof(hello));
    g_assert_cmpuint(ldl_be_p(hello), ==, LINK_HEADER + LINK_HELLO_BODY);
    g_assert_cmpuint(hello[4], ==, LINK_HELLO);
    g_assert_cmphex(ldq_be_p(hello + 4 + LINK_HEADER), ==, FABRIC_GUID);
    g_assert_cmpuint(hello[4 + LINK_HEADER + 16], ==, 1);

    /* The fabric raises the link, then breaks the stream: a hang-up. */
    stl_be_p(state, LINK_HEADER + 1);
    state[4] = LINK_STATE;
    state[4 + LINK_HEADER] = 1;
    g_assert_cmpint(write(fd, state, sizeof(state)), ==, sizeof(state));
    g_assert_cmpint(write(fd, broken, sizeof(broken)), ==, sizeof(broken));
    g_assert_cmpint(read(fd, hello, 1), ==, 0);

    qtest_quit(qts);
    close(fd);
    close(lfd);
    unlink(path);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/mlx5-hca/pci", test_pci);
    qtest_add_func("/mlx5-hca/init-segment", test_init_segment);
    qtest_add_func("/mlx5-hca/command", test_command);
    qtest_add_func("/mlx5-hca/eq-interrupt", test_eq_interrupt);
    qtest_add_func("/mlx5-hca/migration-blocked", test_migration_blocked);
    qtest_add_func("/mlx5-hca/fabric-link", test_fabric_link);
    return g_test_run();
}

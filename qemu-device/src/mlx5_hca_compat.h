/*
 * hcasim: what differs between the QEMU lines the device builds against
 *
 * The device is one source for Debian's QEMU 7.2 (bookworm), 10.0 (trixie)
 * and 10.2 (sid).  Every difference in QEMU's internal API that it meets is
 * here, keyed by the QEMU release that made the change; mlx5_hca.c itself
 * has no version tests.  Releases between the tested lines are assumed to
 * follow the boundaries below.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_HCASIM_MLX5_HCA_COMPAT_H
#define HW_HCASIM_MLX5_HCA_COMPAT_H

#include "hw/qdev-core.h"
#include "hw/qdev-properties.h"
#include "migration/blocker.h"
#include "chardev/char-fe.h"

#define MLX5_HCA_QEMU_AT_LEAST(major, minor) \
    (QEMU_VERSION_MAJOR > (major) || \
     (QEMU_VERSION_MAJOR == (major) && QEMU_VERSION_MINOR >= (minor)))

/* 8.0: PCIDevice and PCIDeviceClass moved out of hw/pci/pci.h. */
#if MLX5_HCA_QEMU_AT_LEAST(8, 0)
#include "hw/pci/pci_device.h"
#endif

/* 10.1: class_init's data became const. */
#if MLX5_HCA_QEMU_AT_LEAST(10, 1)
typedef const void *Mlx5HcaClassData;
#else
typedef void *Mlx5HcaClassData;
#endif

/*
 * 10.0: property lists are const arrays without a terminator (before, a
 * writable array that ended in DEFINE_PROP_END_OF_LIST()).
 */
#if MLX5_HCA_QEMU_AT_LEAST(10, 0)
#define MLX5_HCA_PROPERTY const Property
#define MLX5_HCA_PROP_END
#else
#define MLX5_HCA_PROPERTY Property
#define MLX5_HCA_PROP_END DEFINE_PROP_END_OF_LIST()
#endif

/* 8.2: migration blockers are passed by reference and freed by QEMU. */
static inline int mlx5_hca_add_blocker(Error **reason, Error **errp)
{
#if MLX5_HCA_QEMU_AT_LEAST(8, 2)
    return migrate_add_blocker(reason, errp);
#else
    if (migrate_add_blocker(*reason, errp) < 0) {
        error_free(*reason);
        *reason = NULL;
        return -1;
    }
    return 0;
#endif
}

static inline void mlx5_hca_del_blocker(Error **reason)
{
#if MLX5_HCA_QEMU_AT_LEAST(8, 2)
    migrate_del_blocker(reason);
#else
    if (*reason) {
        migrate_del_blocker(*reason);
        error_free(*reason);
        *reason = NULL;
    }
#endif
}

/* 10.2: the chardev front end's CharBackend was renamed CharFrontend. */
#if MLX5_HCA_QEMU_AT_LEAST(10, 2)
typedef CharFrontend Mlx5HcaChrFe;
#else
typedef CharBackend Mlx5HcaChrFe;
#endif

#endif

// DEVX: user contexts (CREATE/DESTROY_UCTX) and user memory (CREATE/
// DESTROY_UMEM).  mlx5_ib creates a user context for every process that
// opens the device with DEVX (libmlx5 always asks); its uid is then written
// into every command of that process's objects, and the firmware keeps one
// process from naming another's objects (CmdCtx::may_touch/may_use).  A
// UMEM is a page list the process registered once; DEVX objects name it
// (cq_umem_id, wq_umem_id, dbr_umem_id, mkey_umem_id) instead of carrying
// their own page list.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "fw/prm.h"
#include "objects/ids.h"
#include "objects/pages.h"

namespace hca {

struct CmdCtx;
class Device;

class UctxTable {
  public:
    explicit UctxTable(Device &dev) : dev_(dev) {}
    void reset() { uids_.reset(); }
    bool live(uint16_t uid) const { return uids_.used(uid); }
    size_t count() const { return uids_.count(); }
    void cmd_create_uctx(CmdCtx &c);
    void cmd_destroy_uctx(CmdCtx &c);

  private:
    Device &dev_;
    IdAllocator uids_{1, kSharedUid};  // 1..0xfffe, bounded by log_max_uctx
};

// An object built on a UMEM holds one of these while it exists: the UMEM
// cannot be destroyed under it (RESOURCE_BUSY), as its pages would be
// unpinned while the device still writes them.
using UmemPin = std::shared_ptr<const int>;

class UmemTable {
  public:
    explicit UmemTable(Device &dev) : dev_(dev) {}
    void reset() {
        umems_.clear();
        ids_.reset();
    }
    size_t count() const { return umems_.size(); }
    size_t owned_by(uint16_t uid) const;
    void cmd_create_umem(CmdCtx &c);
    void cmd_destroy_umem(CmdCtx &c);

    // The bytes at offset of UMEM id as the buffer of an object the command
    // creates (what names it in the trace): false, with the command failed,
    // when the UMEM does not exist, is not the command's to use or is too
    // short.
    bool buffer(CmdCtx &c, uint32_t id, uint64_t offset, uint64_t bytes, const char *what, PageList &out, UmemPin &pin);
    // The guest address of a doorbell record of bytes (8: a CQ's or QP's,
    // 4: an SRQ's) at offset of UMEM id, aligned to its size.
    bool doorbell(CmdCtx &c, uint32_t id, uint64_t offset, unsigned bytes, const char *what, uint64_t &addr,
                  UmemPin &pin);
    std::string info() const;

  private:
    struct Umem {
        uint16_t uid = 0;
        PageList pages;
        UmemPin pin = std::make_shared<const int>(0);
    };
    Umem *find_for(CmdCtx &c, uint32_t id, const char *what);

    Device &dev_;
    std::map<uint32_t, Umem> umems_;
    IdAllocator ids_{1, 1u << 24};
};

}  // namespace hca

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

    // Where the command that creates a queue puts its doorbell record and
    // its buffer: in UMEMs (a DEVX object's dbr_umem_valid, *_umem_valid;
    // the doorbell field is then an offset in its UMEM) or at a guest
    // address and in the command's page list.
    struct QueueMemory {
        bool dbr_umem = false;
        uint32_t dbr_umem_id = 0;
        unsigned dbr_bytes = 8;  // 4: an SRQ's
        bool buf_umem = false;
        uint32_t buf_umem_id = 0;
        uint64_t buf_umem_offset = 0;
        std::span<const uint8_t> pas;  // the page list, when not in a UMEM
        unsigned log_page_size = 0;
        uint32_t page_offset = 0;  // PageList::offset_bytes() units
    };
    // dbr (the doorbell field in, the record's guest address out) and the
    // buffer of bytes (none when 0) of the queue what; pins[0] and pins[1]
    // hold the UMEMs used. False with the command failed.
    bool queue(CmdCtx &c, const char *what, const QueueMemory &m, uint64_t bytes, uint64_t &dbr, PageList &buf,
               UmemPin (&pins)[2]);
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

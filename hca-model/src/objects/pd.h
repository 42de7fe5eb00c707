// Protection domains and XRC domains (ALLOC/DEALLOC_PD, ALLOC/DEALLOC_XRCD).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "objects/ids.h"

namespace hca {

struct CmdCtx;
class Device;

class PdTable {
  public:
    explicit PdTable(Device &dev) : dev_(dev) {}
    void reset();
    bool pd_exists(uint32_t pdn) const { return pds_.used(pdn); }
    // An object the command creates may name PD pdn: false, with the
    // command failed, when it does not exist or is another user context's.
    bool pd_used_by(CmdCtx &c, uint32_t pdn, const char *what);
    bool xrcd_exists(uint32_t xrcdn) const { return xrcds_.used(xrcdn); }
    size_t pds() const { return pds_.count(); }
    size_t xrcds() const { return xrcds_.count(); }

    void cmd_alloc_pd(CmdCtx &c);
    void cmd_dealloc_pd(CmdCtx &c);
    void cmd_alloc_xrcd(CmdCtx &c);
    void cmd_dealloc_xrcd(CmdCtx &c);

  private:
    Device &dev_;
    IdAllocator pds_{1, 1u << 24};
    std::map<uint32_t, uint16_t> pd_uids_;  // the uid each PD was allocated for
    IdAllocator xrcds_{1, 1u << 24};
};

}  // namespace hca

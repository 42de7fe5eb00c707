// Memory keys (CREATE/DESTROY/QUERY_MKEY) and the translation every SGE,
// RDMA address and atomic goes through: key variant, free state, PD, bounds,
// access rights, then physical (PA) or page-table (MTT) translation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ids.h"

namespace hca {

struct CmdCtx;
class Device;

// mkc.access_mode (4:2 and 1:0 together).
enum class MkeyMode : uint8_t { Pa = 0, Mtt = 1, Klm = 2, Ksm = 3 };

// Access rights needed by an operation.
enum Access : uint8_t {
    kAccLocalRead = 1,
    kAccLocalWrite = 2,
    kAccRemoteRead = 4,
    kAccRemoteWrite = 8,
    kAccRemoteAtomic = 16,
};

struct Mkey {
    uint32_t index = 0;
    uint8_t variant = 0;  // mkc.mkey_7_0
    uint32_t pd = 0;
    uint32_t qpn = 0xffffff;
    uint16_t uid = 0;
    MkeyMode mode = MkeyMode::Pa;
    bool free = false;
    bool umr_en = false;
    bool lr = false, lw = false, rr = false, rw = false, a = false;
    bool length64 = false;
    bool en_rinval = false;
    uint64_t start = 0;
    uint64_t len = 0;
    uint8_t log_page_size = 12;
    uint32_t octwords = 0;      // translations_octword_size
    std::vector<uint64_t> mtt;  // page addresses (MTT mode)

    uint32_t key() const { return index << 8 | variant; }
};

// One physically contiguous piece of a translated range.
struct DmaChunk {
    uint64_t addr;
    uint32_t len;
};

enum class XlatError : uint8_t { None, BadKey, Free, BadPd, Bounds, Access, NoTranslation };
const char *xlat_error_name(XlatError e);

class MkeyTable {
  public:
    static constexpr uint32_t kFirstIndex = 2;  // 0 and 1 would collide with MLX5_INVALID_LKEY (0x100)

    explicit MkeyTable(Device &dev) : dev_(dev) {}
    void reset();
    size_t count() const { return mkeys_.size(); }
    const Mkey *find(uint32_t key) const;

    // Translates [va, va+len) of key for an object of protection domain pd;
    // appends the physical pieces to out (merging adjacent ones).
    XlatError translate(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                        std::vector<DmaChunk> &out) const;

    // Remote or local invalidation: the key becomes free (IBA 10.6.5).
    bool invalidate(uint32_t key, uint32_t pd);

    void cmd_create_mkey(CmdCtx &c);
    void cmd_destroy_mkey(CmdCtx &c);
    void cmd_query_mkey(CmdCtx &c);
    std::string info() const;

  private:
    Device &dev_;
    IdAllocator ids_{kFirstIndex, 1u << 24};
    std::map<uint32_t, Mkey> mkeys_;  // by index
};

}  // namespace hca

// libFuzzer target: arbitrary command-queue contents, mailbox chains and
// BAR0 writes against an initialized device.  The device must never crash,
// touch memory outside the fake guest, or stop answering.
#include <cstdint>
#include <cstring>
#include <vector>

#include "be.h"
#include "driver.h"
#include "fw/cmdif.h"

using namespace hcatest;
using hca::CommandInterface;

namespace {

class Input {
  public:
    Input(const uint8_t *d, size_t n) : d_(d), n_(n) {}
    bool empty() const { return n_ == 0; }
    uint8_t u8() {
        if (!n_) {
            return 0;
        }
        --n_;
        return *d_++;
    }
    uint16_t u16() { return static_cast<uint16_t>(u8() << 8 | u8()); }
    uint32_t u32() { return uint32_t{u16()} << 16 | u16(); }
    void bytes(uint8_t *out, size_t len) {
        for (size_t i = 0; i < len; ++i) {
            out[i] = u8();
        }
    }

  private:
    const uint8_t *d_;
    size_t n_;
};

// Opcodes the device implements, so that most inputs get past BAD_OP.
constexpr uint16_t kOpcodes[] = {
    hca::kOpEnableHca,
    hca::kOpDisableHca,
    hca::kOpQueryIssi,
    hca::kOpSetIssi,
    hca::kOpQueryPages,
    hca::kOpManagePages,
    hca::kOpQueryHcaCap,
    hca::kOpSetHcaCap,
    hca::kOpInitHca,
    hca::kOpTeardownHca,
    hca::kOpSetDriverVersion,
    hca::kOpQueryAdapter,
    hca::kOpAccessReg,
    hca::kOpNop,
    hca::kOpAllocUar,
    hca::kOpDeallocUar,
    hca::kOpCreateEq,
    hca::kOpDestroyEq,
    hca::kOpQueryEq,
    hca::kOpPageFaultResume,
    hca::kOpQuerySpecialContexts,
    hca::kOpCreateDct,
    hca::kOpDestroyDct,
    hca::kOpDrainDct,
    hca::kOpQueryDct,
    hca::kOpArmDctForKeyViolation,
    hca::kOpCreateUctx,
    hca::kOpDestroyUctx,
    hca::kOpCreateUmem,
    hca::kOpDestroyUmem,
    hca::kOpCreateXrq,
    hca::kOpDestroyXrq,
    hca::kOpQueryXrq,
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static Bench *bench = nullptr;
    if (!bench) {
        bench = new Bench;
    }
    Bench &b = *bench;
    b.host.free_all();
    b.dev.reset();
    b.advance(hca::InitSeg::kInitDelayNs);
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    d.create_eq(6, 1, {uint64_t{1} << 0x0a, 0, 0, 0}, uar);

    Input in(data, size);
    for (int steps = 0; !in.empty() && steps < 64; ++steps) {
        switch (in.u8() % 4) {
        case 0: {
            // A well-formed layout with a fuzzed inbox.
            const uint16_t opcode = kOpcodes[in.u8() % std::size(kOpcodes)];
            const size_t inlen = in.u16() % 2048;
            const size_t outlen = in.u16() % 5000;
            std::vector<uint8_t> box = Driver::inbox(opcode, 0, std::max<size_t>(inlen, 8));
            in.bytes(box.data() + 2, box.size() - 2);
            hca::ifc::set(box.data(), hca::ifc::cmd_in_hdr::opcode, opcode);
            const unsigned slot = in.u8() % 32;
            d.exec(box, outlen, slot);
            break;
        }
        case 1: {
            // A raw slot: every layout byte from the input, including the
            // lengths and mailbox pointers.
            const unsigned slot = in.u8() % 32;
            uint8_t lay[64];
            in.bytes(lay, sizeof(lay));
            const uint8_t mode = in.u8();
            if (mode & 1) {  // point into guest memory at a fuzzed offset
                hca::store_be64(lay + CommandInterface::kLayInPtr, FakeHost::kMemBase + (in.u32() % (64u << 20)));
            }
            if (mode & 2) {
                hca::store_be64(lay + CommandInterface::kLayOutPtr, FakeHost::kMemBase + (in.u32() % (64u << 20)));
            }
            if (mode & 4) {  // keep lengths small so chains are followed
                hca::store_be32(lay + CommandInterface::kLayInlen, in.u16() % 4096);
                hca::store_be32(lay + CommandInterface::kLayOutlen, in.u16() % 4096);
            }
            lay[CommandInterface::kLayStatusOwn] |= 1;
            b.host.write(d.cmdq() + slot * 64, lay, sizeof(lay));
            d.ring(1u << slot);
            b.pump();
            break;
        }
        case 2: {
            // Any BAR0 write: init segment, UAR doorbells.
            const uint64_t off = in.u32() % HCA_MODEL_BAR0_SIZE;
            static constexpr unsigned kSizes[] = {1, 2, 4, 8};
            const unsigned sz = kSizes[in.u8() % 4];
            uint8_t v[8];
            in.bytes(v, sz);
            b.dev.mmio_write(off, v, sz);
            uint8_t r[8];
            b.dev.mmio_read(off, r, sz);
            b.pump();
            break;
        }
        case 3:
            b.advance(in.u32() % 2'000'000'000);
            break;
        }
    }
    return 0;
}

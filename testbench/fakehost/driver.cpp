#include "driver.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "be.h"
#include "cmdif.h"
#include "iseg.h"

namespace hcatest {

using hca::CommandInterface;
using hca::InitSeg;

uint32_t Driver::iseg_read32(uint32_t off) {
    uint8_t b[4];
    b_.dev.mmio_read(off, b, 4);
    return hca::load_be32(b);
}

uint8_t Driver::iseg_read8(uint32_t off) {
    uint8_t b;
    b_.dev.mmio_read(off, &b, 1);
    return b;
}

void Driver::iseg_write32(uint32_t off, uint32_t v) {
    uint8_t b[4];
    hca::store_be32(b, v);
    b_.dev.mmio_write(off, b, 4);
}

void Driver::bar_write(uint64_t off, const void *data, unsigned size) {
    b_.dev.mmio_write(off, static_cast<const uint8_t *>(data), size);
}

void Driver::setup_cmdq() {
    cmdq_ = b_.host.alloc(4096);
    iseg_write32(InitSeg::kCmdqAddrH, static_cast<uint32_t>(cmdq_ >> 32));
    iseg_write32(InitSeg::kCmdqAddrLSz, static_cast<uint32_t>(cmdq_));
}

std::vector<uint8_t> Driver::inbox(uint16_t opcode, uint16_t op_mod, size_t inlen) {
    std::vector<uint8_t> in(std::max<size_t>(inlen, 16), 0);
    hca::ifc::set(in.data(), hca::ifc::cmd_in_hdr::opcode, opcode);
    hca::ifc::set(in.data(), hca::ifc::cmd_in_hdr::op_mod, op_mod);
    in.resize(inlen);  // shorter inboxes test length checks
    return in;
}

uint64_t Driver::chain(size_t bytes, uint8_t token) {
    const size_t n = (bytes + CommandInterface::kBlockData - 1) / CommandInterface::kBlockData;
    uint64_t first = 0;
    uint64_t prev = 0;
    for (size_t i = 0; i < n; ++i) {
        // dma_pool alignment of the driver: roundup_pow_of_two(576) = 1024.
        const uint64_t blk = b_.host.alloc(CommandInterface::kBlockSize, 1024);
        b_.host.write_be32(blk + CommandInterface::kBlockNum, static_cast<uint32_t>(i));
        b_.host.mem(blk, CommandInterface::kBlockSize)[CommandInterface::kBlockToken] = token;
        if (prev) {
            b_.host.write_be64(prev + CommandInterface::kBlockNext, blk);
        } else {
            first = blk;
        }
        prev = blk;
    }
    return first;
}

void Driver::post(unsigned slot, const std::vector<uint8_t> &in, size_t outlen, uint8_t token) {
    const uint64_t lay = cmdq_ + slot * CommandInterface::kSlotSize;
    uint8_t l[64] = {};
    l[CommandInterface::kLayType] = CommandInterface::kPciCmdXport;
    hca::store_be32(l + CommandInterface::kLayInlen, static_cast<uint32_t>(in.size()));
    hca::store_be32(l + CommandInterface::kLayOutlen, static_cast<uint32_t>(outlen));
    std::memcpy(l + CommandInterface::kLayIn, in.data(), std::min<size_t>(16, in.size()));
    l[CommandInterface::kLayToken] = token;
    if (in.size() > 16) {
        const uint64_t c = chain(in.size() - 16, token);
        hca::store_be64(l + CommandInterface::kLayInPtr, c);
        uint64_t blk = c;
        for (size_t done = 16; done < in.size(); done += CommandInterface::kBlockData) {
            b_.host.write(blk, in.data() + done, std::min<size_t>(CommandInterface::kBlockData, in.size() - done));
            uint8_t nb[8];
            b_.host.read(blk + CommandInterface::kBlockNext, nb, 8);
            blk = hca::load_be64(nb);
        }
    }
    slots_[slot] = {};
    slots_[slot].outlen = outlen;
    if (outlen > 16) {
        slots_[slot].out_chain = chain(outlen - 16, token);
        hca::store_be64(l + CommandInterface::kLayOutPtr, slots_[slot].out_chain);
    }
    l[CommandInterface::kLayStatusOwn] = 1;  // hardware owns it
    b_.host.write(lay, l, sizeof(l));
}

void Driver::ring(uint32_t bits) { iseg_write32(InitSeg::kCmdDbell, bits); }

CmdResult Driver::result(unsigned slot) {
    const uint64_t lay = cmdq_ + slot * CommandInterface::kSlotSize;
    uint8_t l[64];
    b_.host.read(lay, l, sizeof(l));
    CmdResult r;
    r.completed = !(l[CommandInterface::kLayStatusOwn] & 1);
    r.delivery = l[CommandInterface::kLayStatusOwn] >> 1;
    const size_t outlen = slots_[slot].outlen;
    r.out.assign(std::max<size_t>(outlen, 16), 0);
    std::memcpy(r.out.data(), l + CommandInterface::kLayOut, 16);
    uint64_t blk = slots_[slot].out_chain;
    for (size_t done = 16; done < outlen && blk; done += CommandInterface::kBlockData) {
        b_.host.read(blk, r.out.data() + done, std::min<size_t>(CommandInterface::kBlockData, outlen - done));
        uint8_t nb[8];
        b_.host.read(blk + CommandInterface::kBlockNext, nb, 8);
        blk = hca::load_be64(nb);
    }
    r.out.resize(std::max<size_t>(outlen, 16));
    r.status = r.out[0];
    r.syndrome = hca::load_be32(r.out.data() + 4);
    return r;
}

CmdResult Driver::exec(const std::vector<uint8_t> &in, size_t outlen, unsigned slot) {
    post(slot, in, outlen);
    ring(1u << slot);
    b_.pump();
    return result(slot);
}

void Driver::bring_up() {
    namespace ifc = hca::ifc;
    setup_cmdq();
    auto must = [](const CmdResult &r, const char *what) {
        if (!r.completed || r.delivery || r.status) {
            throw std::runtime_error(std::string("bring-up command failed: ") + what);
        }
    };
    must(exec(inbox(hca::kOpEnableHca, 0, ifc::enable_hca_in::size_bytes), ifc::enable_hca_out::size_bytes),
         "ENABLE_HCA");
    auto issi = exec(inbox(hca::kOpQueryIssi, 0, ifc::query_issi_in::size_bytes), ifc::query_issi_out::size_bytes);
    must(issi, "QUERY_ISSI");
    auto set_issi = inbox(hca::kOpSetIssi, 0, ifc::set_issi_in::size_bytes);
    ifc::set(set_issi.data(), ifc::set_issi_in::current_issi, 1);
    must(exec(set_issi, ifc::set_issi_out::size_bytes), "SET_ISSI");
    for (uint16_t op_mod : {uint16_t{1}, uint16_t{2}}) {
        auto q = exec(inbox(hca::kOpQueryPages, op_mod, ifc::query_pages_in::size_bytes),
                      ifc::query_pages_out::size_bytes);
        must(q, "QUERY_PAGES");
        const uint32_t n = static_cast<uint32_t>(q.get(ifc::query_pages_out::num_pages));
        auto give = inbox(hca::kOpManagePages, 1, ifc::manage_pages_in::size_bytes + n * 8);
        ifc::set(give.data(), ifc::manage_pages_in::input_num_entries, n);
        for (uint32_t i = 0; i < n; ++i) {
            hca::store_be64(give.data() + 16 + i * 8, b_.host.alloc(4096));
        }
        must(exec(give, ifc::manage_pages_out::size_bytes, 31), "MANAGE_PAGES");
        if (op_mod == 1) {
            auto he = inbox(hca::kOpAccessReg, 0, 16 + 16);
            ifc::set(he.data(), ifc::access_register_in::register_id, 0x7004);
            must(exec(he, 16 + 16), "ACCESS_REG HOST_ENDIANNESS");
            auto cur = exec(inbox(hca::kOpQueryHcaCap, 1, 16), ifc::query_hca_cap_out::size_bytes);
            must(cur, "QUERY_HCA_CAP cur");
            auto set = inbox(hca::kOpSetHcaCap, 0, ifc::set_hca_cap_in::size_bytes);
            std::memcpy(set.data() + 16, cur.out.data() + 16, 4096);
            must(exec(set, ifc::set_hca_cap_out::size_bytes), "SET_HCA_CAP");
        }
    }
    must(exec(inbox(hca::kOpInitHca, 0, ifc::init_hca_in::size_bytes), ifc::init_hca_out::size_bytes), "INIT_HCA");
}

uint32_t Driver::alloc_uar() {
    auto r = exec(inbox(hca::kOpAllocUar, 0, hca::ifc::alloc_uar_in::size_bytes), hca::ifc::alloc_uar_out::size_bytes);
    if (r.status) {
        throw std::runtime_error("ALLOC_UAR failed");
    }
    return static_cast<uint32_t>(r.get(hca::ifc::alloc_uar_out::uar));
}

EqHandle Driver::create_eq(unsigned log_size, unsigned vector, std::array<uint64_t, 4> events, uint32_t uar,
                           CmdResult *res) {
    namespace ifc = hca::ifc;
    EqHandle eq;
    eq.nent = 1u << log_size;
    eq.vector = vector;
    eq.uar = uar;
    const size_t bytes = size_t{eq.nent} * 64;
    const size_t npages = (bytes + 4095) / 4096;
    auto in = inbox(hca::kOpCreateEq, 0, ifc::create_eq_in::size_bytes + npages * 8);
    const auto ctx = ifc::create_eq_in::eq_context_entry;
    ifc::set(in.data(), ifc::in(ctx, ifc::eqc::log_eq_size), log_size);
    ifc::set(in.data(), ifc::in(ctx, ifc::eqc::uar_page), uar);
    ifc::set(in.data(), ifc::in(ctx, ifc::eqc::intr), vector);
    for (unsigned w = 0; w < 4; ++w) {
        hca::store_be64(in.data() + ifc::create_eq_in::event_bitmask.at(w), events[w]);
    }
    // Scattered 4 KiB pages, like mlx5_frag_buf_alloc_node().
    std::vector<uint64_t> pages;
    for (size_t i = 0; i < npages; ++i) {
        pages.push_back(b_.host.alloc(4096));
        b_.host.alloc(4096);  // a hole, so the buffer is not contiguous
        hca::store_be64(in.data() + ifc::create_eq_in::pas.byte() + i * 8, pages.back());
        for (unsigned e = 0; e < 64; ++e) {
            b_.host.mem(pages.back() + e * 64 + 63, 1)[0] = 1;  // owner = 1: hardware's
        }
    }
    eq.buf = pages[0];
    auto r = exec(in, ifc::create_eq_out::size_bytes);
    if (res) {
        *res = r;
    }
    if (r.status || r.delivery) {
        return eq;
    }
    eq.eqn = static_cast<uint32_t>(r.get(ifc::create_eq_out::eq_number));
    pages_[eq.eqn] = pages;
    eq_doorbell(eq, true);
    b_.pump();
    return eq;
}

std::optional<Eqe> Driver::next_eqe(EqHandle &eq) {
    const uint32_t idx = eq.ci & (eq.nent - 1);
    const uint64_t addr = pages_.at(eq.eqn)[idx * 64 / 4096] + (idx * 64) % 4096;
    Eqe e;
    b_.host.read(addr, e.data(), 64);
    const unsigned log = static_cast<unsigned>(__builtin_ctz(eq.nent));
    // lib/eq.h next_eqe_sw(): software owns the EQE when the owner bit
    // equals the lap parity.
    if (((e[63] & 1) ^ ((eq.ci >> log) & 1)) != 0) {
        return std::nullopt;
    }
    ++eq.ci;
    return e;
}

void Driver::eq_doorbell(const EqHandle &eq, bool arm) {
    uint8_t v[4];
    hca::store_be32(v, (eq.eqn << 24) | (eq.ci & 0xffffff));
    bar_write(uint64_t{eq.uar} * 4096 + (arm ? 0x40 : 0x48), v, 4);
}

}  // namespace hcatest

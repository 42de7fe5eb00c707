#include "driver.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "be.h"
#include "fw/cmdif.h"
#include "fw/iseg.h"

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

namespace hcatest {

namespace ifc = hca::ifc;

uint32_t Driver::alloc_pd() {
    auto r = exec(inbox(hca::kOpAllocPd, 0, 16), 16);
    if (r.status) {
        throw std::runtime_error("ALLOC_PD failed");
    }
    return static_cast<uint32_t>(r.get(ifc::alloc_pd_out::pd));
}

uint32_t Driver::alloc_xrcd() {
    auto r = exec(inbox(hca::kOpAllocXrcd, 0, 16), 16);
    if (r.status) {
        throw std::runtime_error("ALLOC_XRCD failed");
    }
    return static_cast<uint32_t>(r.get(ifc::alloc_xrcd_out::xrcd));
}

uint32_t Driver::create_pa_mkey(uint32_t pd, uint8_t variant, bool remote) {
    auto in = inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes);
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_1_0), 0);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::lr), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::lw), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::rr), remote);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::rw), remote);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::length64), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::pd), pd);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::mkey_7_0), variant);
    auto r = exec(in, 16);
    if (r.status) {
        throw std::runtime_error("CREATE_MKEY (PA) failed");
    }
    return static_cast<uint32_t>(r.get(ifc::create_mkey_out::mkey_index)) << 8 | variant;
}

CmdResult Driver::alloc_memic(uint64_t range_start, uint32_t range, uint32_t size, uint8_t log_align) {
    auto in = inbox(hca::kOpAllocMemic, 0, ifc::alloc_memic_in::size_bytes);
    ifc::set(in.data(), ifc::alloc_memic_in::range_start_addr, range_start);
    ifc::set(in.data(), ifc::alloc_memic_in::range_size, range);
    ifc::set(in.data(), ifc::alloc_memic_in::memic_size, size);
    ifc::set(in.data(), ifc::alloc_memic_in::log_memic_addr_alignment, log_align);
    return exec(in, ifc::alloc_memic_out::size_bytes);
}

uint8_t Driver::dealloc_memic(uint64_t addr, uint32_t size) {
    auto in = inbox(hca::kOpDeallocMemic, 0, ifc::dealloc_memic_in::size_bytes);
    ifc::set(in.data(), ifc::dealloc_memic_in::memic_start_addr, addr);
    ifc::set(in.data(), ifc::dealloc_memic_in::memic_size, size);
    return exec(in, ifc::dealloc_memic_out::size_bytes).status;
}

CmdResult Driver::create_memic_mkey(uint32_t pd, uint64_t bar_off, uint64_t len, uint8_t access, uint8_t variant) {
    auto in = inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes);
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_1_0), 1);  // MEMIC: 0x5
    ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_4_2), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::lr), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::lw), access & 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::rr), (access >> 2) & 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::rw), (access >> 3) & 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::a), (access >> 4) & 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::pd), pd);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::mkey_7_0), variant);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::start_addr), bar_off);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::len), len);
    return exec(in, ifc::create_mkey_out::size_bytes);
}

MrHandle Driver::create_mtt_mkey(uint32_t pd, uint64_t iova, uint32_t len, uint8_t access, CmdResult *res) {
    MrHandle mr;
    mr.iova = iova;
    mr.len = len;
    const uint64_t first = iova & ~uint64_t{4095};
    const uint64_t pages = (iova + len - first + 4095) / 4096;
    const uint64_t octwords = (pages + 1) / 2;
    auto in = inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes + octwords * 16);
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_1_0), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::lr), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::lw), access & 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::rr), (access >> 2) & 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::rw), (access >> 3) & 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::a), (access >> 4) & 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::umr_en), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::pd), pd);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::mkey_7_0), 0x42);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::start_addr), iova);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::len), len);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::log_page_size), 12);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::translations_octword_size), octwords);
    ifc::set(in.data(), ifc::create_mkey_in::translations_octword_actual_size, octwords);
    // Scattered pages, in reverse order, so a wrong translation shows.
    std::vector<uint64_t> pas(pages);
    for (uint64_t i = 0; i < pages; ++i) {
        pas[pages - 1 - i] = b_.host.alloc(4096);
        b_.host.alloc(4096);
    }
    for (uint64_t i = 0; i < pages; ++i) {
        hca::store_be64(in.data() + ifc::create_mkey_in::size_bytes + i * 8, pas[i]);
    }
    mr.addr = pas.empty() ? 0 : pas[0] + (iova & 4095);
    auto r = exec(in, 16);
    if (res) {
        *res = r;
    }
    if (!r.status) {
        mr.key = static_cast<uint32_t>(r.get(ifc::create_mkey_out::mkey_index)) << 8 | 0x42;
    }
    pages_[0x80000000u | mr.key] = pas;  // remember for tests reading the buffer
    return mr;
}

CqHandle Driver::create_cq(unsigned log_size, uint32_t eqn, uint32_t uar, CmdResult *res, unsigned cqe_sz,
                           int mini_format, unsigned layout) {
    CqHandle cq;
    cq.nent = 1u << log_size;
    cq.uar = uar;
    cq.stride = cqe_sz ? 128 : 64;
    const size_t bytes = size_t{cq.nent} * cq.stride;
    const size_t npages = (bytes + 4095) / 4096;
    auto in = inbox(hca::kOpCreateCq, 0, ifc::create_cq_in::size_bytes + npages * 8);
    const auto ctx = ifc::create_cq_in::cq_context;
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::log_cq_size), log_size);
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::uar_page), uar);
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::c_eqn_or_apu_element), eqn);
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::cqe_sz), cqe_sz);
    if (mini_format >= 0) {
        ifc::set(in.data(), ifc::in(ctx, ifc::cqc::cqe_comp_en), 1);
        ifc::set(in.data(), ifc::in(ctx, ifc::cqc::mini_cqe_res_format), static_cast<uint64_t>(mini_format));
        ifc::set(in.data(), ifc::in(ctx, ifc::cqc::cqe_compression_layout), layout);
    }
    cq.dbr = b_.host.alloc(64, 64);
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::dbr_addr), cq.dbr);
    for (size_t i = 0; i < npages; ++i) {
        cq.pages.push_back(b_.host.alloc(4096));
        b_.host.alloc(4096);
        hca::store_be64(in.data() + ifc::create_cq_in::size_bytes + i * 8, cq.pages.back());
        for (unsigned e = 0; e < 4096 / cq.stride; ++e) {
            b_.host.mem(cq.pages.back() + e * cq.stride + cq.stride - 1, 1)[0] = 0xf0;  // invalid opcode, owner 0
        }
    }
    auto r = exec(in, 16);
    if (res) {
        *res = r;
    }
    cq.cqn = static_cast<uint32_t>(r.get(ifc::create_cq_out::cqn));
    return cq;
}

QpHandle Driver::create_qp(uint8_t st, uint32_t pd, uint32_t cqn_snd, uint32_t cqn_rcv, uint32_t uar, unsigned log_sq,
                           unsigned log_rq, CmdResult *res, uint8_t rq_type, uint32_t srqn) {
    QpHandle qp;
    qp.st = st;
    qp.uar = uar;
    qp.rq_wqes = rq_type == 0 ? 1u << log_rq : 0;
    qp.rq_stride = 64;  // 4 scatter entries
    qp.sq_wqebbs = 1u << log_sq;
    const size_t bytes = size_t{qp.rq_wqes} * qp.rq_stride + size_t{qp.sq_wqebbs} * 64;
    const size_t npages = (bytes + 4095) / 4096;
    auto in = inbox(hca::kOpCreateQp, 0, ifc::create_qp_in::size_bytes + npages * 8);
    const auto ctx = ifc::create_qp_in::qpc;
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::st), st);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::pm_state), 3);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::pd), pd);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::log_sq_size), log_sq);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::log_rq_size), log_rq);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::log_rq_stride), 2);  // 64 bytes
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::rq_type), rq_type);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::srqn_rmpn_xrqn), srqn);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::cqn_snd), cqn_snd);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::cqn_rcv), cqn_rcv);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::uar_page), uar);
    qp.dbr = b_.host.alloc(64, 64);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::dbr_addr), qp.dbr);
    for (size_t i = 0; i < npages; ++i) {
        qp.pages.push_back(b_.host.alloc(4096));
        b_.host.alloc(4096);
        hca::store_be64(in.data() + ifc::create_qp_in::size_bytes + i * 8, qp.pages.back());
    }
    if (qp_fill) {
        qp_fill(in);
        qp_fill = nullptr;
    }
    auto r = exec(in, 16);
    if (res) {
        *res = r;
    }
    qp.qpn = static_cast<uint32_t>(r.get(ifc::create_qp_out::qpn));
    return qp;
}

CmdResult Driver::modify_qp(uint16_t opcode, uint32_t qpn, const std::function<void(std::vector<uint8_t> &)> &fill,
                            uint32_t opt) {
    const bool small = opcode == 0x507 || opcode == 0x50a;
    auto in = inbox(opcode, 0, small ? 16 : ifc::rst2init_qp_in::size_bytes);
    ifc::set(in.data(), ifc::rst2init_qp_in::qpn, qpn);
    if (!small) {
        ifc::set(in.data(), ifc::rst2init_qp_in::opt_param_mask, opt);
    }
    if (fill) {
        fill(in);
    }
    return exec(in, 16);
}

void Driver::ud_to_rts(const QpHandle &qp, uint32_t qkey) {
    const auto ctx = ifc::rst2init_qp_in::qpc;
    const auto pri = ifc::in(ctx, ifc::qpc::primary_address_path);
    auto r = modify_qp(0x502, qp.qpn, [&](std::vector<uint8_t> &in) {
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::q_key), qkey);
        ifc::set(in.data(), ifc::in(pri, ifc::ads::vhca_port_num), 1);
        ifc::set(in.data(), ifc::in(pri, ifc::ads::pkey_index), 0);
    });
    if (r.status) {
        throw std::runtime_error("RST2INIT failed");
    }
    if (modify_qp(0x503, qp.qpn, [&](std::vector<uint8_t> &in) {
            ifc::set(in.data(), ifc::in(ctx, ifc::qpc::mtu), 5);
        }).status) {
        throw std::runtime_error("INIT2RTR failed");
    }
    if (modify_qp(0x504, qp.qpn, [&](std::vector<uint8_t> &in) {
            ifc::set(in.data(), ifc::in(ctx, ifc::qpc::next_send_psn), 0x100);
        }).status) {
        throw std::runtime_error("RTR2RTS failed");
    }
}

std::optional<Cqe> Driver::next_cqe(CqHandle &cq) {
    const uint32_t idx = cq.ci & (cq.nent - 1);
    const uint64_t off = uint64_t{idx} * cq.stride + cq.stride - 64;
    const uint64_t addr = cq.pages[off / 4096] + off % 4096;
    Cqe e;
    b_.host.read(addr, e.data(), 64);
    const unsigned log = static_cast<unsigned>(__builtin_ctz(cq.nent));
    // hw/cq.c get_sw_cqe(): valid opcode and owner == lap parity.
    if ((e[63] >> 4) == 0xf || ((e[63] & 1) ^ ((cq.ci >> log) & 1))) {
        return std::nullopt;
    }
    ++cq.ci;
    b_.host.write_be32(cq.dbr, cq.ci & 0xffffff);
    return e;
}

std::vector<Cqe> Driver::next_cqes(CqHandle &cq, int mini_format, unsigned *sessions) {
    auto slot = [&](uint32_t counter) {
        const uint64_t off = uint64_t{counter & (cq.nent - 1)} * cq.stride + cq.stride - 64;
        Cqe e;
        b_.host.read(cq.pages[off / 4096] + off % 4096, e.data(), 64);
        return e;
    };
    const uint32_t at = cq.ci;
    std::optional<Cqe> first = next_cqe(cq);
    if (!first) {
        return {};
    }
    Cqe title = *first;
    if (((title[63] >> 2) & 3) != 3) {
        return {title};
    }
    if (sessions) {
        ++*sessions;
    }
    const uint32_t n = hca::load_be32(title.data() + 44);
    std::vector<Cqe> out;
    uint16_t wqe = hca::load_be16(title.data() + 60);
    Cqe minis{};
    for (uint32_t i = 0; i < n; ++i) {
        if (i % 8 == 0) {
            minis = slot(at + (i == 0 ? 1 : i));
        }
        const uint8_t *m = minis.data() + (i % 8) * 8;
        Cqe e = title;
        e[63] = static_cast<uint8_t>(title[63] & 0xf3);
        std::memcpy(e.data() + 44, m + 4, 4);
        if (mini_format == 0) {
            std::memcpy(e.data() + 12, m, 4);
        } else {
            std::memcpy(e.data() + 20, m, 2);
        }
        if (mini_format == 3) {
            std::memcpy(e.data() + 60, m + 2, 2);
        } else {
            hca::store_be16(e.data() + 60, static_cast<uint16_t>(wqe + i));
        }
        out.push_back(e);
    }
    // The session's indexes are free for the next lap: mark them invalid,
    // as mlx5e_cqes_update_owner() does (a mini CQE array's last byte is
    // data, not an owner bit).
    const unsigned log = static_cast<unsigned>(__builtin_ctz(cq.nent));
    for (uint32_t i = 0; i < n; ++i) {
        const uint64_t off = uint64_t{(at + i) & (cq.nent - 1)} * cq.stride + cq.stride - 1;
        b_.host.mem(cq.pages[off / 4096] + off % 4096, 1)[0] = static_cast<uint8_t>(0xf0 | (((at + i) >> log) & 1));
    }
    cq.ci = at + n;
    b_.host.write_be32(cq.dbr, cq.ci & 0xffffff);
    return out;
}

uint8_t Driver::resize_cq(CqHandle &cq, unsigned log_size) {
    const uint32_t nent = 1u << log_size;
    const size_t npages = (size_t{nent} * 64 + 4095) / 4096;
    auto in = inbox(hca::kOpModifyCq, 1, ifc::modify_cq_in::size_bytes + npages * 8);
    ifc::set(in.data(), ifc::modify_cq_in::cqn, cq.cqn);
    ifc::set(in.data(), ifc::Field{ifc::modify_cq_in::modify_field_select_resize_field_select.off, 32}, 7);
    const auto ctx = ifc::modify_cq_in::cq_context;
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::log_cq_size), log_size);
    std::vector<uint64_t> pages;
    for (size_t i = 0; i < npages; ++i) {
        pages.push_back(b_.host.alloc(4096));
        for (unsigned e = 0; e < 64; ++e) {
            b_.host.mem(pages.back() + e * 64 + 63, 1)[0] = 0xf0;
        }
        hca::store_be64(in.data() + ifc::modify_cq_in::size_bytes + i * 8, pages.back());
    }
    auto r = exec(in, 16);
    if (r.status) {
        return r.status;
    }
    // copy_resize_cqes(): software-owned CQEs up to the RESIZE CQE move to
    // the new buffer one slot later; the consumer then skips the marker.
    CqHandle old = cq;
    CqHandle nw = cq;
    nw.pages = pages;
    nw.nent = nent;
    uint32_t i = cq.ci;
    for (;;) {
        const uint32_t idx = i & (old.nent - 1);
        Cqe e;
        b_.host.read(old.pages[idx * 64 / 4096] + (idx * 64) % 4096, e.data(), 64);
        const unsigned log = static_cast<unsigned>(__builtin_ctz(old.nent));
        if ((e[63] & 1) ^ ((i >> log) & 1) || (e[63] >> 4) == 0xf) {
            throw std::runtime_error("resize: no RESIZE CQE in the old buffer");
        }
        if ((e[63] >> 4) == hca::kCqeResizeCq) {
            break;
        }
        const uint32_t d = (i + 1) & (nent - 1);
        e[63] = static_cast<uint8_t>((e[63] & ~1) | (((i + 1) >> log_size) & 1));
        b_.host.write(pages[d * 64 / 4096] + (d * 64) % 4096, e.data(), 64);
        ++i;
    }
    nw.ci = cq.ci + 1;
    cq = nw;
    b_.host.write_be32(cq.dbr, cq.ci & 0xffffff);
    return 0;
}

uint8_t Driver::moderate_cq(const CqHandle &cq, uint16_t period_us, uint16_t count) {
    auto in = inbox(hca::kOpModifyCq, 0, ifc::modify_cq_in::size_bytes);
    ifc::set(in.data(), ifc::modify_cq_in::cqn, cq.cqn);
    ifc::set(in.data(), ifc::Field{ifc::modify_cq_in::modify_field_select_resize_field_select.off, 32}, 3);
    const auto ctx = ifc::modify_cq_in::cq_context;
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::cq_period), period_us);
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::cq_max_count), count);
    return exec(in, 16).status;
}

void Driver::cq_arm(const CqHandle &cq, bool solicited) {
    uint8_t v[8];
    hca::store_be32(v, (solicited ? 1u << 24 : 0) | (cq.ci & 0xffffff));
    hca::store_be32(v + 4, cq.cqn);
    b_.host.write(cq.dbr + 4, v, 4);
    bar_write(uint64_t{cq.uar} * 4096 + 0x20, v, 8);
}

void Driver::post_recv(QpHandle &qp, uint32_t lkey, uint64_t addr, uint32_t len) {
    const uint64_t wqe = qp.addr(uint64_t{qp.rq_pi & (qp.rq_wqes - 1)} * qp.rq_stride);
    uint8_t seg[64] = {};
    hca::store_be32(seg, len);
    hca::store_be32(seg + 4, lkey);
    hca::store_be64(seg + 8, addr);
    hca::store_be32(seg + 16 + 4, hca::kInvalidLkey);  // terminator
    b_.host.write(wqe, seg, sizeof(seg));
    ++qp.rq_pi;
    b_.host.write_be32(qp.dbr, qp.rq_pi);
}

void Driver::ring_sq(QpHandle &qp, uint32_t wqebb_index, uint32_t ds, uint8_t opcode, bool two_halves) {
    b_.host.write_be32(qp.dbr + 4, qp.sq_pi);
    uint8_t db[8];
    hca::store_be32(db, (wqebb_index & 0xffff) << 8 | opcode);
    hca::store_be32(db + 4, qp.qpn << 8 | ds);
    const uint64_t off = uint64_t{qp.uar} * 4096 + 0x800;
    if (two_halves) {
        bar_write(off, db, 4);
        bar_write(off + 4, db + 4, 4);
    } else {
        bar_write(off, db, 8);
    }
    if (run_on_doorbell) {
        b_.pump();
    }
}

void Driver::post_ud_send(QpHandle &qp, uint16_t dlid, uint32_t dqpn, uint32_t qkey, std::vector<Sge> sges,
                          bool signaled, const std::vector<uint8_t> &inline_data, bool grh,
                          const std::array<uint8_t, 16> &dgid, bool imm, uint32_t imm_data, bool two_halves) {
    std::vector<uint8_t> w(16 + 48);
    const uint16_t index = qp.sq_pi;
    const uint8_t opcode = imm ? hca::kWqeSendImm : hca::kWqeSend;
    // datagram segment
    uint8_t *av = w.data() + 16;
    hca::store_be32(av, qkey);
    hca::store_be32(av + 8, 0x80000000u | dqpn);
    av[0x0c] = 0;  // SL 0
    hca::store_be16(av + 0x0e, dlid);
    if (grh) {
        hca::store_be32(av + 0x1c, 1u << 30);
        av[0x1b] = 64;
        std::memcpy(av + 0x20, dgid.data(), 16);
    }
    if (!inline_data.empty()) {
        const size_t at = w.size();
        w.resize(at + ((4 + inline_data.size() + 15) & ~size_t{15}));
        hca::store_be32(w.data() + at, 0x80000000u | static_cast<uint32_t>(inline_data.size()));
        std::memcpy(w.data() + at + 4, inline_data.data(), inline_data.size());
    }
    for (const Sge &s : sges) {
        const size_t at = w.size();
        w.resize(at + 16);
        hca::store_be32(w.data() + at, s.len);
        hca::store_be32(w.data() + at + 4, s.lkey);
        hca::store_be64(w.data() + at + 8, s.addr);
    }
    const uint32_t ds = static_cast<uint32_t>(w.size() / 16);
    hca::store_be32(w.data(), uint32_t{index} << 8 | opcode);
    hca::store_be32(w.data() + 4, qp.qpn << 8 | ds);
    w[11] = signaled ? hca::kCeCqUpdate : 0;
    hca::store_be32(w.data() + 12, imm_data);
    const uint32_t bbs = (ds * 16 + 63) / 64;
    w.resize(bbs * 64);
    for (uint32_t b = 0; b < bbs; ++b) {
        b_.host.write(qp.sq_addr(index + b), w.data() + b * 64, 64);
    }
    qp.sq_pi = static_cast<uint16_t>(qp.sq_pi + bbs);
    ring_sq(qp, index, ds, opcode, two_halves);
}

CmdResult Driver::mad_ifc(const std::array<uint8_t, 256> &mad, std::array<uint8_t, 256> &resp, uint16_t op_mod) {
    auto in = inbox(hca::kOpMadIfc, op_mod, ifc::mad_ifc_in::size_bytes);
    ifc::set(in.data(), ifc::mad_ifc_in::port, 1);
    std::memcpy(in.data() + 16, mad.data(), 256);
    auto r = exec(in, ifc::mad_ifc_out::size_bytes);
    std::memcpy(resp.data(), r.out.data() + 16, 256);
    return r;
}

void Driver::activate_port(uint16_t lid, uint16_t sm_lid) {
    for (uint8_t state : {uint8_t{3}, uint8_t{4}}) {
        std::array<uint8_t, 256> m{}, r{};
        m[0] = 1;
        m[1] = 0x01;  // LID-routed SMP
        m[2] = 1;
        m[3] = 0x02;  // Set
        hca::store_be16(m.data() + 16, 0x15);
        hca::store_be32(m.data() + 20, 1);
        uint8_t *d = m.data() + 64;
        hca::store_be64(d + 8, 0xfe80000000000000ull);
        hca::store_be16(d + 16, lid);
        hca::store_be16(d + 18, sm_lid);
        d[32] = state;
        d[36] = 5 << 4;  // NeighborMTU 4096
        if (mad_ifc(m, r).status || hca::load_be16(r.data() + 4)) {
            throw std::runtime_error("SMA refused the PortInfo Set");
        }
    }
}

}  // namespace hcatest

// The fake driver's send side: send WQEs as mlx5_ib builds them, memory
// windows and indirect keys, and an RC QP taken to RTS (driver.cpp: the
// command interface, bring-up and the other objects).
#include <algorithm>
#include <cstring>

#include "be.h"
#include "driver.h"

namespace hcatest {

namespace ifc = hca::ifc;

void Driver::post_send(QpHandle &qp, const SendWr &wr, bool ring) {
    std::vector<uint8_t> w(16);
    const uint16_t index = qp.sq_pi;
    auto put = [&w](const void *p, size_t n) {
        const size_t at = w.size();
        w.resize(at + n);
        std::memcpy(w.data() + at, p, n);
    };
    if (qp.st == hca::kQpXrc) {
        uint8_t x[16] = {};
        hca::store_be32(x, wr.xrc_srqn);
        put(x, 16);
    }
    if (qp.st == hca::kQpDci) {
        uint8_t av[48] = {};
        hca::store_be64(av, wr.dc_key);
        hca::store_be32(av + 8, 0x80000000u | wr.dctn);
        hca::store_be16(av + 14, wr.dlid);
        put(av, 48);
    }
    const bool rdma = wr.opcode == hca::kWqeRdmaWrite || wr.opcode == hca::kWqeRdmaWriteImm ||
                      wr.opcode == hca::kWqeRdmaRead;
    const bool atomic = wr.opcode == hca::kWqeAtomicCs || wr.opcode == hca::kWqeAtomicFa;
    if (rdma || atomic) {
        uint8_t r[16] = {};
        hca::store_be64(r, wr.raddr);
        hca::store_be32(r + 8, wr.rkey);
        put(r, 16);
    }
    if (atomic) {
        uint8_t a[16];
        hca::store_be64(a, wr.swap_add);
        hca::store_be64(a + 8, wr.compare);
        put(a, 16);
    }
    if (!wr.inline_data.empty()) {
        const size_t at = w.size();
        w.resize(at + ((4 + wr.inline_data.size() + 15) & ~size_t{15}));
        hca::store_be32(w.data() + at, 0x80000000u | static_cast<uint32_t>(wr.inline_data.size()));
        std::memcpy(w.data() + at + 4, wr.inline_data.data(), wr.inline_data.size());
    }
    for (const Sge &s : wr.sges) {
        uint8_t d[16];
        hca::store_be32(d, s.len);
        hca::store_be32(d + 4, s.lkey);
        hca::store_be64(d + 8, s.addr);
        put(d, 16);
    }
    const uint32_t ds = static_cast<uint32_t>(w.size() / 16);
    hca::store_be32(w.data(), uint32_t{index} << 8 | wr.opcode);
    hca::store_be32(w.data() + 4, qp.qpn << 8 | ds);
    w[11] = static_cast<uint8_t>(wr.fence << 5 | (wr.signaled ? hca::kCeCqUpdate : 0) | (wr.solicited ? 2 : 0));
    hca::store_be32(w.data() + 12, wr.imm);
    const uint32_t bbs = (ds * 16 + 63) / 64;
    w.resize(bbs * 64);
    for (uint32_t b = 0; b < bbs; ++b) {
        b_.host.write(qp.sq_addr(index + b), w.data() + b * 64, 64);
    }
    qp.sq_pi = static_cast<uint16_t>(qp.sq_pi + bbs);
    if (ring) {
        ring_sq(qp, index, ds, wr.opcode);
    }
}

void Driver::post_raw(QpHandle &qp, uint8_t opcode, uint32_t imm, const std::vector<uint8_t> &body, bool signaled,
                      uint8_t fence) {
    std::vector<uint8_t> w(16);
    w.insert(w.end(), body.begin(), body.end());
    w.resize((w.size() + 15) & ~size_t{15});
    const uint16_t index = qp.sq_pi;
    const uint32_t ds = static_cast<uint32_t>(w.size() / 16);
    hca::store_be32(w.data(), uint32_t{index} << 8 | opcode);
    hca::store_be32(w.data() + 4, qp.qpn << 8 | ds);
    w[11] = static_cast<uint8_t>(fence << 5 | (signaled ? hca::kCeCqUpdate : 0));
    hca::store_be32(w.data() + 12, imm);
    const uint32_t bbs = (ds * 16 + 63) / 64;
    w.resize(bbs * 64);
    for (uint32_t b = 0; b < bbs; ++b) {
        b_.host.write(qp.sq_addr(index + b), w.data() + b * 64, 64);
    }
    qp.sq_pi = static_cast<uint16_t>(qp.sq_pi + bbs);
    ring_sq(qp, index, ds, opcode);
}

uint32_t Driver::create_free_mkey(uint32_t pd, uint32_t octwords, uint8_t variant) {
    auto in = inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes);
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    ifc::set(in.data(), ifc::in(e, ifc::mkc::free_), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::umr_en), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_1_0), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::lr), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::pd), pd);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::mkey_7_0), variant);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::log_page_size), 12);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::translations_octword_size), octwords);
    auto r = exec(in, 16);
    if (r.status) {
        throw std::runtime_error("CREATE_MKEY (free) failed");
    }
    return static_cast<uint32_t>(r.get(ifc::create_mkey_out::mkey_index)) << 8 | variant;
}

uint32_t Driver::create_window(uint32_t pd, bool type2, uint8_t variant, CmdResult *res, bool free) {
    auto in = inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes);
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    ifc::set(in.data(), ifc::in(e, ifc::mkc::free_), free);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::umr_en), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::lr), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_1_0), 2);  // MLX5_MKC_ACCESS_MODE_KLMS
    ifc::set(in.data(), ifc::in(e, ifc::mkc::en_rinval), type2);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::pd), pd);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::mkey_7_0), variant);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::translations_octword_size), 4);
    auto r = exec(in, 16);
    if (res) {
        *res = r;
    } else if (r.status) {
        throw std::runtime_error("CREATE_MKEY (window) failed");
    }
    return r.status ? 0 : static_cast<uint32_t>(r.get(ifc::create_mkey_out::mkey_index)) << 8 | variant;
}

uint32_t Driver::create_indirect_mkey(uint32_t pd, uint8_t mode, uint8_t log_page, uint32_t octwords,
                                      const std::vector<IndirectEntry> &entries, bool free, CmdResult *res) {
    auto in = inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes + entries.size() * 16);
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    ifc::set(in.data(), ifc::in(e, ifc::mkc::free_), free);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::umr_en), 1);
    for (auto f : {ifc::mkc::lr, ifc::mkc::lw, ifc::mkc::rr, ifc::mkc::rw, ifc::mkc::a, ifc::mkc::length64}) {
        ifc::set(in.data(), ifc::in(e, f), 1);
    }
    ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_1_0), mode);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::pd), pd);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::mkey_7_0), 0x55);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::log_page_size), log_page);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::translations_octword_size), octwords);
    ifc::set(in.data(), ifc::create_mkey_in::translations_octword_actual_size, entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
        uint8_t *p = in.data() + ifc::create_mkey_in::size_bytes + i * 16;
        hca::store_be32(p, entries[i].bc);
        hca::store_be32(p + 4, entries[i].key);
        hca::store_be64(p + 8, entries[i].addr);
    }
    auto r = exec(in, 16);
    if (res) {
        *res = r;
    } else if (r.status) {
        throw std::runtime_error("CREATE_MKEY (indirect) failed");
    }
    return r.status ? 0 : static_cast<uint32_t>(r.get(ifc::create_mkey_out::mkey_index)) << 8 | 0x55;
}

void Driver::connect_qp(const QpHandle &qp, uint32_t remote_qpn, uint16_t dlid, uint8_t mtu, uint8_t retry,
                        uint8_t rnr_retry, uint8_t timeout, uint8_t min_rnr) {
    namespace ifc = hca::ifc;
    const auto ctx = ifc::rst2init_qp_in::qpc;
    const auto pri = ifc::in(ctx, ifc::qpc::primary_address_path);
    auto r = modify_qp(0x502, qp.qpn, [&](std::vector<uint8_t> &in) {
        ifc::set(in.data(), ifc::in(pri, ifc::ads::vhca_port_num), 1);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::rre), 1);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::rwe), 1);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::rae), 1);
    });
    if (r.status) {
        throw std::runtime_error("RST2INIT failed");
    }
    r = modify_qp(0x503, qp.qpn, [&](std::vector<uint8_t> &in) {
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::mtu), mtu);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::log_msg_max), 30);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::remote_qpn), remote_qpn);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::next_rcv_psn), 0x1000);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::log_rra_max), 2);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::min_rnr_nak), min_rnr);
        ifc::set(in.data(), ifc::in(pri, ifc::ads::rlid), dlid);
        ifc::set(in.data(), ifc::in(pri, ifc::ads::vhca_port_num), 1);
    });
    if (r.status) {
        throw std::runtime_error("INIT2RTR failed");
    }
    r = modify_qp(0x504, qp.qpn, [&](std::vector<uint8_t> &in) {
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::next_send_psn), 0x1000);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::retry_count), retry);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::rnr_retry), rnr_retry);
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::log_sra_max), 2);
        ifc::set(in.data(), ifc::in(pri, ifc::ads::ack_timeout), timeout);
    });
    if (r.status) {
        throw std::runtime_error("RTR2RTS failed");
    }
}

}  // namespace hcatest

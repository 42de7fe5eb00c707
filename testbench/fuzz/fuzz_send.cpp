// libFuzzer target: the send path of every transport.  RC, UC and XRC QPs
// connected to themselves through the port's LID (so the responder runs
// too), a UD QP, and the REG_UMR QP; each input posts WQEs whose opcode,
// control flags, segments (datagram/AV, XRC, remote address, atomic, UMR
// control + mkey + translations or a memory window bind's KLM entries,
// inline data, scatter entries with real or bogus keys, a window's and a
// device-memory (MEMIC) key among
// them) and lengths it chooses, then rings the doorbell (whole or in two
// halves, with a right or wrong WQE count) or copies it through BlueFlame
// (whole or torn, the device running in the middle or not). An IPoIB offload UD QP adds the
// Ethernet segment: checksum flags, MSS and an inline header (a real TCP/IP
// header, patched, or bytes), for SEND and LSO; its sends to itself run the
// receive side's checksum checks. On-demand paging: steps take pages of the
// MTT region away and give them back (as mlx5_ib's UMRs do) and answer the
// page faults with PAGE_FAULT_RESUME, right, wrong or with error. A DCI
// sends to a DCT on the same port (its address segment's key, DCT number
// and LID right or wrong), the DCT receiving into an RMP. Tag matching: an
// RC QP on a tag-matching XRQ posts tag list operations (APPEND, REMOVE,
// NOP, their indexes, tags, phase counts and buffers chosen) and sends
// itself messages with a TMH (EAGER, RNDV with an RVH naming a real or
// bogus buffer, NO_TAG, FIN), so that matches, unexpected messages and
// the device's own rendezvous READs and FINs interleave with its WQEs.
#include <array>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "datapath/tm.h"
#include "fuzz_input.h"
#include "fuzz_world.h"
#include "ip_packet.h"
#include "objects/mkey.h"

using namespace hcatest;
using hcafuzz::Input;

namespace {

constexpr uint16_t kLid = 3;
constexpr uint32_t kQkey = 7;
constexpr uint64_t kDcKey = 0x5eed;
// Longest message a scatter entry asks for.  Larger ones work, but one
// doorbell of a 64 MiB loopback SEND is 65,536 packets (seconds under
// ASan; it found the unbounded bottom half of issue 13 item 2, see
// docs/RELIABILITY.md), and even 1 MiB made the average input cost 7 ms,
// a fifth of it in CRCs.  256 KiB at MTU 1024 is still 256 packets, the
// budget of one Device::run, so a few such WQEs reach the reschedule.
constexpr uint32_t kMaxMessage = 256u << 10;

struct World {
    Bench b;
    Driver d{b};
    uint32_t uar = 0, pd = 0, xrcd = 0, lkey = 0, free_key = 0, xsrqn = 0;
    uint32_t memic_key = 0;  // 8 KiB of device memory, zero based
    uint32_t psvs[2] = {};   // a signature key's memory and wire PSVs
    uint32_t sig_key = 0;    // a signature key over the MR's first 8 KiB (new_free_key())
    MrHandle mr;
    EqHandle eq;
    CqHandle cq;
    QpHandle rc, uc, ud, xrc, umr, ipoib, dci, tm;
    QpHandle sq;  // an SQ object (CREATE_SQ): NOPs complete, the rest is refused
    uint32_t dctn = 0, xrqn = 0;
    uint64_t buf = 0;

    void setup() {
        hcafuzz::fresh_device(b, d);
        uar = d.alloc_uar();
        eq = d.create_eq(7, 1, {~uint64_t{0}, 0, 0, 0}, uar);
        pd = d.alloc_pd();
        xrcd = d.alloc_xrcd();
        lkey = d.create_pa_mkey(pd, 0x11, true);
        mr = d.create_mtt_mkey(pd, 0x7000, 3 * 4096, 0x1f);
        d.alloc_memic(HCA_MODEL_MEMIC_BAR_OFFSET, 8192, 8192);
        memic_key = static_cast<uint32_t>(d.create_memic_mkey(pd, HCA_MODEL_MEMIC_BAR_OFFSET, 8192, 0x1f)
                                              .get(hca::ifc::create_mkey_out::mkey_index))
                        << 8 |
                    0x5d;
        auto psv = Driver::inbox(hca::kOpCreatePsv, 0, hca::ifc::create_psv_in::size_bytes);
        hca::ifc::set(psv.data(), hca::ifc::create_psv_in::num_psv, 2);
        hca::ifc::set(psv.data(), hca::ifc::create_psv_in::pd, pd);
        const auto pr = d.exec(psv, hca::ifc::create_psv_out::size_bytes);
        psvs[0] = static_cast<uint32_t>(pr.get(hca::ifc::create_psv_out::psv0_index));
        psvs[1] = static_cast<uint32_t>(pr.get(hca::ifc::create_psv_out::psv1_index));
        cq = d.create_cq(10, eq.eqn, uar);
        buf = b.host.alloc(64 << 10);
        d.activate_port(kLid);
        xsrqn = make_xrc_srq();
        rc = d.create_qp(hca::kQpRc, pd, cq.cqn, cq.cqn, uar, 6, 4);
        uc = d.create_qp(hca::kQpUc, pd, cq.cqn, cq.cqn, uar, 6, 4);
        ud = d.create_qp(hca::kQpUd, pd, cq.cqn, cq.cqn, uar, 6, 4);
        umr = d.create_qp(hca::kQpRegUmr, pd, cq.cqn, cq.cqn, uar, 6, 0);
        d.qp_fill = [this](std::vector<uint8_t> &in) {
            hca::ifc::set(in.data(), hca::ifc::in(hca::ifc::create_qp_in::qpc, hca::ifc::qpc::xrcd), xrcd);
        };
        xrc = d.create_qp(hca::kQpXrc, pd, cq.cqn, cq.cqn, uar, 6, 0, nullptr, 1, 0);
        d.qp_fill = [](std::vector<uint8_t> &in) {
            hca::ifc::set(in.data(), hca::ifc::in(hca::ifc::create_qp_in::qpc, hca::ifc::qpc::ulp_stateless_offload_mode),
                          1);
        };
        ipoib = d.create_qp(hca::kQpUd, pd, cq.cqn, cq.cqn, uar, 6, 4);
        dci = d.create_qp(hca::kQpDci, pd, cq.cqn, 0, uar, 6, 0, nullptr, hca::kRqZero);
        dctn = make_dct();
        xrqn = make_xrq();
        tm = d.create_qp(hca::kQpRc, pd, cq.cqn, cq.cqn, uar, 6, 0, nullptr, hca::kRqSrq, xrqn);
        sq = make_sq();
        // A TCP/IP packet at the start of the buffer, for the gather lists
        // to find (checksums computed over real headers).
        const auto pkt = ipoib_packet(false, hca::ipoib::kProtoTcp, 2000);
        b.host.write(buf, pkt.data(), pkt.size());
        for (QpHandle *q : {&rc, &uc, &ud, &xrc, &umr, &ipoib, &dci, &tm, &sq}) {
            reset_qp(*q);
        }
        free_key = 0;
        window = 0;
        new_free_key();
    }

    // 16 linked receive WQEs of 64 bytes, one 256-byte scatter entry each
    // into buf from offset on, and a doorbell record that says plenty of
    // receives are posted, forever.
    void srq_ring(uint64_t &sbuf, uint64_t &dbr, uint64_t offset) {
        sbuf = b.host.alloc(4096);
        dbr = b.host.alloc(64, 64);
        for (uint32_t i = 0; i < 16; ++i) {
            uint8_t w[64] = {};
            hca::store_be16(w + 2, static_cast<uint16_t>((i + 1) % 16));
            hca::store_be32(w + 16, 256);
            hca::store_be32(w + 20, lkey);
            hca::store_be64(w + 24, buf + offset + i * 256);
            hca::store_be32(w + 32 + 4, hca::kInvalidLkey);
            b.host.write(sbuf + i * 64, w, 64);
        }
        b.host.write_be32(dbr, 0x8000);
    }

    uint32_t make_xrc_srq() {
        namespace ifc = hca::ifc;
        uint64_t sbuf = 0, dbr = 0;
        srq_ring(sbuf, dbr, 32768);
        auto xs = Driver::inbox(hca::kOpCreateXrcSrq, 0, ifc::create_xrc_srq_in::size_bytes + 8);
        const auto xc = ifc::create_xrc_srq_in::xrc_srq_context_entry;
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::log_xrc_srq_size), 4);
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::log_rq_stride), 2);
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::xrcd), xrcd);
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::cqn), cq.cqn);
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::pd), pd);
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::db_record_addr_l), dbr >> 2);
        hca::store_be64(xs.data() + ifc::create_xrc_srq_in::size_bytes, sbuf);
        return static_cast<uint32_t>(d.exec(xs, 16).get(ifc::create_xrc_srq_out::xrc_srqn));
    }

    // A DCT on an RMP of 16 receives posted over and over.
    uint32_t make_dct() {
        namespace ifc = hca::ifc;
        uint64_t sbuf = 0, dbr = 0;
        srq_ring(sbuf, dbr, 49152);
        auto rmp = Driver::inbox(hca::kOpCreateRmp, 0, ifc::create_rmp_in::size_bytes + 8);
        const auto wq = ifc::in(ifc::create_rmp_in::ctx, ifc::rmpc::wq);
        ifc::set(rmp.data(), ifc::in(wq, ifc::wq::log_wq_sz), 4);
        ifc::set(rmp.data(), ifc::in(wq, ifc::wq::log_wq_stride), 6);
        ifc::set(rmp.data(), ifc::in(wq, ifc::wq::pd), pd);
        ifc::set(rmp.data(), ifc::in(wq, ifc::wq::dbr_addr), dbr);
        hca::store_be64(rmp.data() + ifc::create_rmp_in::size_bytes, sbuf);
        const auto rmpn = static_cast<uint32_t>(d.exec(rmp, 16).get(ifc::create_rmp_out::rmpn));
        auto in = Driver::inbox(hca::kOpCreateDct, 0, ifc::create_dct_in::size_bytes);
        const auto c = ifc::create_dct_in::dct_context_entry;
        ifc::set(in.data(), ifc::in(c, ifc::dctc::pd), pd);
        ifc::set(in.data(), ifc::in(c, ifc::dctc::srqn_xrqn), rmpn);
        ifc::set(in.data(), ifc::in(c, ifc::dctc::cqn), cq.cqn);
        ifc::set(in.data(), ifc::in(c, ifc::dctc::dc_access_key), kDcKey);
        ifc::set(in.data(), ifc::in(c, ifc::dctc::rre), 1);
        ifc::set(in.data(), ifc::in(c, ifc::dctc::rwe), 1);
        ifc::set(in.data(), ifc::in(c, ifc::dctc::rae), 1);
        ifc::set(in.data(), ifc::in(c, ifc::dctc::atomic_mode), 3);
        ifc::set(in.data(), ifc::in(c, ifc::dctc::port), 1);
        ifc::set(in.data(), ifc::in(c, ifc::dctc::mtu), 3);
        return static_cast<uint32_t>(d.exec(in, ifc::create_dct_out::size_bytes).get(ifc::create_dct_out::dctn));
    }

    // A tag-matching XRQ (16 tags, rendezvous offload) on a ring of
    // receives posted over and over.
    uint32_t make_xrq() {
        namespace ifc = hca::ifc;
        uint64_t sbuf = 0, dbr = 0;
        srq_ring(sbuf, dbr, 53248);
        auto in = Driver::inbox(hca::kOpCreateXrq, 0, ifc::create_xrq_in::size_bytes + 8);
        const auto c = ifc::create_xrq_in::xrq_context;
        const auto wq = ifc::in(c, ifc::xrqc::wq);
        ifc::set(in.data(), ifc::in(c, ifc::xrqc::topology), hca::kXrqTagMatching);
        ifc::set(in.data(), ifc::in(c, ifc::xrqc::offload), hca::kXrqOffloadRndv);
        ifc::set(in.data(),
                 ifc::in(ifc::in(c, ifc::xrqc::tag_matching_topology_context),
                         ifc::tag_matching_topology_context::log_matching_list_sz),
                 4);
        ifc::set(in.data(), ifc::in(c, ifc::xrqc::cqn), cq.cqn);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_sz), 4);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_stride), 6);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::pd), pd);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::dbr_addr), dbr);
        hca::store_be64(in.data() + ifc::create_xrq_in::size_bytes, sbuf);
        return static_cast<uint32_t>(d.exec(in, 16).get(ifc::create_xrq_out::xrqn));
    }

    // An SQ object as mlx5_core's write-combining test makes one: a cyclic
    // WQ of 64 WQEBBs in one page, on the World's CQ and UAR.
    QpHandle make_sq() {
        namespace ifc = hca::ifc;
        QpHandle q;
        q.st = hca::kQpSq;
        q.sq_wqebbs = 64;
        q.pages = {b.host.alloc(4096, 4096)};
        q.dbr = b.host.alloc(64, 64);
        q.uar = uar;
        const ifc::Block ctx = ifc::create_sq_in::ctx;
        const ifc::Block wq = ifc::in(ctx, ifc::sqc::wq);
        auto in = Driver::inbox(hca::kOpCreateSq, 0, ifc::create_sq_in::size_bytes + 8);
        ifc::set(in.data(), ifc::in(ctx, ifc::sqc::cqn), cq.cqn);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::wq_type), 1);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::pd), pd);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::uar_page), uar);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::dbr_addr), q.dbr);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_stride), 6);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_sz), 6);
        hca::store_be64(in.data() + ifc::create_sq_in::size_bytes, q.pages[0]);
        q.qpn = static_cast<uint32_t>(d.exec(in, 16).get(ifc::create_sq_out::sqn));
        return q;
    }

    void modify_sq(uint8_t from, uint8_t to) {
        namespace ifc = hca::ifc;
        auto in = Driver::inbox(hca::kOpModifySq, 0, ifc::modify_sq_in::size_bytes);
        ifc::set(in.data(), ifc::modify_sq_in::sqn, sq.qpn);
        ifc::set(in.data(), ifc::modify_sq_in::sq_state, from);
        ifc::set(in.data(), ifc::in(ifc::modify_sq_in::ctx, ifc::sqc::state), to);
        d.exec(in, 16);
    }

    // One QP back to RST and connected again (to itself), fresh receives:
    // the QP this input is about; the others keep what earlier inputs
    // left.  A fresh free key once a UMR WQE may have changed it.
    void reset_qp(QpHandle &q) {
        if (&q == &sq) {
            // To RST from whatever state it is in (the other tries fail), then RDY.
            for (const uint8_t from : {hca::kSqRdy, hca::kSqErr}) {
                modify_sq(from, hca::kSqRst);
            }
            modify_sq(hca::kSqRst, hca::kSqRdy);
            q.sq_pi = 0;
            b.host.write_be32(q.dbr + 4, 0);
            return;
        }
        d.modify_qp(0x50a, q.qpn);
        q.sq_pi = 0;
        q.rq_pi = 0;
        b.host.write_be32(q.dbr, 0);
        b.host.write_be32(q.dbr + 4, 0);
        if (&q == &ud || &q == &umr || &q == &ipoib) {
            d.ud_to_rts(q, &q == &umr ? 0 : kQkey);
        } else {
            d.connect_qp(q, q.qpn, kLid, 3, 2, 2, 10, 1);
        }
        if (&q != &umr && &q != &xrc && &q != &dci && &q != &tm) {
            for (uint32_t i = 0; i < 8; ++i) {
                d.post_recv(q, lkey, buf + 16384 + (q.qpn & 7) * 2048 + (i & 3) * 512, 512);
            }
        }
    }
    void new_free_key() {
        for (uint32_t k : {free_key, window, ksm, sig_key}) {
            if (k) {
                auto in = Driver::inbox(hca::kOpDestroyMkey, 0, 16);
                hca::ifc::set(in.data(), hca::ifc::destroy_mkey_in::mkey_index, k >> 8);
                d.exec(in, 16);
            }
        }
        free_key = d.create_free_mkey(pd, 8);
        window = d.create_window(pd, true);  // a type 2 memory window (KLM)
        // An implicit-ODP-like KSM key of 4 KiB entities: the MR's pages,
        // a null entry (page fault) between them; past entry 3 nothing.
        ksm = d.create_indirect_mkey(
            pd, 3, 12, 4, {{0, mr.key, mr.iova}, {0, hca::kNullMkey, 0}, {0, mr.key, mr.iova + 4096}, {0, mr.key, 0}});
        sig_key = make_sig_key();
        umr_used = false;
    }
    // A signature key (bsf_en) over the MR's first 8 KiB, its BSF enabled
    // by a UMR: CRC32 on the wire, 512-byte blocks.
    uint32_t make_sig_key() {
        namespace ifc = hca::ifc;
        auto in = Driver::inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes);
        const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
        for (auto f : {ifc::mkc::free_, ifc::mkc::umr_en, ifc::mkc::lr, ifc::mkc::bsf_en}) {
            ifc::set(in.data(), ifc::in(e, f), 1);
        }
        ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_1_0), 2);
        ifc::set(in.data(), ifc::in(e, ifc::mkc::pd), pd);
        ifc::set(in.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
        ifc::set(in.data(), ifc::in(e, ifc::mkc::translations_octword_size), 4);
        ifc::set(in.data(), ifc::in(e, ifc::mkc::bsf_octword_size), 4);
        const uint32_t k = static_cast<uint32_t>(d.exec(in, 16).get(ifc::create_mkey_out::mkey_index)) << 8;
        uint8_t mkc[64] = {};
        ifc::set(mkc, ifc::mkc::lr, 1);
        ifc::set(mkc, ifc::mkc::lw, 1);
        ifc::set(mkc, ifc::mkc::bsf_en, 1);
        ifc::set(mkc, ifc::mkc::expected_sigerr_count, 1);
        ifc::set(mkc, ifc::mkc::len, 8192);
        const auto bsf = sig_bsf(2);
        hca::UmrOp op;
        op.key = k;
        op.mkc = mkc;
        op.mask = hca::UmrOp::kMaskFree | hca::UmrOp::kMaskLen | hca::UmrOp::kMaskLw | hca::UmrOp::kMaskBsfEn |
                  hca::UmrOp::kMaskEnSigerr;
        op.xlt = {uint64_t{8192} << 32 | mr.key, mr.iova, 0, 0, 0, 0, 0, 0};
        op.bsf = bsf;
        b.dev.mkeys.umr(op, nullptr);
        return k;
    }
    // BSFs as libmlx5 writes them: 0 CRC32 in memory and T10-DIF on the
    // wire, 1 T10-DIF in both (same block structure, copied tags), 2 CRC32
    // on the wire only.
    std::array<uint8_t, 64> sig_bsf(unsigned kind) const {
        std::array<uint8_t, 64> f{};
        f[0] = static_cast<uint8_t>(0x80 | (kind == 1 ? 0x10 : 0));
        f[1] = kind == 2 ? 0xf0 : 0xff;
        f[2] = kind == 1 ? 0x3f : 1;
        f[3] = kind == 2 ? 0 : 1;
        hca::store_be32(f.data() + 4, 0xffffffff);
        auto t10 = [&](size_t bfs_psv, size_t inl, uint32_t psv) {
            hca::store_be32(f.data() + bfs_psv, psv);
            hca::store_be16(f.data() + inl, 0xc000);
            hca::store_be16(f.data() + inl + 2, 0x1234);
            hca::store_be32(f.data() + inl + 4, 7);
            f[inl + 8] = kind == 1 ? 2 : 1;
            f[inl + 9] = 0x88;
            f[inl + 13] = 0x41;
            hca::store_be16(f.data() + inl + 14, 0xffff);
        };
        if (kind == 0) {
            hca::store_be32(f.data() + 12, 0x23u << 24 | psvs[0]);
            t10(8, 32, psvs[1]);
        } else if (kind == 1) {
            t10(12, 48, psvs[0]);
            t10(8, 32, psvs[1]);
        } else {
            hca::store_be32(f.data() + 8, 0x22u << 24 | psvs[1]);
        }
        return f;
    }
    uint32_t window = 0, ksm = 0;
    bool umr_used = true;

    void drain() {
        while (d.next_cqe(cq)) {
        }
        bool any = false;
        while (d.next_eqe(eq)) {
            any = true;
        }
        if (any) {
            d.eq_doorbell(eq, true);
        }
        b.host.tx.clear();
    }
};

World &world() {
    static World *w = [] {
        auto *x = new World;
        x->setup();
        return x;
    }();
    return *w;
}

class Wqe {
  public:
    void put(const void *p, size_t n) {
        const size_t at = w.size();
        w.resize(at + n);
        std::memcpy(w.data() + at, p, n);
    }
    std::vector<uint8_t> w = std::vector<uint8_t>(16);
};

uint32_t key(World &x, Input &in) {
    switch (in.pick(6)) {
    case 0: return x.mr.key;
    case 1: return in.flag() ? x.free_key : (x.window & ~0xffu) | (in.u8() & 0xff);
    case 2: return in.u32();
    case 3:
        return in.flag() ? x.sig_key : x.lkey;
    case 4:
        return x.ksm;
    case 5:
        return x.memic_key;
    default: return x.lkey;
    }
}

// The bytes of the signature key's address space per block, as its last
// BSF made them (512 without one).
uint32_t sig_unit(World &x) {
    const hca::SigState *st = x.b.dev.mkeys.sig_of(x.sig_key);
    return st ? st->cfg.unit() : 512;
}

uint64_t addr(World &x, Input &in, uint32_t k) {
    if (in.u8() > 240) {
        return in.u64();
    }
    if (k == x.memic_key) {
        return in.u16() % 9000;  // zero based; past 8 KiB is out of the key
    }
    if (k == x.sig_key) {
        return in.u8() < 230 ? in.pick(8) * sig_unit(x) : in.u16();  // zero based, whole blocks mostly
    }
    const uint64_t base = k == x.mr.key || k == x.free_key ? x.mr.iova : k == x.ksm ? 0 : x.buf;
    return base + in.u16() % 20000;
}

void umr_segments(World &x, Input &in, Wqe &w) {
    uint8_t uc[48] = {};
    static constexpr uint8_t kFlags[] = {hca::UmrOp::kInline,
                                         hca::UmrOp::kInline | hca::UmrOp::kCheckNotFree,
                                         hca::UmrOp::kCheckFree,
                                         0,
                                         hca::UmrOp::kInline | hca::UmrOp::kOffsetEn,
                                         hca::UmrOp::kInline | hca::UmrOp::kOffsetEn | hca::UmrOp::kCheckQpn,
                                         hca::UmrOp::kInline | hca::UmrOp::kOffsetEn | hca::UmrOp::kCheckNotFree};
    // A signature key's configuration (mlx5dv_wr_mkey_configure() with a
    // signature block): one inline KLM entry, then a BSF.
    const bool sig = in.u8() < 40;
    uc[0] = sig ? hca::UmrOp::kInline : in.flag() ? in.pick(kFlags) : in.u8();
    const uint16_t oct = sig ? 4 : in.flag() ? in.u8() % 5 : in.u16();
    hca::store_be16(uc + 4, oct);
    hca::store_be16(uc + 6, sig ? (in.u8() < 240 ? 4 : in.u8()) : in.flag() ? in.u8() % 8 : in.u16());
    hca::store_be64(uc + 8, sig ? hca::UmrOp::kMaskFree | hca::UmrOp::kMaskLen | hca::UmrOp::kMaskBsfEn |
                                      hca::UmrOp::kMaskEnSigerr | (in.flag() ? hca::UmrOp::kMaskLw : 0)
                            : in.flag() ? hca::UmrOp::kMaskSupported & in.u64()
                                        : in.u64());
    hca::store_be32(uc + 16, in.u8() < 240 ? 0 : in.u32());
    w.put(uc, sizeof(uc));
    std::vector<uint8_t> mkc = in.vec(64);
    namespace ifc = hca::ifc;
    ifc::set(mkc.data(), ifc::mkc::pd, in.u8() < 230 ? x.pd : in.u32() & 0xffffff);
    ifc::set(mkc.data(), ifc::mkc::start_addr, x.mr.iova);
    ifc::set(mkc.data(), ifc::mkc::len, in.u8() < 230 ? 8192 : in.u32());
    ifc::set(mkc.data(), ifc::mkc::log_page_size, in.u8() < 230 ? 12 : in.u8() & 0x1f);
    if (sig) {
        ifc::set(mkc.data(), ifc::mkc::bsf_en, in.u8() < 230);
        ifc::set(mkc.data(), ifc::mkc::free_, 0);
    }
    w.put(mkc.data(), mkc.size());
    if (sig) {
        uint8_t e[16];
        hca::store_be32(e, in.u8() < 230 ? 8192 : in.u32());
        hca::store_be32(e + 4, in.u8() < 230 ? x.mr.key : key(x, in));
        hca::store_be64(e + 8, x.mr.iova);
        w.put(e, 16);
        w.put(std::array<uint8_t, 48>{}.data(), 48);  // the entries padded to 64 bytes
        auto bsf = x.sig_bsf(in.pick(3));
        if (in.u8() < 100) {
            for (unsigned i = 0, n = in.pick(4); i < n; ++i) {
                bsf[in.pick(64)] = in.u8();
            }
        }
        w.put(bsf.data(), in.u8() < 240 ? bsf.size() : in.pick(64));
        return;
    }
    if (uc[0] & hca::UmrOp::kInline) {
        const unsigned n = (oct % 5) * 2;
        const bool klm = in.flag();  // a window bind's KLM entries (byte count, key; address)
        for (unsigned i = 0; i < n; ++i) {
            uint8_t e[8];
            const uint64_t v = !klm ? (x.buf + i * 4096) | 1
                               : i % 2 == 0 ? uint64_t{in.u16()} << 32 | key(x, in)
                                            : x.mr.iova + in.u16() % 12288;
            hca::store_be64(e, in.u8() < 240 ? v : in.u64());
            w.put(e, 8);
        }
    } else {
        uint8_t d[16];
        hca::store_be32(d, in.u8() < 230 ? 16u * oct : in.u32());
        hca::store_be32(d + 4, key(x, in));
        hca::store_be64(d + 8, in.u8() < 230 ? x.buf + 40960 : in.u64());
        w.put(d, 16);
    }
}

// The pad and Ethernet segment of an IPoIB offload QP's WQE.
void eth_segment(Input &in, Wqe &w) {
    uint8_t pad[16] = {};
    if (in.u8() > 240) {
        pad[in.u8() % 16] = in.u8();
    }
    w.put(pad, sizeof(pad));
    std::vector<uint8_t> hdr;
    const uint8_t kind = in.u8();
    if (kind < 150) {
        auto pkt = ipoib_packet(in.flag(), in.flag() ? hca::ipoib::kProtoTcp : hca::ipoib::kProtoUdp, 0, 1,
                                in.u8() % 44 & ~size_t{3});
        hdr.assign(pkt.begin(), pkt.end());
        if (in.u8() > 200) {
            hcafuzz::patch(in, hdr, 2);
        }
    } else if (kind < 220) {
        hdr = in.vec(in.u8() % 120);
    }
    std::vector<uint8_t> e((14 + hdr.size() + 15) & ~size_t{15});
    e[4] = in.u8();
    hca::store_be16(e.data() + 6, in.u8() < 200 ? static_cast<uint16_t>(1000 + in.u16() % 1100) : in.u16());
    hca::store_be16(e.data() + 12, in.u8() < 240 ? static_cast<uint16_t>(hdr.size()) : in.u16());
    if (!hdr.empty()) {
        std::memcpy(e.data() + 14, hdr.data(), hdr.size());
    }
    w.put(e.data(), e.size());
}

void data_segments(World &x, Input &in, Wqe &w) {
    if (in.u8() < 60) {
        const uint32_t n = in.u8() % 120;
        std::vector<uint8_t> seg((4 + n + 15) & ~size_t{15});
        hca::store_be32(seg.data(), 0x80000000u | (in.u8() < 240 ? n : in.u32()));
        w.put(seg.data(), seg.size());
        return;
    }
    const unsigned n = in.pick(4);
    for (unsigned i = 0; i < n; ++i) {
        uint8_t d[16];
        const uint32_t k = key(x, in);
        const uint32_t len = k == x.sig_key && in.flag() ? sig_unit(x) * (1 + in.pick(4)) : in.u16() % 5000;
        hca::store_be32(d, in.u8() < 230 ? len : in.u32() % kMaxMessage);
        hca::store_be32(d + 4, k);
        hca::store_be64(d + 8, addr(x, in, k));
        w.put(d, 16);
    }
}

// A tag list operation: opcode, flags, index, phase count, a tag from a
// small set (so that messages match), a buffer.
void tm_segments(World &x, Input &in, Wqe &w) {
    uint8_t t[sizeof(hca::TmSeg)] = {};
    const uint8_t op = in.u8() < 240 ? in.pick(3) : in.u8() >> 4;
    t[0] = static_cast<uint8_t>(op << 4);
    t[1] = in.u8() < 230 ? static_cast<uint8_t>(in.pick(4) << 6) : in.u8();
    hca::store_be16(t + 2, in.u8() < 230 ? in.pick(16) : in.u16());
    hca::store_be16(t + 6, in.u8() < 200 ? in.pick(4) : in.u16());
    hca::store_be64(t + 16, in.u8() < 230 ? in.pick(4) : in.u64());
    hca::store_be64(t + 24, in.u8() < 200 ? ~uint64_t{0} : in.u64());
    w.put(t, sizeof(t));
    if (op == hca::kTmOpAppend || in.u8() > 240) {
        data_segments(x, in, w);
    }
}

// A SEND to the tag-matching QP itself: a TMH (EAGER, RNDV, NO_TAG, FIN,
// or any) with a tag from the list's small set, an RVH naming a buffer,
// inline.
void tm_message(World &x, Input &in, Wqe &w) {
    uint8_t m[64] = {};
    const uint32_t n = in.u8() < 220 ? 32 + in.pick(17) : in.pick(48);
    hca::store_be32(m, 0x80000000u | n);
    m[4] = in.u8() < 230 ? in.pick(4) : in.u8();
    hca::store_be64(m + 4 + 8, in.u8() < 230 ? in.pick(4) : in.u64());
    const uint32_t k = key(x, in);
    hca::store_be64(m + 4 + 16, addr(x, in, k));
    hca::store_be32(m + 4 + 24, k);
    hca::store_be32(m + 4 + 28, in.u8() < 230 ? in.u16() % 9000 : in.u32() % kMaxMessage);
    w.put(m, (4 + n + 15) & ~size_t{15});
}

constexpr uint8_t kOps[] = {
    hca::kWqeSend,     hca::kWqeSendImm,  hca::kWqeSendInval, hca::kWqeRdmaWrite,      hca::kWqeRdmaWriteImm,
    hca::kWqeRdmaRead, hca::kWqeAtomicCs, hca::kWqeAtomicFa,  hca::kWqeAtomicMaskedCs, hca::kWqeAtomicMaskedFa,
    hca::kWqeUmr,      hca::kWqeNop,      hca::kWqeLso,       hca::kWqeBindMw,         hca::kWqeSetPsv};

// One WQE on the input's QP (or another), and its doorbell.
void post(World &x, QpHandle &focus, Input &in) {
    QpHandle *qps[] = {&x.rc, &x.uc, &x.ud, &x.xrc, &x.umr, &x.ipoib, &x.dci, &x.tm, &x.sq};
    const uint8_t which = in.u8();
    QpHandle &qp = which < 230 ? focus : *qps[which % 9];
    const bool tm_op = &qp == &x.tm && in.flag();
    const uint8_t opcode = [&]() -> uint8_t {
        if (tm_op) {
            return hca::kWqeTagMatching;
        }
        if (in.u8() >= 240) {
            return in.u8();
        }
        if (&qp == &x.umr) {
            return hca::kWqeUmr;
        }
        if (&qp == &x.sq && in.flag()) {
            return hca::kWqeNop;  // what an SQ object carries
        }
        return in.pick(kOps);
    }();
    Wqe w;
    if (qp.st == hca::kQpUd) {
        uint8_t av[48] = {};
        hca::store_be32(av, in.u8() < 230 ? kQkey : in.u32());
        const uint32_t to = in.flag() ? x.ipoib.qpn : x.ud.qpn;
        hca::store_be32(av + 8, 0x80000000u | (in.u8() < 230 ? to : in.u32() & 0xffffff));
        hca::store_be16(av + 0x0e, in.u8() < 230 ? kLid : in.u16());
        if (in.u8() > 230) {
            hca::store_be32(av + 0x1c, 1u << 30);
            av[0x1b] = in.u8();
        }
        w.put(av, sizeof(av));
        if (&qp == &x.ipoib) {
            eth_segment(in, w);
        }
    }
    if (qp.st == hca::kQpDci) {
        uint8_t av[48] = {};
        hca::store_be64(av, in.u8() < 230 ? kDcKey : in.u64());
        hca::store_be32(av + 8, 0x80000000u | (in.u8() < 230 ? x.dctn : in.u32() & 0xffffff));
        hca::store_be16(av + 0x0e, in.u8() < 240 ? kLid : in.u16());
        av[0x0c] = in.u8() < 230 ? 0 : in.u8();  // SL
        w.put(av, sizeof(av));
    }
    if (qp.st == hca::kQpXrc) {
        uint8_t s[16] = {};
        hca::store_be32(s, in.u8() < 230 ? x.xsrqn : in.u32());
        w.put(s, 16);
    }
    if (opcode == hca::kWqeUmr) {
        x.umr_used = true;
        umr_segments(x, in, w);
    } else if (opcode == hca::kWqeSetPsv) {
        uint8_t p[16] = {};
        hca::store_be32(p, in.u8() < 230 ? x.psvs[in.pick(2)] : in.u32());
        hca::store_be64(p + 8, in.u64());
        w.put(p, in.u8() < 240 ? 16 : in.pick(16));
    } else if (opcode == hca::kWqeTagMatching) {
        tm_segments(x, in, w);
    } else if (&qp == &x.tm && (opcode == hca::kWqeSend || opcode == hca::kWqeSendImm) && in.flag()) {
        tm_message(x, in, w);
    } else {
        const bool atomic = opcode == hca::kWqeAtomicCs || opcode == hca::kWqeAtomicFa ||
                            opcode == hca::kWqeAtomicMaskedCs || opcode == hca::kWqeAtomicMaskedFa;
        if (atomic || opcode == hca::kWqeRdmaWrite || opcode == hca::kWqeRdmaWriteImm || opcode == hca::kWqeRdmaRead) {
            uint8_t r[16] = {};
            const uint32_t k = key(x, in);
            hca::store_be64(r, addr(x, in, k) & (atomic && in.flag() ? ~uint64_t{7} : ~uint64_t{0}));
            hca::store_be32(r + 8, k);
            w.put(r, 16);
        }
        if (atomic) {
            w.put(in.vec(in.flag() ? 16 : 32).data(), 16);
        }
        data_segments(x, in, w);
    }
    const uint32_t ds = static_cast<uint32_t>(w.w.size() / 16);
    const uint16_t index = qp.sq_pi;
    hca::store_be32(w.w.data(), uint32_t{index} << 8 | opcode);
    hca::store_be32(w.w.data() + 4, qp.qpn << 8 | (ds & 0x3f));
    w.w[11] = in.u8();
    const uint8_t target = in.u8();
    hca::store_be32(w.w.data() + 12, opcode == hca::kWqeUmr && target < 230
                                         ? (target < 60 ? x.sig_key
                                            : in.flag() ? x.free_key
                                                        : (x.window & ~0xffu) | in.u8())
                                         : in.u32());
    if (in.u8() > 220) {
        hcafuzz::patch(in, w.w, 3);
    }
    const uint32_t bbs = std::min<uint32_t>((static_cast<uint32_t>(w.w.size()) + 63) / 64, 16);
    w.w.resize(size_t{bbs} * 64);
    for (uint32_t b = 0; b < bbs; ++b) {
        x.b.host.write(qp.sq_addr(index + b), w.w.data() + b * 64, 64);
    }
    qp.sq_pi = static_cast<uint16_t>(qp.sq_pi + bbs);
    const uint8_t db = in.u8();
    if (db >= 200 && db < 240) {
        // A BlueFlame copy (libmlx5's mlx5_bf_copy(), the kernel's
        // write-combining test): the head and the rest as 8-byte writes to
        // a half-buffer of one of four bfregs; the copy may differ from
        // memory (CE), stop short, and the device may run in the middle.
        x.b.host.write_be32(qp.dbr + 4, qp.sq_pi);
        const uint64_t base = uint64_t{qp.uar} * 4096 + 0x800 + (in.u8() & 7) * 256;
        const uint32_t len = std::min<uint32_t>(static_cast<uint32_t>(w.w.size()), 256);
        const uint32_t stop = in.u8() < 200 ? len : (in.u8() % (len / 8)) * 8 + 8;
        const uint32_t gap = (in.u8() % (len / 8 + 1)) * 8;
        if (in.flag()) {
            w.w[11] = in.u8();
        }
        for (uint32_t o = 0; o < stop; o += 8) {
            x.d.bar_write(base + o, w.w.data() + o, 8);
            if (o + 8 == gap) {
                x.b.pump();
            }
        }
        x.b.pump();
        return;
    }
    x.d.ring_sq(qp, db < 240 ? index : in.u16(), db < 240 ? ds : in.u8(), opcode, db & 1);
}

}  // namespace

// The driver's side of on-demand paging: a UMR that takes pages of the
// MTT region away or gives them back (access bits), or PAGE_FAULT_RESUME
// for a fault the device raised (its token, type and work queue) or a
// made-up one.
void page_faults(World &x, QpHandle &focus, Input &in) {
    namespace ifc = hca::ifc;
    if (in.flag()) {
        const hca::Mkey *m = x.b.dev.mkeys.find(x.mr.key);
        if (!m || m->mtt.empty()) {
            return;
        }
        hca::UmrOp op;
        static const uint8_t kNoMkc[64] = {};
        op.key = x.mr.key;
        op.mkc = kNoMkc;
        op.xlt_first = in.pick(static_cast<unsigned>(m->mtt.size()));
        for (size_t i = op.xlt_first; i < m->mtt.size() && op.xlt.size() < 1 + in.pick(3); ++i) {
            op.xlt.push_back(m->page(i) | in.pick(4));
        }
        x.b.dev.mkeys.umr(op, nullptr);
        return;
    }
    const hca::Qp *q = x.b.dev.qps.find(focus.qpn);
    const uint32_t token = !q || in.u8() > 200 ? in.u32() & 0xffffff
                           : in.flag()         ? q->pf.req_token
                           : q->pf.resp_rdma   ? focus.qpn
                                               : q->pf.resp_token;
    auto box = Driver::inbox(hca::kOpPageFaultResume, 0, ifc::page_fault_resume_in::size_bytes);
    const auto info = ifc::page_fault_resume_in::page_fault_info;
    ifc::set(box.data(), ifc::in(info, ifc::trans_page_fault_info::error), in.u8() > 230);
    ifc::set(box.data(), ifc::in(info, ifc::trans_page_fault_info::page_fault_type), in.pick(4));
    ifc::set(box.data(), ifc::in(info, ifc::trans_page_fault_info::wq_number),
             in.u8() > 240   ? in.u32()
             : in.u8() > 240 ? x.xsrqn
                             : focus.qpn);
    ifc::set(box.data(), ifc::in(info, ifc::trans_page_fault_info::fault_token), token);
    x.d.exec(box, ifc::page_fault_resume_out::size_bytes);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    World &x = world();
    if (hcafuzz::host_used(x.b.host) > (40u << 20)) {
        x.setup();
    }
    Input in(data, size);
    QpHandle *qps[] = {&x.rc, &x.uc, &x.ud, &x.xrc, &x.umr, &x.ipoib, &x.dci, &x.tm, &x.sq};
    QpHandle &focus = *qps[in.pick(9)];
    x.reset_qp(focus);
    if (x.umr_used) {
        x.new_free_key();
    }
    x.drain();
    for (int steps = 0; !in.empty() && steps < 32; ++steps) {
        if (const uint8_t c = in.u8(); c < 20) {
            x.b.advance(int64_t{in.u16()} * 100'000);  // retry timers of the loopback RC/XRC QPs
        } else if (c < 40) {
            page_faults(x, focus, in);
        } else {
            post(x, focus, in);
        }
        x.drain();
    }
    return 0;
}

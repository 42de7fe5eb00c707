// UMR WQEs: the REG_UMR QP loading translations into MR-cache keys
// (enable, revoke, offsets, pointer and inline lists) and fast registration
// / local invalidation on RC QPs, checked by RDMA from the peer.
#include <catch2/catch.hpp>

#include <cstring>

#include "pair.h"

using namespace hcatest;

namespace {

constexpr uint64_t kMaskLen = 1ull << 0, kMaskPageSize = 1ull << 1, kMaskStart = 1ull << 6, kMaskPd = 1ull << 7,
                   kMaskKey = 1ull << 13, kMaskLr = 1ull << 17, kMaskLw = 1ull << 18, kMaskRr = 1ull << 19,
                   kMaskRw = 1ull << 20, kMaskA = 1ull << 21, kMaskFree = 1ull << 29, kMaskBsf = 1ull << 12;
constexpr uint64_t kMaskQpn = 1ull << 14;
constexpr uint8_t kInline = 0x80, kCheckNotFree = 1 << 5, kCheckFree = 2 << 5, kOffsetEn = 1 << 4,
                  kCheckQpn = 1 << 3;

struct Umr {
    uint8_t flags = 0;
    uint16_t xlt_octowords = 0;
    uint64_t xlt_offset = 0;  // octowords
    uint64_t mask = 0;
    // mkey segment
    bool free = false;
    uint8_t access = 0;  // mkc byte 2 bits: a rw rr lw lr (as MLX5_PERM_* >> 2)
    uint8_t variant = 0;
    uint32_t pd = 0;
    uint64_t start = 0, len = 0;
    uint8_t log_page = 12;
    uint32_t qpn = 0xffffff;
    std::vector<uint64_t> inline_xlt;
    std::optional<Driver::Sge> pointer;

    std::vector<uint8_t> body() const {
        std::vector<uint8_t> b(48 + 64);
        b[0] = flags;
        hca::store_be16(b.data() + 4, xlt_octowords);
        hca::store_be16(b.data() + 6, static_cast<uint16_t>(xlt_offset));
        hca::store_be64(b.data() + 8, mask);
        hca::store_be32(b.data() + 16, static_cast<uint32_t>(xlt_offset >> 16));
        uint8_t *m = b.data() + 48;
        namespace ifc = hca::ifc;
        ifc::set(m, ifc::mkc::free_, free);
        ifc::set(m, ifc::mkc::umr_en, 1);
        ifc::set(m, ifc::mkc::lr, access & 1);
        ifc::set(m, ifc::mkc::lw, (access >> 1) & 1);
        ifc::set(m, ifc::mkc::rr, (access >> 2) & 1);
        ifc::set(m, ifc::mkc::rw, (access >> 3) & 1);
        ifc::set(m, ifc::mkc::a, (access >> 4) & 1);
        ifc::set(m, ifc::mkc::access_mode_1_0, 1);
        ifc::set(m, ifc::mkc::qpn, qpn);
        ifc::set(m, ifc::mkc::mkey_7_0, variant);
        ifc::set(m, ifc::mkc::pd, pd);
        ifc::set(m, ifc::mkc::start_addr, start);
        ifc::set(m, ifc::mkc::len, len);
        ifc::set(m, ifc::mkc::log_page_size, log_page);
        for (uint64_t e : inline_xlt) {
            const size_t at = b.size();
            b.resize(at + 8);
            hca::store_be64(b.data() + at, e);
        }
        if (!inline_xlt.empty()) {
            b.resize((b.size() + 16 + 63) / 64 * 64 - 16);  // the WQE ends on a WQEBB
        }
        if (pointer) {
            const size_t at = b.size();
            b.resize(at + 16);
            hca::store_be32(b.data() + at, pointer->len);
            hca::store_be32(b.data() + at + 4, pointer->lkey);
            hca::store_be64(b.data() + at + 8, pointer->addr);
        }
        return b;
    }
};

constexpr uint64_t kAllAccess = kMaskLr | kMaskLw | kMaskRr | kMaskRw | kMaskA;

// The peer's write into [iova, iova+n) of key on node `to`, from node `from`.
void rdma_write(Pair &p, bool a_to_b, uint32_t rkey, uint64_t raddr, uint32_t n, uint8_t seed) {
    Node &from = a_to_b ? p.a : p.b;
    QpHandle &q = a_to_b ? p.qa : p.qb;
    from.fill(from.mr.iova, n, seed);
    from.d.post_send(q, {.opcode = hca::kWqeRdmaWrite, .sges = {{from.mr.key, from.mr.iova, n}}, .raddr = raddr,
                         .rkey = rkey});
    p.w.pump();
}

// A UMR QP on node n, the way mlx5r_umr_resource_init() builds it.
QpHandle umr_qp(Node &n) {
    CmdResult r;
    QpHandle q = n.d.create_qp(hca::kQpRegUmr, n.pd, n.scq.cqn, n.scq.cqn, n.uar, 6, 0, &r);
    REQUIRE(r.status == 0);
    n.d.ud_to_rts(q, 0);
    return q;
}

// A window bind as libmlx5's set_bind_wr() builds it: the new variant,
// free 0, remote access bits, start and length, for type 2 the QPN and
// CHECK_FREE (1 << 5), and one inline KLM entry naming the MR.
Umr bind(uint32_t mr_key, uint64_t addr, uint32_t len, uint8_t access, uint8_t variant, uint32_t qpn) {
    const bool type2 = qpn != 0xffffff;
    return Umr{.flags = static_cast<uint8_t>(kInline | kOffsetEn | (type2 ? kCheckNotFree : 0)),
               .xlt_octowords = 4,
               .mask = kMaskFree | kMaskKey | (type2 ? kMaskQpn : 0) | kMaskLen | kMaskStart | kMaskLw | kMaskRr |
                       kMaskRw | kMaskA,
               .access = access,
               .variant = variant,
               .start = addr,
               .len = len,
               .qpn = qpn,
               .inline_xlt = {uint64_t{len} << 32 | mr_key, addr}};
}

// An unbind or IBV_WR_LOCAL_INV: free, variant 0, no entries (CHECK_QPN for type 2).
Umr unbind(bool type2) {
    return Umr{.flags = static_cast<uint8_t>(kInline | kOffsetEn | (type2 ? kCheckQpn : 0)),
               .mask = kMaskFree | kMaskKey | (type2 ? kMaskQpn : 0),
               .free = true};
}

}  // namespace

TEST_CASE("memory windows: a type 2 window bound on the QP serves RDMA in its range, invalidation ends it", "[umr][mw]") {
    Pair p;
    Node &b = p.b;
    const uint32_t w = b.d.create_window(b.pd, true);
    const uint64_t at = b.mr.iova + 0x1000;
    b.d.post_raw(p.qb, hca::kWqeUmr, w, bind(b.mr.key, at, 0x2000, 0x0c, 0x45, p.qb.qpn).body());
    auto c = b.d.next_cqe(b.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    const uint32_t rkey = (w & ~0xffu) | 0x45;
    const auto *m = b.d.bench().dev.mkeys.find(rkey);
    REQUIRE(m);
    CHECK((!m->free && m->qpn == p.qb.qpn && m->klm.size() == 4 && m->klm[0].key == b.mr.key));
    // Only the QP it is bound to.
    std::vector<hca::DmaChunk> ch;
    CHECK(b.d.bench().dev.mkeys.translate(rkey, b.pd, at, 8, hca::kAccRemoteWrite, ch, p.qb.qpn + 1) ==
          hca::XlatError::BoundQp);

    rdma_write(p, true, rkey, at + 100, 200, 5);
    c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    CHECK(b.same(at + 100, 200, 5));

    auto write_fails = [&](uint64_t addr) {
        rdma_write(p, true, rkey, addr, 8, 1);
        auto e = p.a.d.next_cqe(p.a.scq);
        REQUIRE(e);
        CHECK(op(*e) == hca::kCqeReqErr);
        CHECK((*e)[0x37] == hca::kSyndRemoteAccess);
    };
    SECTION("beyond the window's range (inside the MR)") { write_fails(at + 0x2000 - 4); }
    SECTION("after IBV_WR_LOCAL_INV from its QP") {
        b.d.post_raw(p.qb, hca::kWqeUmr, rkey, unbind(true).body());
        c = b.d.next_cqe(b.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReq);
        CHECK(b.d.bench().dev.mkeys.find(w & ~0xffu)->free);
        write_fails(at);
    }
    SECTION("after the peer's SEND with Invalidate") {
        b.d.post_recv(p.qb, b.mr.key, b.mr.iova + 0x8000, 64);
        p.a.d.post_send(p.qa, {.opcode = hca::kWqeSendInval, .sges = {{p.a.mr.key, p.a.mr.iova, 16}}, .imm = rkey});
        p.w.pump();
        auto rc = b.d.next_cqe(b.rcq);
        REQUIRE(rc);
        CHECK(op(*rc) == hca::kCqeRespSendInv);
        CHECK(b.d.bench().dev.mkeys.find(rkey)->free);
        REQUIRE(p.a.d.next_cqe(p.a.scq));
        write_fails(at);
    }
    SECTION("binding it again while bound: CHECK_FREE fails") {
        b.d.post_raw(p.qb, hca::kWqeUmr, rkey, bind(b.mr.key, at, 0x1000, 0x0c, 0x46, p.qb.qpn).body());
        c = b.d.next_cqe(b.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
        CHECK((*c)[0x37] == hca::kSyndLocalProt);
    }
}

TEST_CASE("memory windows: type 1 binds and unbinds; a bind the MR cannot back is an MW bind error", "[umr][mw]") {
    Pair p;
    Node &b = p.b;
    const uint32_t w = b.d.create_window(b.pd, false);
    const uint64_t at = b.mr.iova + 0x3000;
    SECTION("bind, RDMA READ and WRITE through it, unbind with length 0") {
        b.d.post_raw(p.qb, hca::kWqeUmr, w, bind(b.mr.key, at, 0x1000, 0x0c, 0x51, 0xffffff).body());
        auto c = b.d.next_cqe(b.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReq);
        const uint32_t rkey = (w & ~0xffu) | 0x51;
        rdma_write(p, true, rkey, at + 8, 64, 3);
        c = p.a.d.next_cqe(p.a.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReq);
        CHECK(b.same(at + 8, 64, 3));
        b.d.post_raw(p.qb, hca::kWqeUmr, rkey, unbind(false).body());
        REQUIRE(b.d.next_cqe(b.scq));
        rdma_write(p, true, rkey, at + 8, 8, 3);
        c = p.a.d.next_cqe(p.a.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
    }
    SECTION("remote write on an MR without local write") {
        auto ro = b.d.create_mtt_mkey(b.pd, 0x6000000, 8192, 0x4);  // local and remote read only
        b.d.post_raw(p.qb, hca::kWqeUmr, w, bind(ro.key, ro.iova, 4096, 0x0c, 0x52, 0xffffff).body());
        auto c = b.d.next_cqe(b.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
        CHECK((*c)[0x37] == hca::kSyndMwBind);
    }
    SECTION("a range beyond the MR") {
        b.d.post_raw(p.qb, hca::kWqeUmr, w, bind(b.mr.key, b.mr.iova + 0xf000, 0x2000, 0x04, 0x53, 0xffffff).body());
        auto c = b.d.next_cqe(b.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
        CHECK((*c)[0x37] == hca::kSyndMwBind);
    }
}

TEST_CASE("CREATE_MKEY of KLM and KSM keys with their entries given: translation through them", "[umr][ksm]") {
    Wire w;
    Node n(w.a, 1);
    hca::MkeyTable &keys = n.d.bench().dev.mkeys;
    std::vector<hca::DmaChunk> want, got;
    // KLM: 100 bytes of the MR at +50, then 200 at +5000, laid end to end.
    const uint32_t klm =
        n.d.create_indirect_mkey(n.pd, 2, 12, 4, {{100, n.mr.key, n.mr.iova + 50}, {200, n.mr.key, n.mr.iova + 5000}});
    REQUIRE(keys.translate(klm, n.pd, 90, 20, hca::kAccLocalRead, got) == hca::XlatError::None);
    REQUIRE(keys.translate(n.mr.key, n.pd, n.mr.iova + 140, 10, hca::kAccLocalRead, want) == hca::XlatError::None);
    REQUIRE(keys.translate(n.mr.key, n.pd, n.mr.iova + 5000, 10, hca::kAccLocalRead, want) == hca::XlatError::None);
    CHECK(got.size() == want.size());
    CHECK(std::equal(got.begin(), got.end(), want.begin(), want.end(),
                     [](const auto &x, const auto &y) { return x.addr == y.addr && x.len == y.len; }));
    CHECK(keys.translate(klm, n.pd, 250, 100, hca::kAccLocalRead, got) == hca::XlatError::NoTranslation);

    // KSM: 4 KiB entities; entry 1 names the MR at +8192, entry 2 the null
    // mkey (a page fault), entry 3 is not given.
    const uint32_t ksm = n.d.create_indirect_mkey(
        n.pd, 3, 12, 4, {{0, n.mr.key, n.mr.iova}, {0, n.mr.key, n.mr.iova + 8192}, {0, hca::kNullMkey, 0}});
    got.clear();
    want.clear();
    REQUIRE(keys.translate(ksm, n.pd, 4096 + 7, 100, hca::kAccLocalWrite, got) == hca::XlatError::None);
    REQUIRE(keys.translate(n.mr.key, n.pd, n.mr.iova + 8192 + 7, 100, hca::kAccLocalWrite, want) ==
            hca::XlatError::None);
    CHECK((got.size() == 1 && want.size() == 1 && got[0].addr == want[0].addr && got[0].len == 100));
    CHECK(keys.translate(ksm, n.pd, 2 * 4096, 8, hca::kAccLocalRead, got) == hca::XlatError::PageFault);
    CHECK(keys.translate(ksm, n.pd, 3 * 4096, 8, hca::kAccLocalRead, got) == hca::XlatError::NoTranslation);
    CHECK(keys.translate(ksm, n.pd + 1, 4096, 8, hca::kAccLocalRead, got) == hca::XlatError::BadPd);
    // A KSM entry naming a KSM key naming a KSM key: nested too deep.
    const uint32_t ksm2 = n.d.create_indirect_mkey(n.pd, 3, 12, 4, {{0, ksm, 4096}});
    const uint32_t ksm3 = n.d.create_indirect_mkey(n.pd, 3, 12, 4, {{0, ksm2, 0}});
    CHECK(keys.translate(ksm2, n.pd, 0, 8, hca::kAccLocalRead, got) == hca::XlatError::None);
    CHECK(keys.translate(ksm3, n.pd, 0, 8, hca::kAccLocalRead, got) == hca::XlatError::Depth);

    // Bad input: more entries than translations_octword_size, a KSM entity
    // beyond 2^31 or below 2^12.
    CmdResult r;
    n.d.create_indirect_mkey(n.pd, 3, 12, 1, {{0, n.mr.key, 0}, {0, n.mr.key, 0}}, false, &r);
    CHECK(r.status == static_cast<uint8_t>(hca::Status::BadParam));
    n.d.create_indirect_mkey(n.pd, 3, 32, 1, {}, true, &r);
    CHECK(r.status == static_cast<uint8_t>(hca::Status::BadParam));
    n.d.create_indirect_mkey(n.pd, 3, 11, 1, {}, true, &r);
    CHECK(r.status == static_cast<uint8_t>(hca::Status::BadParam));
    // A 5-level implicit MR's KSM key (2^26 entries of 1 GiB) zapped to the
    // null mkey costs the budget nothing; the entry of GiB 2^17 costs one
    // chunk of 64 entries and the chunk slots up to it (objects/xlt_table.h).
    const uint32_t big = n.d.create_indirect_mkey(n.pd, 3, 30, 1u << 26, {});
    const uint64_t used = n.d.bench().dev.budget.used();
    hca::UmrOp op;
    op.key = big;
    static const uint8_t kNoMkc[64] = {};
    op.mkc = kNoMkc;
    for (uint64_t first = 0; first < (uint64_t{1} << 26); first += 1u << 16) {
        op.xlt_first = first * 2;
        op.xlt.assign(uint64_t{2} << 16, 0);
        for (size_t i = 0; i < op.xlt.size(); i += 2) {
            op.xlt[i] = uint64_t{1} << 62 | hca::kNullMkey;  // a byte count, as 6.1's populate_klm() writes
        }
        REQUIRE(keys.umr(op, nullptr) == hca::UmrError::None);
    }
    CHECK(keys.find(big)->klm.size() == uint64_t{1} << 26);
    CHECK(n.d.bench().dev.budget.used() == used);
    got.clear();
    CHECK(keys.translate(big, n.pd, uint64_t{5} << 40, 8, hca::kAccLocalRead, got) == hca::XlatError::PageFault);
    op.xlt_first = uint64_t{2} << 17;
    op.xlt = {n.mr.key, n.mr.iova - 0x100};
    REQUIRE(keys.umr(op, nullptr) == hca::UmrError::None);
    CHECK(n.d.bench().dev.budget.used() == used + 2049 + 128);
    REQUIRE(keys.translate(big, n.pd, (uint64_t{1} << 47) + 0x100, 8, hca::kAccLocalRead, got) == hca::XlatError::None);
    want.clear();
    REQUIRE(keys.translate(n.mr.key, n.pd, n.mr.iova, 8, hca::kAccLocalRead, want) == hca::XlatError::None);
    CHECK((got.size() == 1 && got[0].addr == want[0].addr));

    // A window as mlx5_ib_alloc_mw() makes it still works.
    CHECK(n.d.create_window(n.pd, true, 0x44, &r) != 0);
    CHECK(r.status == 0);
}

TEST_CASE("UMR QP: enable an MR-cache key with a pointed-to MTT list, RDMA through it, revoke", "[umr]") {
    Pair p;
    Node &b = p.b;
    const uint32_t umr_pd = b.d.alloc_pd();
    const uint32_t key = b.d.create_free_mkey(umr_pd, 8);  // 16 pages of room
    QpHandle uq = umr_qp(b);
    // Four scattered target pages, listed in guest memory (64-byte aligned).
    std::vector<uint64_t> pages;
    for (int i = 0; i < 4; ++i) {
        pages.push_back(b.d.bench().host.alloc(4096));
    }
    const uint64_t list = b.d.bench().host.alloc(64, 64);
    for (int i = 0; i < 4; ++i) {
        b.d.bench().host.write_be64(list + i * 8, pages[3 - i] | 3);  // reverse order, READ|WRITE bits
    }
    const uint32_t dma_key = b.d.create_pa_mkey(umr_pd);
    const uint64_t iova = 0x5550000;
    Umr u{.flags = kCheckNotFree,
          .xlt_octowords = 4,
          .mask = kMaskKey | kMaskFree | kMaskPd | kMaskLen | kMaskPageSize | kMaskStart | kAllAccess,
          .access = 0x1f,
          .variant = 0x77,
          .pd = b.pd,
          .start = iova,
          .len = 4 * 4096,
          .pointer = Driver::Sge{dma_key, list, 64}};
    b.d.post_raw(uq, hca::kWqeUmr, key, u.body());
    auto c = b.d.next_cqe(b.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    CHECK(be32(*c, 0x38) >> 24 == hca::kWqeUmr);
    const uint32_t new_key = (key & ~0xffu) | 0x77;
    const auto *m = b.d.bench().dev.mkeys.find(new_key);
    REQUIRE(m);
    CHECK(!m->free);
    CHECK(m->pd == b.pd);

    // The peer writes 6000 bytes at page offset 100: pages 0 and 1 of the MR,
    // which the list put at pages[3] and pages[2].
    rdma_write(p, true, new_key, iova + 100, 6000, 9);
    auto wc = p.a.d.next_cqe(p.a.scq);
    REQUIRE(wc);
    CHECK(op(*wc) == hca::kCqeReq);
    const uint8_t *pg0 = b.d.bench().host.mem(pages[3], 4096);
    const uint8_t *pg1 = b.d.bench().host.mem(pages[2], 4096);
    CHECK(pg0[100] == 9);
    CHECK(pg0[101] == static_cast<uint8_t>(9 + 7));
    const size_t in1 = 4096 - 100;  // first byte landing in page 1
    CHECK(pg1[0] == static_cast<uint8_t>(9 + in1 * 7));

    // Revoke (mlx5r_umr_revoke_mr): free, back to the UMR PD, no data.
    Umr rv{.flags = kInline, .mask = kMaskPd | kMaskFree, .free = true, .variant = 0x77, .pd = umr_pd};
    b.d.post_raw(uq, hca::kWqeUmr, new_key, rv.body());
    c = b.d.next_cqe(b.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    CHECK(b.d.bench().dev.mkeys.find(new_key)->free);
    rdma_write(p, true, new_key, iova, 8, 1);
    wc = p.a.d.next_cqe(p.a.scq);
    REQUIRE(wc);
    CHECK(op(*wc) == hca::kCqeReqErr);
    CHECK((*wc)[0x37] == hca::kSyndRemoteAccess);
}

TEST_CASE("UMR QP: translation offsets load a list in pieces, checks refuse bad requests", "[umr]") {
    Wire w;
    Node n(w.a, 1);
    const uint32_t key = n.d.create_free_mkey(n.pd, 4);  // room for 8 entries
    QpHandle uq = umr_qp(n);
    // Entries 0..3 inline, then 4..7 inline at offset 2 octowords.
    Umr first{.flags = kInline | kCheckNotFree,
              .xlt_octowords = 2,
              .mask = 0,
              .variant = 0x33,
              .inline_xlt = {0x1003, 0x2003, 0x3003, 0x4003}};  // READ|WRITE bits
    n.d.post_raw(uq, hca::kWqeUmr, key, first.body());
    REQUIRE(n.d.next_cqe(n.scq));
    Umr second{.flags = kInline | kCheckNotFree | kOffsetEn,
               .xlt_octowords = 2,
               .xlt_offset = 2,
               .mask = kMaskFree | kMaskLen | kMaskStart | kMaskPageSize | kMaskLr | kMaskLw,
               .access = 3,
               .variant = 0x33,
               .start = 0,
               .len = 8 * 4096,
               .inline_xlt = {0x5003, 0x6003, 0x7003, 0x8003}};
    n.d.post_raw(uq, hca::kWqeUmr, key, second.body());
    auto c = n.d.next_cqe(n.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    const auto *m = n.d.bench().dev.mkeys.find(key);
    REQUIRE(m);
    REQUIRE(m->mtt.size() == 8);
    CHECK(m->page(0) == 0x1000);
    CHECK(m->page(7) == 0x8000);
    std::vector<hca::DmaChunk> ch;
    CHECK(n.d.bench().dev.mkeys.translate(key, n.pd, 5 * 4096 + 8, 16, hca::kAccLocalWrite, ch) ==
          hca::XlatError::None);
    REQUIRE(ch.size() == 1);
    CHECK(ch[0].addr == 0x6008);

    SECTION("CHECK_NOT_FREE on a key in use fails with a local protection error") {
        n.d.post_raw(uq, hca::kWqeUmr, key, first.body());
        c = n.d.next_cqe(n.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
        CHECK((*c)[0x37] == hca::kSyndLocalProt);
        CHECK(n.d.bench().dev.qps.find(uq.qpn)->state == hca::QpState::Err);
    }
    SECTION("entries beyond the key's translation size") {
        Umr big{.flags = kInline | kCheckFree | kOffsetEn, .xlt_octowords = 2, .xlt_offset = 3, .variant = 0x33,
                .inline_xlt = {1, 2, 3, 4}};
        n.d.post_raw(uq, hca::kWqeUmr, key, big.body());
        c = n.d.next_cqe(n.scq);
        REQUIRE(c);
        CHECK((*c)[0x37] == hca::kSyndLocalProt);
    }
    SECTION("an unsupported mask bit (BSF) is a local QP operation error") {
        Umr bsf{.flags = kInline, .mask = kMaskBsf, .variant = 0x33};
        n.d.post_raw(uq, hca::kWqeUmr, key, bsf.body());
        c = n.d.next_cqe(n.scq);
        REQUIRE(c);
        CHECK((*c)[0x37] == hca::kSyndLocalQpOp);
    }
    SECTION("a wrong variant without the KEY mask bit") {
        Umr v{.flags = kInline | kCheckFree, .mask = kMaskLr, .access = 1, .variant = 0x33};
        n.d.post_raw(uq, hca::kWqeUmr, key ^ 1, v.body());
        c = n.d.next_cqe(n.scq);
        REQUIRE(c);
        CHECK((*c)[0x37] == hca::kSyndLocalProt);
    }
    SECTION("a UMR WQE too short for its segments") {
        n.d.post_raw(uq, hca::kWqeUmr, key, std::vector<uint8_t>(32));
        c = n.d.next_cqe(n.scq);
        REQUIRE(c);
        CHECK((*c)[0x37] == hca::kSyndLocalQpOp);
    }
}

TEST_CASE("RC fast registration (REG_MR) and LOCAL_INV, like ib_alloc_mr() + ib_map_mr_sg()", "[umr][rc]") {
    Pair p;
    Node &b = p.b;
    const uint32_t key = b.d.create_free_mkey(b.pd, 4, 0x10);
    std::vector<uint64_t> pages;
    for (int i = 0; i < 2; ++i) {
        pages.push_back(b.d.bench().host.alloc(4096));
    }
    const uint64_t iova = 0x900000;
    // set_reg_wr(): CHECK_NOT_FREE | INLINE, frwr mask, REMOTE_INVAL, new variant.
    Umr reg{.flags = kInline | kCheckNotFree,
            .xlt_octowords = 4,
            .mask = kMaskLen | kMaskPageSize | kMaskStart | kMaskKey | kAllAccess | kMaskFree | (1ull << 8) |
                    (1ull << 23),
            .access = 0x0f,
            .variant = 0x11,
            .start = iova,
            .len = 8192,
            .inline_xlt = {pages[0] | 3, pages[1] | 3}};
    const uint32_t new_key = (key & ~0xffu) | 0x11;
    b.d.post_raw(p.qb, hca::kWqeUmr, new_key, reg.body());
    p.w.pump();
    auto c = b.d.next_cqe(b.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    CHECK(be32(*c, 0x38) >> 24 == hca::kWqeUmr);

    rdma_write(p, true, new_key, iova + 4000, 200, 44);
    auto wc = p.a.d.next_cqe(p.a.scq);
    REQUIRE(wc);
    CHECK(op(*wc) == hca::kCqeReq);
    CHECK(b.d.bench().host.mem(pages[0], 4096)[4000] == 44);
    CHECK(b.d.bench().host.mem(pages[1], 4096)[0] == static_cast<uint8_t>(44 + 96 * 7));

    // Registering again without invalidating first fails (CHECK_NOT_FREE)...
    SECTION("re-registration of a valid key") {
        b.d.post_raw(p.qb, hca::kWqeUmr, new_key, reg.body());
        c = b.d.next_cqe(b.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
        CHECK((*c)[0x37] == hca::kSyndLocalProt);
    }
    // ...LOCAL_INV (set_linv_wr()) makes it free, and remote access fails.
    SECTION("local invalidate") {
        Umr inv{.flags = kInline, .mask = kMaskFree, .free = true};
        b.d.post_raw(p.qb, hca::kWqeUmr, new_key, inv.body());
        c = b.d.next_cqe(b.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReq);
        rdma_write(p, true, new_key, iova, 8, 1);
        wc = p.a.d.next_cqe(p.a.scq);
        REQUIRE(wc);
        CHECK((*wc)[0x37] == hca::kSyndRemoteAccess);
    }
    SECTION("a key of another PD cannot be registered through this QP") {
        const uint32_t other = b.d.create_free_mkey(b.d.alloc_pd(), 4, 0x10);
        b.d.post_raw(p.qb, hca::kWqeUmr, other, reg.body());
        c = b.d.next_cqe(b.scq);
        REQUIRE(c);
        CHECK((*c)[0x37] == hca::kSyndLocalProt);
    }
}

TEST_CASE("UMR QP: a key sized for 4 entries takes a 64-byte list (MR cache order 0)", "[umr]") {
    Wire w;
    Node n(w.a, 1);
    const uint32_t key = n.d.create_free_mkey(n.pd, 2);  // get_mkc_octo_size(MTT, 4) = 2
    QpHandle uq = umr_qp(n);
    Umr u{.flags = kInline | kCheckNotFree, .xlt_octowords = 4,
          .mask = kMaskFree | kMaskLen | kMaskStart | kMaskPageSize | kMaskLr, .access = 1, .variant = 0x33,
          .len = 4 * 4096, .inline_xlt = {0x1000, 0x2000, 0x3000, 0x4000, 0, 0, 0, 0}};
    n.d.post_raw(uq, hca::kWqeUmr, key, u.body());
    auto c = n.d.next_cqe(n.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    // Sixteen entries do not fit.
    Umr big = u;
    big.flags = kInline | kCheckFree;
    big.xlt_octowords = 8;
    big.inline_xlt.resize(16);
    n.d.post_raw(uq, hca::kWqeUmr, key, big.body());
    c = n.d.next_cqe(n.scq);
    REQUIRE(c);
    CHECK((*c)[0x37] == hca::kSyndLocalProt);
}

TEST_CASE("an interleaved key: a UMR's repeated block of strided entries, a SEND gathered through it", "[umr]") {
    Pair p;
    Node &a = p.a;
    // mlx5dv_create_mkey(): a free KLM key with room for 4 entries, filled
    // by mlx5dv_wr_mr_interleaved(): 8 bytes every 10 at two places, 3 times.
    const uint32_t key = a.d.create_window(a.pd, false);
    a.fill(a.mr.iova, 0x200, 9);
    const uint64_t entry = uint64_t{10} << 48 | uint64_t{8} << 32 | a.mr.key;
    Umr il{.flags = kInline,
           .xlt_octowords = 4,
           .mask = kMaskFree | kMaskLen | kAllAccess,
           .access = 0x1f,
           .len = 48,
           .inline_xlt = {uint64_t{16} << 32 | 0x400, uint64_t{3} << 32 | 2, entry, a.mr.iova, entry, a.mr.iova + 0x100,
                          0, 0}};
    a.d.post_raw(p.qa, hca::kWqeUmr, key, il.body());
    auto c = a.d.next_cqe(a.scq);
    REQUIRE(c);
    REQUIRE(op(*c) == hca::kCqeReq);
    const auto *k = a.d.bench().dev.mkeys.find(key);
    REQUIRE(k);
    CHECK_FALSE(k->free);

    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 64);
    a.d.post_send(p.qa, {.sges = {{key, 0, 48}}});
    p.w.pump();
    c = a.d.next_cqe(a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(be32(*rc, 44) == 48);
    const uint8_t *got = p.b.mem(p.b.mr.iova, 48);
    for (unsigned r = 0; r < 3; ++r) {
        for (unsigned i = 0; i < 8; ++i) {
            CHECK(got[r * 16 + i] == *a.mem(a.mr.iova + r * 10 + i, 1));
            CHECK(got[r * 16 + 8 + i] == *a.mem(a.mr.iova + 0x100 + r * 10 + i, 1));
        }
    }
    // Past the three repetitions there is nothing: a local protection error.
    a.d.post_send(p.qa, {.sges = {{key, 40, 16}}});
    p.w.pump();
    c = a.d.next_cqe(a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReqErr);
}

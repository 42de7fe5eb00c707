// Signature handover: PSVs, signature keys configured by UMR WQEs with a
// BSF the way libmlx5's mlx5dv_wr_mkey_configure() builds them, SET_PSV,
// T10-DIF and CRC32 block signatures carried between two devices, and
// SIGERR CQEs with their arming.
#include <catch2/catch.hpp>

#include <isa-l/crc.h>
#include <libdeflate.h>
#include <cstring>

#include "expect.h"
#include "pair.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

constexpr uint64_t kMaskLen = 1ull << 0, kMaskSigErr = 1ull << 9, kMaskBsf = 1ull << 12, kMaskKey = 1ull << 13,
                   kMaskLw = 1ull << 18, kMaskFree = 1ull << 29;

uint32_t create_psv(Node &n, uint32_t pd, CmdResult *res = nullptr, uint32_t num = 1) {
    auto in = Driver::inbox(hca::kOpCreatePsv, 0, ifc::create_psv_in::size_bytes);
    ifc::set(in.data(), ifc::create_psv_in::num_psv, num);
    ifc::set(in.data(), ifc::create_psv_in::pd, pd);
    auto r = n.d.exec(in, ifc::create_psv_out::size_bytes);
    if (res) {
        *res = r;
    }
    return r.status ? 0 : static_cast<uint32_t>(r.get(ifc::create_psv_out::psv0_index));
}

// mlx5dv_create_mkey(MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE): a free,
// UMR-enabled KLM key with a 4-octoword BSF.
uint32_t create_sig_mkey(Node &n, CmdResult *res = nullptr, uint32_t bsf_octwords = 4) {
    auto in = Driver::inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes);
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    for (auto f : {ifc::mkc::free_, ifc::mkc::umr_en, ifc::mkc::lr, ifc::mkc::bsf_en}) {
        ifc::set(in.data(), ifc::in(e, f), 1);
    }
    ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_1_0), 2);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::pd), n.pd);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::translations_octword_size), 4);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::bsf_octword_size), bsf_octwords);
    auto r = n.d.exec(in, 16);
    if (res) {
        *res = r;
    }
    return r.status ? 0 : static_cast<uint32_t>(r.get(ifc::create_mkey_out::mkey_index)) << 8;
}

// One domain of a BSF as libmlx5's mlx5_umr_fill_sig_bsf() writes it.
struct Domain {
    enum { kNone, kT10, kCrc } type = kNone;
    uint32_t psv = 0;
    uint16_t app = 0;
    uint32_t ref = 0;
    bool inc_ref = false;
};

std::vector<uint8_t> bsf(const Domain &mem, const Domain &wire, uint8_t check, bool sbs = false, uint8_t copy = 0) {
    std::vector<uint8_t> b(64);
    b[0] = static_cast<uint8_t>(2 << 6 | (sbs ? 1 << 4 : 0));
    b[1] = check;
    b[2] = sbs ? copy : (wire.type ? 1 : 0);  // 512-byte blocks
    b[3] = mem.type ? 1 : 0;
    hca::store_be32(b.data() + 4, 0xffffffff);
    auto fill = [&](const Domain &d, size_t bfs_psv, size_t inl) {
        if (d.type == Domain::kCrc) {
            hca::store_be32(b.data() + bfs_psv, 0x22u << 24 | d.psv);  // CRC32, repeat, seed all ones
        } else if (d.type == Domain::kT10) {
            hca::store_be32(b.data() + bfs_psv, d.psv);
            hca::store_be16(b.data() + inl, 0xc000);
            hca::store_be16(b.data() + inl + 2, d.app);
            hca::store_be32(b.data() + inl + 4, d.ref);
            b[inl + 8] = 1;     // CRC guard
            b[inl + 9] = 0x80;  // repeat, guard seed 0
            b[inl + 13] = static_cast<uint8_t>((d.inc_ref ? 0x40 : 0) | 0x02);
            hca::store_be16(b.data() + inl + 14, 0xffff);
        }
    };
    fill(mem, 12, 48);
    fill(wire, 8, 32);
    return b;
}

// mlx5dv_wr_mkey_configure() + set_mkey_layout_list(one entry) +
// set_mkey_sig_block(): UMR control segment, mkey segment, the KLM padded
// to 64 bytes, the BSF. expected_sigerr arms the signature error report.
std::vector<uint8_t> sig_umr(uint32_t key, uint32_t pd, uint32_t mr_key, uint64_t addr, uint32_t len,
                             const std::vector<uint8_t> &bsf_bytes, bool expected_sigerr, bool with_bsf = true) {
    std::vector<uint8_t> b(48 + 64 + 64 + (with_bsf ? 64 : 0));
    b[0] = 0x80;                       // inline
    hca::store_be16(b.data() + 4, 4);  // KLM octowords
    hca::store_be16(b.data() + 6, with_bsf ? 4 : 0);
    hca::store_be64(b.data() + 8, kMaskFree | kMaskKey | kMaskLen | kMaskLw | kMaskBsf | kMaskSigErr);
    uint8_t *m = b.data() + 48;
    ifc::set(m, ifc::mkc::lr, 1);
    ifc::set(m, ifc::mkc::lw, 1);
    ifc::set(m, ifc::mkc::qpn, 0xffffff);
    ifc::set(m, ifc::mkc::mkey_7_0, key & 0xff);
    ifc::set(m, ifc::mkc::bsf_en, with_bsf);
    ifc::set(m, ifc::mkc::expected_sigerr_count, expected_sigerr);
    ifc::set(m, ifc::mkc::pd, pd);
    ifc::set(m, ifc::mkc::len, len);
    uint8_t *klm = b.data() + 112;
    hca::store_be32(klm, len);
    hca::store_be32(klm + 4, mr_key);
    hca::store_be64(klm + 8, addr);
    if (with_bsf) {
        std::copy_n(bsf_bytes.begin(), 64, b.begin() + 176);
    }
    return b;
}

std::vector<uint8_t> set_psv(uint32_t psv, uint64_t sig) {
    std::vector<uint8_t> b(16);
    hca::store_be32(b.data(), psv);
    hca::store_be64(b.data() + 8, sig);
    return b;
}

// A signature key of node n over [iova, iova + len) of its MR, configured
// on qp; the UMR's completion polled.
uint32_t configure(Node &n, QpHandle &qp, uint64_t iova, uint32_t len, const std::vector<uint8_t> &bsf_bytes,
                   bool expected_sigerr = true) {
    const uint32_t key = create_sig_mkey(n);
    REQUIRE(key);
    n.d.post_raw(qp, hca::kWqeUmr, key, sig_umr(key, n.pd, n.mr.key, iova, len, bsf_bytes, expected_sigerr));
    auto c = n.d.next_cqe(n.scq);
    REQUIRE(c);
    REQUIRE(op(*c) == hca::kCqeReq);
    return key;
}

}  // namespace

TEST_CASE("T10-DIF with the IP checksum guard: the block's Internet checksum, big-endian", "[sig]") {
    // Linux's t10_pi_ip_fn(): ip_compute_csum() of the block. Reference:
    // the one's complement of the one's complement sum of its big-endian
    // 16-bit words.
    hca::SigDomain d;
    d.type = hca::SigType::T10dif;
    d.ip_csum = true;
    d.app_tag = 0x1234;
    d.ref_tag = 0x01020304;
    for (const uint32_t block : {512u, 520u, 4096u}) {
        d.block = block;
        std::vector<uint8_t> data(block);
        for (const int pattern : {0, 1, 2}) {
            for (uint32_t i = 0; i < block; ++i) {
                data[i] = pattern == 0 ? 0 : pattern == 1 ? 0xff : static_cast<uint8_t>(i * 37 + (i >> 8) + 5);
            }
            uint32_t sum = 0;
            for (uint32_t i = 0; i < block; i += 2) {
                sum += uint32_t{data[i]} << 8 | data[i + 1];
            }
            while (sum >> 16) {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            uint8_t pi[8];
            hca::sig_make_pi(d, data.data(), 0, pi);
            CHECK(hca::load_be16(pi) == static_cast<uint16_t>(~sum));
            CHECK(hca::load_be16(pi + 2) == 0x1234);
            hca::SigError e;
            CHECK(hca::sig_check_pi(d, hca::kSigCheckGuard, data.data(), 0, pi, e) == 0);
            pi[1] ^= 1;
            CHECK(hca::sig_check_pi(d, hca::kSigCheckGuard, data.data(), 0, pi, e) == hca::kSigErrGuard);
        }
    }
}

TEST_CASE("T10-DIF on the wire: inserted per 512-byte block by the sender, checked and stripped by the receiver",
          "[sig]") {
    Pair p;
    const uint32_t pa = create_psv(p.a, p.a.pd), pb = create_psv(p.b, p.b.pd);
    REQUIRE((pa && pb));
    const Domain t10{.type = Domain::kT10, .app = 0xabcd, .ref = 0x01234567, .inc_ref = true};
    Domain wa = t10, wb = t10;
    wa.psv = pa;
    wb.psv = pb;
    const uint64_t src = p.a.mr.iova, dst = p.b.mr.iova + 0x4000;
    const uint32_t ka = configure(p.a, p.qa, src, 1024, bsf({}, wa, 0xff));
    p.a.d.post_raw(p.qa, hca::kWqeSetPsv, 0, set_psv(pa, 0xffffabcd01234567ull));
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    CHECK(p.a.d.bench().dev.psvs.find(pa)->transient_sig == 0xffffabcd01234567ull);
    p.a.fill(src, 1024, 9);

    SECTION("the wire carries data and PI: a plain receive buffer sees 2 x (512 + 8) bytes") {
        p.b.d.post_recv(p.qb, p.b.mr.key, dst, 2048);
        p.a.d.post_send(p.qa, {.sges = {{ka, 0, 1024}}});
        p.w.pump();
        auto rc = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(rc);
        CHECK(op(*rc) == hca::kCqeRespSend);
        CHECK(be32(*rc, 0x2c) == 1040);
        for (unsigned blk = 0; blk < 2; ++blk) {
            const uint8_t *got = p.b.mem(dst + blk * 520, 520);
            CHECK(std::memcmp(got, p.a.mem(src + blk * 512, 512), 512) == 0);
            CHECK(hca::load_be16(got + 512) == crc16_t10dif(0, p.a.mem(src + blk * 512, 512), 512));
            CHECK(hca::load_be16(got + 514) == 0xabcd);
            CHECK(hca::load_be32(got + 516) == 0x01234567u + blk);  // Type 1: + block number
        }
    }
    SECTION("a receiver's signature key checks and strips it; a corrupted guard is its SIGERR") {
        const uint32_t kb = configure(p.b, p.qb, dst, 1024, bsf({}, wb, 0xff));
        p.b.d.post_recv(p.qb, kb, 0, 1024);
        p.a.d.post_send(p.qa, {.sges = {{ka, 0, 1024}}});
        p.w.pump();
        auto rc = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(rc);
        CHECK(op(*rc) == hca::kCqeRespSend);
        CHECK(p.b.same(dst, 1024, 9));
        REQUIRE(p.a.d.next_cqe(p.a.scq));
        // The sender's PI is wrong for the second block once its ref tag
        // does not increment: the receiver's wire check finds the ref tag.
        Domain bad = wa;
        bad.inc_ref = false;
        const uint32_t ka2 = configure(p.a, p.qa, src, 1024, bsf({}, bad, 0xff));
        p.b.d.post_recv(p.qb, kb, 0, 1024);
        p.a.d.post_send(p.qa, {.sges = {{ka2, 0, 1024}}});
        p.w.pump();
        rc = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(rc);
        CHECK(op(*rc) == hca::kCqeSigErr);  // before the receive's own CQE
        CHECK(hca::load_be16(rc->data() + 0x20) == hca::kSigErrRef);
        CHECK((*rc)[0x23] == 0);  // the wire domain
        CHECK(be32(*rc, 0x24) == kb);
        CHECK(hca::load_be64(rc->data() + 0x28) == 512);  // the second block
        CHECK(be32(*rc, 0x18) == 0x01234568u);            // expected
        CHECK(be32(*rc, 0x1c) == 0x01234567u);            // actual
        rc = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(rc);
        CHECK(op(*rc) == hca::kCqeRespSend);  // the transfer completes
    }
}

TEST_CASE("CRC32 in memory: checked and stripped on the way out; one SIGERR per arming", "[sig]") {
    Pair p;
    const uint32_t psv = create_psv(p.a, p.a.pd);
    const uint64_t src = p.a.mr.iova;
    p.a.fill(src, 516, 3);
    const uint32_t good = static_cast<uint32_t>(libdeflate_crc32(0, p.a.mem(src, 512), 512));
    hca::store_be32(p.a.mem(src + 512, 4), good);
    const uint32_t key = configure(p.a, p.qa, src, 516, bsf({.type = Domain::kCrc, .psv = psv}, {}, 0xf0));
    auto send = [&] {
        p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 1024);
        p.a.d.post_send(p.qa, {.sges = {{key, 0, 512}}});
        p.w.pump();
        auto rc = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(rc);
        CHECK(be32(*rc, 0x2c) == 512);  // the CRC stays behind
        CHECK(p.b.same(p.b.mr.iova, 512, 3));
    };
    send();
    auto c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);

    hca::store_be32(p.a.mem(src + 512, 4), good ^ 1);
    send();
    c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    REQUIRE(op(*c) == hca::kCqeSigErr);
    CHECK(hca::load_be16(c->data() + 0x20) == hca::kSigErrGuard);
    CHECK((*c)[0x22] == 0);  // block signature
    CHECK((*c)[0x23] == 1);  // the memory domain
    CHECK(be32(*c, 0x10) == good);
    CHECK(be32(*c, 0x14) == (good ^ 1));
    c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);  // the SEND itself succeeds

    // Reported once: the key is not armed again until a UMR sets
    // expected_sigerr_count to the next parity.
    send();
    c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    p.a.d.post_raw(
        p.qa, hca::kWqeUmr, key,
        sig_umr(key, p.a.pd, p.a.mr.key, src, 516, bsf({.type = Domain::kCrc, .psv = psv}, {}, 0xf0), false));
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    send();
    c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeSigErr);
}

TEST_CASE("signature keys: what the device refuses", "[sig]") {
    Pair p;
    CmdResult r;
    SECTION("CREATE_MKEY with a BSF other than 4 octowords; CREATE_PSV of 0 or 5") {
        CHECK(create_sig_mkey(p.a, &r, 8) == 0);
        CHECK(r.status == static_cast<uint8_t>(hca::Status::BadParam));
        CHECK(create_psv(p.a, p.a.pd, &r, 0) == 0);
        CHECK(r.status == static_cast<uint8_t>(hca::Status::BadParam));
        CHECK(create_psv(p.a, p.a.pd, &r, 5) == 0);
        CHECK(r.status == static_cast<uint8_t>(hca::Status::BadParam));
        CHECK(create_psv(p.a, p.a.pd + 100, &r) == 0);
        CHECK(r.status != 0);
    }
    SECTION("a BSF on a key made without bsf_en") {
        const uint32_t w = p.a.d.create_window(p.a.pd, false, 0);
        const uint32_t psv = create_psv(p.a, p.a.pd);
        p.a.d.post_raw(
            p.qa, hca::kWqeUmr, w,
            sig_umr(w, p.a.pd, p.a.mr.key, p.a.mr.iova, 512, bsf({.type = Domain::kCrc, .psv = psv}, {}, 0), true));
        auto c = p.a.d.next_cqe(p.a.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
        CHECK((*c)[0x37] == hca::kSyndLocalQpOp);
    }
    SECTION("a PSV that does not exist") {
        Pair q;
        const uint32_t key = create_sig_mkey(q.a);
        q.a.d.post_raw(
            q.qa, hca::kWqeUmr, key,
            sig_umr(key, q.a.pd, q.a.mr.key, q.a.mr.iova, 512, bsf({.type = Domain::kCrc, .psv = 77}, {}, 0), true));
        auto c = q.a.d.next_cqe(q.a.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
        CHECK((*c)[0x37] == hca::kSyndLocalQpOp);
    }
    SECTION("an SGE of part of a block; the key as an RDMA WRITE's remote key") {
        const uint32_t psv = create_psv(p.b, p.b.pd);
        const uint32_t key = configure(p.b, p.qb, p.b.mr.iova, 512, bsf({}, {.type = Domain::kCrc, .psv = psv}, 0));
        p.b.d.post_send(p.qb, {.sges = {{key, 0, 100}}});
        p.w.pump();
        auto c = p.b.d.next_cqe(p.b.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
        CHECK((*c)[0x37] == hca::kSyndLocalLength);
        Pair q;
        const uint32_t qpsv = create_psv(q.b, q.b.pd);
        const uint32_t rkey = configure(q.b, q.qb, q.b.mr.iova, 512, bsf({}, {.type = Domain::kCrc, .psv = qpsv}, 0));
        q.a.d.post_send(
            q.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{q.a.mr.key, q.a.mr.iova, 64}}, .raddr = 0, .rkey = rkey});
        q.w.pump();
        c = q.a.d.next_cqe(q.a.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
        CHECK((*c)[0x37] == hca::kSyndRemoteAccess);
    }
    SECTION("SET_PSV of a PSV of another PD") {
        const uint32_t other = p.a.d.alloc_pd();
        const uint32_t psv = create_psv(p.a, other);
        p.a.d.post_raw(p.qa, hca::kWqeSetPsv, 0, set_psv(psv, 1));
        auto c = p.a.d.next_cqe(p.a.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReqErr);
        CHECK((*c)[0x37] == hca::kSyndLocalProt);
    }
}

TEST_CASE("signature pipelining: a signature error drains the send queue to SQD before the fenced WQE", "[sig]") {
    Pair p;
    hca::Qp *qa = p.a.d.bench().dev.qps.find(p.qa.qpn);
    REQUIRE(qa);
    qa->drain_sigerr = true;  // INIT2INIT with MLX5_QPC_OPT_MASK_INIT2INIT_DRAIN_SIGERR
    const uint32_t psv = create_psv(p.a, p.a.pd);
    const uint64_t src = p.a.mr.iova;
    p.a.fill(src, 516, 1);  // the CRC bytes are not the CRC
    const uint32_t key = configure(p.a, p.qa, src, 516, bsf({.type = Domain::kCrc, .psv = psv}, {}, 0xf0));
    EqHandle aeq = p.a.d.create_eq(6, 0, {1u << hca::kEventSqDrained, 0, 0, 0}, p.a.uar);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova + 0x8000, 64);
    p.a.d.post_send(p.qa,
                    {.opcode = hca::kWqeRdmaWrite,
                     .sges = {{key, 0, 512}},
                     .raddr = p.b.mr.iova,
                     .rkey = p.b.mr.key,
                     .signaled = false},
                    false);
    const uint16_t send_at = p.qa.sq_pi;
    p.a.d.post_send(p.qa, {.sges = {{p.a.mr.key, src + 0x1000, 16}}, .fence = 4});
    p.w.pump();
    auto c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeSigErr);
    CHECK(!p.a.d.next_cqe(p.a.scq));  // the fenced SEND did not run
    CHECK(!p.b.d.next_cqe(p.b.rcq));
    CHECK(qa->state == hca::QpState::Sqd);
    CHECK(qa->sq_ci == send_at);  // hw_sq_wqebb_counter: the first WQE not executed
    const auto e = p.a.d.next_eqe(aeq);
    REQUIRE(e);
    CHECK((*e)[1] == hca::kEventSqDrained);
    CHECK((hca::load_be32(e->data() + 0x38) & 0xffffff) == p.qa.qpn);  // mlx5_eqe_qp_srq.qp_srq_n
    // SQD2RTS resumes at the SEND.
    p.a.d.modify_qp(hca::kOpSqd2RtsQp, p.qa.qpn);
    p.w.pump();
    c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    REQUIRE(p.b.d.next_cqe(p.b.rcq));
}

TEST_CASE("T10-DIF in both domains with the same block structure: checked, and the copy mask carries tags across",
          "[sig]") {
    Pair p;
    const uint32_t pm = create_psv(p.a, p.a.pd), pw = create_psv(p.a, p.a.pd);
    const uint64_t src = p.a.mr.iova, dst = p.b.mr.iova + 0x2000;
    // Memory: one 512-byte block and its PI (guard right, app tag 0x7777
    // where the wire's is 0x1111, reference tag 5).
    p.a.fill(src, 512, 4);
    uint8_t *pi = p.a.mem(src + 512, 8);
    hca::store_be16(pi, crc16_t10dif(0, p.a.mem(src, 512), 512));
    hca::store_be16(pi + 2, 0x7777);
    hca::store_be32(pi + 4, 5);
    const Domain mem{.type = Domain::kT10, .psv = pm, .app = 0x7777, .ref = 5};
    const Domain wire{.type = Domain::kT10, .psv = pw, .app = 0x1111, .ref = 5};
    SECTION("the application tag copied from memory (copy mask 0x30)") {
        const uint32_t key = configure(p.a, p.qa, src, 520, bsf(mem, wire, 0xff, true, 0x30));
        p.b.d.post_recv(p.qb, p.b.mr.key, dst, 1024);
        p.a.d.post_send(p.qa, {.sges = {{key, 0, 520}}});  // both domains carry PI: 520 bytes a block
        p.w.pump();
        auto rc = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(rc);
        CHECK(be32(*rc, 0x2c) == 520);
        CHECK(std::memcmp(p.b.mem(dst, 512), p.a.mem(src, 512), 512) == 0);
        CHECK(hca::load_be16(p.b.mem(dst + 514, 2)) == 0x7777);  // copied, not the wire's 0x1111
        auto c = p.a.d.next_cqe(p.a.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReq);
    }
    SECTION("a wrong guard in memory fails the check; copied as it is (copy mask 0xff)") {
        pi[0] ^= 0xff;
        const uint32_t key = configure(p.a, p.qa, src, 520, bsf(mem, wire, 0xc0, true, 0xff));
        p.b.d.post_recv(p.qb, p.b.mr.key, dst, 1024);
        p.a.d.post_send(p.qa, {.sges = {{key, 0, 520}}});
        p.w.pump();
        auto c = p.a.d.next_cqe(p.a.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeSigErr);
        CHECK(hca::load_be16(c->data() + 0x20) == hca::kSigErrGuard);
        REQUIRE(p.b.d.next_cqe(p.b.rcq));
        CHECK(std::memcmp(p.b.mem(dst + 512, 8), pi, 8) == 0);
    }
}

TEST_CASE("a key whose BSF a UMR disables, or that is destroyed, is a plain key or none again", "[sig]") {
    Pair p;
    const uint32_t psv = create_psv(p.a, p.a.pd);
    auto &keys = p.a.d.bench().dev.mkeys;
    const uint32_t key = configure(p.a, p.qa, p.a.mr.iova, 512, bsf({.type = Domain::kCrc, .psv = psv}, {}, 0));
    const uint32_t other = configure(p.a, p.qa, p.a.mr.iova, 512, bsf({.type = Domain::kCrc, .psv = psv}, {}, 0));
    CHECK(keys.sig_keys() == 2);
    // 100 bytes are not a whole block of a signature key: refused. The
    // same SGE on the key once its BSF is off goes out as plain bytes.
    p.a.d.post_raw(p.qa, hca::kWqeUmr, key, sig_umr(key, p.a.pd, p.a.mr.key, p.a.mr.iova, 512, {}, false, false));
    auto c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    REQUIRE(op(*c) == hca::kCqeReq);
    CHECK(keys.sig_keys() == 1);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 1024);
    p.a.d.post_send(p.qa, {.sges = {{key, 0, 100}}});
    p.w.pump();
    c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(be32(*rc, 0x2c) == 100);
    auto in = Driver::inbox(hca::kOpDestroyMkey, 0, ifc::destroy_mkey_in::size_bytes);
    ifc::set(in.data(), ifc::destroy_mkey_in::mkey_index, other >> 8);
    CHECK(p.a.d.exec(in, 16).status == 0);
    CHECK(keys.sig_keys() == 0);
}

TEST_CASE("TEARDOWN_HCA drops PSVs and signature keys with the rest", "[sig][teardown]") {
    Pair p;
    const uint32_t psv = create_psv(p.a, p.a.pd, nullptr, 2);
    REQUIRE(psv);
    configure(p.a, p.qa, p.a.mr.iova, 512, bsf({}, {.type = Domain::kCrc, .psv = psv}, 0));
    CHECK(p.a.d.bench().dev.psvs.count() == 2);
    CHECK(p.a.d.exec(Driver::inbox(hca::kOpTeardownHca, 0, 16), 16).status == 0);
    expect_no_objects(p.a.d.bench().dev);
}

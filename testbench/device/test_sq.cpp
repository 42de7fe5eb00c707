// SQ objects (objects/sq.cpp): what mlx5_core's write-combining test
// (mlx5_wc_support_get(), 6.12 and later) does with one, and what the
// device refuses.
#include <catch2/catch.hpp>
#include <cstring>

#include "be.h"
#include "driver.h"
#include "expect.h"
#include "ud_setup.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

struct Sq {
    uint32_t sqn = 0;
    uint64_t buf = 0;  // one contiguous buffer of `wqebbs` WQEBBs
    uint64_t dbr = 0;
    uint32_t wqebbs = 0;
    uint16_t pc = 0;
    uint32_t half = 0;  // BlueFlame half-buffer of the next copy
};

// CREATE_SQ as create_wc_sq() fills it: cyclic WQ of 64-byte WQEBBs, PD
// `pd` (0 on a port without an Ethernet netdev), flush_in_error_en.
Sq create_sq(UdSetup &s, unsigned log_sz, uint32_t pd, CmdResult *res = nullptr,
             const std::function<void(std::vector<uint8_t> &)> &fill = {}, uint32_t cqn = 0) {
    Sq q;
    q.wqebbs = 1u << log_sz;
    const size_t bytes = size_t{q.wqebbs} * 64;
    const size_t npages = (bytes + 4095) / 4096;
    q.buf = s.b.host.alloc(npages * 4096, 4096);
    q.dbr = s.b.host.alloc(64, 64);
    const ifc::Block ctx = ifc::create_sq_in::ctx;
    const ifc::Block wq = ifc::in(ctx, ifc::sqc::wq);
    auto in = Driver::inbox(hca::kOpCreateSq, 0, ifc::create_sq_in::size_bytes + npages * 8);
    ifc::set(in.data(), ifc::in(ctx, ifc::sqc::cqn), cqn ? cqn : s.scq.cqn);
    ifc::set(in.data(), ifc::in(ctx, ifc::sqc::flush_in_error_en), 1);
    ifc::set(in.data(), ifc::in(wq, ifc::wq::wq_type), 1);
    ifc::set(in.data(), ifc::in(wq, ifc::wq::pd), pd);
    ifc::set(in.data(), ifc::in(wq, ifc::wq::uar_page), s.uar);
    ifc::set(in.data(), ifc::in(wq, ifc::wq::dbr_addr), q.dbr);
    ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_stride), 6);
    ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_pg_sz), 0);
    ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_sz), log_sz);
    for (size_t i = 0; i < npages; ++i) {
        hca::store_be64(in.data() + ifc::create_sq_in::size_bytes + i * 8, q.buf + i * 4096);
    }
    if (fill) {
        fill(in);
    }
    auto r = s.d.exec(in, 16);
    if (res) {
        *res = r;
    }
    q.sqn = static_cast<uint32_t>(r.get(ifc::create_sq_out::sqn));
    return q;
}

CmdResult modify_sq(UdSetup &s, uint32_t sqn, uint8_t from, uint8_t to) {
    auto in = Driver::inbox(hca::kOpModifySq, 0, ifc::modify_sq_in::size_bytes);
    ifc::set(in.data(), ifc::modify_sq_in::sqn, sqn);
    ifc::set(in.data(), ifc::modify_sq_in::sq_state, from);
    ifc::set(in.data(), ifc::in(ifc::modify_sq_in::ctx, ifc::sqc::state), to);
    return s.d.exec(in, 16);
}

CmdResult destroy_sq(UdSetup &s, uint32_t sqn) {
    auto in = Driver::inbox(hca::kOpDestroySq, 0, ifc::destroy_sq_in::size_bytes);
    ifc::set(in.data(), ifc::destroy_sq_in::sqn, sqn);
    return s.d.exec(in, 16);
}

// mlx5_wc_post_nop(): an (un)signalled NOP in memory, the doorbell record,
// then its copy with CQ_UPDATE always set through BlueFlame as 8 x 8-byte
// writes, alternating half-buffers.
void post_nop(UdSetup &s, Sq &q, bool signaled, uint8_t opcode = hca::kWqeNop) {
    uint8_t w[64] = {};
    hca::store_be32(w, uint32_t{q.pc} << 8 | opcode);
    hca::store_be32(w + 4, q.sqn << 8 | 1);
    w[11] = signaled ? hca::kCeCqUpdate : 0;
    s.b.host.write(q.buf + uint64_t{q.pc & (q.wqebbs - 1)} * 64, w, 64);
    ++q.pc;
    s.b.host.write_be32(q.dbr + 4, q.pc);
    w[11] |= hca::kCeCqUpdate;
    const uint64_t base = uint64_t{s.uar} * 4096 + 0x800 + q.half;
    for (int k = 0; k < 8; ++k) {
        s.d.bar_write(base + k * 8, w + k * 8, 8);
    }
    q.half ^= 256;
}

uint8_t cqe_op(const Cqe &c) {
    return c[0x3f] >> 4;
}

uint16_t wqe_counter(const Cqe &c) {
    return hca::load_be16(c.data() + 0x3c);
}

}  // namespace

TEST_CASE("SQ object: the write-combining test's 255 NOPs through BlueFlame complete from the copies", "[sq][bf]") {
    UdSetup s;
    REQUIRE(s.b.dev.fw.caps().gen(ifc::cmd_hca_cap::log_max_sq) != 0);
    CmdResult r;
    // A CQ of 256 like the test's: every copy asks for a CQE.
    CqHandle cq = s.d.create_cq(8, s.ceq.eqn, s.uar);
    Sq q = create_sq(s, 8, 0, &r, {}, cq.cqn);
    REQUIRE(r.status == 0);
    CHECK(s.b.dev.qps.count() == 1);
    REQUIRE(modify_sq(s, q.sqn, 0, 1).status == 0);
    for (int i = 0; i < 254; ++i) {
        post_nop(s, q, false);
    }
    post_nop(s, q, true);
    s.b.pump();
    // The first CQE names WQE 0: the device ran the BlueFlame copy (its
    // CQ_UPDATE), not the unsignalled WQE in memory. mlx5_core takes
    // wqe_counter 254 for "no write combining".
    auto c = s.d.next_cqe(cq);
    REQUIRE(c);
    CHECK(cqe_op(*c) == hca::kCqeReq);
    CHECK(wqe_counter(*c) == 0);
    CHECK(hca::load_be32(c->data() + 0x38) == (uint32_t{hca::kWqeNop} << 24 | q.sqn));

    auto in = Driver::inbox(hca::kOpQuerySq, 0, ifc::query_sq_in::size_bytes);
    ifc::set(in.data(), ifc::query_sq_in::sqn, q.sqn);
    auto qr = s.d.exec(in, ifc::query_sq_out::size_bytes);
    REQUIRE(qr.status == 0);
    CHECK(qr.get(ifc::in(ifc::query_sq_out::sq_context, ifc::sqc::state)) == 1);
    CHECK(qr.get(ifc::in(ifc::query_sq_out::sq_context, ifc::sqc::cqn)) == cq.cqn);
    CHECK(qr.get(ifc::in(ifc::in(ifc::query_sq_out::sq_context, ifc::sqc::wq), ifc::wq::hw_counter)) == 255);
    int cqes = 1;
    while (s.d.next_cqe(cq)) {
        ++cqes;
    }
    CHECK(cqes == 255);

    // The SQ is no QP: the QP commands do not find it.
    CHECK(s.d.modify_qp(0x501, q.sqn).status == static_cast<uint8_t>(hca::Status::BadRes));
    CHECK(destroy_sq(s, q.sqn).status == 0);
    CHECK(s.b.dev.qps.count() == 0);
    CHECK(destroy_sq(s, q.sqn).status == static_cast<uint8_t>(hca::Status::BadRes));
}

TEST_CASE("SQ object: a SEND has no transmit path and completes in error; ERR, RST and RDY again", "[sq]") {
    UdSetup s;
    Sq q = create_sq(s, 4, s.pd);
    REQUIRE(q.sqn);
    REQUIRE(modify_sq(s, q.sqn, 0, 1).status == 0);
    post_nop(s, q, true, hca::kWqeSend);
    post_nop(s, q, true);
    s.b.pump();
    auto c = s.d.next_cqe(s.scq);
    REQUIRE(c);
    CHECK(cqe_op(*c) == hca::kCqeReqErr);
    CHECK((*c)[0x37] == hca::kSyndLocalQpOp);
    c = s.d.next_cqe(s.scq);
    REQUIRE(c);
    CHECK(cqe_op(*c) == hca::kCqeReqErr);
    CHECK((*c)[0x37] == hca::kSyndWrFlush);
    CHECK(s.b.dev.qps.find(q.sqn)->state == hca::QpState::Err);
    // RDY is not reachable from ERR but through RST, which starts the
    // queue over at WQE 0.
    CHECK(modify_sq(s, q.sqn, 3, 1).status == static_cast<uint8_t>(hca::Status::BadParam));
    CHECK(modify_sq(s, q.sqn, 1, 0).status == static_cast<uint8_t>(hca::Status::BadParam));  // it is ERR
    REQUIRE(modify_sq(s, q.sqn, 3, 0).status == 0);
    q.pc = 0;
    q.half = 0;
    s.b.host.write_be32(q.dbr + 4, 0);  // mlx5_wq_cyc_reset() as mlx5e's recovery does
    REQUIRE(modify_sq(s, q.sqn, 0, 1).status == 0);
    post_nop(s, q, true);
    s.b.pump();
    c = s.d.next_cqe(s.scq);
    REQUIRE(c);
    CHECK(cqe_op(*c) == hca::kCqeReq);
    CHECK(wqe_counter(*c) == 0);
}

TEST_CASE("SQ object: what CREATE_SQ refuses, and TEARDOWN_HCA drops SQs", "[sq][teardown]") {
    UdSetup s;
    CmdResult r;
    auto refused = [&](const std::function<void(std::vector<uint8_t> &)> &fill, hca::Status want) {
        create_sq(s, 4, s.pd, &r, fill);
        CHECK(r.status == static_cast<uint8_t>(want));
    };
    const ifc::Block ctx = ifc::create_sq_in::ctx;
    const ifc::Block wq = ifc::in(ctx, ifc::sqc::wq);
    auto set = [](ifc::Field f, uint64_t v) { return [f, v](std::vector<uint8_t> &in) { ifc::set(in.data(), f, v); }; };
    refused(set(ifc::in(ctx, ifc::sqc::state), 1), hca::Status::BadParam);
    refused(set(ifc::in(wq, ifc::wq::wq_type), 0), hca::Status::BadParam);
    refused(set(ifc::in(wq, ifc::wq::log_wq_stride), 7), hca::Status::BadParam);
    refused(set(ifc::in(wq, ifc::wq::log_wq_sz), 16), hca::Status::BadParam);
    refused(set(ifc::in(ctx, ifc::sqc::cqn), 0x7777), hca::Status::BadParam);
    refused(set(ifc::in(wq, ifc::wq::pd), 0x7777), hca::Status::BadParam);
    refused(set(ifc::in(wq, ifc::wq::uar_page), 0x7777), hca::Status::BadParam);
    refused(set(ifc::in(ctx, ifc::sqc::ts_format), 2), hca::Status::BadParam);
    CHECK(s.b.dev.qps.count() == 0);
    CHECK(create_sq(s, 4, s.pd, &r).sqn);
    CHECK(create_sq(s, 4, 0, &r).sqn);
    CHECK(s.b.dev.qps.count() == 2);
    CHECK(s.d.exec(Driver::inbox(hca::kOpTeardownHca, 0, 16), 16).status == 0);
    expect_no_objects(s.b.dev);
}

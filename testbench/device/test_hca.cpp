// HCA-level firmware commands, good and bad input.
#include <catch2/catch.hpp>

#include <cstring>

#include "be.h"
#include "driver.h"
#include "expect.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

CmdResult enable(Driver &d) {
    d.setup_cmdq();
    return d.exec(Driver::inbox(hca::kOpEnableHca, 0, 16), 16);
}

}  // namespace

TEST_CASE("ENABLE_HCA: only function 0, re-enable resets the function", "[hca]") {
    Bench b;
    Driver d(b);
    d.setup_cmdq();
    auto in = Driver::inbox(hca::kOpEnableHca, 0, 16);
    ifc::set(in.data(), ifc::enable_hca_in::function_id, 3);
    CHECK(d.exec(in, 16).status == 0x03);
    CHECK(d.exec(Driver::inbox(hca::kOpEnableHca, 0, 16), 16).status == 0);
    CHECK(d.exec(Driver::inbox(hca::kOpEnableHca, 0, 16), 16).status == 0);
    CHECK(b.dev.fw.state() == hca::HcaState::Enabled);
}

TEST_CASE("ISSI: 0 and 1 supported, others refused", "[hca]") {
    Bench b;
    Driver d(b);
    REQUIRE(enable(d).status == 0);
    auto q = d.exec(Driver::inbox(hca::kOpQueryIssi, 0, 16), ifc::query_issi_out::size_bytes);
    CHECK(q.get(ifc::query_issi_out::supported_issi_dw0) == 0x3);
    CHECK(q.get(ifc::query_issi_out::current_issi) == 0);
    auto set = Driver::inbox(hca::kOpSetIssi, 0, 16);
    ifc::set(set.data(), ifc::set_issi_in::current_issi, 2);
    CHECK(d.exec(set, 16).status == 0x03);
    ifc::set(set.data(), ifc::set_issi_in::current_issi, 1);
    CHECK(d.exec(set, 16).status == 0);
    CHECK(b.dev.fw.issi() == 1);
}

TEST_CASE("pages: boot and init requests, INIT_HCA needs them, teardown gives all back", "[hca][pages]") {
    Bench b;
    Driver d(b);
    REQUIRE(enable(d).status == 0);
    auto boot = d.exec(Driver::inbox(hca::kOpQueryPages, 1, 16), 16);
    CHECK(static_cast<int32_t>(boot.get(ifc::query_pages_out::num_pages)) == hca::Firmware::kBootPages);
    CHECK(d.exec(Driver::inbox(hca::kOpInitHca, 0, 32), 16).status == 0x04);  // no pages yet
    CHECK(d.exec(Driver::inbox(hca::kOpQueryPages, 9, 16), 16).status == 0x03);
    auto give = Driver::inbox(hca::kOpManagePages, 1, 16 + 8);
    ifc::set(give.data(), ifc::manage_pages_in::input_num_entries, 1);
    hca::store_be64(give.data() + 16, b.host.alloc(4096) + 0x10);
    CHECK(d.exec(give, 16, 31).status == 0x03);  // misaligned page
    ifc::set(give.data(), ifc::manage_pages_in::input_num_entries, 4);
    CHECK(d.exec(give, 16, 31).status == 0x50);  // entries beyond the inbox

    d.bring_up();  // re-enables and walks the whole sequence
    CHECK(b.dev.fw.state() == hca::HcaState::Initialized);
    const size_t held = b.dev.fw.pages_held();
    CHECK(held == size_t(hca::Firmware::kBootPages + hca::Firmware::kInitPages));
    CHECK(d.exec(Driver::inbox(hca::kOpTeardownHca, 0, 16), 16).status == 0);
    auto take = Driver::inbox(hca::kOpManagePages, 2, 16);
    ifc::set(take.data(), ifc::manage_pages_in::input_num_entries, 1000);
    auto t = d.exec(take, 16 + 1000 * 8, 31);
    CHECK(t.get(ifc::manage_pages_out::output_num_entries) == held);
    CHECK(b.dev.fw.pages_held() == 0);
    CHECK(d.exec(Driver::inbox(hca::kOpDisableHca, 0, 16), 16).status == 0);
    CHECK(b.dev.fw.state() == hca::HcaState::Disabled);
}

TEST_CASE("capabilities: current and maximum, SET_HCA_CAP reflected and bounded", "[hca][caps]") {
    Bench b;
    Driver d(b);
    REQUIRE(enable(d).status == 0);
    auto cur = d.exec(Driver::inbox(hca::kOpQueryHcaCap, 1, 16), ifc::query_hca_cap_out::size_bytes);
    auto max = d.exec(Driver::inbox(hca::kOpQueryHcaCap, 0, 16), ifc::query_hca_cap_out::size_bytes);
    REQUIRE(cur.status == 0);
    REQUIRE(max.status == 0);
    CHECK(ifc::get(max.out.data() + 16, ifc::cmd_hca_cap::log_max_qp) == 18);
    CHECK(d.exec(Driver::inbox(hca::kOpQueryHcaCap, 0x7e, 16), ifc::query_hca_cap_out::size_bytes).status == 0x03);

    auto set = Driver::inbox(hca::kOpSetHcaCap, 0, ifc::set_hca_cap_in::size_bytes);
    std::memcpy(set.data() + 16, cur.out.data() + 16, 4096);
    ifc::set(set.data() + 16, ifc::cmd_hca_cap::log_max_qp, 12);
    CHECK(d.exec(set, 16).status == 0);
    auto after = d.exec(Driver::inbox(hca::kOpQueryHcaCap, 1, 16), ifc::query_hca_cap_out::size_bytes);
    CHECK(ifc::get(after.out.data() + 16, ifc::cmd_hca_cap::log_max_qp) == 12);
    ifc::set(set.data() + 16, ifc::cmd_hca_cap::log_max_qp, 25);
    CHECK(d.exec(set, 16).status == 0x03);
}

TEST_CASE("QUERY_ADAPTER board id and vendor, SET_DRIVER_VERSION, ACCESS_REG", "[hca]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    auto a = d.exec(Driver::inbox(hca::kOpQueryAdapter, 0, 16), ifc::query_adapter_out::size_bytes);
    REQUIRE(a.status == 0);
    CHECK(std::string(reinterpret_cast<const char *>(a.out.data() + 0x100)) == hca::kBoardId);
    const auto blk = ifc::query_adapter_out::query_adapter_struct;
    CHECK(a.get(ifc::in(blk, ifc::query_adapter_param_block::ieee_vendor_id)) == 0x02c9);

    auto v = Driver::inbox(hca::kOpSetDriverVersion, 0, ifc::set_driver_version_in::size_bytes);
    std::memcpy(v.data() + 16, "Linux,mlx5_core,6.1.192", 23);
    CHECK(d.exec(v, 16).status == 0);
    CHECK_THAT(b.dev.fw.info(), Catch::Contains("Linux,mlx5_core,6.1.192"));

    auto rd = Driver::inbox(hca::kOpAccessReg, 1, 32);
    ifc::set(rd.data(), ifc::access_register_in::register_id, 0x7004);
    CHECK(d.exec(rd, 32).status == 0);
    ifc::set(rd.data(), ifc::access_register_in::register_id, 0x1234);
    CHECK(d.exec(rd, 32).status == 0x03);
}

TEST_CASE("MFRL: MCAM offers it (6.12 sets up firmware-reset events only then); live patch only", "[hca][reg]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    auto mcam = Driver::inbox(hca::kOpAccessReg, 1, 16 + ifc::mcam_reg::size_bytes);
    ifc::set(mcam.data(), ifc::access_register_in::register_id, 0x907f);
    auto r = d.exec(mcam, 16 + ifc::mcam_reg::size_bytes);
    REQUIRE(r.status == 0);
    CHECK(ifc::get(r.out.data() + 16 + ifc::mcam_reg::mng_access_reg_cap_mask.byte(), ifc::mcam_access_reg::mfrl) == 1);

    auto q = Driver::inbox(hca::kOpAccessReg, 1, 16 + ifc::mfrl_reg::size_bytes);
    ifc::set(q.data(), ifc::access_register_in::register_id, 0x9028);
    r = d.exec(q, 16 + ifc::mfrl_reg::size_bytes);
    REQUIRE(r.status == 0);
    CHECK(ifc::get(r.out.data() + 16, ifc::mfrl_reg::reset_level) == 0x1);  // MLX5_MFRL_REG_RESET_LEVEL0 only
    CHECK(ifc::get(r.out.data() + 16, ifc::mfrl_reg::reset_state) == 0);   // idle
    CHECK(d.exec(q, 16 + 4).status == 0x51);                                 // BAD_OUTPUT_LEN

    auto w = q;
    ifc::set(w.data(), ifc::cmd_in_hdr::op_mod, 0);  // write
    ifc::set(w.data() + 16, ifc::mfrl_reg::reset_level, 0x1);
    CHECK(d.exec(w, 16 + ifc::mfrl_reg::size_bytes).status == 0);  // a live patch: accepted
    ifc::set(w.data() + 16, ifc::mfrl_reg::reset_level, 0x8);      // level 3: the sync reset
    ifc::set(w.data() + 16, ifc::mfrl_reg::pci_sync_for_fw_update_start, 1);
    CHECK(d.exec(w, 16 + ifc::mfrl_reg::size_bytes).status == 0x03);
}

TEST_CASE("UARs: never index 0-2, dealloc checks", "[hca][uar]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t u1 = d.alloc_uar();
    const uint32_t u2 = d.alloc_uar();
    CHECK(u1 >= 3);
    CHECK(u2 >= 3);
    CHECK(u1 != u2);
    auto dealloc = Driver::inbox(hca::kOpDeallocUar, 0, 16);
    ifc::set(dealloc.data(), ifc::dealloc_uar_in::uar, u1);
    CHECK(d.exec(dealloc, 16).status == 0);
    CHECK(d.exec(dealloc, 16).status == 0x05);  // already free
    ifc::set(dealloc.data(), ifc::dealloc_uar_in::uar, 1);
    CHECK(d.exec(dealloc, 16).status == 0x05);
}

TEST_CASE("TEARDOWN_HCA: only the graceful profile, destroys every object", "[hca]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    auto eq = d.create_eq(6, 1, {0x1f02be, 0, 0, 0}, uar);
    const uint32_t pd = d.alloc_pd();
    d.alloc_xrcd();
    d.create_pa_mkey(pd);
    auto cq = d.create_cq(6, eq.eqn, uar);
    CmdResult r;
    auto qp = d.create_qp(hca::kQpRc, pd, cq.cqn, cq.cqn, uar, 4, 4, &r);
    REQUIRE(r.status == 0);
    CHECK(b.dev.eqs.count() == 1);
    auto td = Driver::inbox(hca::kOpTeardownHca, 0, 16);
    ifc::set(td.data(), ifc::teardown_hca_in::profile, 1);
    CHECK(d.exec(td, 16).status == 0x03);
    CHECK(b.dev.qps.count() == 1);  // a refused teardown changes nothing
    ifc::set(td.data(), ifc::teardown_hca_in::profile, 0);
    const unsigned drops = b.host.tx_drops;
    CHECK(d.exec(td, 16).status == 0);
    expect_no_objects(b.dev);
    CHECK(b.host.tx_drops == drops + 1);  // packets queued for the link are forgotten too
    CHECK(b.dev.fw.state() == hca::HcaState::Enabled);
    // INIT_HCA again: the old QPN and CQN are unknown.
    CHECK(d.exec(Driver::inbox(hca::kOpInitHca, 0, ifc::init_hca_in::size_bytes), 16).status == 0);
    auto q = Driver::inbox(hca::kOpQueryQp, 0, ifc::query_qp_in::size_bytes);
    ifc::set(q.data(), ifc::query_qp_in::qpn, qp.qpn);
    CHECK(d.exec(q, ifc::query_qp_out::size_bytes).status == 0x05);
    auto qc = Driver::inbox(hca::kOpQueryCq, 0, ifc::query_cq_in::size_bytes);
    ifc::set(qc.data(), ifc::query_cq_in::cqn, cq.cqn);
    CHECK(d.exec(qc, ifc::query_cq_out::size_bytes).status == 0x05);
}

TEST_CASE("ACCESS_REG MCAM/MCQS/MCQI: the firmware version devlink reports", "[hca][reg]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    auto mcam = Driver::inbox(hca::kOpAccessReg, 1, 16 + ifc::mcam_reg::size_bytes);
    ifc::set(mcam.data(), ifc::access_register_in::register_id, 0x907f);
    auto r = d.exec(mcam, 16 + ifc::mcam_reg::size_bytes);
    REQUIRE(r.status == 0);
    const uint8_t *mask = r.out.data() + 16 + ifc::mcam_reg::mng_access_reg_cap_mask.byte();
    CHECK(ifc::get(mask, ifc::mcam_access_reg::mcqi) == 1);
    CHECK(ifc::get(mask, ifc::mcam_access_reg::mcqs) == 1);
    CHECK(ifc::get(mask, ifc::mcam_access_reg::tracer_registers) == 0);
    CHECK(ifc::get(mask, ifc::mcam_access_reg::mcc) == 0);  // no flashing

    auto mcqs = Driver::inbox(hca::kOpAccessReg, 1, 16 + ifc::mcqs_reg::size_bytes);
    ifc::set(mcqs.data(), ifc::access_register_in::register_id, 0x9060);
    r = d.exec(mcqs, 16 + ifc::mcqs_reg::size_bytes);
    REQUIRE(r.status == 0);
    CHECK(ifc::get(r.out.data() + 16, ifc::mcqs_reg::identifier) == 1);  // boot image
    CHECK(ifc::get(r.out.data() + 16, ifc::mcqs_reg::last_index_flag) == 1);
    ifc::set(mcqs.data() + 16, ifc::mcqs_reg::component_index, 1);
    CHECK(d.exec(mcqs, 16 + ifc::mcqs_reg::size_bytes).status == 0x03);

    const size_t len = 16 + ifc::mcqi_reg::size_bytes + ifc::mcqi_version::size_bytes;
    auto mcqi = Driver::inbox(hca::kOpAccessReg, 1, 16 + ifc::mcqi_reg::size_bytes);
    ifc::set(mcqi.data(), ifc::access_register_in::register_id, 0x9061);
    ifc::set(mcqi.data() + 16, ifc::mcqi_reg::info_type, 1);
    r = d.exec(mcqi, len);
    REQUIRE(r.status == 0);
    const uint8_t *v = r.out.data() + 16 + ifc::mcqi_reg::data.byte();
    CHECK(ifc::get(v, ifc::mcqi_version::version) == (16u << 24 | 35u << 16 | 2000u));
    // A read request shorter than the register (the fuzzer's 10-byte MCQI,
    // which read past the inbox) is taken as zero-extended: component 0,
    // info type 0, which does not exist.
    for (const size_t short_in : {size_t{16}, size_t{16 + 2}, size_t{16 + 10}}) {
        auto s = Driver::inbox(hca::kOpAccessReg, 1, short_in);
        ifc::set(s.data(), ifc::access_register_in::register_id, 0x9061);
        CHECK(d.exec(s, len).status == 0x03);
        ifc::set(s.data(), ifc::access_register_in::register_id, 0x5001);  // PCAP: local_port 0
        CHECK(d.exec(s, 16 + ifc::pcap_reg::size_bytes).status == 0x03);
    }
    // A reply that does not fit the outbox is BAD_OUTPUT_LEN, never a write
    // past it (the fuzzer's PCAP read with no room for the register data).
    for (const size_t short_out : {size_t{16}, size_t{16 + 4}, size_t{16 + ifc::pcap_reg::size_bytes - 1}}) {
        auto p = Driver::inbox(hca::kOpAccessReg, 1, 16 + ifc::pcap_reg::size_bytes);
        ifc::set(p.data(), ifc::access_register_in::register_id, 0x5001);
        ifc::set(p.data() + 16, ifc::pcap_reg::local_port, 1);
        CHECK(d.exec(p, short_out).status == 0x51);  // BAD_OUTPUT_LEN
    }
    // The same for every register, one byte short (the check is in
    // ACCESS_REGISTER itself, not in each register's handler).
    const std::pair<uint16_t, size_t> regs[] = {{0x7004, 16},
                                                {0x907f, ifc::mcam_reg::size_bytes},
                                                {0x9060, ifc::mcqs_reg::size_bytes},
                                                {0x9061, ifc::mcqi_reg::size_bytes},
                                                {0x5001, ifc::pcap_reg::size_bytes},
                                                {0x6001, 64},
                                                {0x9050, ifc::mpein_reg::size_bytes},
                                                {0x9028, ifc::mfrl_reg::size_bytes}};
    for (const auto &[id, size] : regs) {
        INFO("register 0x" << std::hex << id);
        auto a = Driver::inbox(hca::kOpAccessReg, 1, 16 + size);
        ifc::set(a.data(), ifc::access_register_in::register_id, id);
        CHECK(d.exec(a, 16 + size - 1).status == 0x51);
    }
    // Writes to read-only registers are refused.
    auto w = mcqs;
    ifc::set(w.data(), ifc::cmd_in_hdr::op_mod, 0);
    CHECK(d.exec(w, 16 + ifc::mcqs_reg::size_bytes).status == 0x03);
}

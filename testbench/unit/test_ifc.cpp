// PRM layout accessors and the generated layouts: offsets checked against
// MLX5-LAYOUTS.txt / mlx5_ifc.h, bits round-tripped against known bytes.
#include <catch2/catch.hpp>

#include <array>

#include "be.h"
#include "ifc/mlx5_ifc.gen.h"

using namespace hca;

TEST_CASE("field get/set follow the MSB-first big-endian bit numbering", "[ifc]") {
    std::array<uint8_t, 16> b{};
    ifc::set(b.data(), ifc::Field{0, 16}, 0x0104);  // opcode ENABLE_HCA
    CHECK(b[0] == 0x01);
    CHECK(b[1] == 0x04);
    ifc::set(b.data(), ifc::Field{0x3d, 3}, 5);  // 3 bits crossing nothing, low bits of byte 7
    CHECK(b[7] == 0x05);
    ifc::set(b.data(), ifc::Field{0x44, 24}, 0xabcdef);  // crosses bytes 8..11 at a nibble
    CHECK(b[8] == 0x0a);
    CHECK(b[9] == 0xbc);
    CHECK(b[10] == 0xde);
    CHECK(b[11] == 0xf0);
    CHECK(ifc::get(b.data(), ifc::Field{0x44, 24}) == 0xabcdef);
    CHECK(ifc::get(b.data(), ifc::Field{0, 16}) == 0x0104);
    ifc::set(b.data(), ifc::Field{0x40, 64}, 0x1122334455667788ull);
    CHECK(load_be64(b.data() + 8) == 0x1122334455667788ull);
    CHECK(ifc::get(b.data(), ifc::Field{0x40, 64}) == 0x1122334455667788ull);
    // Setting a field leaves its neighbours alone.
    b.fill(0xff);
    ifc::set(b.data(), ifc::Field{0x4, 4}, 0);
    CHECK(b[0] == 0xf0);
    CHECK(b[1] == 0xff);
}

TEST_CASE("generated layouts match the driver's offsets", "[ifc]") {
    // MLX5-LAYOUTS.txt: create_eq_in pas at 0x110, event_bitmask at 0x58.
    CHECK(ifc::create_eq_in::pas.byte() == 0x110);
    CHECK(ifc::create_eq_in::event_bitmask.byte() == 0x58);
    CHECK(ifc::create_eq_in::eq_context_entry.byte() == 0x10);
    // eqc: log_eq_size dw3[28:24], uar_page dw3[23:0], intr dw5[11:0].
    CHECK(ifc::eqc::log_eq_size.off == 3 * 32 + 3);
    CHECK(ifc::eqc::uar_page.off == 3 * 32 + 8);
    CHECK(ifc::eqc::intr.off == 5 * 32 + 20);
    CHECK(ifc::query_issi_out::supported_issi_dw0.byte() == 0x6c);
    CHECK(ifc::query_adapter_out::query_adapter_struct.byte() + ifc::query_adapter_param_block::vsd_contd_psid.byte() ==
          0x100);
    CHECK(ifc::query_hca_cap_out::capability.byte() == 0x10);
    CHECK(ifc::query_hca_cap_out::size_bytes == 4112);
    // cmd_hca_cap (Appendix A): log_max_eq at byte 0x1c bits 3:0, port_type 0x34 bits 9:8.
    CHECK(ifc::cmd_hca_cap::log_max_eq.off == 0x1c * 8 + 28);
    CHECK(ifc::cmd_hca_cap::port_type.off == 0x34 * 8 + 22);
    CHECK(ifc::cmd_hca_cap::max_wqe_sz_sq.byte() == 0x52);
    CHECK(ifc::cmd_hca_cap::bf.off == 0x4c * 8);
    CHECK(ifc::cmd_hca_cap::log_bf_reg_size.off == 0x4c * 8 + 11);
    CHECK(ifc::cmd_hca_cap::device_frequency_khz.byte() == 0x9c);
    CHECK(ifc::manage_pages_in::pas.byte() == 0x10);
    CHECK(ifc::alloc_uar_out::uar.off == 0x40 + 8);
}

TEST_CASE("big-endian wrappers", "[ifc]") {
    struct S {
        be16 a;
        be32 b;
        be64 c;
    } s{};
    static_assert(sizeof(S) == 14);
    s.a.set(0x1234);
    s.b.set(0xdeadbeef);
    s.c.set(0x0102030405060708ull);
    const auto *raw = reinterpret_cast<const uint8_t *>(&s);
    CHECK(raw[0] == 0x12);
    CHECK(raw[2] == 0xde);
    CHECK(raw[13] == 0x08);
    CHECK(s.b.get() == 0xdeadbeef);
}

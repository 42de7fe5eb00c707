#include <catch2/catch.hpp>

#include <vector>

#include "fw/caps.h"

using namespace hca;

TEST_CASE("capability tables produce the advertised profile", "[caps]") {
    Caps caps;
    const auto &cur = caps.image(kCapGeneral, true);
    const auto &max = caps.image(kCapGeneral, false);
    CHECK(ifc::get(cur.data(), ifc::cmd_hca_cap::port_type) == 0);   // InfiniBand
    CHECK(ifc::get(cur.data(), ifc::cmd_hca_cap::num_ports) == 1);
    CHECK(ifc::get(cur.data(), ifc::cmd_hca_cap::xrc) == 1);          // mlx5_ib needs it
    CHECK(ifc::get(cur.data(), ifc::cmd_hca_cap::log_max_eq) >= 3);   // >= 5 EQs
    CHECK(ifc::get(cur.data(), ifc::cmd_hca_cap::max_wqe_sz_sq) >= 352);  // IPoIB
    CHECK(ifc::get(cur.data(), ifc::cmd_hca_cap::ib_virt) == 0);      // MAD_IFC access
    CHECK(ifc::get(max.data(), ifc::cmd_hca_cap::log_max_qp) == 18);
    CHECK(!caps.supported(0x7f));
}

TEST_CASE("SET_HCA_CAP applies settable fields within their maximum only", "[caps]") {
    Caps caps;
    Caps::Image img = caps.image(kCapGeneral, true);
    ifc::set(img.data(), ifc::cmd_hca_cap::log_max_qp, 12);
    ifc::set(img.data(), ifc::cmd_hca_cap::num_ports, 7);  // read-only: ignored
    CHECK(caps.set(kCapGeneral, img.data()).empty());
    CHECK(caps.gen(ifc::cmd_hca_cap::log_max_qp) == 12);
    CHECK(caps.gen(ifc::cmd_hca_cap::num_ports) == 1);

    ifc::set(img.data(), ifc::cmd_hca_cap::log_max_qp, 19);
    const std::string why = caps.set(kCapGeneral, img.data());
    CHECK_THAT(why, Catch::Contains("log_max_qp"));
    CHECK(caps.gen(ifc::cmd_hca_cap::log_max_qp) == 12);  // refused SET changes nothing

    caps.reset();
    CHECK(caps.gen(ifc::cmd_hca_cap::log_max_qp) == 18);
}

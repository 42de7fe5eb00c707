// Assertions shared by the device tests.
#pragma once

#include <catch2/catch.hpp>

#include "device.h"

namespace hcatest {

// What firmware leaves after TEARDOWN_HCA, DISABLE_HCA or a function reset:
// no object of the old function survives.
inline void expect_no_objects(hca::Device &dev) {
    CHECK(dev.qps.count() == 0);
    CHECK(dev.cqs.count() == 0);
    CHECK(dev.srqs.count() == 0);
    CHECK(dev.mkeys.count() == 0);
    CHECK(dev.pds.pds() == 0);
    CHECK(dev.pds.xrcds() == 0);
    CHECK(dev.eqs.count() == 0);
    CHECK(dev.uars.in_use() == 0);
    CHECK(dev.qcounters.count() == 0);
    CHECK_THAT(dev.info(), Catch::Contains("UARs in use: 0, PDs: 0, XRCDs: 0, Q counter sets: 0"));
}

}  // namespace hcatest

// Assertions shared by the device tests.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "device.h"

namespace hcatest {

// What firmware leaves after TEARDOWN_HCA, DISABLE_HCA or a function reset:
// no object of the old function survives.
inline void expect_no_objects(hca::Device &dev) {
    CHECK(dev.qps.count() == 0);
    CHECK(dev.cqs.count() == 0);
    CHECK(dev.srqs.count() == 0);
    CHECK(dev.mkeys.count() == 0);
    CHECK(dev.mkeys.sig_keys() == 0);
    CHECK(dev.psvs.count() == 0);
    CHECK(dev.pds.pds() == 0);
    CHECK(dev.pds.xrcds() == 0);
    CHECK(dev.eqs.count() == 0);
    CHECK(dev.uars.in_use() == 0);
    CHECK(dev.qcounters.count() == 0);
    CHECK_THAT(dev.info(), Catch::Contains("UARs in use: 0, PDs: 0, XRCDs: 0, Q counter sets: 0"));
}

// The device's trace of the given categories in a temporary file, for
// tests that assert on what it says.
class TraceCapture {
  public:
    TraceCapture(hca::Device &dev, uint32_t mask) : dev_(dev) {
        const int fd = mkstemp(path_);
        REQUIRE(fd >= 0);
        close(fd);
        std::string err;
        REQUIRE(dev.tracer().open(path_, 64 << 20, &err));
        dev.tracer().set_mask(mask);
    }
    ~TraceCapture() {
        dev_.tracer().open("", 0, nullptr);
        std::remove(path_);
    }
    TraceCapture(const TraceCapture &) = delete;
    TraceCapture &operator=(const TraceCapture &) = delete;
    // The lines so far that contain every one of the parts.
    std::vector<std::string> lines(std::initializer_list<std::string_view> parts) {
        dev_.tracer().flush();
        std::ifstream f(path_);
        std::vector<std::string> out;
        for (std::string line; std::getline(f, line);) {
            bool all = true;
            for (std::string_view part : parts) {
                all = all && line.find(part) != std::string::npos;
            }
            if (all) {
                out.push_back(line);
            }
        }
        return out;
    }

  private:
    hca::Device &dev_;
    char path_[32] = "/tmp/hcasim-trace-XXXXXX";
};

}  // namespace hcatest

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "trace.h"

using namespace hca;

TEST_CASE("trace filters", "[trace]") {
    uint32_t m = 0;
    REQUIRE(parse_trace_filter("cmd,eq", &m));
    CHECK(m == (kTrCmd | kTrEq));
    REQUIRE(parse_trace_filter("all,-eq", &m));
    CHECK((m & kTrEq) == 0);
    CHECK((m & kTrCmd) != 0);
    CHECK((m & kTrCmdData) == 0);  // payload dumps only on request
    REQUIRE(parse_trace_filter("none", &m));
    CHECK(m == 0);
    CHECK(!parse_trace_filter("cmd,bogus", &m));
}

TEST_CASE("trace lines carry sequence and time, and the file stays under its cap", "[trace]") {
    char path[] = "/tmp/hcasim-trace-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    {
        Tracer t;
        std::string err;
        REQUIRE(t.open(path, 4096, &err));
        t.set_mask(kTrCmd);
        t.emit(kTrCmd, 1500, "done opcode={}", "ENABLE_HCA");
        t.emit(kTrEq, 1600, "not traced");
        t.flush();
        std::ifstream f(path);
        std::string line;
        std::getline(f, line);
        CHECK(line == "1 1.500 cmd done opcode=ENABLE_HCA");
        CHECK(!std::getline(f, line));
        for (int i = 0; i < 1000; ++i) {
            t.emit(kTrCmd, i, "filler line number {}", i);
        }
        t.flush();
    }
    std::ifstream a(path, std::ios::ate), b(std::string(path) + ".1", std::ios::ate);
    CHECK(static_cast<long>(a.tellg()) + static_cast<long>(b.tellg()) <= 4096);
    std::remove(path);
    std::remove((std::string(path) + ".1").c_str());
}

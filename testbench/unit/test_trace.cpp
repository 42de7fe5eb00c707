#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "trace/trace.h"

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

TEST_CASE("trace scope: qpn= and cqn= keep the QP-level events of the listed objects", "[trace]") {
    uint32_t m = 0;
    TraceScope sc;
    REQUIRE(parse_trace_filter("wqe,cqe,cmd,qpn=0x104,cqn=7", &m, &sc));
    CHECK(sc.qpns == std::vector<uint32_t>{0x104});
    CHECK(sc.cqns == std::vector<uint32_t>{7});
    CHECK(!parse_trace_filter("qpn=0x104", &m));         // no scope requested
    CHECK(!parse_trace_filter("qpn=zz", &m, &sc));
    CHECK(!parse_trace_filter("-qpn=1", &m, &sc));
    char path[] = "/tmp/hcasim-trace-XXXXXX";
    close(mkstemp(path));
    {
        Tracer t;
        std::string err;
        REQUIRE(t.open(path, 1 << 20, &err));
        REQUIRE(parse_trace_filter("wqe,cqe,cmd,qpn=0x104,cqn=0x7", &m, &sc));
        t.set_mask(m);
        t.set_scope(sc);
        t.emit(kTrWqe, 1, "fetch qpn=0x{:x} index=0x0", 0x104);           // kept
        t.emit(kTrWqe, 2, "fetch qpn=0x{:x} index=0x0", 0x105);           // dropped
        t.emit(kTrCqe, 3, "cqe cqn=0x7 qpn=0x105 REQ");                   // kept (its CQ)
        t.emit(kTrCqe, 4, "cqe cqn=0x8 qpn=0x106 REQ src_qpn=0x104");     // dropped (src_qpn is not qpn)
        t.emit(kTrCmd, 5, "done opcode=CREATE_QP qpn=0x999");             // not a QP-level category
        t.emit(kTrWqe, 6, "something without ids");                       // kept
        t.flush();
    }
    std::ifstream f(path);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(all.find("qpn=0x104 index") != std::string::npos);
    CHECK(all.find("qpn=0x105 index") == std::string::npos);
    CHECK(all.find("cqn=0x7 qpn=0x105") != std::string::npos);
    CHECK(all.find("cqn=0x8") == std::string::npos);
    CHECK(all.find("CREATE_QP") != std::string::npos);
    CHECK(all.find("without ids") != std::string::npos);
    std::remove(path);
}

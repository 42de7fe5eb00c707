#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "datapath/wqe.h"
#include "iba/packet.h"
#include "trace/trace.h"
#include "trace_events.gen.h"

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
        // What HCA_TRACE does: the category first, then the event.
        auto emit = [&](const auto &ev, int64_t now) {
            if (t.on(ev.kCat)) {
                ev.emit(t, now);
            }
        };
        emit(tev::cmd_done{.slot = 0, .opcode = {"ENABLE_HCA", 0x104}, .status = {"ok", 0}, .ns = 42}, 1500);
        emit(tev::eq_destroy{.eqn = 3}, 1600);
        t.flush();
        std::ifstream f(path);
        std::string line;
        std::getline(f, line);
        CHECK(line == fmt::format("# hcasim trace format {}", kTraceFormat));
        std::getline(f, line);
        CHECK(line ==
              "1 1.500 cmd done slot=0 opcode=ENABLE_HCA(0x104) op_mod=0x0 inlen=0 outlen=0 status=ok(0x0) "
              "syndrome=0x00000000 delivery=0x0 ns=42");
        CHECK(!std::getline(f, line));
        for (int i = 0; i < 1000; ++i) {
            emit(tev::cmd_driver_version{.version = "filler line"}, i);
        }
        t.flush();
    }
    std::ifstream a(path, std::ios::ate), b(std::string(path) + ".1", std::ios::ate);
    CHECK(static_cast<long>(a.tellg()) + static_cast<long>(b.tellg()) <= 4096);
    // Both halves start with the format line, so a tool reading either knows it.
    std::ifstream a0(path), b0(std::string(path) + ".1");
    std::string ha, hb;
    std::getline(a0, ha);
    std::getline(b0, hb);
    CHECK(ha.starts_with("# hcasim trace format "));
    CHECK(hb == ha);
    std::remove(path);
    std::remove((std::string(path) + ".1").c_str());
}

TEST_CASE("trace scope: qpn= and cqn= keep the QP-level events of the listed objects, by field", "[trace]") {
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
        REQUIRE(parse_trace_filter("wqe,cqe,cmd,obj,pkt,qpn=0x104,cqn=0x7", &m, &sc));
        t.set_mask(m);
        t.set_scope(sc);
        auto emit = [&](const auto &ev, int64_t now) {
            if (t.on(ev.kCat)) {
                ev.emit(t, now);
            }
        };
        emit(tev::wqe_fetch{.qpn = 0x104, .index = 1}, 1);                                      // kept
        emit(tev::wqe_fetch{.qpn = 0x105, .index = 2}, 2);                                      // dropped
        emit(tev::cqe_cqe{.cqn = 0x7, .qpn = 0x105, .kind = "REQ"}, 3);                         // kept (its CQ)
        emit(tev::cqe_cqe{.cqn = 0x8, .qpn = 0x106, .kind = "RESP_SEND", .src_qp = 0x104}, 4);  // dropped
        emit(tev::obj_create_qp{.qpn = 0x999, .type = "RC"}, 5);                                // not a scoped category
        emit(tev::wqe_lso{.index = 6}, 6);                                                      // qpn 0: dropped
        emit(tev::pkt_drop{.id = 0x77, .reason = "a drop without ids"}, 7);                     // kept
        t.flush();
    }
    std::ifstream f(path);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(all.find("qpn=0x104 index") != std::string::npos);
    CHECK(all.find("qpn=0x105 index") == std::string::npos);
    CHECK(all.find("cqn=0x7 qpn=0x105") != std::string::npos);
    CHECK(all.find("cqn=0x8") == std::string::npos);
    CHECK(all.find("create_qp qpn=0x999") != std::string::npos);
    CHECK(all.find("index=0x6") == std::string::npos);
    CHECK(all.find("drop id=0x77: a drop without ids") != std::string::npos);
    // Events left out by the scope take no sequence number: no false gaps.
    CHECK(all.find("\n4 0.007 pkt drop") != std::string::npos);
    std::remove(path);
}

TEST_CASE("the WQE opcode names come from trace-events, one per opcode the model knows", "[trace]") {
    const std::pair<uint8_t, const char *> known[] = {
        {kWqeNop, "NOP"},
        {kWqeSendInval, "SEND_INVAL"},
        {kWqeRdmaWrite, "RDMA_WRITE"},
        {kWqeRdmaWriteImm, "RDMA_WRITE_IMM"},
        {kWqeSend, "SEND"},
        {kWqeSendImm, "SEND_IMM"},
        {kWqeLso, "LSO"},
        {kWqeRdmaRead, "RDMA_READ"},
        {kWqeAtomicCs, "ATOMIC_CS"},
        {kWqeAtomicFa, "ATOMIC_FA"},
        {kWqeAtomicMaskedCs, "ATOMIC_MASKED_CS"},
        {kWqeAtomicMaskedFa, "ATOMIC_MASKED_FA"},
        {kWqeBindMw, "BIND_MW"},
        {kWqeConfigCmd, "CONFIG_CMD"},
        {kWqeSetPsv, "SET_PSV"},
        {kWqeUmr, "UMR"},
        {kWqeTagMatching, "TAG_MATCHING"},
    };
    int named = 0;
    for (unsigned v = 0; v < 256; ++v) {
        named += std::string_view(wqe_opcode_name(static_cast<uint8_t>(v))) != "unknown";
    }
    CHECK(named == static_cast<int>(std::size(known)));
    for (const auto &[op, name] : known) {
        CHECK(std::string_view(wqe_opcode_name(op)) == name);
    }
}

// The link library names packets itself (the fabric has no trace tables);
// trace-events declares the same names for the Python tools.  They agree.
TEST_CASE("the packet opcode names of trace-events are the link library's", "[trace]") {
    for (unsigned op = 0; op < 0x20; ++op) {
        const std::string_view link = iba::opcode_name(static_cast<uint8_t>(op));
        INFO("opcode 0x" << std::hex << op << ": " << link);
        if (link.starts_with("RESERVED")) {
            continue;
        }
        CHECK(link == trace_name_iba_opcode(op));
    }
    CHECK(std::string_view(iba::opcode_name(iba::kRc | iba::kAck)) == trace_name_iba_opcode(iba::kAck));
}

// The host survives any guest: the exception barrier of the C entry points
// and the firmware-fatal state it leads to, the translation budget and the
// per-object caps (UMR, CREATE_MKEY, queues, MANAGE_PAGES), and the RC/UC
// responder's checks of duplicate READs and of the packet's source.
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>

#include "hcasim/hca_model.h"
#include "iba/link.h"
#include "pair.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

// ---------------------------------------------------------------- fatal --

// A model behind the C interface over a fake host whose DMA can be made to
// throw: the test's stand-in for an internal model error.
struct CModel {
    FakeHost host;
    int64_t clock = 1'000'000'000;
    bool throw_on_dma = false;
    uint64_t dma = 0;   // DMA calls that reached the host
    uint64_t msix = 0;  // MSI-X messages
    HcaModel *m = nullptr;

    CModel() {
        static const HcaHostOps ops = {
            .dma_read = [](void *o, uint64_t a, void *b, size_t n) {
                auto *s = static_cast<CModel *>(o);
                if (s->throw_on_dma) {
                    throw std::runtime_error("injected internal error");
                }
                ++s->dma;
                return s->host.dma_read(a, b, n);
            },
            .dma_write = [](void *o, uint64_t a, const void *b, size_t n) {
                auto *s = static_cast<CModel *>(o);
                ++s->dma;
                return s->host.dma_write(a, b, n);
            },
            .msix_notify = [](void *o, unsigned) { ++static_cast<CModel *>(o)->msix; },
            .schedule = [](void *) {},
            .timer_mod = [](void *, int64_t) {},
            .clock_ns = [](void *o) { return static_cast<CModel *>(o)->clock; },
            .port_tx_ready = nullptr,
            .guest_error = nullptr,
            .port_rx_ready = nullptr,
        };
        char err[256] = "";
        m = hca_model_new(&ops, this, nullptr, err, sizeof(err));
        REQUIRE(m);
        clock += hca::InitSeg::kInitDelayNs;
    }
    ~CModel() { hca_model_free(m); }
    uint32_t read32(uint32_t off) {
        uint8_t b[4];
        hca_model_mmio_read(m, off, b, 4);
        return hca::load_be32(b);
    }
    uint8_t read8(uint32_t off) {
        uint8_t b;
        hca_model_mmio_read(m, off, &b, 1);
        return b;
    }
    void write32(uint64_t off, uint32_t v) {
        uint8_t b[4];
        hca::store_be32(b, v);
        hca_model_mmio_write(m, off, b, 4);
    }
    // A command in slot 0 rung: the device reads the slot's layout by DMA.
    void ring_command() {
        const uint64_t q = host.alloc(4096);
        uint8_t own = 1;
        host.write(q + 0x3f, &own, 1);
        write32(hca::InitSeg::kCmdqAddrH, static_cast<uint32_t>(q >> 32));
        write32(hca::InitSeg::kCmdqAddrLSz, static_cast<uint32_t>(q));
        write32(hca::InitSeg::kCmdDbell, 1);
        hca_model_run(m);
    }
};

}  // namespace

TEST_CASE("C entry points: an internal error makes the device firmware-fatal, not the host abort", "[limits][fatal]") {
    CModel c;
    CHECK(c.read8(0x23d) == 0);  // health.synd
    const uint32_t hc0 = c.read32(hca::InitSeg::kHealthCounter);
    c.clock += 1'000'000'000;
    CHECK(c.read32(hca::InitSeg::kHealthCounter) != hc0);

    c.throw_on_dma = true;
    REQUIRE_NOTHROW(c.ring_command());  // the exception stops at hca_model_run()
    c.throw_on_dma = false;

    // health.c: rfr && synd is the fatal sensor; synd 1 = firmware internal error.
    CHECK(c.read8(0x23d) == hca::InitSeg::kSyndFwInternalErr);
    CHECK((c.read8(0x238) & 0x80) != 0);
    CHECK(c.read32(hca::InitSeg::kHealthFwVer) != 0xffffffff);  // not a PCI error
    // The firmware stopped: the health counter no longer moves.
    const uint32_t hc1 = c.read32(hca::InitSeg::kHealthCounter);
    c.clock += 10'000'000'000;
    CHECK(c.read32(hca::InitSeg::kHealthCounter) == hc1);

    // Nothing reaches guest memory or raises an interrupt any more.
    c.dma = 0;
    c.ring_command();
    c.write32(0x1000 * hca::UarTable::kFirst + hca::UarTable::kCqDoorbell, 0);
    hca_model_run(c.m);
    hca_model_timer(c.m);
    hca_model_port_link(c.m, 1, true);
    hca_model_port_connected(c.m, 1);
    uint8_t frame[iba::link::kLength + 64] = {};
    iba::link::put_length(frame, 64);
    frame[iba::link::kLength] = iba::link::kPacket;
    hca_model_port_rx(c.m, 1, frame, sizeof(frame));
    CHECK(c.dma == 0);
    CHECK(c.msix == 0);
    char *info = hca_model_info(c.m);
    REQUIRE(info);
    std::free(info);

    // A reset brings the firmware back.
    hca_model_reset(c.m);
    c.clock += hca::InitSeg::kInitDelayNs;
    CHECK(c.read8(0x23d) == 0);
    CHECK(c.read8(0x238) == 0);
    const uint32_t hc2 = c.read32(hca::InitSeg::kHealthCounter);
    c.clock += 1'000'000'000;
    CHECK(c.read32(hca::InitSeg::kHealthCounter) != hc2);
    c.ring_command();
    CHECK(c.dma > 0);
}

TEST_CASE("Fatal state: no DMA, MSI-X or packets after the firmware died, until a reset", "[limits][fatal]") {
    Pair p;
    p.b.d.cq_arm(p.b.rcq);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 4096);
    p.w.pump();
    p.w.b.dev.enter_fatal("test");
    p.a.fill(p.a.mr.iova, 2000, 5);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 2000}}});
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 100}},
                           .raddr = p.b.mr.iova + 8192, .rkey = p.b.mr.key});
    p.b.d.post_send(p.qb, {.opcode = hca::kWqeSend, .inline_data = {1, 2, 3}});  // b's own doorbell
    const uint8_t *mem = p.w.b.host.mem(FakeHost::kMemBase, 1);
    const std::vector<uint8_t> before(mem, mem + (64u << 20));
    const auto msix_before = p.w.b.host.msix;
    uint64_t from_a = 0, from_b = 0;
    p.w.advance(2'000'000'000, [&](bool a, uint64_t) {
        ++(a ? from_a : from_b);
        return false;
    });
    CHECK(std::memcmp(before.data(), mem, before.size()) == 0);
    CHECK(p.w.b.host.msix == msix_before);
    CHECK(from_a > 1);  // a keeps retrying ...
    CHECK(from_b == 0);  // ... b answers nothing
    CHECK(p.w.b.dev.iseg.health_synd() == hca::InitSeg::kSyndFwInternalErr);

    p.w.b.dev.reset();
    CHECK(!p.w.b.dev.fatal());
    CHECK(p.w.b.dev.iseg.health_synd() == 0);
    CHECK(p.w.b.dev.qps.count() == 0);
}

// --------------------------------------------------------------- budget --

namespace {

constexpr uint8_t kCheckNotFree = 1 << 5, kOffsetEn = 1 << 4, kInline = 0x80;

// A UMR WQE body loading xlt_octowords of translations at an offset.
std::vector<uint8_t> umr_body(uint8_t flags, uint16_t octowords, uint64_t offset, uint8_t variant,
                              std::optional<Driver::Sge> list, std::vector<uint64_t> inline_xlt = {}) {
    std::vector<uint8_t> b(48 + 64);
    b[0] = flags;
    hca::store_be16(b.data() + 4, octowords);
    hca::store_be16(b.data() + 6, static_cast<uint16_t>(offset));
    hca::store_be32(b.data() + 16, static_cast<uint32_t>(offset >> 16));
    uint8_t *m = b.data() + 48;
    ifc::set(m, ifc::mkc::umr_en, 1);
    ifc::set(m, ifc::mkc::access_mode_1_0, 1);
    ifc::set(m, ifc::mkc::mkey_7_0, variant);
    for (uint64_t e : inline_xlt) {
        b.resize(b.size() + 8);
        hca::store_be64(b.data() + b.size() - 8, e);
    }
    if (!inline_xlt.empty()) {
        b.resize((b.size() + 16 + 63) / 64 * 64 - 16);
    }
    if (list) {
        b.resize(b.size() + 16);
        uint8_t *d = b.data() + b.size() - 16;
        hca::store_be32(d, list->len);
        hca::store_be32(d + 4, list->lkey);
        hca::store_be64(d + 8, list->addr);
    }
    return b;
}

QpHandle umr_qp(Node &n) {
    CmdResult r;
    QpHandle q = n.d.create_qp(hca::kQpRegUmr, n.pd, n.scq.cqn, n.scq.cqn, n.uar, 6, 0, &r);
    REQUIRE(r.status == 0);
    n.d.ud_to_rts(q, 0);
    return q;
}

CmdResult create_mkey_octwords(Driver &d, uint32_t pd, uint64_t octwords) {
    auto in = Driver::inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes);
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    ifc::set(in.data(), ifc::in(e, ifc::mkc::free_), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::umr_en), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_1_0), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::pd), pd);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::log_page_size), 12);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::mkey_7_0), 0x33);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::translations_octword_size), octwords);
    return d.exec(in, 16);
}

constexpr uint8_t kStatusBadParam = 0x03, kStatusLim = 0x08;

}  // namespace

TEST_CASE("CREATE_MKEY: a translation size beyond what an inbox can carry is BAD_PARAM", "[limits][umr]") {
    Wire w;
    Node n(w.a, 1);
    CHECK(create_mkey_octwords(n.d, n.pd, 0xffffffff).status == kStatusBadParam);
    CHECK(create_mkey_octwords(n.d, n.pd, hca::limits::kMkeyOctwords + 1).status == kStatusBadParam);
    CHECK(create_mkey_octwords(n.d, n.pd, hca::limits::kMkeyOctwords).status == 0);
}

TEST_CASE("UMR: a translation offset above 16 bits (umr_extended_translation_offset) loads there, within the key",
          "[limits][umr]") {
    Wire w;
    Node n(w.a, 1);
    const CmdResult r = create_mkey_octwords(n.d, n.pd, hca::limits::kMkeyOctwords);
    REQUIRE(r.status == 0);
    const uint32_t key = static_cast<uint32_t>(r.get(ifc::create_mkey_out::mkey_index)) << 8 | 0x33;
    QpHandle uq = umr_qp(n);
    CHECK(n.d.bench().dev.fw.caps().gen(ifc::cmd_hca_cap::umr_extended_translation_offset) == 1);
    // xlt_offset_47_16 = 1: entries 131072 and on.
    n.d.post_raw(uq, hca::kWqeUmr, key,
                 umr_body(kInline | kCheckNotFree | kOffsetEn, 2, uint64_t{1} << 16, 0x33, std::nullopt, {1, 2, 3, 4}));
    auto c = n.d.next_cqe(n.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    const hca::Mkey *m = n.d.bench().dev.mkeys.find(key);
    REQUIRE(m);
    CHECK(m->mtt.size() == (uint64_t{1} << 17) + 4);
    CHECK(m->mtt[(uint64_t{1} << 17) + 1] == 2);
    // Past translations_octword_size (2^21 octowords): a protection error,
    // the table unchanged.
    n.d.post_raw(
        uq, hca::kWqeUmr, key,
        umr_body(kInline | kCheckNotFree | kOffsetEn, 2, hca::limits::kMkeyOctwords, 0x33, std::nullopt, {1, 2, 3, 4}));
    c = n.d.next_cqe(n.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReqErr);
    CHECK((*c)[0x37] == hca::kSyndLocalProt);
    CHECK(n.d.bench().dev.qps.find(uq.qpn)->state == hca::QpState::Err);
    CHECK(m->mtt.size() == (uint64_t{1} << 17) + 4);
}

TEST_CASE("Translation budget: UMR loads stop at it, then CREATE_MKEY and CREATE_CQ answer LIM", "[limits][umr]") {
    Wire w;
    Node n(w.a, 1);
    hca::Device &dev = n.d.bench().dev;
    FakeHost &host = n.d.bench().host;
    const uint32_t dma_key = n.d.create_pa_mkey(n.pd);
    // One list of 0xffff octowords (131070 page entries), loaded into key after key.
    constexpr uint32_t kOct = 0xffff;
    const uint64_t list = host.alloc(kOct * 16, 64);
    for (uint64_t i = 0; i < kOct * 2; ++i) {
        host.write_be64(list + i * 8, (i + 1) << 12);
    }
    std::vector<uint32_t> keys;
    QpHandle uq = umr_qp(n);
    int loaded = 0;
    std::optional<Cqe> fail;
    for (int i = 0; i < 40 && !fail; ++i) {
        const CmdResult r = create_mkey_octwords(n.d, n.pd, 1u << 16);
        REQUIRE(r.status == 0);
        keys.push_back(static_cast<uint32_t>(r.get(ifc::create_mkey_out::mkey_index)) << 8 | 0x33);
        n.d.post_raw(uq, hca::kWqeUmr, keys.back(),
                     umr_body(kCheckNotFree, kOct, 0, 0x33, Driver::Sge{dma_key, list, kOct * 16}));
        auto c = n.d.next_cqe(n.scq);
        REQUIRE(c);
        if (op(*c) == hca::kCqeReqErr) {
            fail = c;
        } else {
            ++loaded;
        }
        CHECK(dev.budget.used() <= dev.budget.max());
    }
    // 2^22 units hold 31 lists of 131070 entries, each costing a slot per
    // 64 entries as well (objects/xlt_table.h), less what the queues use.
    REQUIRE(fail);
    CHECK(loaded <= 31);
    CHECK(loaded >= 30);
    CHECK((*fail)[0x37] == hca::kSyndLocalQpOp);
    CHECK(dev.qps.find(uq.qpn)->state == hca::QpState::Err);
    CHECK(dev.mkeys.find(keys.back())->mtt.empty());

    // Spend the rest in whole chunks (64 entries and their slot), through
    // a second UMR QP: less than one chunk is left.
    QpHandle uq2 = umr_qp(n);
    const uint64_t rest = dev.budget.max() - dev.budget.used();
    const uint64_t fit = rest / 65 * 64;
    REQUIRE(fit <= 2 * kOct);
    n.d.post_raw(uq2, hca::kWqeUmr, keys.back(),
                 umr_body(kCheckNotFree, static_cast<uint16_t>(fit / 2), 0, 0x33,
                          Driver::Sge{dma_key, list, static_cast<uint32_t>(fit / 2 * 16)}));
    auto c = n.d.next_cqe(n.scq);
    REQUIRE(c);
    REQUIRE(op(*c) == hca::kCqeReq);
    CHECK(dev.budget.max() - dev.budget.used() < 65);

    CmdResult r;
    n.d.create_mtt_mkey(n.pd, 0x100000, 65536, 0x3, &r);
    CHECK(r.status == kStatusLim);
    n.d.create_cq(14, n.ceq.eqn, n.uar, &r);  // 256 pages
    CHECK(r.status == kStatusLim);

    // Destroying a key gives its entries back.
    auto in = Driver::inbox(hca::kOpDestroyMkey, 0, ifc::destroy_mkey_in::size_bytes);
    ifc::set(in.data(), ifc::destroy_mkey_in::mkey_index, keys.front() >> 8);
    REQUIRE(n.d.exec(in, 16).status == 0);
    n.d.create_cq(8, n.ceq.eqn, n.uar, &r);
    CHECK(r.status == 0);
    n.d.create_mtt_mkey(n.pd, 0x100000, 65536, 0x3, &r);
    CHECK(r.status == 0);
    // A reset returns everything.
    dev.reset();
    CHECK(dev.budget.used() == 0);
}

TEST_CASE("MANAGE_PAGES GIVE beyond the pages the device keeps is refused with LIM", "[limits]") {
    Wire w;
    Node n(w.a, 1);
    hca::Device &dev = n.d.bench().dev;
    auto give = [&](uint32_t count) {
        const size_t pas = ifc::manage_pages_in::pas.byte();
        auto in = Driver::inbox(hca::kOpManagePages, 1, pas + size_t{count} * 8);
        ifc::set(in.data(), ifc::manage_pages_in::input_num_entries, count);
        for (uint32_t i = 0; i < count; ++i) {
            hca::store_be64(in.data() + pas + i * 8, uint64_t{0x40000000} + (uint64_t{i} << 12));
        }
        return n.d.exec(in, 16).status;
    };
    const uint64_t held = dev.fw.pages_held();
    uint64_t room = hca::limits::kFirmwarePages - held;
    while (room >= 8192) {
        REQUIRE(give(8192) == 0);
        room -= 8192;
    }
    CHECK(give(static_cast<uint32_t>(room) + 1) == kStatusLim);
    CHECK(give(static_cast<uint32_t>(room)) == 0);
    CHECK(dev.fw.pages_held() == hca::limits::kFirmwarePages);
    CHECK(give(1) == kStatusLim);
    CHECK(dev.fw.pages_held() == hca::limits::kFirmwarePages);
}

TEST_CASE("MODIFY_QP: responder/requester READ depth beyond the capabilities is BAD_PARAM", "[limits][rc]") {
    Pair p;
    const auto ctx = ifc::rst2init_qp_in::qpc;
    const CmdResult r = p.a.d.modify_qp(hca::kOpRts2RtsQp, p.qa.qpn, [&](std::vector<uint8_t> &in) {
        ifc::set(in.data(), ifc::in(ctx, ifc::qpc::log_rra_max), 5);
    }, 1u << 9 /* RRA_MAX */);
    CHECK(r.status == kStatusBadParam);
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->log_rra_max == 2);
}

// ------------------------------------------------------------ responder --

namespace {

// A request packet as node a (LID 1) would send it to b's QP, but built
// by the test: any source, PSN and RETH.
void inject(Pair &p, uint8_t opcode, uint32_t psn, std::span<const uint8_t> ext, std::span<const uint8_t> payload,
            uint16_t slid = 1, uint8_t transport = iba::kRc) {
    iba::PacketSpec s;
    s.dlid = 2;
    s.slid = slid;
    s.opcode = transport | opcode;
    s.dqpn = p.qb.qpn;
    s.psn = psn;
    s.ack_req = true;
    const auto pkt = iba::build(s, ext, payload);
    std::vector<uint8_t> frame(iba::link::kHeader + pkt.size());
    frame[0] = iba::link::kPacket;
    std::memcpy(frame.data() + iba::link::kHeader, pkt.data(), pkt.size());
    p.w.b.dev.port_rx(1, frame.data(), frame.size());
    p.w.b.pump();
}

std::array<uint8_t, 16> reth(uint64_t va, uint32_t rkey, uint32_t len) {
    std::array<uint8_t, 16> r{};
    hca::store_be64(r.data(), va);
    hca::store_be32(r.data() + 8, rkey);
    hca::store_be32(r.data() + 12, len);
    return r;
}

// The packets b sent since the last call: (opcode, PSN, AETH syndrome).
struct Sent {
    uint8_t opcode;
    uint32_t psn;
    uint8_t aeth;
};
std::vector<Sent> take_sent(Pair &p) {
    std::vector<Sent> out;
    for (const auto &f : p.w.b.host.tx) {
        iba::PacketView v;
        REQUIRE(parse_frame(f, v) == iba::ParseError::None);
        out.push_back({static_cast<uint8_t>(v.opcode() & 0x1f), v.psn(), v.aeth ? static_cast<uint8_t>(v.aeth->syndrome_msn.get() >> 24) : uint8_t{0}});
    }
    p.w.b.host.tx.clear();
    return out;
}

}  // namespace

TEST_CASE("RC responder: a duplicate READ is replayed only within the responder resources", "[limits][rc]") {
    Pair p;  // log_rra_max 2: b keeps the last 4 READs
    p.b.fill(p.b.mr.iova, 8192, 21);
    const uint32_t psn0 = 0x1000;
    for (uint32_t i = 0; i < 6; ++i) {
        inject(p, iba::kReadRequest, psn0 + i, reth(p.b.mr.iova + i * 100, p.b.mr.key, 100), {});
    }
    auto s = take_sent(p);
    REQUIRE(s.size() == 6);
    CHECK(s[5].opcode == iba::kReadRespOnly);

    SECTION("the newest READs are replayed") {
        inject(p, iba::kReadRequest, psn0 + 4, reth(p.b.mr.iova + 400, p.b.mr.key, 100), {});
        s = take_sent(p);
        REQUIRE(s.size() == 1);
        CHECK(s[0].opcode == iba::kReadRespOnly);
        CHECK(s[0].psn == psn0 + 4);
    }
    SECTION("one older than the window is dropped") {
        inject(p, iba::kReadRequest, psn0 + 1, reth(p.b.mr.iova + 100, p.b.mr.key, 100), {});
        CHECK(take_sent(p).empty());
    }
    SECTION("a duplicate asking for more packets than the original had is dropped") {
        inject(p, iba::kReadRequest, psn0 + 5, reth(p.b.mr.iova, p.b.mr.key, 8192), {});
        CHECK(take_sent(p).empty());
    }
    CHECK(p.w.b.dev.qps.find(p.qb.qpn)->state == hca::QpState::Rts);
    CHECK(p.w.b.dev.qps.find(p.qb.qpn)->rc.epsn == psn0 + 6);
}

TEST_CASE("RC responder: a READ of nearly 4 GiB is an invalid request, not a wrapped packet count", "[limits][rc]") {
    Pair p;
    const uint32_t pa_key = p.b.d.create_pa_mkey(p.b.pd, 0x11, true);
    inject(p, iba::kReadRequest, 0x1000, reth(FakeHost::kMemBase, pa_key, 0xffffffff), {});
    auto s = take_sent(p);
    REQUIRE(s.size() == 1);
    CHECK(s[0].opcode == iba::kAck);
    CHECK(s[0].aeth == (hca::kAethNak | hca::kNakInvalidRequest));
    CHECK(p.w.b.dev.qps.find(p.qb.qpn)->state == hca::QpState::Err);
}

TEST_CASE("RC and UC responders drop requests from a source other than the QP's remote", "[limits][rc][uc]") {
    const bool uc = GENERATE(false, true);
    Pair p(uc ? hca::kQpUc : hca::kQpRc);
    const uint8_t t = uc ? iba::kUc : iba::kRc;
    const std::vector<uint8_t> data(64, 0x5a);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 4096);
    inject(p, iba::kSendOnly, 0x1000, {}, data, 7, t);  // SLID 7: not a's LID 1
    CHECK(take_sent(p).empty());
    CHECK(!p.b.d.next_cqe(p.b.rcq));
    CHECK(p.w.b.dev.qps.find(p.qb.qpn)->rc.epsn == 0x1000);
    CHECK(p.w.b.dev.qps.find(p.qb.qpn)->dropped == 1);

    inject(p, iba::kSendOnly, 0x1000, {}, data, 1, t);
    auto c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeRespSend);
    CHECK(*p.b.mem(p.b.mr.iova, 1) == 0x5a);
}

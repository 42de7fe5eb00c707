// libFuzzer target: RC, UC, UD and XRC packets from the wire into QPs that
// hold real state.  Each input starts with connected QPs (remote LID 9)
// whose requesters have outstanding SENDs, WRITEs, READs and atomics, and
// whose responders have receives posted; then it sends packets whose
// opcode, PSN, AETH syndrome/MSN, RETH, AtomicETH, DETH, XRCETH, payload
// and addressing it chooses — ACKs, NAKs, RNR NAKs, READ responses, atomic
// ACKs, requests of every kind — optionally with bytes changed and the
// CRCs repaired, with clock jumps in between (retry and RNR timers).
//
// Input: [QP][WQE mask] then records: a clock jump, more WQEs, or a packet
// (see make_packet()).
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_world.h"

using namespace hcatest;
using hcafuzz::Input;

namespace {

constexpr uint16_t kLid = 3;
constexpr uint16_t kPeerLid = 9;
constexpr uint32_t kPeerQpn = 0x99;
constexpr uint32_t kPsn = 0x1000;  // connect_qp(): send and receive PSN
constexpr uint32_t kQkey = 7;

struct World {
    Bench b;
    Driver d{b};
    uint32_t uar = 0, pd = 0, xrcd = 0, lkey = 0, rkey = 0, xsrqn = 0;
    EqHandle eq;
    CqHandle cq;
    QpHandle rc, uc, ud, xrc;
    uint64_t buf = 0;  // 64 KiB the QPs read from and write to
    uint64_t srq_buf = 0, srq_dbr = 0;
    uint32_t srq_posted = 0;

    void setup() {
        hcafuzz::fresh_device(b, d);
        uar = d.alloc_uar();
        eq = d.create_eq(7, 1, {~uint64_t{0}, 0, 0, 0}, uar);
        pd = d.alloc_pd();
        xrcd = d.alloc_xrcd();
        lkey = d.create_pa_mkey(pd, 0x11, true);
        rkey = lkey;
        cq = d.create_cq(10, eq.eqn, uar);
        buf = b.host.alloc(64 << 10);
        d.activate_port(kLid);
        make_xrc_srq();
        rc = d.create_qp(hca::kQpRc, pd, cq.cqn, cq.cqn, uar, 5, 4);
        uc = d.create_qp(hca::kQpUc, pd, cq.cqn, cq.cqn, uar, 5, 4);
        ud = d.create_qp(hca::kQpUd, pd, cq.cqn, cq.cqn, uar, 5, 4);
        d.qp_fill = [this](std::vector<uint8_t> &in) {
            hca::ifc::set(in.data(), hca::ifc::in(hca::ifc::create_qp_in::qpc, hca::ifc::qpc::xrcd), xrcd);
        };
        xrc = d.create_qp(hca::kQpXrc, pd, cq.cqn, cq.cqn, uar, 5, 0, nullptr, 1, 0);
        for (QpHandle *q : {&rc, &uc, &ud, &xrc}) {
            reset_qp(*q);
        }
    }

    // An XRC SRQ of 16 WQEs of 64 bytes linked in a ring, each with one
    // 256-byte scatter entry; receives are posted by raising the counter.
    void make_xrc_srq() {
        namespace ifc = hca::ifc;
        srq_buf = b.host.alloc(4096);
        srq_dbr = b.host.alloc(64, 64);
        srq_posted = 0;
        for (uint32_t i = 0; i < 16; ++i) {
            uint8_t w[64] = {};
            hca::store_be16(w + 2, static_cast<uint16_t>((i + 1) % 16));
            hca::store_be32(w + 16, 256);
            hca::store_be32(w + 20, lkey);
            hca::store_be64(w + 24, buf + 32768 + i * 256);
            hca::store_be32(w + 32 + 4, hca::kInvalidLkey);
            b.host.write(srq_buf + i * 64, w, 64);
        }
        auto xs = Driver::inbox(hca::kOpCreateXrcSrq, 0, ifc::create_xrc_srq_in::size_bytes + 8);
        const auto xc = ifc::create_xrc_srq_in::xrc_srq_context_entry;
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::log_xrc_srq_size), 4);
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::log_rq_stride), 2);
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::xrcd), xrcd);
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::cqn), cq.cqn);
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::pd), pd);
        ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::db_record_addr_l), srq_dbr >> 2);
        hca::store_be64(xs.data() + ifc::create_xrc_srq_in::size_bytes, srq_buf);
        xsrqn = static_cast<uint32_t>(d.exec(xs, 16).get(ifc::create_xrc_srq_out::xrc_srqn));
    }

    // One QP back to RST and connected again, with fresh receives: the QP
    // this input is about (resetting all four would cost four times the
    // commands; the others keep whatever state earlier inputs left).
    void reset_qp(QpHandle &q) {
        d.modify_qp(0x50a, q.qpn);
        q.sq_pi = 0;
        q.rq_pi = 0;
        b.host.write_be32(q.dbr, 0);
        b.host.write_be32(q.dbr + 4, 0);
        if (&q == &ud) {
            d.ud_to_rts(ud, kQkey);
        } else {
            d.connect_qp(q, kPeerQpn, kPeerLid, 3, 7, 7, 14, 1);
        }
        if (&q == &xrc) {
            srq_posted += 4;
            b.host.write_be32(srq_dbr, srq_posted & 0xffff);
            return;
        }
        for (uint32_t i = 0; i < 4; ++i) {
            d.post_recv(q, lkey, buf + 16384 + (q.qpn & 7) * 2048 + i * 512, 512);
        }
    }

    void drain() {
        while (d.next_cqe(cq)) {
        }
        bool any = false;
        while (d.next_eqe(eq)) {
            any = true;
        }
        if (any) {
            d.eq_doorbell(eq, true);
        }
        b.host.tx.clear();
    }
};

World &world() {
    static World *w = [] {
        auto *x = new World;
        x->setup();
        return x;
    }();
    return *w;
}

// The requester side: outstanding WQEs chosen by mask on a connected QP.
void post_requests(World &x, QpHandle &q, uint8_t mask) {
    if (&q == &x.ud) {
        return;
    }
    const bool reliable = &q != &x.uc;
    Driver::SendWr wr;
    wr.xrc_srqn = x.xsrqn;
    wr.sges = {{x.lkey, x.buf, 64}};
    if (mask & 1) {
        wr.opcode = hca::kWqeSend;
        x.d.post_send(q, wr);
    }
    if (mask & 2) {
        wr.opcode = hca::kWqeRdmaWrite;
        wr.raddr = 0x5000;
        wr.rkey = 0x1234;
        wr.sges = {{x.lkey, x.buf, 2000}};
        x.d.post_send(q, wr);
    }
    if (reliable && (mask & 4)) {
        wr.opcode = hca::kWqeRdmaRead;
        wr.sges = {{x.lkey, x.buf + 4096, 3000}};
        x.d.post_send(q, wr);
    }
    if (reliable && (mask & 8)) {
        wr.opcode = (mask & 16) ? hca::kWqeAtomicFa : hca::kWqeAtomicCs;
        wr.raddr = 0x8000;
        wr.sges = {{x.lkey, x.buf + 8192, 8}};
        x.d.post_send(q, wr);
    }
}

// Extended transport headers between BTH and payload, per base opcode.
size_t ext_len(uint8_t op) {
    switch (op) {
    case iba::kSendLastImm: case iba::kSendOnlyImm: case iba::kWriteLastImm: case iba::kSendLastInv:
    case iba::kSendOnlyInv: case iba::kReadRespFirst: case iba::kReadRespLast: case iba::kReadRespOnly:
    case iba::kAck:
        return 4;
    case iba::kWriteFirst: case iba::kWriteOnly: case iba::kReadRequest: return 16;
    case iba::kWriteOnlyImm: return 20;
    case iba::kAtomicAck: return 12;
    case iba::kCompareSwap: case iba::kFetchAdd: return 28;
    default: return 0;
    }
}

constexpr uint8_t kOps[] = {
    iba::kSendFirst, iba::kSendMiddle, iba::kSendLast, iba::kSendLastImm, iba::kSendOnly, iba::kSendOnlyImm,
    iba::kWriteFirst, iba::kWriteMiddle, iba::kWriteLast, iba::kWriteLastImm, iba::kWriteOnly, iba::kWriteOnlyImm,
    iba::kReadRequest, iba::kReadRespFirst, iba::kReadRespMiddle, iba::kReadRespLast, iba::kReadRespOnly,
    iba::kAck, iba::kAtomicAck, iba::kCompareSwap, iba::kFetchAdd, iba::kSendLastInv, iba::kSendOnlyInv,
};
constexpr uint8_t kTransports[] = {iba::kRc, iba::kUc, iba::kUd, iba::kXrc, iba::kRc, iba::kXrc};
// AETH syndromes: ACK with credits, RNR NAK with a timer, NAK codes 0..4.
constexpr uint8_t kSyndromes[] = {0x1f, 0x00, 0x20, 0x21, 0x3f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x7f, 0x40};

// AETH / RETH / AtomicETH / AtomicAckETH / immediate fields of the packet.
void fill_ext(World &x, Input &in, uint8_t op, uint8_t *e) {
    const auto addr = [&](bool aligned) -> uint64_t {
        const uint64_t a = in.flag() ? x.buf + in.u16() : in.u64();
        return aligned ? a & ~uint64_t{7} : a;
    };
    switch (op) {
    case iba::kAck: case iba::kAtomicAck: case iba::kReadRespFirst: case iba::kReadRespLast: case iba::kReadRespOnly:
        e[0] = in.pick(kSyndromes);
        hca::store_be32(e, uint32_t{e[0]} << 24 | (in.flag() ? in.u8() : in.u32() & 0xffffff));
        if (op == iba::kAtomicAck) {
            hca::store_be64(e + 4, in.u64());
        }
        break;
    case iba::kWriteFirst: case iba::kWriteOnly: case iba::kWriteOnlyImm: case iba::kReadRequest:
        hca::store_be64(e, addr(false));
        hca::store_be32(e + 8, in.flag() ? x.rkey : in.u32());
        // DMA length: short; up to 1 MiB; or at least 128 MiB, past the
        // end of guest memory unless the address is arbitrary (a READ of
        // tens of MiB inside it would cost the input tens of thousands of
        // response packets and teach the fuzzer nothing new).
        hca::store_be32(e + 12, in.flag()   ? in.u16() % 4200
                                : in.flag() ? in.u32() % (1u << 20)
                                            : in.u32() | 0x08000000);
        if (op == iba::kWriteOnlyImm) {
            hca::store_be32(e + 16, in.u32());
        }
        break;
    case iba::kCompareSwap: case iba::kFetchAdd:
        hca::store_be64(e, addr(in.flag()));
        hca::store_be32(e + 8, in.flag() ? x.rkey : in.u32());
        hca::store_be64(e + 12, in.u64());
        hca::store_be64(e + 20, in.u64());
        break;
    default:
        for (size_t i = 0; i < ext_len(op); ++i) {
            e[i] = in.u8();
        }
        break;
    }
}

// One packet chosen by the input, mostly towards the input's QP.
std::vector<uint8_t> make_packet(World &x, const QpHandle &focus, Input &in) {
    iba::PacketSpec s;
    const uint8_t t = in.pick(kTransports);
    const uint8_t op = in.flag() ? in.pick(kOps) : in.u8() & 0x1f;
    s.opcode = static_cast<uint8_t>(t | op);
    const QpHandle *dst[] = {&x.rc, &x.uc, &x.ud, &x.xrc};
    const uint8_t q = in.u8();
    s.dqpn = q < 200 ? focus.qpn : q < 230 ? dst[q % 4]->qpn : (q < 240 ? 1 : in.u32() & 0xffffff);
    s.dlid = in.u8() < 240 ? kLid : in.u16();
    s.slid = in.u8() < 230 ? kPeerLid : in.u16();
    s.grh = in.u8() > 230;
    if (s.grh) {
        s.dgid[0] = 0xfe;
        s.dgid[1] = 0x80;
        s.hop_limit = in.u8();
    }
    s.sl = in.u8() & 15;
    s.se = in.flag();
    s.ack_req = in.flag();
    s.pkey = in.u8() < 240 ? 0xffff : in.u16();
    const uint8_t ps = in.u8();
    s.psn = ps < 200 ? (kPsn + (ps % 24) - 4) & 0xffffff : (ps < 230 ? in.u32() & 0xffffff : (kPsn - 0x800000) & 0xffffff);
    uint8_t ext[64] = {};
    size_t len = 0;
    if (t == iba::kXrc) {
        hca::store_be32(ext, in.u8() < 230 ? x.xsrqn : in.u32());
        len = 4;
    } else if (t == iba::kUd) {
        hca::store_be32(ext, in.u8() < 230 ? kQkey : in.u32());
        hca::store_be32(ext + 4, in.u32() & 0xffffff);
        len = 8;
    }
    fill_ext(x, in, op, ext + len);
    len += ext_len(op);
    static constexpr uint16_t kLens[] = {0, 1, 4, 8, 64, 255, 256, 1023, 1024, 1025, 2048, 4096};
    std::vector<uint8_t> payload(in.flag() ? in.pick(kLens) : in.u16() % 4400);
    if (!payload.empty()) {
        payload[0] = in.u8();
    }
    std::vector<uint8_t> pkt = iba::build(s, {ext, len}, payload);
    if (in.u8() > 220) {
        hcafuzz::patch(in, pkt, 3);
        if (in.flag()) {
            hcafuzz::repair(pkt);
        }
    }
    return pkt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    World &x = world();
    if (hcafuzz::host_used(x.b.host) > (40u << 20)) {
        x.setup();
    }
    Input in(data, size);
    QpHandle *qps[] = {&x.rc, &x.xrc, &x.uc, &x.ud};
    QpHandle &focus = *qps[in.pick(4)];
    x.reset_qp(focus);
    post_requests(x, focus, in.u8());
    x.drain();
    for (int steps = 0; !in.empty() && steps < 48; ++steps) {
        switch (in.pick(8)) {
        case 0:
            x.b.advance(int64_t{in.u16()} * 100'000);  // up to 6.5 s: retry/RNR timers
            break;
        case 1:
            post_requests(x, focus, in.u8());
            break;
        default:
            hcafuzz::wire_rx(x.b, make_packet(x, focus, in), steps);
            break;
        }
        x.drain();
    }
    return 0;
}

// libFuzzer target for the data path and MAD_IFC: garbage WQEs and
// doorbells on live QPs, arbitrary MADs through MAD_IFC, and arbitrary
// frames from the fabric link (packet parser, receive side).
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "be.h"
#include "driver.h"
#include "iba/link.h"

using namespace hcatest;

namespace {

struct World {
    Bench b;
    Driver d{b};
    uint32_t uar = 0;
    uint32_t pd = 0;
    uint32_t lkey = 0;
    CqHandle cq;
    int mini_format = -1;  // the CQ compresses CQEs in this format (-1: it does not)
    uint32_t free_key = 0;
    QpHandle ud, qp1, rc, umr;
};

class Input {
  public:
    Input(const uint8_t *d, size_t n) : d_(d), n_(n) {}
    bool empty() const { return n_ == 0; }
    uint8_t u8() {
        if (!n_) {
            return 0;
        }
        --n_;
        return *d_++;
    }
    uint32_t u32() { return uint32_t{u8()} << 24 | uint32_t{u8()} << 16 | uint32_t{u8()} << 8 | u8(); }
    void bytes(uint8_t *out, size_t len) {
        for (size_t i = 0; i < len; ++i) {
            out[i] = u8();
        }
    }

  private:
    const uint8_t *d_;
    size_t n_;
};

// The world every input starts from: the device reset and brought up,
// its QPs ready, receives posted.
void set_up(World &x, int mini_format) {
    x.b.host.free_all();
    x.b.dev.reset();
    x.b.advance(hca::InitSeg::kInitDelayNs);
    x.b.dev.port_link(1, true);
    x.d.bring_up();
    x.uar = x.d.alloc_uar();
    auto eq = x.d.create_eq(7, 1, {0, 0, 0, 0}, x.uar);
    x.pd = x.d.alloc_pd();
    x.lkey = x.d.create_pa_mkey(x.pd);
    x.mini_format = mini_format;
    x.cq = x.d.create_cq(7, eq.eqn, x.uar, nullptr, 0, mini_format);
    x.ud = x.d.create_qp(hca::kQpUd, x.pd, x.cq.cqn, x.cq.cqn, x.uar, 4, 4);
    x.qp1 = x.d.create_qp(hca::kQpQp1, x.pd, x.cq.cqn, x.cq.cqn, x.uar, 4, 4);
    x.d.activate_port(3);
    x.d.ud_to_rts(x.ud, 7);
    x.d.ud_to_rts(x.qp1, 0x80010000);
    // An RC QP connected to itself (loopback through LID 3) and the UMR QP,
    // with a free UMR-enabled key for UMR and fast-registration WQEs.  The
    // RC QP retries RNR forever, as a driver may ask, but after 1.28 ms, not
    // 10 us: a send with no receive posted then costs a clock jump of
    // 100 ms 78 retries, not 10,000 (they made the average input 0.2 s).
    x.rc = x.d.create_qp(hca::kQpRc, x.pd, x.cq.cqn, x.cq.cqn, x.uar, 4, 4);
    x.d.connect_qp(x.rc, x.rc.qpn, 3, 3, 7, 7, 14, 14);
    x.umr = x.d.create_qp(hca::kQpRegUmr, x.pd, x.cq.cqn, x.cq.cqn, x.uar, 4, 0);
    x.d.ud_to_rts(x.umr, 0);
    x.free_key = x.d.create_free_mkey(x.pd, 8);
    for (int i = 0; i < 8; ++i) {
        x.d.post_recv(x.ud, x.lkey, x.b.host.alloc(512, 64), 512);
        x.d.post_recv(x.qp1, x.lkey, x.b.host.alloc(512, 64), 512);
    }
}

// A garbage WQE (1..4 WQEBBs) on one of the send queues, then its doorbell.
void step_wqe(World &x, Input &in) {
    QpHandle *qps[] = {&x.ud, &x.qp1, &x.rc, &x.umr};
    QpHandle &qp = *qps[in.u8() % 4];
    static constexpr uint8_t kOps[] = {0x0a, 0x0b, 0x08, 0x09, 0x10, 0x11, 0x12, 0x25, 0x01, 0x00};
    const uint32_t bbs = 1 + in.u8() % 4;
    for (uint32_t b = 0; b < bbs; ++b) {
        uint8_t bb[64];
        in.bytes(bb, sizeof(bb));
        if (b == 0 && (in.u8() & 1)) {
            // Keep the header plausible so the segments get parsed.
            const uint8_t opcode = kOps[in.u8() % std::size(kOps)];
            hca::store_be32(bb, uint32_t{qp.sq_pi} << 8 | opcode);
            hca::store_be32(bb + 4, qp.qpn << 8 | ((bbs * 4) & 0x3f));
            if (opcode == hca::kWqeUmr && (in.u8() & 1)) {
                hca::store_be32(bb + 12, x.free_key);  // a real key as the UMR target
            }
        }
        if (b == 1 && (in.u8() & 1)) {
            hca::store_be32(bb + 4, x.lkey);  // a real lkey in the first data segment
        }
        x.b.host.write(qp.sq_addr(qp.sq_pi + b), bb, 64);
    }
    qp.sq_pi = static_cast<uint16_t>(qp.sq_pi + bbs);
    x.d.ring_sq(qp, qp.sq_pi - bbs, bbs * 4, 0x0a, in.u8() & 1);
}

// Any MAD through MAD_IFC.
void step_mad(World &x, Input &in) {
    std::array<uint8_t, 256> mad, resp;
    in.bytes(mad.data(), mad.size());
    if (in.u8() & 1) {
        mad[0] = 1;
        mad[1] = (in.u8() & 1) ? 0x81 : (in.u8() & 1 ? 0x01 : 0x04);
        mad[2] = 1;
    }
    x.d.mad_ifc(mad, resp, in.u8() & 3);
}

// A frame from the fabric, once or a few times: arbitrary, or a packet
// whose headers are plausible and whose CRCs are right.
void step_frame(World &x, Input &in) {
    std::vector<uint8_t> frame(12 + (in.u8() % 200));
    in.bytes(frame.data(), frame.size());
    if (in.u8() & 1) {
        iba::PacketSpec s;
        s.dlid = in.u8() & 1 ? 3 : 0xc000;
        s.slid = 9;
        s.grh = in.u8() & 1;
        s.dgid[0] = 0xff;
        s.opcode = static_cast<uint8_t>(iba::kUd | (in.u8() & 1 ? iba::kSendOnly : iba::kSendOnlyImm));
        s.dqpn = in.u8() & 1 ? x.ud.qpn : 1;
        s.vl = in.u8() & 1 ? 15 : 0;
        std::vector<uint8_t> ext(12);
        in.bytes(ext.data(), ext.size());
        if (in.u8() & 1) {
            hca::store_be32(ext.data(), s.dqpn == 1 ? 0x80010000 : 7);
        }
        std::vector<uint8_t> payload(in.u8() % 300);
        in.bytes(payload.data(), payload.size());
        auto pkt = iba::build(s, {ext.data(), s.opcode == (iba::kUd | iba::kSendOnly) ? 8u : 12u}, payload);
        frame.assign(12, 0);
        frame[0] = iba::link::kPacket;
        frame.insert(frame.end(), pkt.begin(), pkt.end());
    }
    // Up to 4 copies in one burst: their receives complete in one device
    // run (a compressing CQ makes them one session).
    const unsigned copies = 1 + in.u8() % 4;
    for (unsigned k = 0; k < copies; ++k) {
        x.b.dev.port_rx(1, frame.data(), frame.size());
    }
    x.b.pump();
}

// Post receives with arbitrary scatter lists.
void step_recv(World &x, Input &in) {
    QpHandle *rqs[] = {&x.ud, &x.qp1, &x.rc};
    QpHandle &qp = *rqs[in.u8() % 3];
    uint8_t wqe[64];
    in.bytes(wqe, sizeof(wqe));
    x.b.host.write(qp.addr(uint64_t{qp.rq_pi & (qp.rq_wqes - 1)} * qp.rq_stride), wqe, 64);
    ++qp.rq_pi;
    x.b.host.write_be32(qp.dbr, qp.rq_pi);
}

// CQ arm / EQ doorbells with arbitrary values, and a clock jump.
void step_doorbell(World &x, Input &in) {
    uint8_t v[8];
    in.bytes(v, sizeof(v));
    x.d.bar_write(uint64_t{x.uar} * 4096 + (in.u8() & 1 ? 0x20 : 0x40), v, in.u8() & 1 ? 8 : 4);
    // Mostly short jumps: a long one fires every timer of the QPs
    // (RNR retries, ACK timeouts, and the RQ doorbell-record poll of
    // error QPs, every 2 ms backing off to 64 ms).
    const uint32_t jump = in.u32() % 100'000'000;
    x.b.advance(jump >> (in.u8() % 4 * 3));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static World *w = nullptr;
    if (!w) {
        w = new World;
    }
    World &x = *w;
    Input in(data, size);
    // The first byte: whether the CQ compresses, and in which format
    // (hash, checksum, checksum and stride index).
    static constexpr int kFormats[] = {-1, -1, 0, 1, 3};
    set_up(x, kFormats[in.u8() % std::size(kFormats)]);
    static void (*const kSteps[])(World &, Input &) = {step_wqe, step_mad, step_frame, step_recv, step_doorbell};
    for (int steps = 0; !in.empty() && steps < 48; ++steps) {
        kSteps[in.u8() % std::size(kSteps)](x, in);
        // Drain completions like a driver would, so CQs do not overrun immediately.
        while (!x.d.next_cqes(x.cq, x.mini_format).empty()) {
        }
    }
    return 0;
}

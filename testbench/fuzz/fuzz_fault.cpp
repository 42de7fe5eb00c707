// libFuzzer target: fault injection (fault/faults.h). The input is a
// sequence of steps on a device a driver has brought up (an EQ, a CQ, two
// UD QPs, an active port):
//  * a fault command as raw text (the parser's every refusal),
//  * a well-formed spec assembled from choices (each kind with its keys,
//    triggers and values in and out of range), armed,
//  * work that reaches the fault points: a command, UD sends, a CQ and EQ
//    doorbell, time passing (delayed completions, after=, for=), a reset.
// A fault may make the device fail in any way a driver can see; the host
// must see no crash, leak or unbounded growth.
#include <string>

#include "driver.h"
#include "fuzz_input.h"

using hcafuzz::Input;
using namespace hcatest;

namespace {

const char *const kKinds[] = {"cmd-status", "cmd-delivery", "cmd-delay", "cmd-drop",  "error-cqe",
                              "wqe-dma-error", "lost-cqe", "lost-eqe",  "lost-msix", "cqe-delay",
                              "init-delay", "health-fatal", "health-stall", "page-request", "qp-event",
                              "srq-event", "cq-error", "port-event", "general-event", "pci-gone", "nope"};
const char *const kKeys[] = {"opcode", "status", "syndrome", "delivery", "ms",    "qpn",   "cqn",  "eqn",
                             "srqn",   "npages", "type",     "subtype",  "power", "watts", "count", "every",
                             "prob",   "seed",   "for",      "after",    ""};
const char *const kWords[] = {"CREATE_CQ", "NOP", "CREATE_QP", "BAD_PARAM", "FW_INTERNAL_ERR", "comm-est",
                              "catastrophic", "limit", "overrun", "access", "client-rereg", "lid",
                              "pci-power", "fw-live-patch", "delay-drop", "insufficient", "sufficient",
                              "0.5", "1", "0", "-1", "0x48", "99999999999", "", "=", "0x"};

std::string value(Input &in) {
    switch (in.pick(3)) {
    case 0: return in.pick(kWords);
    case 1: return std::to_string(in.u16() % 200);
    default: return std::to_string(static_cast<int32_t>(in.u32()));
    }
}

std::string spec(Input &in, uint32_t qpn, uint32_t cqn, uint32_t eqn) {
    std::string s = in.pick(kKinds);
    const unsigned n = in.pick(6);
    for (unsigned i = 0; i < n; ++i) {
        s += i == 0 ? ':' : ',';
        const std::string key = in.pick(kKeys);
        s += key + "=";
        if (key == "qpn" && in.flag()) {
            s += std::to_string(qpn);
        } else if (key == "cqn" && in.flag()) {
            s += std::to_string(cqn);
        } else if (key == "eqn" && in.flag()) {
            s += std::to_string(eqn);
        } else if (key == "ms" || key == "for" || key == "after") {
            s += std::to_string(in.u8());
        } else {
            s += value(in);
        }
    }
    return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Input in(data, size);
    Bench b({}, 16u << 20);
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    auto eq = d.create_eq(5, 1, {~0ull, 0, 0, 0}, uar);
    const uint32_t pd = d.alloc_pd();
    const uint32_t lkey = d.create_pa_mkey(pd);
    auto cq = d.create_cq(5, eq.eqn, uar);
    d.activate_port(5);
    auto q1 = d.create_qp(hca::kQpUd, pd, cq.cqn, cq.cqn, uar, 4, 4);
    auto q2 = d.create_qp(hca::kQpUd, pd, cq.cqn, cq.cqn, uar, 4, 4);
    d.ud_to_rts(q1, 0x11);
    d.ud_to_rts(q2, 0x11);
    const uint64_t buf = b.host.alloc(256, 64);
    for (unsigned step = 0; step < 48 && !in.empty(); ++step) {
        switch (in.pick(8)) {
        case 0: {
            const size_t len = in.u8() % 96;
            std::string line;
            for (size_t i = 0; i < len; ++i) {
                line += static_cast<char>(in.u8());
            }
            b.dev.faults.command(line);
            break;
        }
        case 1:
        case 2:
            b.dev.faults.command(spec(in, in.flag() ? q1.qpn : q2.qpn, cq.cqn, eq.eqn));
            break;
        case 3:
            d.exec(Driver::inbox(in.flag() ? hca::kOpNop : hca::kOpQueryHcaCap, 1, 16), 0x1010,
                   in.u8() % 32);
            break;
        case 4:
            if (d.iseg_read32(hca::InitSeg::kInitializing) >> 31 == 0) {
                d.post_ud_send(in.flag() ? q1 : q2, 5, q2.qpn, 0x11, {{lkey, buf, in.u8()}});
            }
            break;
        case 5:
            while (d.next_cqe(cq)) {
            }
            d.cq_arm(cq);
            while (d.next_eqe(eq)) {
            }
            d.eq_doorbell(eq, true);
            b.pump();
            break;
        case 6:
            b.advance(int64_t{in.u16()} * 100'000);
            break;
        case 7:
            if (in.pick(4) == 0) {
                b.dev.reset();
                b.dev.faults.command(in.flag() ? "clear" : "list");
            }
            break;
        }
    }
    return 0;
}

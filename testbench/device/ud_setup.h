// A device a driver has brought up for UD work: a completion EQ on vector
// 3, a PD, a physical-address key, a send and a receive CQ, port Active at
// LID 5. Shared by the data-path and fault tests.
#pragma once

#include <catch2/catch.hpp>

#include "driver.h"

namespace hcatest {

struct UdSetup {
    Bench b;
    Driver d{b};
    uint32_t uar = 0;
    EqHandle ceq;
    uint32_t pd = 0;
    uint32_t lkey = 0;
    CqHandle scq, rcq;
    explicit UdSetup(const hca::DeviceConfig &cfg = {}) : b(cfg) {
        d.bring_up();
        uar = d.alloc_uar();
        ceq = d.create_eq(7, 3, {0, 0, 0, 0}, uar);  // completion EQ on vector 3
        pd = d.alloc_pd();
        lkey = d.create_pa_mkey(pd);
        scq = d.create_cq(6, ceq.eqn, uar);
        rcq = d.create_cq(6, ceq.eqn, uar);
        d.activate_port(5);
    }
    // A UD-like QP of type st in RTS with Q_Key qkey, 2^log_sq send and
    // 2^log_rq receive WQEs.
    QpHandle ud(uint32_t qkey, uint8_t st = hca::kQpUd, unsigned log_sq = 4, unsigned log_rq = 4) {
        CmdResult r;
        auto qp = d.create_qp(st, pd, scq.cqn, rcq.cqn, uar, log_sq, log_rq, &r);
        REQUIRE(r.status == 0);
        d.ud_to_rts(qp, qkey);
        return qp;
    }
    // n bytes seed, seed+1, ... in fresh guest memory.
    uint64_t buffer(size_t n, uint8_t seed) {
        const uint64_t a = b.host.alloc(n, 64);
        for (size_t i = 0; i < n; ++i) {
            b.host.mem(a + i, 1)[0] = static_cast<uint8_t>(seed + i);
        }
        return a;
    }
};

}  // namespace hcatest

// Two devices cabled back to back, each with a PD, CQs, an EQ and a 64 KiB
// MTT region, and a connected QP pair between them.
#pragma once

#include <catch2/catch.hpp>

#include "be.h"
#include "driver.h"

namespace hcatest {

struct Node {
    Driver d;
    uint32_t uar = 0;
    EqHandle ceq;
    uint32_t pd = 0;
    CqHandle scq, rcq;
    MrHandle mr;  // 64 KiB, local write + remote read/write/atomic
    Node(Bench &b, uint16_t lid) : d(b) {
        d.bring_up();
        uar = d.alloc_uar();
        ceq = d.create_eq(8, 2, {0, 0, 0, 0}, uar);
        pd = d.alloc_pd();
        scq = d.create_cq(8, ceq.eqn, uar);
        rcq = d.create_cq(8, ceq.eqn, uar);
        mr = d.create_mtt_mkey(pd, 0x7f0000000000 + lid * 0x100000, 65536, 0x1f);
        d.activate_port(lid);
    }
    uint8_t *mem(uint64_t iova, size_t n) {
        // The MR's pages are scattered: find the page for iova.
        const uint64_t off = iova - mr.iova;
        const auto *m = d.bench().dev.mkeys.find(mr.key);
        return d.bench().host.mem(m->page(off / 4096) + off % 4096, n);
    }
    void fill(uint64_t iova, size_t n, uint8_t seed) {
        for (size_t i = 0; i < n; ++i) {
            mem(iova + i, 1)[0] = static_cast<uint8_t>(seed + i * 7);
        }
    }
    bool same(uint64_t iova, size_t n, uint8_t seed) {
        for (size_t i = 0; i < n; ++i) {
            if (mem(iova + i, 1)[0] != static_cast<uint8_t>(seed + i * 7)) {
                return false;
            }
        }
        return true;
    }
};

struct Pair {
    Wire w;
    Node a{w.a, 1};
    Node b{w.b, 2};
    QpHandle qa, qb;
    // link_crcs: the devices compute every packet's CRCs (DeviceConfig).
    explicit Pair(uint8_t st = hca::kQpRc, uint8_t retry = 7, uint8_t rnr_retry = 7, bool link_crcs = false)
        : w(config(0x0002c90300b00001, link_crcs), config(0x0002c90300b00002, link_crcs)) {
        CmdResult r;
        qa = a.d.create_qp(st, a.pd, a.scq.cqn, a.rcq.cqn, a.uar, 6, 6, &r);
        REQUIRE(r.status == 0);
        qb = b.d.create_qp(st, b.pd, b.scq.cqn, b.rcq.cqn, b.uar, 6, 6, &r);
        REQUIRE(r.status == 0);
        a.d.connect_qp(qa, qb.qpn, 2, 3, retry, rnr_retry);
        b.d.connect_qp(qb, qa.qpn, 1, 3, retry, rnr_retry);
    }
    static hca::DeviceConfig config(uint64_t guid, bool link_crcs) {
        hca::DeviceConfig c = Bench::fabric_config(guid);
        c.link_crcs = link_crcs;
        return c;
    }
};

inline uint8_t op(const Cqe &c) { return c[63] >> 4; }
inline uint32_t be32(const Cqe &c, size_t off) { return hca::load_be32(c.data() + off); }


}  // namespace hcatest

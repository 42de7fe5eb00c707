// Device memory (MEMIC): the capability page, ALLOC/DEALLOC_MEMIC as
// mlx5_ib's dm.c issues them, MEMIC memory keys (zero based, as
// ibv_reg_dm_mr registers them) under SEND, RDMA WRITE/READ and atomics,
// BAR0 access for a host that does not map the memory, and teardown.
#include <catch2/catch.hpp>

#include <cstring>

#include "pair.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

constexpr uint64_t kBar = HCA_MODEL_MEMIC_BAR_OFFSET;

uint32_t key_of(const CmdResult &r) {
    return static_cast<uint32_t>(r.get(ifc::create_mkey_out::mkey_index)) << 8 | 0x5d;
}

}  // namespace

TEST_CASE("device memory: the capability page mlx5_core reads when device_memory is set", "[devmem]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    auto gen = d.exec(Driver::inbox(hca::kOpQueryHcaCap, 1, 16), ifc::query_hca_cap_out::size_bytes);
    REQUIRE(gen.status == 0);
    CHECK(ifc::get(gen.out.data() + 16, ifc::cmd_hca_cap::device_memory) == 1);
    auto r = d.exec(Driver::inbox(hca::kOpQueryHcaCap, 0xf << 1 | 1, 16), ifc::query_hca_cap_out::size_bytes);
    REQUIRE(r.status == 0);
    const uint8_t *cap = r.out.data() + 16;
    CHECK(ifc::get(cap, ifc::device_mem_cap::memic) == 1);
    CHECK(ifc::get(cap, ifc::device_mem_cap::memic_bar_start_addr) == kBar);
    CHECK(ifc::get(cap, ifc::device_mem_cap::memic_bar_size) == HCA_MODEL_MEMIC_SIZE);
    CHECK(ifc::get(cap, ifc::device_mem_cap::max_memic_size) == HCA_MODEL_MEMIC_SIZE);
    CHECK(ifc::get(cap, ifc::device_mem_cap::memic_operations) == 0);
    CHECK(HCA_MODEL_MEMIC_BAR_OFFSET + HCA_MODEL_MEMIC_SIZE <= HCA_MODEL_BAR0_SIZE);
}

TEST_CASE("device memory: ALLOC_MEMIC places, refuses and frees as the driver expects", "[devmem]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    // mlx5_cmd_alloc_memic(): one page from page_idx on, size in 64-byte units.
    auto a = d.alloc_memic(kBar, 4096, 4096);
    REQUIRE(a.status == 0);
    CHECK(a.get(ifc::alloc_memic_out::memic_start_addr) == kBar);
    // The same range again is taken: NO_RESOURCES, which dm.c turns into
    // -EAGAIN and a try at the next page.
    CHECK(d.alloc_memic(kBar, 4096, 4096).status == 0x0f);
    auto c = d.alloc_memic(kBar + 4096, 4096, 192, 2);
    REQUIRE(c.status == 0);
    CHECK(c.get(ifc::alloc_memic_out::memic_start_addr) == kBar + 4096);
    // A second allocation in the rest of that range lands at the next
    // 256-byte boundary (64 << 2).
    auto e = d.alloc_memic(kBar + 4096, 4096, 64, 2);
    REQUIRE(e.status == 0);
    CHECK(e.get(ifc::alloc_memic_out::memic_start_addr) == kBar + 4096 + 256);

    CHECK(d.alloc_memic(kBar - 4096, 4096, 4096).status == 0x03);                       // below the memory
    CHECK(d.alloc_memic(kBar + HCA_MODEL_MEMIC_SIZE - 4096, 8192, 64).status == 0x03);  // past its end
    CHECK(d.alloc_memic(kBar + 8192, 4096, 100).status == 0x03);                        // not 64-byte units
    CHECK(d.alloc_memic(kBar + 8192, 4096, 8192).status == 0x03);                       // larger than the range
    CHECK(d.alloc_memic(kBar + 8192, 4096, 0).status == 0x03);
    CHECK(d.alloc_memic(kBar + 8192, 4096, 64, 7).status == 0x03);  // alignment beyond the capability
    CHECK(b.dev.devmem.allocations() == 3);

    CHECK(d.dealloc_memic(kBar, 64) == 0x03);  // another size than allocated
    CHECK(d.dealloc_memic(kBar + 64, 4096) == 0x03);
    // What one owner wrote is gone for the next.
    std::memset(b.dev.devmem.base(), 0xab, 4096);
    CHECK(d.dealloc_memic(kBar, 4096) == 0);
    auto again = d.alloc_memic(kBar, 4096, 4096);
    REQUIRE(again.status == 0);
    CHECK(b.dev.devmem.base()[0] == 0);
    CHECK(b.dev.devmem.base()[4095] == 0);
}

TEST_CASE("device memory: BAR0 reads and writes reach it when the host does not map it", "[devmem]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint8_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const uint64_t errors = b.dev.counters.guest_errors;
    b.dev.mmio_write(kBar + 64, v, 8);
    CHECK(std::memcmp(b.dev.devmem.base() + 64, v, 8) == 0);
    uint8_t r[4] = {};
    b.dev.mmio_read(kBar + 66, r, 4);
    CHECK((r[0] == 3 && r[3] == 6));
    CHECK(b.dev.counters.guest_errors == errors);
    // Past the device memory: refused as any write outside the registers.
    b.dev.mmio_write(kBar + HCA_MODEL_MEMIC_SIZE - 4, v, 8);
    b.dev.mmio_write(HCA_MODEL_BAR0_MMIO_SIZE - 4, v, 8);
    CHECK(b.dev.counters.guest_errors == errors + 2);
}

TEST_CASE("device memory: MEMIC keys under SEND, RDMA WRITE, READ and atomics", "[devmem][rc]") {
    Pair p;
    // Each side's device memory: 4 KiB at BAR offset +8 KiB, a zero-based key over it.
    REQUIRE(p.a.d.alloc_memic(kBar + 8192, 4096, 4096).status == 0);
    REQUIRE(p.b.d.alloc_memic(kBar + 8192, 4096, 4096).status == 0);
    auto ka = p.a.d.create_memic_mkey(p.a.pd, kBar + 8192, 4096, 0x1f);
    auto kb = p.b.d.create_memic_mkey(p.b.pd, kBar + 8192, 4096, 0x1f);
    REQUIRE((ka.status == 0 && kb.status == 0));
    const uint32_t dma = key_of(ka), dmb = key_of(kb);
    uint8_t *mema = p.a.d.bench().dev.devmem.base() + 8192;
    uint8_t *memb = p.b.d.bench().dev.devmem.base() + 8192;

    // RDMA WRITE from host memory into the peer's device memory at offset 100.
    p.a.fill(p.a.mr.iova, 1000, 3);
    p.a.d.post_send(
        p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 1000}}, .raddr = 100, .rkey = dmb});
    p.w.pump();
    auto c1 = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c1);
    CHECK(op(*c1) == hca::kCqeReq);
    for (int i = 0; i < 1000; ++i) {
        REQUIRE(memb[100 + i] == static_cast<uint8_t>(3 + i * 7));
    }
    // RDMA READ of it back into A's device memory.
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaRead, .sges = {{dma, 0, 1000}}, .raddr = 100, .rkey = dmb});
    p.w.pump();
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    CHECK(std::memcmp(mema, memb + 100, 1000) == 0);
    // SEND from A's device memory into a receive buffer in B's device memory.
    p.b.d.post_recv(p.qb, dmb, 2048, 1000);
    p.a.d.post_send(p.qa, {.sges = {{dma, 0, 1000}}});
    p.w.pump();
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(op(*rc) == hca::kCqeRespSend);
    CHECK(std::memcmp(memb + 2048, mema, 1000) == 0);
    // Fetch-and-add on a counter in B's device memory.
    uint64_t v = 40;
    std::memcpy(memb + 8, &v, 8);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeAtomicFa,
                           .sges = {{p.a.mr.key, p.a.mr.iova + 256, 8}},
                           .raddr = 8,
                           .rkey = dmb,
                           .swap_add = 2});
    p.w.pump();
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    uint64_t old = 0, now = 0;
    std::memcpy(&old, p.a.mem(p.a.mr.iova + 256, 8), 8);
    std::memcpy(&now, memb + 8, 8);
    CHECK((old == 40 && now == 42));

    // Past the key's end (zero based: 4096 bytes from 0): a remote access
    // error, and nothing written beyond it.
    const uint8_t after = memb[4096];
    p.a.d.post_send(
        p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 64}}, .raddr = 4064, .rkey = dmb});
    p.w.pump();
    auto bad = p.a.d.next_cqe(p.a.scq);
    REQUIRE(bad);
    CHECK(op(*bad) == hca::kCqeReqErr);
    CHECK(memb[4096] == after);
}

TEST_CASE("device memory: MEMIC keys outside the memory are refused, bus addresses never reach it", "[devmem][mkey]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t pd = d.alloc_pd();
    CHECK(d.create_memic_mkey(pd, kBar - 64, 128, 1).status == 0x03);
    CHECK(d.create_memic_mkey(pd, kBar + HCA_MODEL_MEMIC_SIZE - 64, 128, 1).status == 0x03);
    REQUIRE(d.create_memic_mkey(pd, kBar, HCA_MODEL_MEMIC_SIZE, 1).status == 0);
    // A physical-address key with the device memory's tag bit set in the
    // address translates to nothing.
    const uint32_t pa = d.create_pa_mkey(pd);
    std::vector<hca::DmaChunk> out;
    CHECK(b.dev.mkeys.translate(pa, pd, hca::DevMem::tagged(0), 8, hca::kAccLocalRead, out) ==
          hca::XlatError::NoTranslation);
}

TEST_CASE("device memory: teardown and reset free every allocation and zero the memory", "[devmem][teardown]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    REQUIRE(d.alloc_memic(kBar, 4096, 4096).status == 0);
    b.dev.devmem.base()[10] = 0x77;
    REQUIRE(d.exec(Driver::inbox(hca::kOpTeardownHca, 0, 16), 16).status == 0);
    CHECK(b.dev.devmem.allocations() == 0);
    CHECK(b.dev.devmem.base()[10] == 0);
    b.dev.reset();
    d.bring_up();
    REQUIRE(d.alloc_memic(kBar, 4096, 4096).status == 0);
    b.dev.devmem.base()[10] = 0x77;
    b.dev.reset();
    CHECK(b.dev.devmem.allocations() == 0);
    CHECK(b.dev.devmem.base()[10] == 0);
}

// The sparse translation table of memory keys (objects/xlt_table.h): blank
// entries cost nothing, extra_cost() is exactly what store() adds.
#include <catch2/catch.hpp>

#include "objects/xlt_table.h"

using hca::XltTable;

TEST_CASE("XltTable: blank entries grow the table without cost; the first other entry costs a chunk and its slots",
          "[xlt]") {
    XltTable<uint64_t> t;
    const std::vector<uint64_t> zeros(1000, 0);
    CHECK(t.extra_cost(5000, zeros) == 0);
    t.store(5000, zeros);
    CHECK(t.size() == 6000);
    CHECK(t.cost() == 0);
    CHECK(t[5999] == 0);
    const std::vector<uint64_t> one{0x1003};
    // Entry 6400 is in chunk 100: 101 slots and one chunk of 64.
    CHECK(t.extra_cost(6400, one) == 101 + 64);
    t.store(6400, one);
    CHECK(t.cost() == 101 + 64);
    CHECK(t.size() == 6401);
    CHECK(t[6400] == 0x1003);
    CHECK(t[6401 - 2] == 0);
    // A second entry in the same chunk costs nothing more; one in an earlier
    // chunk costs its chunk only.
    CHECK(t.extra_cost(6401, one) == 0);
    CHECK(t.extra_cost(0, one) == 64);
    t.store(0, one);
    CHECK(t.cost() == 101 + 128);
}

TEST_CASE("XltTable: a non-zero blank (the KSM null mkey) reads back where nothing was stored", "[xlt]") {
    struct E {
        uint32_t key = 0;
        uint64_t addr = 0;
        bool operator==(const E &) const = default;
    };
    XltTable<E> t(E{1, 0});
    const std::vector<E> null(128, E{1, 0});
    t.store(0, null);
    CHECK(t.cost() == 0);
    CHECK(t[77] == E{1, 0});
    const std::vector<E> child{E{0x4200, 1ull << 30}, E{1, 0}};
    CHECK(t.extra_cost(64, child) == 2 + 128);  // two slots, a chunk of 16-byte entries
    t.store(64, child);
    CHECK(t[64] == E{0x4200, 1ull << 30});
    CHECK(t[65] == E{1, 0});
    CHECK(t[63] == E{1, 0});
}

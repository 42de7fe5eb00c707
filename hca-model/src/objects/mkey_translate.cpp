// Translation through memory keys: what a gather/scatter entry, an RDMA
// address or a UMR's pointer names, as physically contiguous chunks of
// guest (or device) memory, through PA, MTT, KLM (and repeated blocks),
// KSM and MEMIC keys.
#include <algorithm>

#include "device.h"
#include "objects/mkey.h"

namespace hca {

namespace {

// An indirect key's entries are reached with the local right matching the
// access (IBA 10.6.7.2: a window's MR grants local write under remote write
// and atomic access).
uint8_t inner_access(uint8_t access) {
    uint8_t a = access & (kAccLocalRead | kAccLocalWrite);
    if (access & kAccRemoteRead) {
        a |= kAccLocalRead;
    }
    if (access & (kAccRemoteWrite | kAccRemoteAtomic)) {
        a |= kAccLocalWrite;
    }
    return a;
}

constexpr int kMaxIndirection = 2;

// Pieces one access through a repeated block may be cut into: each is a
// DMA chunk, so an access of many tiny strides is bounded.
constexpr uint64_t kMaxRepeatPieces = 1u << 16;

}  // namespace

XlatError MkeyTable::translate(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                               std::vector<DmaChunk> &out, uint32_t qpn) const {
    const Mkey *m = find(key);
    if (!m) {
        return XlatError::BadKey;
    }
    if (m->qpn != kAnyQpn && qpn != kAnyQpn && m->qpn != qpn) {
        return XlatError::BoundQp;
    }
    return translate_in(*m, pd, va, len, access, out, 0);
}

namespace {

// Appends n bytes at addr to out, merged with the piece before if they
// touch.
void append_chunk(std::vector<DmaChunk> &out, uint64_t addr, uint64_t n) {
    if (!out.empty() && out.back().addr + out.back().len == addr && out.back().len + n <= UINT32_MAX) {
        out.back().len += static_cast<uint32_t>(n);
    } else {
        out.push_back({addr, static_cast<uint32_t>(n)});
    }
}

}  // namespace

XlatError MkeyTable::translate_layout(const Mkey &m, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                                      std::vector<DmaChunk> &out) const {
    return translate_key(m, pd, va, len, access, out, 0);
}

XlatError MkeyTable::translate_in(const Mkey &key, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                                  std::vector<DmaChunk> &out, int depth) const {
    if (key.sig) {
        return XlatError::Signature;
    }
    return translate_key(key, pd, va, len, access, out, depth);
}

XlatError MkeyTable::translate_key(const Mkey &key, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                                   std::vector<DmaChunk> &out, int depth) const {
    const Mkey *m = &key;
    if (m->free) {
        return XlatError::Free;
    }
    if (m->pd != pd) {
        return XlatError::BadPd;
    }
    if (((access & kAccLocalWrite) && !m->lw) || ((access & kAccRemoteRead) && !m->rr) ||
        ((access & kAccRemoteWrite) && !m->rw) || ((access & kAccRemoteAtomic) && !m->a) ||
        ((access & kAccLocalRead) && !m->lr)) {
        return XlatError::Access;
    }
    if (len == 0) {
        return XlatError::None;
    }
    if (m->mode == MkeyMode::Memic) {
        // Zero based (ibv_reg_dm_mr's IBV_ACCESS_ZERO_BASED): va is the
        // offset into the key; start is where it begins in BAR0.
        if (len > m->len || va > m->len - len) {
            return XlatError::Bounds;
        }
        out.push_back({DevMem::tagged(m->start - DevMem::kBarOffset + va), static_cast<uint32_t>(len)});
        return XlatError::None;
    }
    if (!m->length64 && (va < m->start || len > m->len || va - m->start > m->len - len)) {
        return XlatError::Bounds;
    }
    if (m->mode == MkeyMode::Pa) {
        // Physical addressing: the address is the bus address (never a
        // device memory tag).
        if (DevMem::is_tagged(va) || DevMem::is_tagged(va + len - 1)) {
            return XlatError::NoTranslation;
        }
        append_chunk(out, va, len);
        return XlatError::None;
    }
    if (m->mode == MkeyMode::Klm) {
        return translate_klm(*m, pd, va, len, access, out, depth);
    }
    if (m->mode == MkeyMode::Ksm) {
        return translate_ksm(*m, pd, va, len, access, out, depth);
    }
    if (m->mode != MkeyMode::Mtt) {
        return XlatError::NoTranslation;
    }
    return translate_mtt(*m, va, len, access, out);
}

// KLM: the entries are laid end to end from start on; each piece goes
// through its own key, of the same PD.
XlatError MkeyTable::translate_klm(const Mkey &m, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                                   std::vector<DmaChunk> &out, int depth) const {
    if (depth >= kMaxIndirection) {
        return XlatError::Depth;
    }
    if (m.klm.size() && m.klm[0].key == kRepeatBlockOp) {
        return translate_repeat(m, pd, va - m.start, len, access, out, depth);
    }
    uint64_t off = va - m.start;
    uint64_t left = len;
    for (size_t i = 0; i < m.klm.size(); ++i) {
        const Klm k = m.klm[i];
        if (!left || k.bc == 0) {
            break;
        }
        if (off >= k.bc) {
            off -= k.bc;
            continue;
        }
        const uint64_t n = std::min<uint64_t>(left, k.bc - off);
        const Mkey *inner = find(k.key);
        if (!inner) {
            return XlatError::BadKey;
        }
        if (const XlatError e = translate_in(*inner, pd, k.addr + off, n, inner_access(access), out, depth + 1);
            e != XlatError::None) {
            return e;
        }
        left -= n;
        off = 0;
    }
    return left ? XlatError::NoTranslation : XlatError::None;
}

// A repeated block: byte_count bytes made of each entry's byte count in
// turn, repeated repeat_count times; repetition r of entry i is at its
// address + r * its stride.
XlatError MkeyTable::translate_repeat(const Mkey &m, uint32_t pd, uint64_t off, uint64_t len, uint8_t access,
                                      std::vector<DmaChunk> &out, int depth) const {
    const Klm h = m.klm[0];
    const uint64_t block = h.bc;
    const uint64_t repeats = h.addr >> 32;
    const size_t nent = h.addr & 0xffff;
    if (block == 0 || nent == 0 || nent >= m.klm.size()) {
        return XlatError::NoTranslation;
    }
    uint64_t left = len;
    for (uint64_t pieces = 0; left; ++pieces) {
        const uint64_t r = off / block;
        uint64_t within = off % block;
        if (r >= repeats || pieces >= kMaxRepeatPieces) {
            return XlatError::NoTranslation;
        }
        size_t i = 1;
        for (; i <= nent && within >= (m.klm[i].bc & 0xffff); ++i) {
            within -= m.klm[i].bc & 0xffff;
        }
        if (i > nent) {
            return XlatError::NoTranslation;  // the entries add up to less than byte_count
        }
        const Klm e = m.klm[i];
        const uint64_t n = std::min<uint64_t>(left, (e.bc & 0xffff) - within);
        const Mkey *inner = find(e.key);
        if (!inner) {
            return XlatError::BadKey;
        }
        if (const XlatError err =
                translate_in(*inner, pd, e.addr + r * (e.bc >> 16) + within, n, inner_access(access), out, depth + 1);
            err != XlatError::None) {
            return err;
        }
        off += n;
        left -= n;
    }
    return XlatError::None;
}

// KSM: entry i maps [start + i * 2^log_page_size, +2^log_page_size) to its
// key from its address on. An entry naming the null mkey maps nothing yet:
// the access page-faults (implicit ODP: the driver creates the child key,
// loads the entry and resumes).
XlatError MkeyTable::translate_ksm(const Mkey &m, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                                   std::vector<DmaChunk> &out, int depth) const {
    if (depth >= kMaxIndirection) {
        return XlatError::Depth;
    }
    if (va < m.start) {
        return XlatError::Bounds;
    }
    const unsigned shift = m.log_page_size;
    const uint64_t size = uint64_t{1} << shift;
    uint64_t off = va - m.start;
    uint64_t left = len;
    while (left) {
        const uint64_t i = off >> shift;
        if (i >= m.klm.size()) {
            return XlatError::NoTranslation;
        }
        const Klm k = m.klm[i];
        if (k.key == kNullMkey) {
            return XlatError::PageFault;
        }
        const Mkey *inner = find(k.key);
        if (!inner) {
            return XlatError::BadKey;
        }
        const uint64_t in_entry = off & (size - 1);
        const uint64_t n = std::min(left, size - in_entry);
        if (const XlatError e = translate_in(*inner, pd, k.addr + in_entry, n, inner_access(access), out, depth + 1);
            e != XlatError::None) {
            return e;
        }
        off += n;
        left -= n;
    }
    return XlatError::None;
}

// MTT: entry = (page of va) - (page of start); the first page may be
// entered at an offset (start not page aligned). A page whose entry lacks
// the access bit the access needs is not present.
XlatError MkeyTable::translate_mtt(const Mkey &m, uint64_t va, uint64_t len, uint8_t access,
                                   std::vector<DmaChunk> &out) const {
    const unsigned shift = m.log_page_size;
    const uint64_t psize = uint64_t{1} << shift;
    const uint64_t base = m.start & ~(psize - 1);
    const uint64_t need = ((access & (kAccLocalRead | kAccRemoteRead | kAccRemoteAtomic)) ? kMttRead : 0) |
                          ((access & (kAccLocalWrite | kAccRemoteWrite | kAccRemoteAtomic)) ? kMttWrite : 0);
    uint64_t cur = va;
    uint64_t left = len;
    while (left) {
        const uint64_t entry = ((cur & ~(psize - 1)) - base) >> shift;
        if (entry >= m.mtt.size()) {
            return XlatError::NoTranslation;
        }
        const uint64_t e = m.mtt[entry];
        if (DevMem::is_tagged(e)) {
            return XlatError::NoTranslation;
        }
        if ((e & need) != need) {
            return XlatError::PageFault;
        }
        const uint64_t in_page = cur & (psize - 1);
        const uint64_t n = std::min(left, psize - in_page);
        append_chunk(out, (e & ~uint64_t{7}) + in_page, n);
        cur += n;
        left -= n;
    }
    return XlatError::None;
}

}  // namespace hca

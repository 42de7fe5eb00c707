#include "datapath/sig_xfer.h"

#include <cstring>

#include "be.h"
#include "device.h"
#include "objects/qp.h"

namespace hca {

namespace {

// The wire bytes one signature SGE may carry: a gather is read whole when
// its WQE starts, into the message's inline bytes.
constexpr uint64_t kMaxSigWire = 4u << 20;

// The PSV a SET_PSV names, and its transient signature.
struct SetPsvSeg {
    be32 psv_index;
    be16 syndrome;
    uint8_t rsvd[2];
    be64 transient_sig;
};
static_assert(sizeof(SetPsvSeg) == 16);

// A block's PI did not check: traced, and reported by a SIGERR CQE on cqn
// while the key is armed (its reported errors and expected_sigerr_count
// differ in parity; the next UMR with SIG_ERR arms it again).
void sig_error(Device &dev, const Qp &qp, uint32_t cqn, Mkey &m, const SigError &e) {
    const bool armed = (m.sigerr_count & 1) != static_cast<uint32_t>(m.sigerr_expected);
    const bool t10 = (e.memory ? m.sig->cfg.mem : m.sig->cfg.wire).type == SigType::T10dif;
    HCA_TRACE(dev, mkey_sig_err, .qpn = qp.qpn, .key = m.key(), .domain = e.memory ? "memory" : "wire",
              .block = e.offset / m.sig->cfg.unit(), .syndrome = e.syndrome, .expected = e.expected_sig,
              .actual = e.actual_sig, .expected_ref = trace_opt(t10, e.expected_ref),
              .actual_ref = trace_opt(t10, e.actual_ref), .reported = armed);
    if (!armed) {
        return;
    }
    ++m.sigerr_count;
    SigErrCqe c{};
    c.expected_trans_sig.set(e.expected_sig);
    c.actual_trans_sig.set(e.actual_sig);
    c.expected_reftag.set(e.expected_ref);
    c.actual_reftag.set(e.actual_ref);
    c.syndrome.set(e.syndrome);
    c.domain = e.memory ? 1 : 0;
    c.mkey.set(m.key());
    c.err_offset.set(e.offset);
    c.qpn.set(qp.qpn);
    c.op_own = kCqeSigErr << 4;
    HCA_TRACE(dev, cqe_sigerr, .cqn = cqn, .qpn = qp.qpn, .key = m.key(), .domain = e.memory ? "memory" : "wire",
              .syndrome = e.syndrome, .offset = e.offset);
    dev.cqs.post(cqn, reinterpret_cast<Cqe64 &>(c), false);
}

// Reads or writes [va, va + len) of the key's own layout (its memory domain).
bool layout_io(Device &dev, const Mkey &m, uint32_t pd, uint64_t va, uint8_t *buf, uint64_t len, bool write,
               std::vector<DmaChunk> &chunks, uint8_t &synd) {
    chunks.clear();
    const XlatError e = dev.mkeys.translate_layout(m, pd, va, len, write ? kAccLocalWrite : kAccLocalRead, chunks);
    if (e != XlatError::None) {
        dev.guest_error("signature key 0x{:x} layout 0x{:x}+{}: {}", m.key(), va, len, xlat_error_name(e));
        synd = kSyndLocalProt;
        return false;
    }
    for (const DmaChunk &c : chunks) {
        if (!(write ? dev.mem_write(c.addr, buf, c.len) : dev.mem_read(c.addr, buf, c.len))) {
            synd = kSyndLocalProt;
            return false;
        }
        buf += c.len;
    }
    return true;
}

}  // namespace

bool sig_wire_sge(Device &dev, const Qp &qp, Sge &s) {
    const SigState *st = dev.mkeys.sig_of(s.lkey);
    if (!st) {
        return true;
    }
    const SigConfig &c = st->cfg;
    s.sig = true;
    if (s.addr % c.unit() || s.len % c.unit() || uint64_t{s.len} / c.unit() * c.wire_unit() > kMaxSigWire) {
        dev.guest_error(
            "qpn=0x{:x} SGE 0x{:x}+{} through signature key 0x{:x}: not whole {}-byte blocks within {} "
            "wire bytes",
            qp.qpn, s.addr, s.len, s.lkey, c.unit(), kMaxSigWire);
        s.len = 0;
        return false;
    }
    s.len = static_cast<uint32_t>(s.len / c.unit() * c.wire_unit());
    return true;
}

bool sig_gather(Device &dev, Qp &qp, uint16_t index, GatherList &msg, uint8_t &synd) {
    std::vector<uint8_t> mem;  // the memory domain's bytes of one SGE
    for (Sge &s : msg.sges) {
        if (!s.sig) {
            continue;
        }
        Mkey *m = dev.mkeys.find(s.lkey);
        if (!m || !m->sig || !s.len) {
            dev.guest_error("qpn=0x{:x} WQE 0x{:x}: signature SGE key 0x{:x} has no BSF", qp.qpn, index, s.lkey);
            synd = kSyndLocalProt;
            return false;
        }
        const SigConfig &c = m->sig->cfg;
        const uint64_t first = s.addr / c.unit();
        const uint64_t blocks = s.len / c.wire_unit();
        mem.resize(blocks * c.mem_unit());
        if (!layout_io(dev, *m, qp.pd, first * c.mem_unit(), mem.data(), mem.size(), false, m->sig->chunks, synd)) {
            return false;
        }
        const size_t at = msg.inline_data.size();
        msg.inline_data.resize(at + blocks * c.wire_unit());
        uint8_t *out = msg.inline_data.data() + at;
        SigError err;
        for (uint64_t i = 0; i < blocks; ++i) {
            const uint8_t *data = mem.data() + i * c.mem_unit();
            const uint8_t *mpi = data + c.block();
            SigError e;
            if (c.mem.type != SigType::None && !err.syndrome &&
                (e.syndrome = sig_check_pi(c.mem, c.check_mask, data, first + i, mpi, e))) {
                e.memory = true;
                e.offset = (first + i) * c.unit();
                err = e;
            }
            std::memcpy(out, data, c.block());
            if (c.wire.type != SigType::None) {
                uint8_t *wpi = out + c.block();
                sig_make_pi(c.wire, data, first + i, wpi);
                sig_copy_pi(c, mpi, wpi);
            }
            out += c.wire_unit();
        }
        s = Sge{0, at, s.len, true};
        if (err.syndrome) {
            sig_error(dev, qp, qp.cqn_snd, *m, err);
            qp.sigerr_draining = qp.sigerr_draining || qp.drain_sigerr;
        }
    }
    return true;
}

bool sig_scatter(Device &dev, const Qp &qp, uint32_t pd, uint32_t cqn, const Sge &s, uint32_t in_sge,
                 std::span<const uint8_t> data, uint8_t &synd) {
    Mkey *m = dev.mkeys.find(s.lkey);
    if (!m || !m->sig) {
        dev.guest_error("qpn=0x{:x} scatter: signature key 0x{:x} has no BSF", qp.qpn, s.lkey);
        synd = kSyndLocalProt;
        return false;
    }
    SigState &st = *m->sig;
    const SigConfig &c = st.cfg;
    const uint32_t wu = c.wire_unit();
    // A write that does not go on from where the last one stopped starts
    // over at a block boundary (the bytes of a block cut short are lost).
    if (in_sge != st.stream_next || in_sge == 0) {
        st.block.clear();
        if (in_sge % wu) {
            st.stream_next = UINT64_MAX;
            synd = kSyndLocalLength;
            dev.guest_error("qpn=0x{:x} signature key 0x{:x}: write resumes inside a block", qp.qpn, s.lkey);
            return false;
        }
    }
    std::vector<uint8_t> &out = st.out;
    out.resize(c.mem_unit());
    SigError err;
    size_t pos = 0;
    while (pos < data.size()) {
        const size_t take = std::min<size_t>(wu - st.block.size(), data.size() - pos);
        st.block.insert(st.block.end(), data.begin() + pos, data.begin() + pos + take);
        pos += take;
        if (st.block.size() < wu) {
            break;
        }
        const uint64_t n = s.addr / c.unit() + (in_sge + pos) / wu - 1;
        const uint8_t *wpi = st.block.data() + c.block();
        SigError e;
        if (c.wire.type != SigType::None && !err.syndrome &&
            (e.syndrome = sig_check_pi(c.wire, c.check_mask, st.block.data(), n, wpi, e))) {
            e.offset = n * c.unit();
            err = e;
        }
        std::memcpy(out.data(), st.block.data(), c.block());
        if (c.mem.type != SigType::None) {
            uint8_t *mpi = out.data() + c.block();
            sig_make_pi(c.mem, st.block.data(), n, mpi);
            sig_copy_pi(c, wpi, mpi);
        }
        st.block.clear();
        if (!layout_io(dev, *m, pd, n * c.mem_unit(), out.data(), out.size(), true, st.chunks, synd)) {
            return false;
        }
    }
    st.stream_next = in_sge + data.size();
    if (err.syndrome) {
        sig_error(dev, qp, cqn, *m, err);
    }
    return true;
}

bool set_psv(Device &dev, const Qp &qp, const SqWqe &w, uint8_t &synd) {
    synd = kSyndLocalQpOp;
    if (w.bytes.size() < sizeof(CtrlSeg) + sizeof(SetPsvSeg)) {
        dev.guest_error("qpn=0x{:x} SET_PSV WQE 0x{:x} without its PSV segment", qp.qpn, w.index);
        return false;
    }
    SetPsvSeg seg;
    std::memcpy(&seg, w.bytes.data() + sizeof(CtrlSeg), sizeof(seg));
    const uint32_t index = seg.psv_index.get() & 0xffffff;
    HCA_TRACE(dev, wqe_set_psv, .qpn = qp.qpn, .index = w.index, .psv = index, .signature = seg.transient_sig.get());
    Psv *p = dev.psvs.find(index);
    if (!p || p->pd != qp.pd) {
        dev.guest_error("qpn=0x{:x} SET_PSV WQE 0x{:x}: PSV 0x{:x} is not one of PD {}", qp.qpn, w.index, index, qp.pd);
        synd = kSyndLocalProt;
        return false;
    }
    p->transient_sig = seg.transient_sig.get();
    return true;
}

}  // namespace hca

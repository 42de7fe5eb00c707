// SQ doorbells and BlueFlame copies: the writes at UAR +0x800.. taken in
// (a doorbell's head, the rest of a copy), how each bfreg's doorbells come,
// the waits for a copy under way, and the copies kept with their QPs until
// the send queue (send.cpp) takes them.
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "be.h"
#include "device.h"
#include "objects/qp.h"

namespace hca {

namespace {

// A write at UAR +offset (offset >= kBfRegion): its place in its BlueFlame
// half-buffer, and the half-buffer (uar << 4 | half, the key of captures
// and waits).
uint32_t in_buf_of(uint32_t offset) {
    return (offset - UarTable::kBfRegion) % SendQueue::kBfBufSize;
}
uint32_t buf_key_of(uint32_t uar, uint32_t offset) {
    return uar << 4 | (offset - UarTable::kBfRegion) / SendQueue::kBfBufSize;
}

// How far WQE index is ahead of the send queue's next WQE.
uint16_t ahead(const Qp &qp, uint16_t index) {
    return static_cast<uint16_t>(index - qp.sq_ci);
}

// A QP's BlueFlame copies are kept in the order of their WQEs from sq_ci
// (the order in which a driver copies them), so the next WQE's copy, if
// it came, is the first, and the copies of consumed WQEs leave from the
// front. A copy that came again for the same WQE replaces the one before.
// Only copies of WQEs posted and not consumed are stored (the caller
// checks), and the ones a moved window left behind go first: at most one
// per WQEBB of the send queue.
void store_bf_wqe(Qp &qp, uint16_t index, std::span<const uint8_t> bytes) {
    static_assert(Qp::kBfWqeMax == SendQueue::kBfBufSize);
    auto &ring = qp.bf_wqes;
    while (!ring.empty() && ahead(qp, ring.back().index) >= qp.sq_wqebbs()) {
        ring.pop_back();
    }
    // The copy goes after the last one not ahead of it.
    auto before = ring.end();
    while (before != ring.begin() && ahead(qp, std::prev(before)->index) > ahead(qp, index)) {
        --before;
    }
    Qp::BfWqe *w = nullptr;
    if (before != ring.begin() && std::prev(before)->index == index) {
        w = &*std::prev(before);
    } else {
        w = &ring.emplace_at(static_cast<size_t>(before - ring.begin()));
        w->index = index;
    }
    w->len = static_cast<uint16_t>(bytes.size());
    std::memcpy(w->bytes.data(), bytes.data(), bytes.size());
}

}  // namespace

void SendQueue::forget_uar(uint32_t uar) {
    for (auto &[key, cap] : bf_) {
        if (key >> 4 == uar) {
            abandon(cap);
        }
    }
    std::erase_if(bf_, [uar](const auto &kv) { return kv.first >> 4 == uar; });
    std::erase_if(bfregs_, [this, uar](const auto &kv) {
        if (kv.first >> 3 != uar) {
            return false;
        }
        for (const DeferredHead &h : kv.second.deferred) {
            deferred_heads_ -= h.end != 0;
        }
        return true;
    });
}

// Writes at UAR +0x800.. (hw/mlx5 mlx5r_ring_db(), libmlx5 post_send_db()
// and mlx5_bf_copy(), mem.c post_send_nop()). The first 8 bytes of a
// BlueFlame half-buffer are the doorbell: the head of the last posted WQE
// (opmod_idx_opcode, qpn_ds). Further contiguous writes in the same
// half-buffer carry the rest of that WQE (BlueFlame); once ds*16 bytes have
// arrived the WQE is executed from them instead of being fetched. Writes
// are only recorded here; the send queues run once the batch of doorbells
// has been taken in (process_pending()). Under QEMU each 8 bytes of a copy
// is an MMIO write of its own and the device may run between them: a send
// queue that reaches a WQE whose copy is under way waits for the rest
// (await_copy()) if its bfreg carries copies.
void SendQueue::doorbell(uint32_t uar, uint32_t offset, const uint8_t *data, unsigned size) {
    const uint32_t in_buf = in_buf_of(offset);
    const uint32_t buf_key = buf_key_of(uar, offset);
    if (in_buf == 0 && size == 8) {
        doorbell_head(uar, offset, buf_key, load_be32(data), load_be32(data + 4));
        return;
    }
    if (in_buf == 0 && size == 4) {
        // First 32-bit half; the doorbell acts when the second half arrives.
        pending_half_ = {uar, offset, load_be32(data), true};
        return;
    }
    if (in_buf == 4 && size == 4 && pending_half_.valid && pending_half_.uar == uar &&
        pending_half_.offset + 4 == offset) {
        pending_half_.valid = false;
        doorbell_head(uar, offset - 4, buf_key, pending_half_.value, load_be32(data));
        return;
    }
    // A BlueFlame continuation.
    auto it = bf_.find(buf_key);
    if (it != bf_.end() && it->second.late && it->second.got == in_buf) {
        // The rest of a copy the send queue stopped waiting for (its vCPU
        // was preempted in the middle of the copy for longer than
        // kCopyWaitNs): the WQE ran from memory, and the rest is no error.
        it->second.got = in_buf + size;
        return;
    }
    if (it == bf_.end() || !it->second.active || it->second.got != in_buf) {
        dev_.guest_error("write of {} bytes at UAR {} +0x{:x}: not the continuation of a BlueFlame write", size, uar,
                         offset);
        if (it != bf_.end()) {
            abandon(it->second);
        }
        return;
    }
    BfCapture &cap = it->second;
    if (in_buf + size > cap.expected) {
        // Bytes past the WQE (the rest of a 64-byte chunk): ignored.
        cap.got = in_buf + size;
        return;
    }
    std::memcpy(cap.bytes.data() + in_buf, data, size);
    cap.got = in_buf + size;
    if (cap.got == cap.expected) {
        Qp *qp = qps_.find(cap.qpn);
        if (qp && !qp->no_sq && static_cast<uint16_t>(cap.index - qp->sq_ci) < qp->sq_wqebbs()) {
            HCA_TRACE(dev_, uar_blueflame, .uar = uar, .offset = offset - in_buf, .qpn = cap.qpn,
                      .wqe_index = cap.index, .bytes = cap.expected,
                      .data = std::span<const uint8_t>(cap.bytes.data(), cap.expected));
            store_bf_wqe(*qp, cap.index, std::span<const uint8_t>(cap.bytes.data(), cap.expected));
            // A bfreg that carries BlueFlame copies alternates its two
            // halves on every doorbell (bf->offset ^= buf_size).
            if (cap.prev_half == static_cast<int8_t>(buf_key & 1)) {
                dev_.guest_error("BlueFlame alternation broken: doorbells in a row to half {} of bfreg {} of uar {}",
                                 buf_key & 1, (buf_key >> 1) & 7, uar);
            }
        }
        judge(buf_key, BfUse::Copies);
        end_wait(cap.qpn, cap.index, "the BlueFlame copy is whole");
        // Keep got past expected so the rest of the chunk is swallowed.
    }
}

void SendQueue::judge(uint32_t buf_key, BfUse use) {
    if (auto reg = bfregs_.find(buf_key >> 1); reg != bfregs_.end()) {
        reg->second.use = use;
    }
}

void SendQueue::abandon(BfCapture &cap) {
    if (cap.active && cap.got < cap.expected) {
        end_wait(cap.qpn, cap.index, "the BlueFlame copy was not completed: the WQE is fetched from memory");
    }
    cap.active = false;
}

void SendQueue::end_wait(uint32_t qpn, uint16_t index, const char *why) {
    Qp *qp = qps_.find(qpn);
    if (!qp || !qp->bf_copy_valid || qp->bf_copy != index) {
        return;
    }
    qp->bf_copy_valid = false;
    auto it = waits_.find(qpn);
    if (it == waits_.end()) {
        return;  // the send queue had not reached the WQE
    }
    dev_.cancel_timer(it->second.timer);
    waits_.erase(it);
    HCA_TRACE(dev_, wqe_blueflame, .qpn = qpn, .index = index, .reason = why);
    defer(*qp);
}

void SendQueue::await_copy(Qp &qp, uint16_t index) {
    if (waits_.contains(qp.qpn)) {
        return;
    }
    HCA_TRACE(dev_, wqe_blueflame, .qpn = qp.qpn, .index = index,
              .reason = "waiting for the rest of the BlueFlame copy");
    const uint32_t qpn = qp.qpn;
    CopyWait wait;
    for (const auto &[key, cap] : bf_) {
        if (cap.active && cap.qpn == qpn && cap.index == index) {
            wait.buf_key = key;
            wait.end = cap.expected;
        }
    }
    wait.timer = dev_.add_timer(kCopyWaitNs, [this, qpn, index] { copy_overdue(qpn, index); });
    waits_.emplace(qpn, wait);
}

bool SendQueue::defer_head(uint32_t uar, uint32_t offset, const uint8_t *data) {
    const uint32_t buf_key = buf_key_of(uar, offset);
    const uint32_t ds = data[7] & 0x3f;  // qpn_ds, big-endian
    auto reg = bfregs_.find(buf_key >> 1);
    if (reg == bfregs_.end() || reg->second.use != BfUse::Copies || !ds || ds * 16 > kBfBufSize ||
        !dev_.fw.caps().gen(ifc::cmd_hca_cap::bf)) {
        return false;
    }
    DeferredHead &h = reg->second.deferred[buf_key & 1];
    deferred_heads_ += h.end == 0;
    h.end = ds * 16;
    h.deadline = dev_.now() + kCopyWaitNs;
    if (!deferred_timer_) {
        deferred_timer_ = true;
        dev_.add_timer(kCopyWaitNs, [this] { deferred_heads_due(); });
    }
    return true;
}

void SendQueue::deferred_heads_due() {
    deferred_timer_ = false;
    const int64_t now = dev_.now();
    int64_t next = -1;
    bool overdue = false;
    for (auto &[reg_key, reg] : bfregs_) {
        for (DeferredHead &h : reg.deferred) {
            if (!h.end) {
                continue;
            }
            if (h.deadline <= now) {
                h.end = 0;
                h.overdue = true;
                --deferred_heads_;
                reg.use = BfUse::Plain;
                overdue = true;
            } else {
                next = next < 0 ? h.deadline : std::min(next, h.deadline);
            }
        }
    }
    if (overdue) {
        dev_.schedule();
    }
    if (next >= 0) {
        deferred_timer_ = true;
        dev_.add_timer(next - now, [this] { deferred_heads_due(); });
    }
}

bool SendQueue::completes_copy(uint32_t uar, uint32_t offset, unsigned size) {
    if (waits_.empty() && deferred_heads_ == 0) {
        return false;
    }
    const uint32_t buf_key = buf_key_of(uar, offset);
    const uint32_t reached = in_buf_of(offset) + size;
    if (auto reg = bfregs_.find(buf_key >> 1); reg != bfregs_.end()) {
        DeferredHead &h = reg->second.deferred[buf_key & 1];
        if (h.end && reached >= h.end) {
            h.end = 0;
            --deferred_heads_;
            return true;
        }
    }
    for (const auto &[qpn, wait] : waits_) {
        if (wait.buf_key == buf_key && reached >= wait.end) {
            return true;
        }
    }
    return false;
}

void SendQueue::copy_overdue(uint32_t qpn, uint16_t index) {
    for (auto &[key, cap] : bf_) {
        if (cap.active && cap.qpn == qpn && cap.index == index && cap.got < cap.expected) {
            cap.active = false;
            cap.late = true;
            judge(key, BfUse::Plain);
        }
    }
    waits_.erase(qpn);  // its timer is the one that fired
    Qp *qp = qps_.find(qpn);
    if (!qp) {
        return;
    }
    if (qp->bf_copy_valid && qp->bf_copy == index) {
        qp->bf_copy_valid = false;
        HCA_TRACE(dev_, wqe_blueflame, .qpn = qpn, .index = index,
                  .reason = "the rest of the BlueFlame copy did not come in time: the WQE is fetched from memory");
    }
    defer(*qp);  // (a QP of that number made since then may wait too: it runs and waits anew)
}

void SendQueue::doorbell_head(uint32_t uar, uint32_t offset, uint32_t buf_key, uint32_t head, uint32_t qpn_ds) {
    const uint32_t qpn = qpn_ds >> 8;
    const uint16_t index = static_cast<uint16_t>(head >> 8);
    const uint32_t ds = qpn_ds & 0x3f;
    Qp *qp = qps_.find(qpn);
    HCA_TRACE(dev_, uar_sq_doorbell, .uar = uar, .offset = offset, .qpn = qpn, .wqe_index = index,
              .opcode = wqe_opcode_name(head & 0xff), .ds = ds);
    auto [reg, fresh] = bfregs_.try_emplace(buf_key >> 1);
    // A head whose run came from the deferred heads' timer: its copy did
    // not come in time, so the send queue does not wait for it.
    const bool overdue = std::exchange(reg->second.deferred[buf_key & 1].overdue, false);
    int8_t prev_half = -1;
    if (!fresh) {
        // The bfreg's previous doorbell: its copy, if it had one, is over
        // (the driver finishes a copy before it rings again).
        prev_half = static_cast<int8_t>(reg->second.last_half);
        auto prev = bf_.find((buf_key & ~1u) | reg->second.last_half);
        if (prev != bf_.end() && prev->second.possible) {
            reg->second.use = prev->second.got > 8 ? BfUse::Copies : BfUse::Plain;
            abandon(prev->second);
        }
    }
    if (overdue) {
        reg->second.use = BfUse::Plain;  // newer news than the doorbell before
    }
    reg->second.last_half = static_cast<uint8_t>(buf_key & 1);
    BfCapture &cap = bf_[buf_key];
    abandon(cap);
    cap.possible = false;
    cap.late = false;
    cap.prev_half = prev_half;
    if (!qp) {
        dev_.guest_error("SQ doorbell for QP 0x{:x} that does not exist (uar={} +0x{:x})", qpn, uar, offset);
        return;
    }
    if (qp->uar != uar) {
        dev_.guest_error("SQ doorbell for qpn=0x{:x} through uar={}, but the QP belongs to uar={}: ignored", qpn, uar,
                         qp->uar);
        return;
    }
    if (qp->no_sq) {
        dev_.guest_error("SQ doorbell for qpn=0x{:x}, which has no send queue", qpn);
        return;
    }
    // The WQE the doorbell names must be behind the doorbell record's
    // producer counter; sq_producer() checks it when it reads the record.
    if (qp->state == QpState::Rts) {
        qp->db_named = index;
        qp->db_named_valid = true;
    }
    if (dev_.fw.caps().gen(ifc::cmd_hca_cap::bf) && ds && ds * 16 <= kBfBufSize) {
        // May be the start of a BlueFlame copy of this WQE.
        cap.active = true;
        cap.possible = true;
        cap.qpn = qpn;
        cap.index = index;
        cap.expected = ds * 16;
        cap.got = 8;
        store_be32(cap.bytes.data(), head);
        store_be32(cap.bytes.data() + 4, qpn_ds);
        qp->bf_copy = index;
        qp->bf_copy_valid = reg->second.use == BfUse::Copies && !overdue;
    }
    if (!qp->sq_pending) {
        qp->sq_pending = true;
        pending_.push_back(qpn);
    }
}

// The send queue goes on at next; the BlueFlame copies of the WQEs it
// passed go (store_bf_wqe() keeps them in order: they are the first).
void SendQueue::consume_to(Qp &qp, uint16_t next) {
    const uint16_t passed = static_cast<uint16_t>(next - qp.sq_ci);
    while (!qp.bf_wqes.empty() && ahead(qp, qp.bf_wqes.front().index) < passed) {
        qp.bf_wqes.pop_front();
    }
    qp.sq_ci = next;
}

}  // namespace hca

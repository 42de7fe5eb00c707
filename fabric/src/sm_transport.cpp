// The subnet manager's SMP transport: transaction ids nobody can predict,
// retries with the same TID, and responses taken only from the port their
// request left by (see subnet_manager.h).
#include "subnet_manager.h"

#include "switch.h"

namespace fabric {

uint64_t SubnetManager::new_tid() {
    uint64_t tid;
    do {
        tid = tid_rng_();
    } while (tid == 0 || pending_.count(tid));
    return tid;
}

// --- SMP transport ---

void SubnetManager::smp(std::span<const uint8_t> path, uint8_t method, uint16_t attr, uint32_t mod,
                        const std::array<uint8_t, 64> *data, SmpCallback cb, bool switch_mkey) {
    const uint64_t tid = new_tid();
    Pending p;
    init_dr_smp(p.req, method, tid, attr, mod, path);
    p.port = path.size() > 1 ? path[1] : 0;
    if (switch_mkey) {
        // Only to a switch, over a path of switches: no guest sees the key.
        set64(p.req, mad::smp::kMkey, cfg_.switch_mkey);
    }
    if (data) {
        std::copy(data->begin(), data->end(), p.req.begin() + mad::smp::kData);
    }
    p.cb = std::move(cb);
    pending_.emplace(tid, std::move(p));
    send_pending(tid);
}

void SubnetManager::switch_smp(size_t s, uint8_t method, uint16_t attr, uint32_t mod,
                               const std::array<uint8_t, 64> *data, SmpCallback cb) {
    const std::vector<uint8_t> path = switches_.at(s).path;
    smp(path, method, attr, mod, data, std::move(cb), true);
}

void SubnetManager::send_pending(uint64_t tid) {
    Pending &p = pending_.at(tid);
    ++p.tries;
    ++smps_sent_;
    ++act_count_;
    MadAddress to;
    to.slid = sw_.lid() ? sw_.lid() : iba::kPermissiveLid;
    to.dlid = iba::kPermissiveLid;  // IBA 14.2.2: the directed part uses the permissive DLID
    to.src_qp = 0;
    to.dst_qp = 0;
    p.timer = loop_.after(cfg_.smp_timeout_us, [this, tid] { on_timeout(tid); });
    // Retries resend the same TID (IBA 13.4.6.2).
    sw_.send_local(mad_packet(to, p.req, static_cast<uint32_t>(tid & 0xffffff)));
}

void SubnetManager::on_timeout(uint64_t tid) {
    auto it = pending_.find(tid);
    if (it == pending_.end()) {
        return;
    }
    it->second.timer = 0;
    if (it->second.tries <= cfg_.retries) {
        send_pending(tid);
        return;
    }
    ++smp_timeouts_;
    SmpCallback cb = std::move(it->second.cb);
    pending_.erase(it);
    cb(nullptr);
}

void SubnetManager::on_mad(const MadAddress &from, const Mad &m) {
    const uint8_t method = m[mad::kMethod];
    if (m[mad::kMgmtClass] == mad::kClassSubnLid && method == mad::kTrap) {
        // IBA 14.2.5.1: acknowledge with TrapRepress; a trap means something
        // changed, so look at the subnet again.
        if (log_.allow("sm")) {
            log_.info("sm", "trap {} from LID {}", get16(m, mad::smp::kData + 4), from.slid);
        }
        Mad r = m;
        r[mad::kMethod] = mad::kTrapRepress;
        set16(r, mad::kStatus, 0);
        MadAddress to;
        to.slid = sw_.lid();
        to.dlid = from.slid;
        sw_.send_local(mad_packet(to, r));
        request_sweep();
        return;
    }
    if (!is_response(method)) {
        return;
    }
    auto it = pending_.find(get64(m, mad::kTid));
    if (it == pending_.end()) {
        return;  // a late answer to a request that already timed out
    }
    if (!response_matches(it->second, from, m)) {
        return;
    }
    loop_.cancel(it->second.timer);
    SmpCallback cb = std::move(it->second.cb);
    pending_.erase(it);
    cb(&m);
}

// A response counts only if it came back through the port its request left
// by, as the same attribute; anything else is a guest answering in another
// node's place (the request stays pending).
bool SubnetManager::response_matches(const Pending &p, const MadAddress &from, const Mad &m) {
    if (from.in_port == p.port && get16(m, mad::kAttrId) == get16(p.req, mad::kAttrId) &&
        get32(m, mad::kAttrMod) == get32(p.req, mad::kAttrMod) && m[mad::kMgmtClass] == p.req[mad::kMgmtClass]) {
        return true;
    }
    ++smps_rejected_;
    if (log_.allow("sm-spoof")) {
        log_.warn("sm", "response attr {:#06x} from port {} to an SMP sent to port {} ignored",
                  get16(m, mad::kAttrId), from.in_port, p.port);
    }
    return false;
}

}  // namespace fabric

#include "device.h"

#include <cstring>

#include "be.h"
#include "iba/link.h"

namespace hca {

namespace {

uint64_t default_guid(const void *instance) {
    // Mellanox OUI 00:02:c9, then bytes that differ per instance.
    const uint64_t x = reinterpret_cast<uintptr_t>(instance) >> 4;
    return (uint64_t{0x0002c903} << 32) | (x & 0xffffffffu);
}

// Marks the device as inside run() or on_timer() for their duration, an
// exception included.
class Running {
  public:
    explicit Running(bool &flag) : flag_(flag) { flag_ = true; }
    ~Running() { flag_ = false; }
    Running(const Running &) = delete;
    Running &operator=(const Running &) = delete;

  private:
    bool &flag_;
};

}  // namespace

Device::Device(Host &host, const DeviceConfig &cfg)
    : host_(host),
      host_logs_errors_(host.logs_guest_errors()),
      cfg_(cfg),
      node_guid_(cfg.node_guid ? cfg.node_guid : default_guid(this)),
      iseg(*this),
      fw(*this),
      regs(*this),
      uars(*this, HCA_MODEL_BAR0_MMIO_SIZE >> kPageShift),
      eqs(*this),
      uctxs(*this),
      umems(*this),
      pds(*this),
      psvs(*this),
      devmem(*this),
      qcounters(*this),
      mkeys(*this),
      cqs(*this),
      srqs(*this),
      qps(*this),
      odp(*this),
      port1(*this, 1),
      cmdif(*this) {
    uint32_t mask = 0;
    TraceScope scope;
    if (!parse_trace_filter(cfg.trace_filter, &mask, &scope)) {
        throw ConfigError(fmt::format("bad trace filter '{}' (categories: all, none, {}; qpn=N, cqn=N)",
                                      cfg.trace_filter,
                                      [] {
                                          std::string s;
                                          for (const auto &c : kTraceCats) {
                                              s += s.empty() ? "" : ", ";
                                              s += c.name;
                                          }
                                          return s;
                                      }()));
    }
    std::string err;
    if (!tracer_.open(cfg.trace_path, cfg.trace_max_bytes, &err)) {
        throw ConfigError(err);
    }
    tracer_.set_mask(mask);
    tracer_.set_scope(std::move(scope));
    if (!cfg.test_fault.empty() && cfg.test_fault != "cqe-opcode") {
        throw ConfigError(fmt::format("unknown test fault '{}' (known: cqe-opcode)", cfg.test_fault));
    }
    fault_cqe_opcode_ = cfg.test_fault == "cqe-opcode";
    // Packet ids: the low bits of the node GUID, then a counter, so ids of
    // different nodes never collide in a fabric capture.
    next_packet_id_ = (node_guid_ & 0xffff) << 40 | 1;
    reset();
    // Without a fabric the port's cable is always plugged in (LinkUp, Init),
    // so a subnet manager in the guest can configure it.
    if (!cfg_.fabric) {
        port1.set_link(true);
    }
    // Faults armed from the start (--fault at boot), one per ';'.
    std::string_view rest = cfg.faults;
    while (!rest.empty()) {
        const size_t semi = rest.find(';');
        const std::string_view spec = rest.substr(0, semi);
        rest = semi == std::string_view::npos ? std::string_view{} : rest.substr(semi + 1);
        if (spec.empty()) {
            continue;
        }
        try {
            faults.arm(spec);
        } catch (const FaultSpecError &e) {
            throw ConfigError(fmt::format("fault '{}': {}", spec.substr(0, 100), e.what));
        }
    }
}

void Device::reset() {
    HCA_TRACE(*this, iseg_reset, .node_guid = node_guid_);
    if (!cfg_.test_fault.empty()) {
        HCA_TRACE(*this, guest_err_test_fault, .kind = cfg_.test_fault,
                  .reason = "TEST FAULT ACTIVE: a deliberate device bug (--test-fault)");
    }
    fatal_ = false;
    off_bus_until_ = -1;
    drop_objects();
    scheduled_ = false;  // the host drops its pending bottom half with the reset
    iseg.reset();
    fw.reset();
    regs.reset();
    port1.reset();
    cmdif.reset();
}

void Device::drop_objects() {
    host_.port_tx_drop();
    faults.drop_waiting();
    timers_.clear();
    sync_timer();
    doorbells_.clear();
    rx_.clear();
    rx_bytes_ = 0;
    rx_refused_ = false;
    tx_waiting_ = false;
    packet_pool_.clear();
    qps.reset();
    odp.reset();
    srqs.reset();
    cqs.reset();
    mkeys.reset();
    psvs.reset();
    pds.reset();
    umems.reset();
    uctxs.reset();
    devmem.reset();
    qcounters.reset();
    eqs.reset();
    uars.reset();
}

bool Device::set_trace_filter(std::string_view filter) {
    uint32_t mask = 0;
    TraceScope scope;
    if (!parse_trace_filter(filter, &mask, &scope)) {
        return false;
    }
    tracer_.set_mask(mask);
    tracer_.set_scope(std::move(scope));
    return true;
}

bool Device::dma_read(uint64_t addr, void *buf, size_t len) { return !fatal_ && host_.dma_read(addr, buf, len); }

bool Device::dma_write(uint64_t addr, const void *buf, size_t len) {
    return !fatal_ && host_.dma_write(addr, buf, len);
}

void Device::msix(unsigned vector) {
    if (fatal_) {
        return;
    }
    ++counters.msix;
    host_.msix_notify(vector);
}

void Device::schedule() {
    if (!scheduled_) {
        scheduled_ = true;
        host_.schedule();
    }
}

Timers::Id Device::add_timer(int64_t delay_ns, std::function<void()> fn) {
    const Timers::Id id = timers_.add(now() + delay_ns, std::move(fn));
    sync_timer();
    return id;
}

void Device::cancel_timer(Timers::Id id) {
    timers_.cancel(id);
    sync_timer();
}

void Device::sync_timer() {
    const int64_t next = timers_.next_deadline();
    if (next != timer_armed_at_) {
        timer_armed_at_ = next;
        host_.timer_mod(next);
    }
}

void Device::on_timer() {
    timer_armed_at_ = -1;
    if (fatal_) {
        return;
    }
    const Running running(running_);
    timers_.run_expired(now());
    cqs.flush_sessions();
    sync_timer();
    tracer_.flush();
}

void Device::enter_fatal(std::string_view reason) noexcept { fail_firmware(InitSeg::kSyndFwInternalErr, reason); }

void Device::halt(const std::function<std::string()> &why) noexcept {
    fatal_ = true;
    try {
        doorbells_.clear();
        rx_.clear();
        rx_bytes_ = 0;
        timers_.clear();
        sync_timer();
        if (why) {
            const std::string msg = why();
            if (tracer_.on(kTrIseg)) {
                tev::iseg_halted{.reason = msg}.emit(tracer_, now());
            } else if (tracer_.on(kTrGuestErr)) {
                tev::guest_err_error{.reason = msg}.emit(tracer_, now());
            }
            tracer_.flush();
        }
    } catch (...) {
        // Stopped all the same; nothing more to report.
    }
}

void Device::fail_firmware(uint8_t synd, std::string_view reason) noexcept {
    const bool first = !fatal_;
    iseg.set_fatal(synd, now());
    halt(first ? std::function<std::string()>([&] {
        return fmt::format("fatal firmware error (health syndrome 0x{:02x}), device stopped until reset: {}", synd,
                           reason);
    })
               : nullptr);
}

void Device::leave_bus(int64_t back_ns) noexcept {
    off_bus_until_ = back_ns < 0 ? INT64_MAX : now() + back_ns;
    host_.port_tx_drop();
    halt([&] {
        return fmt::format("off the bus (surprise removal): reads return all ones, {}",
                           back_ns < 0 ? "until a reset" : fmt::format("a new function in {} ms", back_ns / 1'000'000));
    });
}

bool Device::off_bus() {
    if (off_bus_until_ < 0) [[likely]] {
        return false;
    }
    if (now() < off_bus_until_) {
        return true;
    }
    HCA_TRACE(*this, iseg_new_function, .reason = "a new function in the slot: power-on state");
    reset();
    return false;
}

bool Device::guest_error_budget() {
    // At most 100 lines per second of device time.
    const int64_t t = now();
    if (t - guest_error_window_ >= 1'000'000'000) {
        if (guest_errors_in_window_ > 100) {
            HCA_TRACE(*this, guest_err_suppressed, .lines = guest_errors_in_window_ - 100);
        }
        guest_error_window_ = t;
        guest_errors_in_window_ = 0;
    }
    return ++guest_errors_in_window_ <= 100;
}

void Device::mmio_read(uint64_t offset, uint8_t *data, unsigned size) {
    if (off_bus()) {
        std::memset(data, 0xff, size);  // a read nobody completes: all ones
        return;
    }
    if (offset < InitSeg::kSize) {
        iseg.read(static_cast<uint32_t>(offset), data, size);
        return;
    }
    // Device memory (MEMIC) behind the registers.
    if (offset >= DevMem::kBarOffset && devmem.read(offset - DevMem::kBarOffset, data, size)) {
        return;
    }
    // UAR pages are write-only doorbells; reads return zeros.
    std::memset(data, 0, size);
}

void Device::mmio_write(uint64_t offset, const uint8_t *data, unsigned size) {
    // One test on the doorbell path: leave_bus() sets fatal_ too.
    if (fatal_) [[unlikely]] {
        if (off_bus()) {
            return;  // nobody there: nothing is written
        }
        if (fatal_) {
            // Dead firmware: doorbells and commands are ignored until a
            // reset, which the driver can ask for through nic_interface.
            if (offset >= InitSeg::kCmdqAddrLSz && offset + size <= InitSeg::kCmdqAddrLSz + 4) {
                iseg.write(static_cast<uint32_t>(offset), data, size);
            }
            return;
        }
        // A new function is in the slot (off_bus() reset it): written below.
    }
    if (offset >= DevMem::kBarOffset && size <= 8 && devmem.write(offset - DevMem::kBarOffset, data, size)) {
        return;  // device memory (MEMIC) behind the registers
    }
    if (offset + size > HCA_MODEL_BAR0_MMIO_SIZE || size == 0 || size > 8) {
        guest_error("BAR0 write of {} bytes at 0x{:x} is outside the BAR", size, offset);
        return;
    }
    const uint32_t page = static_cast<uint32_t>(offset >> kPageShift);
    if (page < UarTable::kFirst) {
        // The command doorbell is handled off this path (CommandInterface::process).
        iseg.write(static_cast<uint32_t>(offset), data, size);
        return;
    }
    // Doorbells are only recorded here; they execute in run().
    Doorbell db{.uar = page, .offset = static_cast<uint16_t>(offset & (kPageSize - 1)),
                .size = static_cast<uint8_t>(size), .data = {}};
    std::memcpy(db.data, data, size);
    if (doorbells_.size() >= kMaxDoorbells) {
        ++counters.doorbell_stalls;
        HCA_TRACE(*this, uar_stall, .queued = doorbells_.size(),
                  .reason = "the guest rings faster than the device runs: the queued doorbells ring now");
        ring_queued_doorbells();
    }
    doorbells_.push_back(db);
    ++counters.doorbells;
    // Under TCG every 8 bytes of a BlueFlame copy is a separate MMIO
    // write; a bottom half for each ran the device up to eight times for
    // one post. One write of a copy asks for a run: its head (which rings;
    // or the second 32-bit half of a split head), or, on a bfreg whose
    // doorbells come with copies, the write that completes the copy (a run
    // between the head and the rest would only wait for the rest).
    bool ask = true;
    if (db.offset >= UarTable::kBfRegion) {
        const uint32_t in_buf = (db.offset - UarTable::kBfRegion) % SendQueue::kBfBufSize;
        if (in_buf >= 8) {
            ask = qps.sq().completes_copy(page, db.offset, db.size);
        } else if (in_buf == 0 && size == 8) {
            ask = !qps.sq().defer_head(page, db.offset, data);
        }
    }
    if (ask) {
        schedule();
    }
}

// What a doorbell does is small and bounded (record a producer index,
// arm a CQ or an EQ); the work it asks for waits for run()'s budget.
void Device::ring_queued_doorbells() {
    while (!doorbells_.empty()) {
        const Doorbell db = doorbells_.front();
        doorbells_.pop_front();
        uar_doorbell(db.uar, db.offset, db.data, db.size);
    }
}

void Device::run() {
    scheduled_ = false;
    run_packets_ = 0;
    run_bytes_ = 0;
    run_wqes_ = 0;
    if (fatal_) {
        return;
    }
    const Running running(running_);
    // The doorbells queued so far, then the commands. A doorbell that names
    // an object a command creates or changes was rung after the driver saw
    // that command complete, so it is not queued yet; one rung before a
    // command destroys its object (mlx5_core's write-combining test
    // destroys its SQ once the first CQE is in, NOPs still queued) is
    // taken in while the object exists, as the MMIO order has it.
    ring_queued_doorbells();
    if (cmdif.pending()) {
        cmdif.process();
    }
    // Doorbells only record what the driver rang (a few bytes each, one
    // per MMIO write). Then the send queues, round robin, and received
    // packets (looped-back ones too) take turns until the budget is spent:
    // up to half of it for receives first, so a busy send queue cannot
    // stall acknowledgements and responses, nor a flood from the wire the
    // send queues.
    while (budget_left()) {
        ring_queued_doorbells();
        for (uint32_t n = 0; !rx_.empty() && budget_left() && n < kRunPackets / 2; ++n) {
            Packet pkt = std::move(rx_.front());
            rx_.pop_front();
            rx_bytes_ -= pkt.bytes.size();
            receive(pkt);
            recycle(std::move(pkt));
        }
        // One ACK per QP for what this batch brought (IBA 9.7.5.1.1).
        qps.responder().pay_acks();
        // Every write of the batch is in, so BlueFlame copies are whole.
        if (!link_tx_full()) {
            qps.sq().process_pending();
        }
        if (rx_.empty() && (!qps.sq().has_work() || tx_waiting_) && doorbells_.empty()) {
            break;
        }
    }
    // Compressed CQE sessions end with the run: the CQEs of one burst.
    cqs.flush_sessions();
    if (!rx_.empty() || (qps.sq().has_work() && !tx_waiting_) || !doorbells_.empty()) {
        schedule();
    }
    if (rx_refused_ && rx_bytes_ <= kRxLow) {
        rx_refused_ = false;
        HCA_TRACE(*this, port_rx_resumed, .waiting = rx_bytes_);
        host_.port_rx_resume(1);
    }
    tracer_.flush();
}

// The send queues wait while the link holds kTxHigh bytes or more.
bool Device::link_tx_full() {
    if (!cfg_.fabric) {
        return false;
    }
    const size_t backlog = host_.port_tx_backlog(1);
    if (tx_waiting_) {
        if (backlog > kTxLow) {
            return true;
        }
        tx_waiting_ = false;
        HCA_TRACE(*this, port_tx_resumed);
        return false;
    }
    if (backlog < kTxHigh) {
        return false;
    }
    tx_waiting_ = true;
    ++counters.tx_waits;
    HCA_TRACE(*this, port_tx_blocked, .backlog = backlog);
    return true;
}

// The host wrote (or forgot) queued bytes: the send queues may go on.
void Device::port_tx_done() {
    if (tx_waiting_ && !link_tx_full() && qps.sq().has_work()) {
        schedule();
    }
}

size_t Device::port_rx_room() {
    if (rx_bytes_ < kRxHigh) {
        return kRxHigh - rx_bytes_;
    }
    if (!rx_refused_) {
        rx_refused_ = true;
        ++counters.rx_waits;
        HCA_TRACE(*this, port_rx_blocked, .waiting = rx_bytes_);
    }
    return 0;
}

void Device::rx_push(Packet &&pkt) {
    rx_bytes_ += pkt.bytes.size();
    rx_.push_back(std::move(pkt));
}

Packet Device::new_packet() {
    Packet pkt;
    if (!packet_pool_.empty()) {
        pkt.bytes = std::move(packet_pool_.back());
        packet_pool_.pop_back();
    }
    return pkt;
}

void Device::recycle(Packet &&pkt) {
    // An IB packet is at most LRH + GRH + BTH + extensions + 4 KiB + CRCs;
    // a larger buffer (a bad frame from the link) is not kept.
    // The bytes stay as they are: whoever takes the buffer sizes and fills
    // it whole (build_into, assign), and keeping the size spares resize()
    // zeroing what is about to be overwritten.
    if (packet_pool_.size() < kPacketPool && pkt.bytes.capacity() <= 8192) {
        packet_pool_.push_back(std::move(pkt.bytes));
    }
}

void Device::transmit(Packet &&pkt, uint32_t src_qpn, int32_t wqe_index) {
    pkt.id = next_packet_id_++;
    ++run_packets_;
    run_bytes_ += pkt.bytes.size();
    Port &p = port1;
    const auto *lrh = reinterpret_cast<const iba::Lrh *>(pkt.bytes.data());
    const uint16_t dlid = lrh->dlid.get();
    const uint8_t vl = lrh->vl_lver >> 4;
    if (tracer_.on(kTrPkt)) {
        iba::PacketView v;
        if (iba::parse(pkt.bytes, v, false) == iba::ParseError::None) {
            HCA_TRACE(*this, pkt_send, .id = pkt.id, .qpn = src_qpn, .op = iba::opcode_name(v.opcode()),
                      .slid = v.slid(), .dlid = dlid, .dqpn = v.dqpn(), .psn = v.psn(), .vl = vl,
                      .len = pkt.bytes.size(), .wqe = trace_opt(wqe_index >= 0, wqe_index),
                      .dgid = trace_opt(v.grh ? &v.grh->dgid : nullptr));
        }
    }
    // IBA 7.2: only SMPs (VL15) leave a port that is not Active.
    if (!p.link_up() || (vl != 15 && !p.active())) {
        ++p.counters().xmit_discards;
        ++counters.packets_dropped;
        HCA_TRACE(*this, pkt_drop, .id = pkt.id, .reason = p.link_up() ? "port not active" : "link down");
        return;
    }
    ++p.counters().xmit_pkts;
    p.counters().xmit_data += pkt.bytes.size() - 2;
    ++counters.packets_tx;
    const bool multicast = dlid >= iba::kMulticastLidBase && dlid != iba::kPermissiveLid;
    if (multicast) {
        ++p.counters().multicast_xmit;
    } else {
        ++p.counters().unicast_xmit;
    }
    const bool local = !multicast && dlid != iba::kPermissiveLid && p.owns_lid(dlid);
    const Qp *src = multicast ? qps.find(src_qpn) : nullptr;
    if (src && src->block_lb_mc) {
        HCA_TRACE(*this, pkt_mcast_no_loopback, .id = pkt.id, .qpn = src_qpn);
    } else if (multicast || local) {
        // The HCA loops packets for its own LID and its multicast groups back
        // to the receive side itself.
        ++counters.packets_looped;
        rx_push(local ? std::move(pkt) : Packet(pkt));
        rx_.back().no_crcs = true;
        if (local) {
            return;
        }
    }
    if (!cfg_.fabric) {
        HCA_TRACE(*this, pkt_drop, .id = pkt.id, .dlid = dlid, .reason = "dlid is not local and there is no fabric");
        return;
    }
    // Packets are built without CRCs; only the link may want them
    // (DeviceConfig::link_crcs; looped-back packets never do).
    if (cfg_.link_crcs) {
        iba::fill_crcs(pkt.bytes);
    }
    uint8_t header[iba::link::kHeader];
    iba::link::put_header(header, iba::link::kPacket, cfg_.link_crcs ? 0 : iba::link::kNoCrcs, pkt.id);
    host_.port_tx(p.num(), header, pkt.bytes);
    recycle(std::move(pkt));
}

void Device::port_rx(unsigned port, const uint8_t *frame, size_t len) {
    iba::link::FrameView f;
    if (fatal_ || port != 1 || !iba::link::parse({frame, len}, f)) {
        return;
    }
    switch (f.type) {
    case iba::link::kPacket: {
        Packet pkt = new_packet();
        pkt.id = f.packet_id;
        pkt.no_crcs = (f.flags & iba::link::kNoCrcs) != 0;
        pkt.bytes.assign(f.body.begin(), f.body.end());
        rx_push(std::move(pkt));
        schedule();
        return;
    }
    case iba::link::kLinkState:
        if (!f.body.empty()) {
            port_link(port, f.body[0] != 0);
        }
        return;
    default:
        return;
    }
}

iba::link::Hello Device::hello(unsigned port) const {
    return {.node_guid = node_guid_, .port_guid = port1.port_guid(), .port_num = static_cast<uint8_t>(port)};
}

void Device::port_link(unsigned port, bool up) {
    if (port == 1 && !fatal_) {
        port1.set_link(up);
        tracer_.flush();
    }
}

void Device::receive(Packet &pkt) {
    Port &p = port1;
    ++run_packets_;
    run_bytes_ += pkt.bytes.size();
    iba::PacketView v;
    const iba::ParseError e = iba::parse(pkt.bytes, v, !pkt.no_crcs);
    if (e != iba::ParseError::None) {
        ++p.counters().rcv_errors;
        ++counters.packets_dropped;
        HCA_TRACE(*this, pkt_drop, .id = pkt.id, .len = pkt.bytes.size(), .reason = iba::parse_error_name(e));
        return;
    }
    ++counters.packets_rx;
    const uint16_t dlid = v.dlid();
    const bool multicast = dlid >= iba::kMulticastLidBase && dlid != iba::kPermissiveLid;
    HCA_TRACE(*this, pkt_recv, .id = pkt.id, .op = iba::opcode_name(v.opcode()), .slid = v.slid(), .dlid = dlid,
              .dqpn = v.dqpn(), .psn = v.psn(), .vl = v.vl(), .len = pkt.bytes.size());
    if (!p.link_up() || (v.vl() != 15 && !p.active())) {
        ++counters.packets_dropped;
        HCA_TRACE(*this, pkt_drop, .id = pkt.id, .reason = "port not active");
        return;
    }
    if (!multicast && dlid != iba::kPermissiveLid && !p.owns_lid(dlid)) {
        ++p.counters().rcv_errors;
        HCA_TRACE(*this, pkt_drop, .id = pkt.id, .dlid = dlid, .lid = p.lid(), .reason = "dlid is not this port's LID");
        return;
    }
    if (v.vl() == 15 && v.dqpn() != 0) {
        ++p.counters().vl15_dropped;
        return;
    }
    ++p.counters().rcv_pkts;
    p.counters().rcv_data += pkt.bytes.size() - 2;
    if (multicast) {
        ++p.counters().multicast_rcv;
    } else {
        ++p.counters().unicast_rcv;
    }
    qps.receiver().receive(pkt, v);
}

void Device::uar_doorbell(uint32_t uar, uint32_t off, const uint8_t *data, unsigned size) {
    if (!uars.allocated(uar)) {
        guest_error("doorbell write to UAR {} +0x{:x} that is not allocated: ignored", uar, off);
        return;
    }
    HCA_TRACE(*this, uar_write, .uar = uar, .offset = off, .size = size, .data = std::span<const uint8_t>(data, size));
    if (off >= UarTable::kBfRegion) {
        qps.sq().doorbell(uar, off, data, size);
        return;
    }
    switch (off) {
    case UarTable::kCqDoorbell:
        if (size != 8) {
            guest_error("CQ doorbell uar={} of {} bytes (must be 8)", uar, size);
            return;
        }
        cqs.doorbell(uar, data);
        return;
    case UarTable::kEqArmDoorbell:
    case UarTable::kEqCiDoorbell:
        if (size != 4) {
            guest_error("EQ doorbell uar={} +0x{:x} of {} bytes (must be 4)", uar, off, size);
            return;
        }
        eqs.doorbell(uar, off == UarTable::kEqArmDoorbell, load_be32(data));
        return;
    default:
        guest_error("write to UAR {} at unknown offset 0x{:x} ({} bytes)", uar, off, size);
        return;
    }
}

std::string Device::info() {
    std::string s = fmt::format("mlx5-hca node_guid=0x{:016x} fw={}.{}.{} board_id={}\n", node_guid_, kFwMajor,
                                kFwMinor, kFwSubMinor, kBoardId);
    s += fw.info();
    s += fmt::format("UARs in use: {}, PDs: {}, XRCDs: {}, Q counter sets: {}\n", uars.in_use(), pds.pds(), pds.xrcds(),
                     qcounters.count());
    s += fmt::format("user contexts: {}\n", uctxs.count());
    s += umems.info();
    s += port1.info();
    s += eqs.info();
    s += cqs.info();
    s += qps.info();
    s += srqs.info();
    s += mkeys.info();
    s += fmt::format(
        "counters: commands={} command_errors={} eqes={} msix={} doorbells={} guest_errors={} packets_tx={} "
        "packets_rx={} packets_looped={} packets_dropped={} link_tx_waits={} link_rx_waits={} doorbell_stalls={}\n",
        counters.commands, counters.command_errors, counters.eqes, counters.msix, counters.doorbells,
        counters.guest_errors, counters.packets_tx, counters.packets_rx, counters.packets_looped,
        counters.packets_dropped, counters.tx_waits, counters.rx_waits, counters.doorbell_stalls);
    return s;
}

}  // namespace hca

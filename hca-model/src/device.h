// The HCA: BAR0 decoding, the deferred-work loop, timers, and the
// subsystems (initialization segment, command interface, firmware, UARs,
// EQs).  One instance per PCI function.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "datapath/odp.h"
#include "fault/faults.h"
#include "fifo.h"
#include "fw/cmdif.h"
#include "fw/firmware.h"
#include "fw/fw_limits.h"
#include "fw/iseg.h"
#include "fw/registers.h"
#include "hcasim/hca_model.h"
#include "host.h"
#include "iba/link.h"
#include "objects/counters.h"
#include "objects/cq.h"
#include "objects/devmem.h"
#include "objects/devx.h"
#include "objects/eq.h"
#include "objects/mkey.h"
#include "objects/pd.h"
#include "objects/psv.h"
#include "objects/qp.h"
#include "objects/srq.h"
#include "objects/uar.h"
#include "port/port.h"
#include "timers.h"
#include "trace/trace.h"
#include "trace_events.gen.h"

// One trace event of DEV (a Device): EV is <category>_<event> of
// hca-model/trace-events, the rest its fields, by name or in order:
//   HCA_TRACE(dev_, cqe_arm, .cqn = cqn, .ci = ci, ...)
// The category is tested first, so a disabled one costs a load and a branch
// and the fields (names looked up, hex dumps) are never evaluated.  The
// event is built in an out-of-line lambda: its fields stay out of the
// function that traces, which keeps that function as small as without them.
#define HCA_TRACE(dev, ev, ...)                                                \
    do {                                                                       \
        if ((dev).tracer().on(::hca::tev::ev::kCat)) [[unlikely]] {            \
            [&]() __attribute__((noinline, cold)) {                            \
                ::hca::tev::ev{__VA_ARGS__}.emit((dev).tracer(), (dev).now()); \
            }                                                                  \
            ();                                                                \
        }                                                                      \
    } while (0)

namespace hca {

struct DeviceConfig {
    uint64_t node_guid = 0;
    std::string trace_path;
    std::string trace_filter = "all";
    uint64_t trace_max_bytes = 0;
    bool fabric = false;  // the port's link follows a fabric connection
    // Compute the ICRC and VCRC of every packet sent to the link. Off, the
    // packets go out without them, flagged (iba::link::kNoCrcs), and the
    // fabric adds them where they matter (captures, corrupting faults).
    bool link_crcs = false;
    // A deliberate device bug, only for checking that the test runner
    // notices one: "cqe-opcode" (requester CQEs say RESP_SEND, not REQ).
    std::string test_fault;
    // Faults to arm at power-on, ';'-separated (fault/faults.h syntax).
    std::string faults;
};

struct ConfigError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Firmware identity (iseg fw_rev, ibv_devinfo fw_ver, devlink).
inline constexpr uint16_t kFwMajor = 16;
inline constexpr uint16_t kFwMinor = 35;
inline constexpr uint16_t kFwSubMinor = 2000;
inline constexpr const char *kBoardId = "MT_0000000010";  // QUERY_ADAPTER PSID

class Device {
  public:
    Device(Host &host, const DeviceConfig &cfg);
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;

    void reset();
    // Destroys every object the driver created (QPs, SRQs, CQs, memory keys,
    // PDs, XRCDs, EQs, UARs), every timer, the doorbells and packets
    // queued for them and the packets queued for the link, as the firmware
    // does on TEARDOWN_HCA, DISABLE_HCA and a function or firmware reset:
    // nothing dropped touches guest memory or the link again.
    void drop_objects();
    void mmio_read(uint64_t offset, uint8_t *data, unsigned size);
    void mmio_write(uint64_t offset, const uint8_t *data, unsigned size);
    // Deferred work: command doorbells, UAR doorbells, send queues and
    // received packets. One call does a bounded amount of work and asks to
    // be run again while some is left.
    void run();
    void on_timer();
    std::string info();
    bool set_trace_filter(std::string_view filter);
    // An internal model error (an exception caught at the C entry points):
    // the device dies the way firmware does (health syndrome, DMA, MSI-X,
    // doorbells and commands stop) until the next reset.
    void enter_fatal(std::string_view reason) noexcept;
    // The same death with a chosen health syndrome (a fault, fault/faults.h).
    void fail_firmware(uint8_t synd, std::string_view reason) noexcept;
    bool fatal() const { return fatal_; }
    // A surprise removal (fault pci-gone): the function is off the bus,
    // everything stops as in fail_firmware() and MMIO reads return all
    // ones; after back_ns (never if negative) the next MMIO access finds a
    // new function in the slot, in its power-on state (a reset).
    void leave_bus(int64_t back_ns) noexcept;
    // leave_bus() in effect? Asking once its time is up finds the new
    // function, as an MMIO access or a configuration read does.
    bool off_bus();

    // The port's link to the fabric (frames of iba/link.h).
    void port_rx(unsigned port, const uint8_t *frame, size_t len);
    void port_link(unsigned port, bool up);
    // What the port says first on a new connection to the fabric.
    iba::link::Hello hello(unsigned port) const;
    // A packet leaving a QP: local loopback, multicast copy, or the wire.
    void transmit(Packet &&pkt, uint32_t src_qpn, int32_t wqe_index = -1);
    // A packet whose buffer is a used one when there is one (no heap
    // allocation per packet once warm): its bytes are stale, the caller
    // sizes and fills them whole (iba::build_into, assign). recycle()
    // takes the buffer back.
    Packet new_packet();
    void recycle(Packet &&pkt);
    Port &port(unsigned) { return port1; }

    // Services for the subsystems.
    int64_t now() { return host_.now_ns(); }
    bool dma_read(uint64_t addr, void *buf, size_t len);
    bool dma_write(uint64_t addr, const void *buf, size_t len);
    // Memory behind a memory key: guest memory, or device memory for an
    // address MkeyTable::translate() tagged (DevMem::tagged()).
    bool mem_read(uint64_t addr, void *buf, size_t len) {
        return DevMem::is_tagged(addr) ? !fatal_ && devmem.read(addr & ~DevMem::kTag, buf, len)
                                       : dma_read(addr, buf, len);
    }
    bool mem_write(uint64_t addr, const void *buf, size_t len) {
        return DevMem::is_tagged(addr) ? !fatal_ && devmem.write(addr & ~DevMem::kTag, buf, len)
                                       : dma_write(addr, buf, len);
    }
    void msix(unsigned vector);
    void schedule();
    // For work the end of a run() or on_timer() does anyway (flushing CQE
    // sessions): a bottom half only when it comes from outside them.
    void schedule_unless_running() {
        if (!running_) {
            schedule();
        }
    }
    Timers::Id add_timer(int64_t delay_ns, std::function<void()> fn);
    void cancel_timer(Timers::Id id);

    // The work one run() may do, so that one doorbell, one queue or a burst
    // from the wire cannot hold the host's main loop (QEMU: vCPUs, timers,
    // other devices) for long: packets sent and received, their bytes, and
    // send WQEs executed. What is left waits for the next run().
    static constexpr uint32_t kRunPackets = 256;
    static constexpr uint64_t kRunBytes = uint64_t{1} << 20;
    static constexpr uint32_t kRunWqes = 256;
    // The link's flow control, as credits keep a real link lossless: the
    // send queues wait while the host holds more than kTxHigh bytes for the
    // link and run again below kTxLow (port_tx_done); received bytes are
    // refused above kRxHigh waiting (port_rx_room) until they are below
    // kRxLow (Host::port_rx_resume).  Responses and acknowledgements are
    // never held back, so two ports sending to each other cannot deadlock.
    static constexpr size_t kTxHigh = size_t{1} << 20;
    static constexpr size_t kTxLow = size_t{256} << 10;
    static constexpr size_t kRxHigh = size_t{1} << 20;
    static constexpr size_t kRxLow = size_t{512} << 10;
    size_t port_rx_room();
    void port_tx_done();
    bool budget_left() const {
        return run_packets_ < kRunPackets && run_bytes_ < kRunBytes && run_wqes_ < kRunWqes;
    }
    void charge_wqe() { ++run_wqes_; }

    // A guest mistake the device detected: a "guest_err error" event whose
    // reason is the message, and QEMU's LOG_GUEST_ERROR when the host asks.
    // Rate limited so a hostile guest cannot flood the trace.
    template <typename... Args>
    void guest_error(fmt::format_string<Args...> f, Args &&...args) {
        ++counters.guest_errors;
        const bool traced = tracer_.on(kTrGuestErr);
        if ((!traced && !host_logs_errors_) || !guest_error_budget()) [[likely]] {
            return;
        }
        const std::string msg = fmt::format(f, std::forward<Args>(args)...);
        if (traced) {
            tev::guest_err_error{.reason = msg}.emit(tracer_, now());
        }
        if (host_logs_errors_) {
            host_.guest_error(msg);
        }
    }
    Tracer &tracer() { return tracer_; }
    const DeviceConfig &config() const { return cfg_; }
    // --test-fault cqe-opcode, resolved once from the configuration.
    bool fault_cqe_opcode() const { return fault_cqe_opcode_; }
    uint64_t node_guid() const { return node_guid_; }

    struct Counters {
        uint64_t commands = 0;
        uint64_t command_errors = 0;
        uint64_t eqes = 0;
        uint64_t msix = 0;
        uint64_t doorbells = 0;
        uint64_t guest_errors = 0;
        uint64_t packets_tx = 0;
        uint64_t packets_rx = 0;
        uint64_t packets_looped = 0;
        uint64_t packets_dropped = 0;
        uint64_t tx_waits = 0;  // times the send queues waited for the link
        uint64_t rx_waits = 0;  // times received bytes were refused
        uint64_t doorbell_stalls = 0;  // MMIO writes that found kMaxDoorbells queued
    } counters;

  private:
    bool guest_error_budget();
    // Stops everything that moves (doorbells, received packets, timers)
    // until a reset, as dead firmware or a function off the bus does;
    // why() (if given) makes its trace line.
    void halt(const std::function<std::string()> &why) noexcept;
    void sync_timer();
    void uar_doorbell(uint32_t uar, uint32_t off, const uint8_t *data, unsigned size);

    Host &host_;
    const bool host_logs_errors_;  // Host::logs_guest_errors(), asked once
    DeviceConfig cfg_;
    uint64_t node_guid_;
    Tracer tracer_;
    Timers timers_;
    int64_t timer_armed_at_ = -1;
    int64_t guest_error_window_ = 0;
    uint32_t guest_errors_in_window_ = 0;
    bool scheduled_ = false;
    bool running_ = false;  // inside run() or on_timer()
    bool fatal_ = false;
    int64_t off_bus_until_ = -1;  // leave_bus(): -1 on the bus
    uint32_t run_packets_ = 0;
    uint64_t run_bytes_ = 0;
    uint32_t run_wqes_ = 0;

    struct Doorbell {
        uint32_t uar;
        uint16_t offset;
        uint8_t size;
        uint8_t data[8];
    };
    // At most kMaxDoorbells wait for run(); a guest that rings faster than
    // the main loop runs the device has the queue worked off in its MMIO
    // write, as a PCIe link out of posted-write credits would stall it.
    static constexpr size_t kMaxDoorbells = 4096;
    Fifo<Doorbell, 256> doorbells_;
    void ring_queued_doorbells();
    Fifo<Packet, 256> rx_;    // packets waiting for the receive side
    size_t rx_bytes_ = 0;     // their bytes
    bool rx_refused_ = false;  // port_rx_room() said 0 since the last resume
    bool tx_waiting_ = false;  // the send queues wait for the link
    bool link_tx_full();
    void rx_push(Packet &&pkt);
    // Buffers of finished packets (new_packet/recycle), at most
    // kPacketPool of them, each no larger than the largest packet.
    static constexpr size_t kPacketPool = 256;
    std::vector<std::vector<uint8_t>> packet_pool_;
    uint64_t next_packet_id_ = 1;
    bool fault_cqe_opcode_ = false;
    void receive(Packet &pkt);

  public:
    // Translation entries of all objects (fw_limits.h); before the tables
    // whose page lists and keys it counts.
    Budget budget{limits::kTranslationEntries};
    // Faults armed by the user; before the subsystems that test them.
    FaultTable faults{*this};
    // Subsystems, in dependency order.
    InitSeg iseg;
    Firmware fw;
    Registers regs;
    UarTable uars;
    EqTable eqs;
    UctxTable uctxs;
    UmemTable umems;
    PdTable pds;
    PsvTable psvs;
    DevMem devmem;
    QCounterTable qcounters;
    MkeyTable mkeys;
    CqTable cqs;
    SrqTable srqs;
    QpTable qps;
    PageFaults odp;  // on-demand paging: faults raised, waiting for PAGE_FAULT_RESUME
    Port port1;
    CommandInterface cmdif;
};

}  // namespace hca

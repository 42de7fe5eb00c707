// What the model needs from its host: guest memory, MSI-X, deferred work, a
// timer and a clock.  QEMU implements it over pci_dma_*/msix_notify/BHs, the
// test bench over a fake guest memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace hca {

class Host {
  public:
    virtual ~Host() = default;
    // False when any byte of the range is not guest memory.
    virtual bool dma_read(uint64_t addr, void *buf, size_t len) = 0;
    virtual bool dma_write(uint64_t addr, const void *buf, size_t len) = 0;
    virtual void msix_notify(unsigned vector) = 0;
    // Run Device::run() soon, off the caller's (vCPU) path.
    virtual void schedule() = 0;
    // Call Device::on_timer() at deadline_ns (replaces; negative cancels).
    virtual void timer_mod(int64_t deadline_ns) = 0;
    virtual int64_t now_ns() = 0;
    // One link frame for port's fabric stream: head followed by body (a
    // link header and the packet: the host copies them once, together).
    virtual void port_tx(unsigned port, std::span<const uint8_t> head, std::span<const uint8_t> body) = 0;
    // Forget every packet queued by port_tx and not yet sent: after a
    // reset or teardown nothing of the old function goes out.
    virtual void port_tx_drop() = 0;
    // Bytes of port's stream queued and not yet written: the link's flow
    // control (Device::kTxHigh).  A host that writes at once has none.
    virtual size_t port_tx_backlog(unsigned) const { return 0; }
    // The model refused received bytes (Device::port_rx_room() was 0) and
    // has room again: the host may read its link again.
    virtual void port_rx_resume(unsigned) {}
    // Whether the host logs guest errors itself (Device::guest_error then
    // formats each one for guest_error(), within its rate budget).
    virtual bool logs_guest_errors() const { return false; }
    virtual void guest_error(const std::string &) {}
};

}  // namespace hca

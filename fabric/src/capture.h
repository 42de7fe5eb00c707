// Packet capture of everything that enters the switch: one pcapng record
// per ingress packet (forwarded or dropped), readable by Wireshark/tshark
// 4.0.  Link type LINKTYPE_ERF (197); each packet is an ERF record of type
// 21 (INFINIBAND): a 16-byte ERF header (little-endian 64-bit timestamp,
// type, flags, then big-endian rlen, lctr, wlen) followed by the packet
// from LRH to VCRC.  An opt_comment "id=0x<packet id> port=<ingress port>
// <verdict>" ties each record to the devices' traces, which print the same
// id in the same hex form (pkt send/recv id=0x...).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fabric {

class Capture {
  public:
    virtual ~Capture() = default;
    virtual void record(uint64_t packet_id, uint8_t port, std::span<const uint8_t> packet,
                        std::string_view verdict) = 0;
};

class PcapngWriter : public Capture {
  public:
    static constexpr uint16_t kLinktypeErf = 197;
    static constexpr uint8_t kErfTypeInfiniband = 21;

    // Throws std::runtime_error if the file cannot be created.
    PcapngWriter(const std::string &path, uint64_t max_bytes);
    ~PcapngWriter() override;
    void record(uint64_t packet_id, uint8_t port, std::span<const uint8_t> packet,
                std::string_view verdict) override;
    void flush();

    uint64_t records() const { return records_; }
    uint64_t bytes() const { return bytes_; }
    // True once the size limit stopped the capture.
    bool full() const { return full_; }
    // Replaces the wall clock (nanoseconds since the epoch), for tests.
    void set_clock(std::function<uint64_t()> ns) { clock_ = std::move(ns); }
    // Called once when the limit is reached.
    void on_full(std::function<void()> fn) { on_full_ = std::move(fn); }

  private:
    bool write_block(const std::vector<uint8_t> &b);
    FILE *f_ = nullptr;
    uint64_t max_bytes_;
    uint64_t bytes_ = 0;
    uint64_t records_ = 0;
    bool full_ = false;
    std::function<uint64_t()> clock_;
    std::function<void()> on_full_;
    std::vector<uint8_t> buf_;
};

// Keeps records in memory (tests, fuzzing).
class MemoryCapture : public Capture {
  public:
    struct Record {
        uint64_t id;
        uint8_t port;
        std::vector<uint8_t> packet;
        std::string verdict;
    };
    void record(uint64_t packet_id, uint8_t port, std::span<const uint8_t> packet,
                std::string_view verdict) override {
        if (records.size() < limit) {
            records.push_back({packet_id, port, {packet.begin(), packet.end()}, std::string(verdict)});
        }
    }
    std::vector<Record> records;
    size_t limit = 100000;
};

}  // namespace fabric

// The management network: a learning Ethernet switch for the VMs'
// virtio-net devices (QEMU -netdev stream over a unix socket).  Nothing of
// it leaves the host: the only endpoints are the VMs.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "asio.h"

#include "framed.h"
#include "log.h"

namespace fabric {

class EthHub {
  public:
    static constexpr size_t kMaxMacs = 4096;
    static constexpr size_t kMaxConns = 256;

    EthHub(boost::asio::io_context &io, const std::string &socket_path, Log *log = nullptr);
    size_t ports() const { return conns_.size(); }
    size_t macs() const { return macs_.size(); }
    struct Stats {
        uint64_t frames = 0;
        uint64_t flooded = 0;
        uint64_t bytes = 0;
        uint64_t macs_refused = 0;
        uint64_t conns_refused = 0;
    };
    const Stats &stats() const { return stats_; }

  private:
    using Mac = std::array<uint8_t, 6>;
    void accept();
    void on_frame(FramedConn &from, Frame f);
    void on_close(FramedConn &c);
    void learn(const Mac &src, uint64_t conn);

    boost::asio::local::stream_protocol::acceptor acceptor_;
    std::map<uint64_t, std::shared_ptr<FramedConn>> conns_;
    std::map<Mac, uint64_t> macs_;
    Stats stats_;
    Log *log_;
};

}  // namespace fabric

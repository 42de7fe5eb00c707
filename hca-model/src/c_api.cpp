// The C interface (hcasim/hca_model.h) over Device.  Every entry point is an
// exception barrier: nothing thrown inside the model reaches QEMU.  An
// exception is an internal model error, and the device dies of it the way
// firmware does (Device::enter_fatal: health syndrome, DMA and MSI-X stop)
// until the next reset; the driver notices through its health poll.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "device.h"
#include "hcasim/hca_model.h"

namespace {

class CHost final : public hca::Host {
  public:
    CHost(const HcaHostOps &ops, void *opaque) : ops_(ops), opaque_(opaque) {}
    bool dma_read(uint64_t addr, void *buf, size_t len) override { return ops_.dma_read(opaque_, addr, buf, len); }
    bool dma_write(uint64_t addr, const void *buf, size_t len) override {
        return ops_.dma_write(opaque_, addr, buf, len);
    }
    void msix_notify(unsigned vector) override { ops_.msix_notify(opaque_, vector); }
    void schedule() override { ops_.schedule(opaque_); }
    void timer_mod(int64_t deadline_ns) override { ops_.timer_mod(opaque_, deadline_ns); }
    int64_t now_ns() override { return ops_.clock_ns(opaque_); }
    // The model's frames become bytes of the port's stream here; the host
    // only carries them (hca_model_port_tx_peek/done).
    void port_tx(unsigned port, std::span<const uint8_t> head, std::span<const uint8_t> body) override {
        if (!ops_.port_tx_ready || port != 1 || !connected) {
            return;
        }
        if (writer.push(head, body)) {
            ops_.port_tx_ready(opaque_, port);
        }
    }
    void port_tx_drop() override { writer.drop_packets(); }
    size_t port_tx_backlog(unsigned) const override { return writer.pending().size(); }
    void port_rx_resume(unsigned port) override {
        if (ops_.port_rx_ready) {
            ops_.port_rx_ready(opaque_, port);
        }
    }
    bool logs_guest_errors() const override { return ops_.guest_error != nullptr; }
    void guest_error(const std::string &msg) override { ops_.guest_error(opaque_, msg.c_str()); }

    // Port 1's stream to the fabric (iba/link.h).
    bool connected = false;
    iba::link::StreamReader reader;
    iba::link::StreamWriter writer;

  private:
    HcaHostOps ops_;
    void *opaque_;
};

}  // namespace

struct HcaModel {
    CHost host;
    hca::Device dev;
    HcaModel(const HcaHostOps &ops, void *opaque, const hca::DeviceConfig &cfg) : host(ops, opaque), dev(host, cfg) {}
};

namespace {

void die(HcaModel *m, const char *entry, const char *what) noexcept {
    try {
        m->dev.enter_fatal(std::string(entry) + ": " + what);
    } catch (...) {
        m->dev.enter_fatal(entry);
    }
}

// Runs f; an exception of any kind makes the device enter the fatal state.
template <typename F>
bool guarded(HcaModel *m, const char *entry, F &&f) noexcept {
    try {
        f();
        return true;
    } catch (const std::exception &e) {
        die(m, entry, e.what());
    } catch (...) {
        die(m, entry, "unknown exception");
    }
    return false;
}

}  // namespace

extern "C" {

HcaModel *hca_model_new(const HcaHostOps *ops, void *opaque, const HcaModelConfig *cfg, char *err, size_t errlen) {
    try {
        hca::DeviceConfig c;
        if (cfg) {
            c.node_guid = cfg->node_guid;
            c.trace_path = cfg->trace_path ? cfg->trace_path : "";
            if (cfg->trace_filter && *cfg->trace_filter) {
                c.trace_filter = cfg->trace_filter;
            }
            c.trace_max_bytes = cfg->trace_max_bytes;
            c.fabric = cfg->fabric;
            c.test_fault = cfg->test_fault ? cfg->test_fault : "";
            c.faults = cfg->faults ? cfg->faults : "";
        }
        return new HcaModel(*ops, opaque, c);
    } catch (const std::exception &e) {
        if (err && errlen) {
            std::snprintf(err, errlen, "%s", e.what());
        }
    } catch (...) {
        if (err && errlen) {
            std::snprintf(err, errlen, "internal error");
        }
    }
    return nullptr;
}

void hca_model_free(HcaModel *m) {
    try {
        delete m;
    } catch (...) {
        // Destructors do not throw; nothing is left to stop.
    }
}

void hca_model_reset(HcaModel *m) {
    guarded(m, "reset", [&] {
        m->dev.reset();
    });
}

void hca_model_mmio_read(HcaModel *m, uint64_t offset, void *data, unsigned size) {
    if (!guarded(m, "mmio_read", [&] { m->dev.mmio_read(offset, static_cast<uint8_t *>(data), size); })) {
        std::memset(data, 0, size);
    }
}

void hca_model_mmio_write(HcaModel *m, uint64_t offset, const void *data, unsigned size) {
    guarded(m, "mmio_write", [&] { m->dev.mmio_write(offset, static_cast<const uint8_t *>(data), size); });
}

bool hca_model_on_bus(HcaModel *m) {
    bool on = true;
    guarded(m, "on_bus", [&] { on = !m->dev.off_bus(); });
    return on;
}

void hca_model_run(HcaModel *m) {
    guarded(m, "run", [&] { m->dev.run(); });
}

void hca_model_port_connected(HcaModel *m, unsigned port) {
    guarded(m, "port_connected", [&] {
        if (port != 1) {
            return;
        }
        CHost &h = m->host;
        h.connected = true;
        h.reader.clear();
        h.writer.clear();
        m->dev.port_tx_done();
        const iba::link::Hello hello = m->dev.hello(port);
        HCA_TRACE(m->dev, port_fabric_connected, .node_guid = hello.node_guid, .port_guid = hello.port_guid,
                  .port = hello.port_num);
        // The link comes up when the fabric says so (a link-state frame).
        h.port_tx(port, iba::link::hello_frame(hello), {});
    });
}

bool hca_model_port_rx(HcaModel *m, unsigned port, const void *bytes, size_t len) {
    bool ok = false;
    guarded(m, "port_rx", [&] {
        CHost &h = m->host;
        if (port != 1 || !h.connected) {
            return;
        }
        ok = h.reader.feed({static_cast<const uint8_t *>(bytes), len}, [&](std::span<const uint8_t> frame) {
            m->dev.port_rx(port, frame.data(), frame.size());
        });
        if (!ok) {
            HCA_TRACE(m->dev, port_fabric_bad_frame, .length = h.reader.bad_length(),
                      .reason = "the frame length breaks the stream; closing it");
        }
    });
    return ok;
}

size_t hca_model_port_tx_peek(HcaModel *m, unsigned port, const void **bytes) {
    const std::span<const uint8_t> p = m->host.writer.pending();
    *bytes = p.data();
    return port == 1 ? p.size() : 0;
}

void hca_model_port_tx_done(HcaModel *m, unsigned port, size_t n) {
    if (port == 1) {
        m->host.writer.consumed(n);
        guarded(m, "port_tx_done", [&] { m->dev.port_tx_done(); });
    }
}

size_t hca_model_port_rx_room(HcaModel *m, unsigned port) {
    size_t room = 0;
    guarded(m, "port_rx_room", [&] { room = port == 1 ? m->dev.port_rx_room() : 0; });
    return room;
}

void hca_model_port_link(HcaModel *m, unsigned port, bool up) {
    guarded(m, "port_link", [&] {
        if (!up && port == 1 && m->host.connected) {
            m->host.connected = false;
            m->host.writer.clear();
            m->host.reader.clear();
            HCA_TRACE(m->dev, port_fabric_lost);
            m->dev.port_tx_done();
        }
        m->dev.port_link(port, up);
    });
}

void hca_model_timer(HcaModel *m) {
    guarded(m, "timer", [&] { m->dev.on_timer(); });
}

bool hca_model_set_trace_filter(HcaModel *m, const char *filter) {
    bool ok = false;
    guarded(m, "set_trace_filter", [&] { ok = m->dev.set_trace_filter(filter ? filter : ""); });
    return ok;
}

char *hca_model_fault(HcaModel *m, const char *command) {
    char *out = nullptr;
    guarded(m, "fault", [&] {
        const std::string s = m->dev.faults.command(command ? command : "");
        out = strdup(s.c_str());
    });
    return out ? out : strdup("error internal error while handling the fault command\n");
}

char *hca_model_info(HcaModel *m) {
    char *out = nullptr;
    guarded(m, "info", [&] {
        const std::string s = m->dev.info();
        out = static_cast<char *>(std::malloc(s.size() + 1));
        if (out) {
            std::memcpy(out, s.c_str(), s.size() + 1);
        }
    });
    return out ? out : strdup("mlx5-hca: internal error while dumping the device state\n");
}

}  // extern "C"

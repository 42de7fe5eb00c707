#include "fw/cmdif.h"

#include <algorithm>
#include <cstring>

#include "be.h"
#include "device.h"

namespace hca {

void CommandInterface::reset() { pending_ = 0; }

void CommandInterface::ring(uint32_t bits) {
    HCA_TRACE(dev_, cmd_doorbell, .bits = bits);
    pending_ |= bits;
    dev_.schedule();
}

void CommandInterface::process() {
    if (dev_.iseg.nic_interface() != InitSeg::kNicFullDriver) {
        if (pending_) {
            dev_.guest_error("command doorbell 0x{:08x} while nic_interface={}: ignored", pending_,
                             dev_.iseg.nic_interface());
        }
        pending_ = 0;
        return;
    }
    uint32_t signal = 0;
    while (pending_) {
        const unsigned slot = static_cast<unsigned>(__builtin_ctz(pending_));
        pending_ &= pending_ - 1;
        if (execute(slot)) {
            signal |= 1u << slot;
        }
    }
    // Several completions may share one EQE (eq.c mlx5_cmd_comp_handler()).
    if (signal) {
        dev_.eqs.post_cmd_completion(signal);
    }
}

// Mailboxes are followed block by block; only as many blocks as the length
// needs are read, since the driver's message cache may chain more.
Delivery CommandInterface::gather(uint64_t ptr, uint8_t token, std::vector<uint8_t> &in, uint32_t inlen) {
    uint8_t block[kBlockSize];
    uint32_t done = 16;
    for (uint32_t n = 0; done < inlen; ++n) {
        if (ptr & 7) {
            return Delivery::InputPointerNotAligned;
        }
        if (!dev_.dma_read(ptr, block, sizeof(block))) {
            return Delivery::BadBlockNumber;
        }
        if (load_be32(block + kBlockNum) != n) {
            return Delivery::BadBlockNumber;
        }
        if (block[kBlockToken] != token) {
            return Delivery::TokenErr;
        }
        const uint32_t len = std::min<uint32_t>(kBlockData, inlen - done);
        std::memcpy(in.data() + done, block, len);
        done += len;
        ptr = load_be64(block + kBlockNext);
    }
    return Delivery::Ok;
}

Delivery CommandInterface::scatter(uint64_t ptr, uint8_t token, const std::vector<uint8_t> &out) {
    uint8_t hdr[kBlockSize - kBlockData];
    const uint32_t outlen = static_cast<uint32_t>(out.size());
    uint32_t done = 16;
    for (uint32_t n = 0; done < outlen; ++n) {
        if (ptr & 7) {
            return Delivery::OutputPointerNotAligned;
        }
        if (!dev_.dma_read(ptr + kBlockData, hdr, sizeof(hdr))) {
            return Delivery::BadBlockNumber;
        }
        if (load_be32(hdr + (kBlockNum - kBlockData)) != n) {
            return Delivery::BadBlockNumber;
        }
        if (hdr[kBlockToken - kBlockData] != token) {
            return Delivery::TokenErr;
        }
        const uint32_t len = std::min<uint32_t>(kBlockData, outlen - done);
        if (!dev_.dma_write(ptr, out.data() + done, len)) {
            return Delivery::BadBlockNumber;
        }
        done += len;
        ptr = load_be64(hdr + (kBlockNext - kBlockData));
    }
    return Delivery::Ok;
}

// The delivery status of a command whose layout says this (PRM "Command
// Queue": the type must be PCIe, the lengths within the mailboxes' reach).
Delivery CommandInterface::descriptor_status(uint8_t type, uint32_t inlen, uint32_t outlen) {
    if (type != kPciCmdXport) {
        return Delivery::BadCommandDescriptor;
    }
    if (inlen < 8 || inlen > kMaxMsg) {
        return Delivery::InputLenErr;
    }
    if (outlen < 8 || outlen > kMaxMsg) {
        return Delivery::OutputLenErr;
    }
    return Delivery::Ok;
}

void CommandInterface::report_status(const CmdCtx &ctx) {
    dev_.guest_error("cmd slot={} {}(0x{:x}) op_mod=0x{:x}: {} status={}(0x{:x}) syndrome=0x{:08x}", ctx.slot,
                     opcode_name(ctx.opcode), ctx.opcode, ctx.op_mod, ctx.error, status_name(ctx.status),
                     static_cast<unsigned>(ctx.status), ctx.syndrome);
}

bool CommandInterface::execute(unsigned slot) {
    const uint64_t base = dev_.iseg.cmdq_addr();
    const uint64_t lay_addr = base + slot * kSlotSize;
    uint8_t lay[kSlotSize];
    if (!dev_.dma_read(lay_addr, lay, sizeof(lay))) {
        dev_.guest_error("cmd slot={} layout at 0x{:x} is not guest memory", slot, lay_addr);
        return false;
    }
    if (!(lay[kLayStatusOwn] & 1)) {
        dev_.guest_error("cmd slot={} rung but owned by software (status_own=0x{:02x})", slot,
                         lay[kLayStatusOwn]);
        return false;
    }
    const int64_t t0 = dev_.now();
    const uint32_t inlen = load_be32(lay + kLayInlen);
    const uint32_t outlen = load_be32(lay + kLayOutlen);
    const uint8_t token = lay[kLayToken];
    Delivery deliv = descriptor_status(lay[kLayType], inlen, outlen);

    std::vector<uint8_t> in;
    std::vector<uint8_t> out;
    Verdict fault;
    CmdCtx ctx{.in = {}, .out = out};
    ctx.slot = slot;
    if (deliv == Delivery::Ok) {
        in.assign(std::max<uint32_t>(inlen, 16), 0);
        std::memcpy(in.data(), lay + kLayIn, 16);
        deliv = gather(load_be64(lay + kLayInPtr), token, in, inlen);
        in.resize(inlen);
    }
    if (deliv == Delivery::Ok) {
        out.assign(std::max<uint32_t>(outlen, 16), 0);
        ctx.in = in;
        ctx.opcode = static_cast<uint16_t>(ifc::get(in.data(), ifc::cmd_in_hdr::opcode));
        ctx.op_mod = static_cast<uint16_t>(ifc::get(in.data(), ifc::cmd_in_hdr::op_mod));
        fault = injected(slot, ctx, deliv);
        if (fault.what == Injected::Drop) {
            return false;  // the slot stays the device's: no ownership, no EQE
        }
        if (fault.what == Injected::None || fault.what == Injected::Delay) {
            dev_.fw.execute(ctx);
        }
        ++dev_.counters.commands;
        if (!ctx.ok()) {
            ++dev_.counters.command_errors;
            out.assign(out.size(), 0);
        }
        ifc::set(out.data(), ifc::cmd_out_hdr::status, static_cast<uint8_t>(ctx.status));
        ifc::set(out.data(), ifc::cmd_out_hdr::syndrome, ctx.syndrome);
        out.resize(std::max<uint32_t>(outlen, 16));
        if (deliv == Delivery::Ok) {
            deliv = scatter(load_be64(lay + kLayOutPtr), token, out);
        }
        if (deliv == Delivery::Ok) {
            dev_.dma_write(lay_addr + kLayOut, out.data(), 16);
        }
    }
    // Ownership back to software last, with the delivery status.
    const uint8_t status_own = static_cast<uint8_t>(static_cast<uint8_t>(deliv) << 1);
    if (fault.what == Injected::Delay) {
        complete_later(fault.delay_ns, slot, lay_addr, status_own, !ctx.suppress_eqe);
    } else {
        dev_.dma_write(lay_addr + kLayStatusOwn, &status_own, 1);
    }

    const int64_t took = dev_.now() - t0;
    // A failure the guest caused is a guest error; an injected one is not.
    if (deliv != Delivery::Ok && fault.what != Injected::Delivery) {
        dev_.guest_error("cmd slot={} delivery status {} (0x{:x}) inlen={} outlen={}", slot,
                         delivery_name(deliv), static_cast<unsigned>(deliv), inlen, outlen);
    } else if (!ctx.ok() && fault.what != Injected::Status) {
        report_status(ctx);
    }
    HCA_TRACE(dev_, cmd_done, .slot = slot, .opcode = TraceNamed{opcode_name(ctx.opcode), ctx.opcode},
              .op_mod = ctx.op_mod, .inlen = inlen, .outlen = outlen,
              .status = TraceNamed{status_name(ctx.status), ctx.status}, .syndrome = ctx.syndrome, .delivery = deliv,
              .ns = took);
    HCA_TRACE(dev_, cmd_data_in, .slot = slot, .bytes = in);
    HCA_TRACE(dev_, cmd_data_out, .slot = slot, .bytes = out);
    return fault.what != Injected::Delay && !ctx.suppress_eqe;
}

// A fault armed for this command (fault/faults.h): the status, delivery
// status, delay or silence the user asked for, decided once the opcode is
// known.
CommandInterface::Verdict CommandInterface::injected(unsigned slot, CmdCtx &ctx, Delivery &deliv) {
    FaultTable &faults = dev_.faults;
    const FaultSite site{.opcode = ctx.opcode};
    if (const Fault *f = faults.hit(FaultKind::CmdDrop, site)) {
        faults.fired(*f, fmt::format("slot={} opcode={}(0x{:x}) dropped: no completion", slot,
                                     opcode_name(ctx.opcode), ctx.opcode));
        return {Injected::Drop};
    }
    if (const Fault *f = faults.hit(FaultKind::CmdDelivery, site)) {
        deliv = static_cast<Delivery>(f->delivery);
        faults.fired(*f, fmt::format("slot={} opcode={}(0x{:x}) delivery={}(0x{:x})", slot,
                                     opcode_name(ctx.opcode), ctx.opcode, delivery_name(deliv), f->delivery));
        return {Injected::Delivery};
    }
    if (const Fault *f = faults.hit(FaultKind::CmdStatus, site)) {
        const auto status = static_cast<Status>(f->status);
        ctx.fail(status, "injected fault id={}", f->id);
        ctx.syndrome = f->syndrome;
        faults.fired(*f, fmt::format("slot={} opcode={}(0x{:x}) status={}(0x{:x}) syndrome=0x{:08x}", slot,
                                     opcode_name(ctx.opcode), ctx.opcode, status_name(status), f->status,
                                     f->syndrome));
        return {Injected::Status};
    }
    if (const Fault *f = faults.hit(FaultKind::CmdDelay, site)) {
        faults.fired(*f, fmt::format("slot={} opcode={}(0x{:x}) completes in {} ms", slot,
                                     opcode_name(ctx.opcode), ctx.opcode, f->ms));
        return {Injected::Delay, f->ms * 1'000'000};
    }
    return {};
}

// The completion of a delayed command: ownership back, then its EQE. A
// reset or teardown drops it with every other timer, so nothing is written
// after them.
void CommandInterface::complete_later(int64_t delay_ns, unsigned slot, uint64_t lay_addr, uint8_t status_own,
                                      bool eqe) {
    dev_.add_timer(delay_ns, [this, slot, lay_addr, status_own, eqe] {
        dev_.dma_write(lay_addr + kLayStatusOwn, &status_own, 1);
        HCA_TRACE(dev_, cmd_delayed_completion, .slot = slot, .delivery = status_own >> 1);
        if (eqe) {
            dev_.eqs.post_cmd_completion(1u << slot);
        }
    });
}

}  // namespace hca

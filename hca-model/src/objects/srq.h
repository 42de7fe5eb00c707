// Shared receive queues.  ISSI 1 (what the driver negotiates with this
// device): basic SRQs are RMPs (CREATE/DESTROY/QUERY/MODIFY_RMP) and XRC SRQs
// use CREATE/DESTROY/QUERY/ARM_XRC_SRQ.  ISSI 0's CREATE/DESTROY/QUERY_SRQ
// and ARM_RQ are accepted as well, and CREATE/DESTROY/QUERY_XRQ make the
// tag-matching XRQs of datapath/tm.h.  All are one object: a linked list
// of receive WQEs (16-byte next segment + scatter entries) fed through the
// doorbell record's WQE counter, with a limit event armed by lwm.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "datapath/tm.h"
#include "ifc/field.h"
#include "objects/devx.h"
#include "objects/ids.h"
#include "objects/pages.h"

namespace hca {

struct CmdCtx;
class Device;

struct Srq {
    enum class Kind : uint8_t { Srq, XrcSrq, Rmp, Xrq };
    uint32_t srqn = 0;
    Kind kind = Kind::Rmp;
    uint8_t log_size = 0;
    uint32_t stride = 0;  // bytes per WQE
    uint32_t pd = 0;
    uint32_t xrcd = 0;
    uint32_t cqn = 0;  // XRC SRQs and XRQs: their receive CQ
    uint32_t user_index = 0;
    uint16_t uid = 0;
    UmemPin pins[2];  // a DEVX RMP's doorbell and buffer UMEMs
    uint64_t dbr = 0;
    uint8_t log_page_size = 0;
    uint32_t page_offset = 0;
    PageList buf;
    uint16_t lwm = 0;        // limit; 0 = not armed
    uint16_t head = 0;       // next WQE to consume (follows next_wqe_index)
    uint16_t consumed = 0;   // WQEs consumed (compared with the doorbell counter)
    bool error = false;
    uint32_t refs = 0;       // QPs attached
    uint64_t received = 0;
    std::unique_ptr<TagList> tm;  // a tag-matching XRQ's matching list

    uint32_t nent() const { return 1u << log_size; }
};

const char *srq_kind_name(Srq::Kind k);

class SrqTable {
  public:
    explicit SrqTable(Device &dev) : dev_(dev) {}
    void reset();
    Srq *find(uint32_t srqn);
    size_t count() const { return srqs_.size(); }

    // Takes the next posted WQE; returns its index, or nullopt when the
    // driver has posted none (the doorbell counter equals what we consumed).
    std::optional<uint16_t> take(Srq &s);
    // Undoes the take() of WQE index just done.
    void give_back(Srq &s, uint16_t index);
    // Guest address of byte off of WQE index.
    uint64_t wqe_addr(const Srq &s, uint32_t index, uint32_t off = 0) const {
        return s.buf.addr(uint64_t{index & (s.nent() - 1)} * s.stride + off);
    }

    void cmd_create_rmp(CmdCtx &c);
    void cmd_destroy_rmp(CmdCtx &c);
    void cmd_query_rmp(CmdCtx &c);
    void cmd_modify_rmp(CmdCtx &c);
    void cmd_create_xrc_srq(CmdCtx &c);
    void cmd_destroy_xrc_srq(CmdCtx &c);
    void cmd_query_xrc_srq(CmdCtx &c);
    void cmd_arm_xrc_srq(CmdCtx &c);
    void cmd_create_srq(CmdCtx &c);
    void cmd_destroy_srq(CmdCtx &c);
    void cmd_query_srq(CmdCtx &c);
    void cmd_arm_rq(CmdCtx &c);
    void cmd_create_xrq(CmdCtx &c);
    void cmd_destroy_xrq(CmdCtx &c);
    void cmd_query_xrq(CmdCtx &c);
    std::string info() const;

  private:
    // wq: the RMP's wq context, whose UMEMs DEVX may name instead of pas.
    bool finish_create(CmdCtx &c, Srq &s, std::span<const uint8_t> pas, ifc::Field out_field,
                       std::optional<ifc::Block> wq = std::nullopt);
    void destroy(CmdCtx &c, uint32_t srqn, Srq::Kind kind);
    Srq *lookup(CmdCtx &c, uint32_t srqn, Srq::Kind kind);
    void arm(CmdCtx &c, uint32_t srqn, Srq::Kind kind, uint16_t lwm);

    Device &dev_;
    IdAllocator ids_{1, 1u << 24};
    std::map<uint32_t, Srq> srqs_;
};

}  // namespace hca

#!/usr/bin/env python3
"""Generate hca-model/src/ifc/mlx5_ifc.gen.h from the newest kernel's mlx5_ifc.h.

The PRM layouts are taken as facts from include/linux/mlx5/mlx5_ifc.h of the
newest kernel the device serves (Debian linux-source-7.2; the header only
grows: older drivers read the same offsets under the same or older names,
and the device sets what every driver of the matrix reads): every
`struct mlx5_ifc_X_bits` whose
name is listed in STRUCTS below becomes `struct X` with one constexpr Field
(bit offset, width) per member, named exactly as the driver names it.  Nested
structures and arrays become Blocks (offset, element width, count).  Nothing
but offsets and widths is emitted.

Usage: tools/gen-ifc.py KSRC > hca-model/src/ifc/mlx5_ifc.gen.h
       tools/gen-ifc.py --opcodes KSRC > hca-model/src/ifc/opcodes.gen.inc
(the second form lists every MLX5_CMD_OP_* as {value, "NAME"}, the names
core/cmd.c mlx5_command_str() prints)
"""
import os
import re
import sys

# Structures the model reads or writes.  Add a name here and regenerate.
STRUCTS = """
query_hca_cap_in query_hca_cap_out set_hca_cap_in set_hca_cap_out
cmd_hca_cap cmd_hca_cap_2 atomic_caps odp_cap odp_scheme_cap odp_per_transport_service_cap
page_fault_resume_in page_fault_resume_out trans_page_fault_info
query_special_contexts_in query_special_contexts_out
enable_hca_in enable_hca_out disable_hca_in disable_hca_out
query_issi_in query_issi_out set_issi_in set_issi_out
query_pages_in query_pages_out manage_pages_in manage_pages_out
init_hca_in init_hca_out teardown_hca_in teardown_hca_out
set_driver_version_in set_driver_version_out
query_adapter_in query_adapter_out query_adapter_param_block
access_register_in access_register_out
alloc_uar_in alloc_uar_out dealloc_uar_in dealloc_uar_out
create_eq_in create_eq_out destroy_eq_in destroy_eq_out query_eq_in query_eq_out eqc
nop_in nop_out
alloc_pd_in alloc_pd_out dealloc_pd_in dealloc_pd_out
alloc_xrcd_in alloc_xrcd_out dealloc_xrcd_in dealloc_xrcd_out
create_mkey_in create_mkey_out destroy_mkey_in destroy_mkey_out query_mkey_in query_mkey_out mkc
create_cq_in create_cq_out destroy_cq_in destroy_cq_out query_cq_in query_cq_out modify_cq_in modify_cq_out cqc
create_qp_in create_qp_out destroy_qp_in destroy_qp_out query_qp_in query_qp_out qpc ads
rst2init_qp_in init2rtr_qp_in rtr2rts_qp_in rts2rts_qp_in init2init_qp_in sqerr2rts_qp_in sqd2rts_qp_in
qp_2err_in qp_2err_out qp_2rst_in qp_2rst_out rst2init_qp_out init2rtr_qp_out rtr2rts_qp_out rts2rts_qp_out init2init_qp_out sqerr2rts_qp_out sqd2rts_qp_out
destroy_srq_out arm_rq_out query_xrc_srq_in destroy_xrc_srq_out arm_xrc_srq_out query_rmp_in query_srq_in
create_srq_in create_srq_out destroy_srq_in destroy_srq_out query_srq_in query_srq_out srqc arm_rq_in
create_xrc_srq_in create_xrc_srq_out destroy_xrc_srq_in query_xrc_srq_in query_xrc_srq_out xrc_srqc arm_xrc_srq_in
attach_to_mcg_in attach_to_mcg_out detach_from_mcg_in detach_from_mcg_out
mad_ifc_in mad_ifc_out
query_hca_vport_context_in query_hca_vport_context_out hca_vport_context
query_vport_state_in query_vport_state_out
pcap_reg ptys_reg pmtu_reg pvlc_reg paos_reg
mcam_reg mcam_access_reg mcam_enhanced_features mcqs_reg mcqi_reg mcqi_version mpein_reg mfrl_reg
create_rmp_in create_rmp_out destroy_rmp_in destroy_rmp_out query_rmp_in query_rmp_out modify_rmp_in modify_rmp_out rmpc wq rmp_bitmask
query_hca_vport_gid_in query_hca_vport_pkey_in
device_mem_cap alloc_memic_in alloc_memic_out dealloc_memic_in dealloc_memic_out
create_psv_in create_psv_out destroy_psv_in destroy_psv_out
alloc_q_counter_in alloc_q_counter_out dealloc_q_counter_in dealloc_q_counter_out query_q_counter_in query_q_counter_out
create_dct_in create_dct_out destroy_dct_in destroy_dct_out drain_dct_in drain_dct_out query_dct_in query_dct_out dctc arm_dct_in arm_dct_out
create_uctx_in create_uctx_out destroy_uctx_in destroy_uctx_out uctx create_umem_in create_umem_out destroy_umem_in destroy_umem_out umem
create_xrq_in create_xrq_out destroy_xrq_in destroy_xrq_out query_xrq_in query_xrq_out xrqc tag_matching_topology_context
create_sq_in create_sq_out modify_sq_in modify_sq_out destroy_sq_in destroy_sq_out query_sq_in query_sq_out sqc
""".split()

KEYWORDS = {"free", "register", "class", "private", "protected", "public", "delete",
            "new", "operator", "template", "this", "default", "signed", "unsigned",
            "int", "long", "short", "char", "union", "struct", "export", "static"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


CONSTANTS = {}


class Resolver(dict):
    """Looks names up in CONSTANTS, evaluating macro bodies on demand."""

    def __missing__(self, key):
        return evalnum(CONSTANTS[key])


def evalnum(expr):
    expr = expr.strip()
    return int(eval(expr, {"__builtins__": {}}, Resolver())) if expr else 0


defs = {}


def matching_brace(text, pos):
    depth = 1
    while depth:
        if text[pos] == "{":
            depth += 1
        elif text[pos] == "}":
            depth -= 1
        pos += 1
    return pos


def parse_body(body):
    members = []
    pos = 0
    inline_re = re.compile(r"\s*(union|struct)\s*\{", re.S)
    bits_re = re.compile(r"\s*u8\s+(\w+)\s*((?:\[[^\]]*\])+)\s*;", re.S)
    ref_re = re.compile(r"\s*(?:struct|union)\s+mlx5_ifc_(\w+?)(?:_bits)?\s+(\w+)\s*((?:\[[^\]]*\])*)\s*;", re.S)
    # Newer headers declare trailing arrays of unknown length with the
    # kernel's DECLARE_FLEX_ARRAY(type, name): no bits of their own.
    flex_re = re.compile(r"\s*DECLARE_FLEX_ARRAY\(\s*(?:(?:struct|union)\s+mlx5_ifc_(\w+?)(?:_bits)?|u8)\s*,"
                         r"\s*(\w+)\s*\)\s*;", re.S)
    while pos < len(body):
        m = inline_re.match(body, pos)
        if m:
            end = matching_brace(body, m.end())
            inner = body[m.end():end - 1]
            m2 = re.compile(r"\s*(\w*)\s*;", re.S).match(body, end)
            anon = "__anon_%d" % len(defs)
            defs[anon] = (m.group(1), parse_body(inner))
            members.append((m2.group(1) or anon, "ref", anon, 1))
            pos = m2.end()
            continue
        m = bits_re.match(body, pos)
        if m:
            dims = [evalnum(d) for d in re.findall(r"\[([^\]]*)\]", m.group(2))]
            if len(dims) == 1:
                members.append((m.group(1), "bits", dims[0], 1))
            else:
                members.append((m.group(1), "bits", dims[1], dims[0]))
            pos = m.end()
            continue
        m = flex_re.match(body, pos)
        if m:
            members.append((m.group(2), "ref", m.group(1), 0) if m.group(1) else (m.group(2), "bits", 8, 0))
            pos = m.end()
            continue
        m = ref_re.match(body, pos)
        if m:
            dims = [evalnum(d) for d in re.findall(r"\[([^\]]*)\]", m.group(3))]
            members.append((m.group(2), "ref", m.group(1), dims[0] if dims else 1))
            pos = m.end()
            continue
        if re.compile(r"\s*$", re.S).match(body, pos):
            break
        raise SystemExit("gen-ifc: cannot parse near: " + body[pos:pos + 80])
    return members


sizes = {}


def size(name):
    if name not in sizes:
        kind, members = defs[name]
        total = 0
        for (_, k, t, c) in members:
            s = (t if k == "bits" else size(t)) * c
            total = max(total, s) if kind == "union" else total + s
        sizes[name] = total
    return sizes[name]


def variable(name):
    """Whether a struct or union ends in an array of unknown length, itself or
    through a member (7.2's query_qp_out ends in a union of PAS arrays)."""
    return any(c == 0 or (k == "ref" and variable(t)) for (_, k, t, c) in defs[name][1])


def fixed(name):
    """Bits before the first member of unknown length: what a command's
    mailbox must hold whichever kernel's header sized it.  A 6.1 driver sizes
    QUERY_QP's outbox without 7.2's trailing union, and firmware accepts it."""
    kind, members = defs[name]
    if kind == "union":
        return min(fixed(t) if k == "ref" else t * c for (_, k, t, c) in members) if variable(name) else size(name)
    off = 0
    for (_, k, t, c) in members:
        if c == 0 or (k == "ref" and variable(t)):
            return off + (fixed(t) if k == "ref" and c else 0)
        off += (t if k == "bits" else size(t)) * c
    return off


def flatten(name, base, prefix, out):
    """Emit (name, kind, offset, elem_bits, count) for every member; anonymous
    structs/unions are flattened into their parent, named ones become Blocks."""
    kind, members = defs[name]
    off = 0
    for (mname, k, t, c) in members:
        o = base + (0 if kind == "union" else off)
        if k == "bits":
            sz = t * c
            if not mname.startswith("reserved_at_"):
                out.append((prefix + mname, "bits", o, t, c))
        else:
            sz = size(t) * c
            if mname.startswith("__anon"):
                flatten(t, o, prefix, out)
            else:
                out.append((prefix + mname, "block", o, size(t), c))
        if kind != "union":
            off += sz


def cname(name):
    return name + "_" if name in KEYWORDS else name


def opcodes(ksrc):
    src = open(ksrc + "/include/linux/mlx5/mlx5_ifc.h").read()
    print("// Generated by tools/gen-ifc.py --opcodes from include/linux/mlx5/mlx5_ifc.h.")
    seen = set()
    for m in re.finditer(r"^\s*MLX5_CMD_OP_(\w+)\s*=\s*(0x[0-9a-fA-F]+)", src, re.M):
        value = int(m.group(2), 16)
        if value in seen or m.group(1) == "MAX":
            continue
        seen.add(value)
        print('{0x%x, "%s"},' % (value, m.group(1)))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--opcodes":
        return opcodes(sys.argv[2])
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    src = "".join(strip_comments(open(sys.argv[1] + "/include/linux/mlx5/" + h).read())
                  for h in ("mlx5_ifc.h", "mlx5_ifc_fpga.h"))
    # Array sizes may name enum constants or macros of the same header.
    src = src.replace("\\\n", " ")
    for m in re.finditer(r"^\s*(MLX5_\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\b", src, re.M):
        CONSTANTS[m.group(1)] = m.group(2)
    for m in re.finditer(r"^#define\s+(MLX5_\w+)\s+(.+)$", src, re.M):
        CONSTANTS[m.group(1)] = m.group(2)
    for m in re.finditer(r"(struct|union)\s+mlx5_ifc_(\w+?)(?:_bits)?\s*\{", src):
        end = matching_brace(src, m.end())
        defs[m.group(2)] = (m.group(1), parse_body(src[m.end():end - 1]))
    print("// Generated by tools/gen-ifc.py from include/linux/mlx5/mlx5_ifc.h")
    print(f"// ({os.path.basename(os.path.normpath(sys.argv[1]))}). Do not edit; add names to STRUCTS and regenerate.")
    print("#pragma once")
    print('#include "ifc/field.h"')
    print("namespace hca::ifc {")
    for name in dict.fromkeys(STRUCTS):  # each once, in order
        if name not in defs:
            raise SystemExit("gen-ifc: no struct mlx5_ifc_%s_bits" % name)
        out = []
        flatten(name, 0, "", out)
        print("struct %s {" % cname(name))
        print("    static constexpr uint32_t size_bits = 0x%x;" % size(name))
        print("    static constexpr uint32_t size_bytes = 0x%x;" % (size(name) // 8))
        print("    static constexpr uint32_t fixed_bytes = 0x%x;" % (fixed(name) // 8))
        seen = set()
        for (mname, kind, off, width, count) in out:
            if mname in seen:
                continue
            seen.add(mname)
            if kind == "bits" and count == 1 and width <= 64:
                print("    static constexpr Field %s{0x%x, %d};" % (cname(mname), off, width))
            else:
                print("    static constexpr Block %s{0x%x, %d, %d};" % (cname(mname), off, width, count))
        print("};")
    print("}  // namespace hca::ifc")


if __name__ == "__main__":
    main()

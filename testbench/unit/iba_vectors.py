#!/usr/bin/env python3
"""Known-answer ICRC/VCRC vectors for testbench/unit/test_iba.cpp, computed
without the model's code: the CRCs are Python's zlib.crc32 (ICRC) and a
bit-serial CRC-16 written here from its definition (VCRC); the masking of
the variant fields follows IBA Vol. 1 section 7.8.1 (no GRH: the LRH's VL
and the BTH's Resv8a are taken as ones; with a GRH: the whole LRH, the
GRH's TClass, FlowLabel and HopLmt, and Resv8a).

Self-check first: the same ICRC code reproduces the ICRC a ConnectX-4 Lx
put on the wire in a captured RoCEv2 CNP (the packet is the one quoted in
scapy's RoCE tests, test/contrib/roce.uts; RoCE computes the IBA ICRC with
IP/UDP fields in place of the LRH and GRH, IBA Annex A17). It shows the
wire byte order: the ICRC goes out lowest byte of zlib.crc32's value first.

Prints the vectors as C++ for test_iba.cpp. Usage: iba_vectors.py"""
import struct
import zlib


def icrc(pkt, grh):
    """IBA 7.8.1 over LRH..pad (pkt without ICRC/VCRC)."""
    m = bytearray(pkt)
    if grh:
        m[0:8] = b"\xff" * 8                 # the whole LRH
        m[8] |= 0x0f                         # TClass low nibble ...
        m[9:12] = b"\xff\xff\xff"            # ... TClass high, FlowLabel
        m[15] = 0xff                         # HopLmt
        bth = 48
    else:
        m[0] |= 0xf0                         # LRH VL
        bth = 8
    m[bth + 4] = 0xff                        # BTH Resv8a
    return zlib.crc32(bytes(m))


def vcrc(data):
    """IBA 7.8.2: CRC-16, polynomial x^16+x^12+x^3+x+1 (0x100B), register
    preset to ones, bits of each byte taken least significant first (as
    the ICRC's), remainder complemented. Written MSB-first on the
    bit-reversed stream, not as the model's reflected table."""
    reg = 0xffff
    for byte in data:
        for i in range(8):
            bit = (byte >> i) & 1
            top = (reg >> 15) & 1
            reg = (reg << 1) & 0xffff
            if top ^ bit:
                reg ^= 0x100b
    out = 0
    for i in range(16):                      # back to the reflected order
        out |= ((reg >> i) & 1) << (15 - i)
    return out ^ 0xffff


def roce_self_check():
    cap = bytes.fromhex(
        "e41d2dab2bc27cfe90643b32080045c2"
        "003c718c4000401191610a0011010a00"
        "1201000012b7002800008100ffff4000"
        "01180000000000000000000000000000"
        "00000000000082fd002a")
    ip = bytearray(cap[14:34])
    udp = bytearray(cap[34:42])
    rest = bytearray(cap[42:-4])
    ip[1] = 0xff                             # TOS
    ip[8] = 0xff                             # TTL
    ip[10:12] = b"\xff\xff"                  # header checksum
    udp[6:8] = b"\xff\xff"                   # UDP checksum
    rest[4] = 0xff                           # Resv8a
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(rest))
    assert struct.pack("<I", crc) == cap[-4:], (hex(crc), cap[-4:].hex())


def packet(vl, sl, grh, dlid, slid, opcode, dqpn, psn, ext, payload,
           hop_limit=64, tclass=0, flow=0):
    pad = (4 - len(payload) % 4) % 4
    body_len = 8 + (40 if grh else 0) + 12 + len(ext) + len(payload) + pad
    lrh = struct.pack(">BBHHH", vl << 4, sl << 4 | (3 if grh else 2), dlid,
                      (body_len + 4) // 4, slid)
    g = b""
    if grh:
        sgid = bytes.fromhex("fe800000000000000002c90300a00001")
        dgid = bytes.fromhex("fe800000000000000002c90300a00002")
        paylen = body_len - 48 + 4
        g = struct.pack(">IHBB", 6 << 28 | tclass << 20 | flow, paylen, 0x1b,
                        hop_limit) + sgid + dgid
    bth = struct.pack(">BBHII", opcode, pad << 4, 0xffff, dqpn & 0xffffff,
                      0x80000000 | psn)
    return lrh + g + bth + ext + payload + b"\0" * pad


def vectors():
    deth = struct.pack(">II", 0x80010000, 0x000048)
    reth = struct.pack(">QII", 0x00007f0012345000, 0x00abcdef, 13)
    pay13 = bytes(range(1, 14))
    mad = bytes((i * 7) & 0xff for i in range(24))
    return [
        ("UD SEND_ONLY with GRH (hop limit 64, flow label set)",
         True, packet(0, 0, True, 2, 1, 0x64, 1, 0x123, deth, mad,
                      hop_limit=64, tclass=0x20, flow=0x12345)),
        ("UD SEND_ONLY_IMM without GRH on VL 1",
         False, packet(1, 3, False, 0x12, 0x34, 0x65, 0x48, 0x456,
                       deth + struct.pack(">I", 0xcafe0001), pay13)),
        ("RC RDMA_WRITE_ONLY without GRH, pad 3",
         False, packet(0, 0, False, 3, 4, 0x0a, 0x1234, 0x7, reth, pay13)),
        ("RC SEND_ONLY with GRH",
         True, packet(0, 5, True, 3, 4, 0x04, 0x1234, 0xffffff, b"", mad,
                      hop_limit=1)),
    ]


def main():
    roce_self_check()
    for name, grh, body in vectors():
        ic = icrc(body, grh)
        wire = body + struct.pack("<I", ic)
        vc = vcrc(wire)
        print(f"    // {name}")
        print(f"    {{{'true' if grh else 'false'}, 0x{ic:08x}, 0x{vc:04x},")
        hexs = "".join(f"{b:02x}" for b in wire)
        for i in range(0, len(hexs), 64):
            print(f'     "{hexs[i:i + 64]}"')
        print("    },")


if __name__ == "__main__":
    main()

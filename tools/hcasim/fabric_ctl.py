"""One command on hcasim-fabric's control socket (its line protocol: a
reply ends with "ok" or "error ...")."""
import socket


def fabric_command(sock_path, line, timeout=10.0, limit=1 << 20):
    """Sends one command to the fabric's control socket; returns its reply
    (at most limit bytes)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(sock_path))
        s.sendall(line.strip().encode() + b"\n")
        reply = b""
        while len(reply) < limit:
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
            text = reply.decode(errors="replace")
            last = text.rstrip("\n").split("\n")[-1]
            if last == "ok" or last.startswith("error"):
                break
        return reply[:limit].decode(errors="replace")

"""Host access to a run directory that the guests share over 9p.

The guests can put anything in it: symlinks to host files, fifos, device
nodes, huge files, directories where files are expected.  (With QEMU's
security_model=mapped-xattr they are all stored as regular files on the host;
this module does not rely on that.)  Everything here works relative to a
directory file descriptor the harness opened, opens with O_NOFOLLOW, refuses
anything but a regular file, caps what it reads, and writes only files it
creates itself (O_EXCL), replacing the directory entry the guest left, never
what that entry points to.
"""
import os
import stat
from pathlib import Path


class Refused(OSError):
    """A run-directory entry the host will not use (link, fifo, device, too big)."""


_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir(path, dir_fd=None):
    """A file descriptor of the directory path (no symlink, also not as the
    last component)."""
    try:
        return os.open(path, _DIR, dir_fd=dir_fd)
    except OSError as e:
        raise Refused(e.errno, f"{path}: not a directory the harness made ({e.strerror})") from e


def read_file(dir_fd, name, limit):
    """The bytes of the regular file name in dir_fd; Refused for anything
    else or for more than limit bytes.  Never blocks (a fifo is refused
    before it is read)."""
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except OSError as e:
        raise Refused(e.errno, f"{name}: cannot open without following links ({e.strerror})") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(0, f"{name}: not a regular file")
        if st.st_size > limit:
            raise Refused(0, f"{name}: {st.st_size} bytes, more than {limit}")
        data = b""
        while len(data) <= limit:
            chunk = os.read(fd, limit + 1 - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) > limit:
            raise Refused(0, f"{name}: more than {limit} bytes")
        return data
    finally:
        os.close(fd)


def read_tail(dir_fd, name, nbytes):
    """The last nbytes (at most) of the regular file name in dir_fd, however
    large it is; Refused for anything but a regular file."""
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except OSError as e:
        raise Refused(e.errno, f"{name}: cannot open without following links ({e.strerror})") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(0, f"{name}: not a regular file")
        return os.pread(fd, nbytes, max(0, st.st_size - nbytes))
    finally:
        os.close(fd)


def _walk(root_fd, rel, read):
    """read(dir fd, name) for a relative path (a/b/c) under root_fd, every
    directory on the way opened without following links."""
    parts = [p for p in str(rel).split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise Refused(0, f"{rel}: not a plain relative path")
    fd = root_fd
    opened = []
    try:
        for p in parts[:-1]:
            fd = open_dir(p, dir_fd=fd)
            opened.append(fd)
        return read(fd, parts[-1])
    finally:
        for o in opened:
            os.close(o)


def read_path(root_fd, rel, limit):
    """read_file for a relative path (a/b/c) under root_fd."""
    return _walk(root_fd, rel, lambda fd, name: read_file(fd, name, limit))


def read_path_tail(root_fd, rel, nbytes):
    """read_tail for a relative path (a/b/c) under root_fd."""
    return _walk(root_fd, rel, lambda fd, name: read_tail(fd, name, nbytes))


def create_file(dir_fd, name, mode=0o644):
    """A new file name in dir_fd opened for writing (binary).  Whatever the
    guest left under that name is unlinked first (the entry only: a symlink
    is removed, not followed; a directory is refused)."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise Refused(e.errno, f"{name}: cannot replace ({e.strerror})") from e
    try:
        fd = os.open(name, _CREATE, mode, dir_fd=dir_fd)
    except OSError as e:
        raise Refused(e.errno, f"{name}: cannot create ({e.strerror})") from e
    return os.fdopen(fd, "wb")


def write_file(dir_fd, name, data, tmp_suffix=".host-tmp"):
    """Writes data to name in dir_fd through a temporary file the host
    creates and a rename over whatever entry was there."""
    tmp = name + tmp_suffix
    with create_file(dir_fd, tmp) as f:
        f.write(data)
    try:
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as e:
        os.unlink(tmp, dir_fd=dir_fd)
        raise Refused(e.errno, f"{name}: cannot replace ({e.strerror})") from e


def remove(dir_fd, name):
    """Removes the entry name (a file, a link, a fifo; not a directory);
    quietly does nothing if it cannot."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def host_side(run_dir, create=False):
    """<run>.host: the run's host-only directory, next to the run directory
    the guests share. What the host's own tools trust (where the QMP and
    fabric control sockets are) lives there, never in the shared tree a
    guest can rewrite."""
    d = Path(run_dir).with_name(Path(run_dir).name + ".host")
    if create:
        d.mkdir(exist_ok=True)
    return d

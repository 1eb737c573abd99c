"""The one reader of another tool's files, for the CLI and the method alike: only a regular file
is read (a FIFO, a device or a socket in a tool's data folder, or a session-named link to one, is
refused before it is opened, and opened so that a swap never blocks), and never more than a
bound, counted through the open descriptor (``/dev/zero`` and ``/proc`` files say 0 bytes)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

#: A file beside the sessions that says where or when they are (``sessions.json``,
#: ``projects.json``, ``workspace.json``): larger than this, it is not one.
SIDE_FILE_BYTES = 64 * 1024 * 1024
#: Opening never blocks (a FIFO with no writer), never makes a terminal the process's own, and
#: the descriptor never leaks into a child.
_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
#: What a read that found more in the file than its size said asks for at a time.
_CHUNK = 1024 * 1024


class NotRegular(OSError):
    """A path that is not a regular file (its ``strerror`` says what it is): not read."""

    def __init__(self, mode: int) -> None:
        super().__init__(errno.EINVAL, f"{_kind(mode)}, not a regular file: not read")


class TooLarge(OSError):
    """A file holding more than the bound: not read."""

    def __init__(self, limit: int) -> None:
        super().__init__(errno.EFBIG, f"larger than {limit:,} bytes, not read")
        self.limit = limit


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a file"


def listed(path: Path) -> bool:
    """Whether a discovered path is one to read, or to warn about: anything there but a folder
    (the reader refuses a FIFO or a device by name); a link to nothing is not there."""
    return path.exists() and not path.is_dir()


def regular(path: Path) -> os.stat_result:
    """The status of the regular file at ``path`` (links followed), or NotRegular; OSError when
    it cannot be looked at."""
    status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):
        raise NotRegular(status.st_mode)
    return status


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them: NotRegular (checked
    before it is opened, and again on the descriptor, in case it was swapped), TooLarge (counted
    as read, whatever its size said), else OSError."""
    regular(path)  # a FIFO is never opened
    fd = os.open(path, _FLAGS)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise NotRegular(status.st_mode)
        chunks: list[bytes] = []
        total = 0
        want = min(status.st_size, limit) + 1  # the whole file in one read, as a rule
        while chunk := os.read(fd, want):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise TooLarge(limit)
            want = min(_CHUNK, limit + 1 - total)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)

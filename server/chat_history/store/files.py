"""The database's folder and files on disk: created owner-only whatever the umask (folders 0700,
files 0600), loosened ones of ours tightened, and a store that belongs to another user refused.

What is "ours": the storage folder when it holds nothing but the database and its -wal/-shm
(a folder the user also keeps other things in is only warned about), and those files. Folders
above the storage folder that already existed are never changed. Root may use another user's
store, and tightens it as its own (owner-only; the owner keeps every access): a root server
never leaves anyone's history readable by others."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

from chat_history.errors import StorageError

log = logging.getLogger("chat_history")

FOLDER_MODE = 0o700
FILE_MODE = 0o600
SIDECARS = ("-wal", "-shm")


def _euid() -> int | None:
    """This process's user, where the platform has one (not on Windows: no owner checks)."""
    geteuid = getattr(os, "geteuid", None)
    return int(geteuid()) if geteuid is not None else None


def _may_tighten(info: os.stat_result) -> bool:
    """Whether this process makes the file or folder owner-only: its own, or any as root."""
    euid = _euid()
    return euid is not None and (info.st_uid == euid or euid == 0)


def make_folder(folder: Path) -> None:
    """``folder`` and every missing folder above it, each exactly 0700 (mkdir's mode is cut by
    the umask, and ``Path.mkdir(parents=True)`` gives the parents the umask's default)."""
    missing: list[Path] = []
    current = folder
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, FOLDER_MODE)
        except FileExistsError:
            continue  # another process made it first: not ours to change
        os.chmod(path, FOLDER_MODE)


def check_owner(path: Path, info: os.stat_result, what: str) -> None:
    """Refuse ``path`` when another user owns it: that user can read and change every row (and
    files SQLite creates there would not be theirs). Root may use any user's store (SQLite gives
    the files it creates to the database's owner); it is warned."""
    euid = _euid()
    if euid is None or info.st_uid == euid:
        return
    if euid == 0:
        log.warning("%s %s belongs to uid %d; used as root", what, path, info.st_uid)
        return
    raise StorageError(
        f"{what} {path} belongs to another user (uid {info.st_uid}); it was not used: a user's "
        "chat history is kept only in files of that user. Choose another storage folder or "
        "change the owner"
    )


def check_folder(folder: Path, file_name: str) -> None:
    """The storage folder before it is used: refused when another user (not root) owns it;
    tightened to 0700 when others may read or write it and it holds only the database's files,
    else warned about when others may write it (they could replace or delete the database)."""
    info = os.stat(folder)
    if info.st_uid != 0:  # a folder of root's (``/tmp``) is no risk: root can read all anyway
        check_owner(folder, info, "the storage folder")
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o077:
        return
    ours = {file_name, *(file_name + suffix for suffix in SIDECARS)}
    if set(os.listdir(folder)) <= ours and _may_tighten(info):
        os.chmod(folder, FOLDER_MODE)
        log.warning("the storage folder %s was %04o; made owner-only (0700)", folder, mode)
    elif mode & 0o022 and not mode & stat.S_ISVTX:
        log.warning(
            "the storage folder %s is %04o: other users can replace or delete the database in "
            "it; make it owner-only (chmod 700) or choose another folder",
            folder,
            mode,
        )


def create_file(path: Path) -> None:
    """Create the database file 0600 when there is none. A dangling symlink is followed: its
    target is created, 0600 as well (SQLite would create it with the umask's mode)."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if target.exists():
        return
    try:
        descriptor = os.open(target, os.O_CREAT | os.O_WRONLY | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return  # another process created it first (several windows starting at once)
    try:
        os.fchmod(descriptor, FILE_MODE)
    finally:
        os.close(descriptor)


def check_file(path: Path) -> None:
    """The database file (or -wal/-shm) before use: refused when another user owns it, made
    0600 when it is looser."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    check_owner(path, info, "the database file")
    tighten(path, info)


def tighten(path: Path, info: os.stat_result | None = None) -> None:
    """Make one of our files 0600 (with a warning when it was readable by others)."""
    if info is None:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return
    mode = stat.S_IMODE(info.st_mode)
    if mode == FILE_MODE or not _may_tighten(info):
        return
    with contextlib.suppress(OSError):
        os.chmod(path, FILE_MODE)
        if mode & 0o077:
            log.warning("%s was %04o; made owner-only (0600)", path, mode)

"""What one import source declares (``IMPORTER`` in its module under ``importers/``): where its
tool keeps its data, which files to read, how to read them, the session id a file's path gives,
and how a session is placed — so that the service's import runs every source the same way.

Only ``read`` is pure; the other hooks look at this machine's file system (never write it), and
read a file only through ``importers.files`` (regular files, within a bound)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from chat_history.importers.common import Session
from chat_history.importers.files import read_regular

#: A session file's bytes and the session id its path gives in, its sessions out.
Reader = Callable[[bytes, str], list[Session]]
#: A file's path, its sessions, the project folder they were found for and the current folder
#: in, the sessions placed out (``Importer.place``).
Placer = Callable[[Path, list[Session], str | None, str | None], list[Session]]


def _stem(path: Path) -> str:
    return path.stem


def _as_read(
    path: Path, sessions: list[Session], folder: str | None, here: str | None
) -> list[Session]:
    return sessions


def _always(path: Path) -> bool:
    return True


def folder_or(beside: Callable[[Path, str | None], str | None]) -> Placer:
    """The ``place`` of a tool whose sessions record no folder: each session without one takes
    the project folder it was found for, else ``beside(path, here)``: the folder the tool keeps
    beside the file (from the current folder ``here`` too; None: none is known)."""

    def place(
        path: Path, sessions: list[Session], folder: str | None, here: str | None
    ) -> list[Session]:
        where = folder or beside(path, here)
        return [attrs.evolve(s, folder=where) if s.folder is None else s for s in sessions]

    return place


@attrs.frozen
class Importer:
    """One tool's history, as an import reads it."""

    #: the source's name (protocol.md's ``SOURCE``), the conversation id's prefix
    source: str
    #: one session file's bytes in (or what ``gather`` made of a file), sessions out; pure
    read: Reader
    #: the tool's data folder on this machine, from the environment (the tool's own variables
    #: first, as it reads them) and the home folder
    locate: Callable[[Mapping[str, str], Path], Path]
    #: the session files under a folder (the data folder or one inside it, never a file), those
    #: of the project folder only when one is given and the files tell; a newer format first (a
    #: session found again is read from the first file that holds it)
    discover: Callable[[Path, str | None], list[Path]]
    #: the tool's id of the session a file holds (the reader may find it inside instead)
    session_id: Callable[[Path], str] = _stem
    #: each session records its folder and the tool keeps every project's together: the
    #: sessions of a project are picked after reading (the files do not tell)
    folder_inside: bool = False
    #: the sessions of a file given what it does not record (a folder, a time) from the project
    #: folder they were found for (the third argument), from files beside them, or from what
    #: the tool keeps of the current folder (the fourth: Gemini CLI's hash of it); a session
    #: still without a folder goes into the current folder's workspace (``service.imports``)
    #: (``folder_or``: the one they were found for, else what the tool keeps beside them)
    place: Placer = _as_read
    #: what a file that is not one session's own bytes holds: each session's id and bytes, each
    #: within the given bound (OpenCode's storage tree and database); None: the file's bytes
    gather: Callable[[Path, int], Iterator[tuple[str, bytes]]] | None = None
    #: whether a file's own size bounds it (checked before any file is read); False: a file of
    #: many sessions, bounded one session at a time by ``gather``
    sized: Callable[[Path], bool] = _always

    def data_folder(self, environ: Mapping[str, str] | None = None) -> Path:
        """Where the tool keeps its sessions on this machine."""
        env = os.environ if environ is None else environ
        return self.locate(env, Path(env.get("HOME") or Path.home()))

    def session_files(self, root: Path, folder: str | None) -> list[Path]:
        """The session files under the folder ``root``; anything else there is itself (a file,
        or what the reader refuses: a FIFO, a device); nothing there: none."""
        if root.is_dir():
            return self.discover(root, folder)
        if root.exists() or root.is_symlink():
            return [root]
        return []

    def contents(self, path: Path, limit: int) -> Iterator[tuple[str, bytes]]:
        """Each session of the file at ``path``: its id and bytes (``files.NotRegular``,
        ``files.TooLarge``, OSError: not read)."""
        if self.gather is not None:
            yield from self.gather(path, limit)
        else:
            yield self.session_id(path), read_regular(path, limit)

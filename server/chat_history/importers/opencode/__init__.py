"""OpenCode's history, all of it: its data folder ``~/.local/share/opencode``
(``$XDG_DATA_HOME/opencode`` first) holds the SQLite database of builds from 2026
(``opencode.db``, ``opencode-<channel>.db`` for other release channels: ``database``) and the
older storage tree (``storage/session/<project id>/<session id>.json`` with its message and part
files, or only the latter: ``tree``); each is gathered into the shape of ``opencode export``,
which ``export`` reads (an export file reads the same). A session in both is read from the
database. Every project's sessions are kept together, each recording its folder."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from chat_history.importers.files import listed, read_regular
from chat_history.importers.opencode import database, tree
from chat_history.importers.opencode.export import SOURCE, read
from chat_history.importers.source import Importer


def _locate(env: Mapping[str, str], home: Path) -> Path:
    data = env.get("XDG_DATA_HOME")
    return (Path(data) if data else home / ".local" / "share") / "opencode"


def _discover(root: Path, folder: str | None) -> list[Path]:
    """The databases under ``root`` (the data folder), then the session files of the storage
    tree (``root`` or ``root/storage``), then the message folders of its sessions without one."""
    tree_root = any((root / name).is_dir() for name in ("session", "message"))
    storage = root if tree_root else root / "storage"
    databases = sorted(p for p in root.glob("opencode*.db") if listed(p))
    files = sorted(storage.glob("session/*/*.json"))
    orphans = tree.sessions_without_file(storage, {path.stem for path in files})
    return [*databases, *files, *orphans]


def _gather(path: Path, limit: int) -> Iterator[tuple[str, bytes]]:
    """A database's sessions one at a time, a tree's session with its files (or its message
    folder), an export file."""
    if database.is_database(path):
        yield from database.sessions(path, limit)
    elif tree.in_tree(path) or tree.is_message_folder(path):
        yield path.name if path.is_dir() else path.stem, tree.bundle(path, limit)
    else:
        yield path.stem, read_regular(path, limit)


IMPORTER = Importer(
    source=SOURCE,
    read=read,
    locate=_locate,
    discover=_discover,
    folder_inside=True,
    gather=_gather,
    # a database and a message folder are bounded by each session they hold, as gathered
    sized=lambda path: not database.is_database(path) and not tree.is_message_folder(path),
)

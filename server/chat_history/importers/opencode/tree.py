"""OpenCode's storage tree gathered into one session: ``session/<project>/<id>.json``, its
``message/<id>/*.json`` and each message's ``part/<message id>/*.json``, in id order, as the
bytes of ``opencode export``'s shape (``export`` reads it). A session whose ``session/`` file is
missing (a tree with only ``message/`` and ``part/``) is found by its ``message/<id>/`` folder:
its id is the folder's name, its folder the one a reply recorded (``path.cwd``), no title.
Bounded: a session whose files add up to more than the limit is not read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chat_history.errors import InvalidParams
from chat_history.importers.files import NotRegular, TooLarge, read_regular


def in_tree(path: Path) -> bool:
    """Whether ``path`` is a session file of a storage tree (not an export file)."""
    return path.parent.parent.name == "session"


def is_message_folder(path: Path) -> bool:
    """Whether ``path`` is a session's ``message/<id>`` folder (a session without its file)."""
    return path.parent.name == "message" and path.is_dir()


def sessions_without_file(storage: Path, named: set[str]) -> list[Path]:
    """The ``message/<id>`` folders of ``storage`` whose session has no file among ``named``."""
    return sorted(
        path for path in (storage / "message").glob("*") if path.is_dir() and path.name not in named
    )


def bundle(path: Path, limit: int) -> bytes:
    """The session at ``path`` (its file, or its message folder) with its messages and parts, as
    one JSON document; InvalidParams ``path`` naming the session when its files add up to more
    than ``limit`` bytes."""
    budget = [limit]
    orphan = is_message_folder(path)
    storage, sid = (path.parent.parent, path.name) if orphan else (path.parents[2], path.stem)
    info = None if orphan else _load(path, budget, path)
    messages = []
    for message_path in sorted((storage / "message" / sid).glob("*.json")):
        head = _load(message_path, budget, path)
        parts_dir = storage / "part" / message_path.stem
        parts = [_load(p, budget, path) for p in sorted(parts_dir.glob("*.json"))]
        messages.append({"info": head, "parts": parts})
    if orphan:
        info = {"id": sid, "directory": _cwd(messages)}
    return json.dumps({"info": info, "messages": messages}).encode("utf-8")


def _cwd(messages: list[dict[str, Any]]) -> str | None:
    """The folder the first reply that recorded one ran in (``path.cwd``)."""
    for message in messages:
        head = message["info"]
        where = head.get("path") if isinstance(head, dict) else None
        cwd = where.get("cwd") if isinstance(where, dict) else None
        if isinstance(cwd, str) and cwd:
            return cwd
    return None


def _load(file: Path, budget: list[int], session: Path) -> Any:
    try:
        data = read_regular(file, budget[0])
    except TooLarge:
        raise InvalidParams(
            "path", f"{session}: its messages and parts are too large, not read"
        ) from None
    except NotRegular:
        return None  # counted by the reader as a message or part it cannot read
    budget[0] -= len(data)
    try:
        return json.loads(data)
    except ValueError:
        return None  # counted by the reader as a message or part it cannot read

"""OpenCode's storage tree gathered into one session: ``session/<project>/<id>.json``, its
``message/<id>/*.json`` and each message's ``part/<message id>/*.json``, in id order, as the
bytes of ``opencode export``'s shape (``export`` reads it). Bounded: a session
whose files add up to more than the limit is not read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chat_history.errors import InvalidParams


def in_tree(path: Path) -> bool:
    """Whether ``path`` is a session file of a storage tree (not an export file)."""
    return path.parent.parent.name == "session"


def bundle(path: Path, limit: int) -> bytes:
    """The session at ``path`` with its messages and parts, as one JSON document; InvalidParams
    ``path`` naming the session when its files add up to more than ``limit`` bytes."""
    storage = path.parent.parent.parent
    budget = [limit]
    info = _load(path, budget, path)
    messages = []
    for message_path in sorted((storage / "message" / path.stem).glob("*.json")):
        head = _load(message_path, budget, path)
        parts_dir = storage / "part" / message_path.stem
        parts = [_load(p, budget, path) for p in sorted(parts_dir.glob("*.json"))]
        messages.append({"info": head, "parts": parts})
    return json.dumps({"info": info, "messages": messages}).encode("utf-8")


def _load(file: Path, budget: list[int], session: Path) -> Any:
    size = file.stat().st_size
    budget[0] -= size
    if budget[0] < 0:
        raise InvalidParams("path", f"{session}: its messages and parts are too large, not read")
    try:
        return json.loads(file.read_bytes())
    except ValueError:
        return None  # counted by the reader as a message or part it cannot read

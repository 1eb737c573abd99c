"""OpenCode's SQLite database (builds from 2026: ``opencode.db`` in its data folder, or
``opencode-<channel>.db`` for other release channels), each session gathered, like the storage
tree (``tree``), into the bytes of ``opencode export``'s shape, which ``export`` reads: one place
for each mapping rule.

The schema as observed (OpenCode's Drizzle tables, ``packages/opencode/src/session/
session.sql.ts``): ``session`` (``id``, ``project_id``, ``parent_id``, ``directory``, ``title``,
``version``, ``time_created``, ``time_updated``, epoch ms), ``message`` (``id``, ``session_id``,
``time_created``, ``data``: the message's JSON without ``id`` and ``sessionID``) and ``part``
(``id``, ``message_id``, ``session_id``, ``data``: the part's JSON without ``id``,
``sessionID`` and ``messageID``). A build without ``session.directory`` has the folder in
``project.worktree``.

The file is OpenCode's: it is opened read-only (``mode=ro``) and never written. A file that is
not such a database, is locked, or lacks a table or column read here is InvalidParams ``path``
naming it. Messages and parts are read in id order, as the tree's file names give them."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chat_history.errors import InvalidParams
from chat_history.importers.common import json_value
from chat_history.importers.files import regular

#: How long a read waits for OpenCode's own write to finish before the file counts as locked.
BUSY_TIMEOUT_S = 1.0
#: The columns read, by table (a database without one is a schema this reader does not know).
REQUIRED = {
    "session": {"id", "title", "time_created"},
    "message": {"id", "session_id", "time_created", "data"},
    "part": {"id", "message_id", "session_id", "data"},
}


def is_database(path: Path) -> bool:
    """Whether ``path`` is an OpenCode database (not a session file of the tree, or an export)."""
    return path.suffix == ".db"


def sessions(path: Path, limit: int) -> Iterator[tuple[str, bytes]]:
    """Each session of the database at ``path``: (its id, its export's bytes), one at a time;
    InvalidParams ``path`` naming the file when it cannot be read (see the module's notes) or a
    session's rows add up to more than ``limit`` bytes."""
    regular(path)  # SQLite's open of a FIFO would block: files.NotRegular instead
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise InvalidParams("path", f"{path}: cannot be opened ({exc})") from None
    try:
        columns = _columns(db, path)
        folder = "directory" if "directory" in columns["session"] else None
        heads = _session_rows(db, columns, folder)
        for head in heads:
            yield head["id"], _bundle(db, path, head, limit)
    except sqlite3.Error as exc:
        raise InvalidParams("path", f"{path}: cannot be read ({exc})") from None
    finally:
        db.close()


def _columns(db: sqlite3.Connection, path: Path) -> dict[str, set[str]]:
    found = {
        table: {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        for table in (*REQUIRED, "project")
    }
    for table, needed in REQUIRED.items():
        missing = sorted(needed - found[table])
        if missing:
            raise InvalidParams(
                "path",
                f"{path}: not an OpenCode database this reader knows "
                f"(table {table} has no {', '.join(missing)})",
            )
    return found


def _session_rows(
    db: sqlite3.Connection, columns: dict[str, set[str]], folder: str | None
) -> list[dict[str, Any]]:
    """Every session's own columns (few and small), oldest first."""
    wanted = ["id", "title", "time_created"]
    wanted += [c for c in ("project_id", "parent_id", "version", "time_updated", folder) if c]
    present = [c for c in wanted if c in columns["session"]]
    select = ", ".join(f"s.{c}" for c in present)
    join = ""
    if folder is None and {"id", "worktree"} <= columns["project"] and "project_id" in present:
        select += ", p.worktree AS directory"
        join = " LEFT JOIN project p ON p.id = s.project_id"
    db.row_factory = sqlite3.Row
    rows = db.execute(f"SELECT {select} FROM session s{join} ORDER BY s.time_created, s.id")
    return [dict(row) for row in rows]


def _bundle(db: sqlite3.Connection, path: Path, head: dict[str, Any], limit: int) -> bytes:
    """One session's rows as the JSON of ``opencode export``."""
    budget = [limit]
    parts: dict[str, list[Any]] = {}
    part_rows = db.execute(
        "SELECT id, message_id, session_id, data FROM part WHERE session_id = ? "
        "ORDER BY message_id, id",
        (head["id"],),
    )
    for row in part_rows:
        data = _data(row["data"], budget, path, head["id"])
        if isinstance(data, dict):
            data = {**data, "id": row["id"], "messageID": row["message_id"]}
            data["sessionID"] = row["session_id"]
        parts.setdefault(row["message_id"], []).append(data)
    messages = []
    message_rows = db.execute(
        "SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY id",
        (head["id"],),
    )
    for row in message_rows:
        info = _data(row["data"], budget, path, head["id"])
        if isinstance(info, dict):
            info = {"time": {"created": row["time_created"]}, **info, "id": row["id"]}
            info["sessionID"] = head["id"]
        messages.append({"info": info, "parts": parts.get(row["id"], [])})
    return json.dumps({"info": _session_info(head), "messages": messages}).encode("utf-8")


def _session_info(head: dict[str, Any]) -> dict[str, Any]:
    """A session row in the shape of the tree's session file."""
    info: dict[str, Any] = {"id": head["id"], "title": head["title"]}
    for column, key in (
        ("project_id", "projectID"),
        ("parent_id", "parentID"),
        ("directory", "directory"),
        ("version", "version"),
    ):
        if head.get(column) is not None:
            info[key] = head[column]
    info["time"] = {"created": head["time_created"], "updated": head.get("time_updated")}
    return info


def _data(raw: Any, budget: list[int], path: Path, session: str) -> Any:
    """A row's JSON ``data`` (None when it is not JSON: counted by the reader), charged to the
    session's ``budget``."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if not isinstance(text, str):
        return None
    budget[0] -= len(text)
    if budget[0] < 0:
        raise InvalidParams(
            "path", f"{path}: session {session}: its messages and parts are too large, not read"
        )
    try:
        return json_value(text)
    except ValueError:
        return None

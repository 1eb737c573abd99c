"""A small OpenCode database for the tests, built from a hand-written schema in the shape of
OpenCode's own tables (tests/fixtures/imports/SOURCES.md) and filled with the storage tree
fixture's sessions, so that the database and the tree hold the same conversations."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STORAGE = Path(__file__).resolve().parent / "fixtures" / "imports" / "opencode" / "storage"

#: OpenCode's tables as its Drizzle schema declares them (the columns read here and some others).
SCHEMA = """
CREATE TABLE project (
  id text PRIMARY KEY, worktree text NOT NULL, vcs text, name text,
  time_created integer NOT NULL, time_updated integer NOT NULL, sandboxes text NOT NULL
);
CREATE TABLE session (
  id text PRIMARY KEY, project_id text NOT NULL REFERENCES project(id) ON DELETE CASCADE,
  parent_id text, slug text NOT NULL, directory text NOT NULL, title text NOT NULL,
  version text NOT NULL, share_url text, summary_additions integer, summary_deletions integer,
  summary_files integer, summary_diffs text, revert text, permission text,
  time_created integer NOT NULL, time_updated integer NOT NULL, time_compacting integer,
  time_archived integer
);
CREATE TABLE message (
  id text PRIMARY KEY, session_id text NOT NULL REFERENCES session(id) ON DELETE CASCADE,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL
);
CREATE TABLE part (
  id text PRIMARY KEY, message_id text NOT NULL REFERENCES message(id) ON DELETE CASCADE,
  session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL,
  data text NOT NULL
);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
CREATE INDEX part_session_idx ON part (session_id);
"""


#: The part table's last column and what follows it (to build a schema without it).
PART_DATA = "  data text NOT NULL\n);\nCREATE INDEX"


def without(value: dict[str, Any], *keys: str) -> str:
    return json.dumps({k: v for k, v in value.items() if k not in keys})


def tree_rows() -> Iterator[tuple[str, tuple[Any, ...]]]:
    """The tree fixture's files as rows of OpenCode's tables (a part file that is not JSON
    stays as its text, as a row OpenCode could not have written whole)."""
    project = next((STORAGE / "project").glob("*.json"))
    yield "project", (project.stem, "/home/me/shop", "git", None, 1, 1, "[]")
    sessions = sorted((STORAGE / "session").glob("*/*.json"))
    for path in sessions:
        s = json.loads(path.read_text())
        t = s["time"]
        head = (s["id"], s["projectID"], s.get("parentID"), s["id"][-6:], s["directory"])
        yield "session", (*head, s["title"], s["version"], t["created"], t["updated"])
        for message_path in sorted((STORAGE / "message" / s["id"]).glob("*.json")):
            m = json.loads(message_path.read_text())
            at = m["time"]["created"]
            yield "message", (m["id"], s["id"], at, at, without(m, "id", "sessionID"))
            for part_path in sorted((STORAGE / "part" / m["id"]).glob("*.json")):
                text = part_path.read_text()
                try:
                    data = without(json.loads(text), "id", "sessionID", "messageID")
                except ValueError:
                    data = text
                yield "part", (part_path.stem, m["id"], s["id"], at, at, data)


def build(path: Path, schema: str = SCHEMA) -> Path:
    """A database at ``path`` of ``schema`` holding the tree fixture's sessions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    try:
        db.executescript(schema)
        session_columns = {row[1] for row in db.execute("PRAGMA table_info(session)")}
        for table, row in tree_rows():
            if table == "session":
                named = ["id", "project_id", "parent_id", "slug", "directory", "title"]
                named += ["version", "time_created", "time_updated"]
                values = dict(zip(named, row, strict=True))
                kept = [c for c in named if c in session_columns]
                marks = ", ".join("?" * len(kept))
                sql = f"INSERT INTO session ({', '.join(kept)}) VALUES ({marks})"
                db.execute(sql, [values[c] for c in kept])
            else:
                db.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(row))})", row)
        db.commit()
    finally:
        db.close()
    return path

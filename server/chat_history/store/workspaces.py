"""Stateless SQL of workspace identities (protocol.md "Version 3" → Workspace identity), shared by
both engines: the workspaces that hold conversations, re-keying one workspace's conversations to
another (renaming the ones whose ids are taken there, when asked), the record of each such
rename (``conversation_renames``), and the folder fingerprints recorded per identity
(``workspace_folders``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from chat_history.model import Key
from chat_history.policy.identity import Fingerprint
from chat_history.store.engine import sqlite3

#: Schema step 7 (SQLite): one fingerprint per (identity, machine).
SCHEMA = """
CREATE TABLE IF NOT EXISTS workspace_folders (
    workspace TEXT NOT NULL,
    machine TEXT NOT NULL,
    folder TEXT NOT NULL,
    remote TEXT,
    inner_path TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (workspace, machine)
) WITHOUT ROWID
"""

#: Schema step 12 (SQLite; PostgreSQL's 7): a conversation that re-keying moved under a new id
#: because its id was taken where it went (``service.workspaces._take``): its id before
#: (``was``), the workspace spelling it came from (``came_from``), when (``renamed_at``, ms). One
#: record per conversation (a later rename of it replaces it); keyed like the history, so it
#: moves and is renamed with its conversation (``KEYED``) and is deleted when the conversation
#: stops existing (``forget_renames``): it holds a path, which goes when the history goes.
RENAMES_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversation_renames (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    was TEXT NOT NULL,
    came_from TEXT NOT NULL,
    renamed_at INTEGER NOT NULL,
    PRIMARY KEY (workspace, conversation)
) WITHOUT ROWID
"""

#: The tables whose rows are keyed by (workspace, conversation): every re-keying moves them all,
#: a streaming reply's lease and text (``replies``) with its row.
KEYED = (
    "messages",
    "conversations",
    "summaries",
    "turn_figures",
    "conversation_renames",
    "replies",
    "compactions",
)
#: A conversation exists (store.records: rows, a summary, a user title or metadata).
_EXISTS = (
    "(c.message_count > 0 OR c.title IS NOT NULL OR c.metadata IS NOT NULL "
    "OR EXISTS (SELECT 1 FROM summaries s WHERE s.workspace = c.workspace "
    "AND s.conversation = c.conversation))"
)


@attrs.frozen
class WorkspaceRow:
    workspace: str
    conversations: int
    last_activity: int | None


@attrs.frozen
class RenameRow:
    workspace: str
    conversation: str
    was: str
    came_from: str
    renamed_at: int


#: A row of the recorded folders is the identity rule's fingerprint, field for field (one type).
FolderRow = Fingerprint


def workspaces(connection: sqlite3.Connection) -> list[WorkspaceRow]:
    """Every workspace with conversations, newest activity first."""
    rows = connection.execute(
        "SELECT c.workspace, COUNT(*), MAX(c.last_activity) FROM conversations c "
        f"WHERE {_EXISTS} GROUP BY c.workspace ORDER BY MAX(c.last_activity) DESC, c.workspace"
    ).fetchall()
    return [WorkspaceRow(r[0], int(r[1]), r[2]) for r in rows]


def conversation_ids(connection: sqlite3.Connection, workspace: str) -> set[str]:
    """The ids of the workspace's existing conversations."""
    return {
        r[0]
        for r in connection.execute(
            f"SELECT c.conversation FROM conversations c WHERE c.workspace = ? AND {_EXISTS}",
            (workspace,),
        )
    }


def keyed_ids(connection: sqlite3.Connection, workspace: str) -> set[str]:
    """Every conversation id with any row under ``workspace`` (existing or not)."""
    found: set[str] = set()
    for table in ("conversations", "summaries", "conversation_renames"):
        found |= {
            r[0]
            for r in connection.execute(
                f"SELECT conversation FROM {table} WHERE workspace = ?", (workspace,)
            )
        }
    return found


def drop_empty(connection: sqlite3.Connection, workspace: str, ids: set[str]) -> None:
    """Delete the records of ``ids`` under ``workspace`` that describe no conversation (what
    retention left), so a move may take their keys."""
    for conversation in sorted(ids):
        for table in ("turn_figures", "conversations", "conversation_renames"):
            connection.execute(
                f"DELETE FROM {table} WHERE workspace = ? AND conversation = ?",
                (workspace, conversation),
            )


def rename(connection: sqlite3.Connection, workspace: str, renames: dict[str, str]) -> None:
    """Give conversations of ``workspace`` new ids (old -> new; the caller chose new ids that
    name no conversation there: records retention left under them are dropped first)."""
    drop_empty(connection, workspace, set(renames.values()))
    for old, new in sorted(renames.items()):
        for table in KEYED:
            connection.execute(
                f"UPDATE {table} SET conversation = ? WHERE workspace = ? AND conversation = ?",
                (new, workspace, old),
            )


def move(connection: sqlite3.Connection, source: str, target: str) -> None:
    """Re-key every row of ``source`` to ``target`` (the caller checked for collisions)."""
    for table in KEYED:
        connection.execute(
            f"UPDATE {table} SET workspace = ? WHERE workspace = ?", (target, source)
        )


def record_rename(connection: sqlite3.Connection, row: RenameRow) -> None:
    """Record that re-keying gave ``row.conversation`` its id (replacing an older record of it)."""
    connection.execute(
        "INSERT INTO conversation_renames (workspace, conversation, was, came_from, renamed_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace, conversation) DO UPDATE SET "
        "was = excluded.was, came_from = excluded.came_from, renamed_at = excluded.renamed_at",
        (row.workspace, row.conversation, row.was, row.came_from, row.renamed_at),
    )


def renames(connection: sqlite3.Connection) -> list[RenameRow]:
    """Every rename record of a conversation that exists, newest first."""
    rows: list[Any] = connection.execute(
        "SELECT r.workspace, r.conversation, r.was, r.came_from, r.renamed_at FROM "
        "conversation_renames r JOIN conversations c ON c.workspace = r.workspace AND "
        f"c.conversation = r.conversation WHERE {_EXISTS} "
        "ORDER BY r.renamed_at DESC, r.workspace, r.conversation"
    ).fetchall()
    return [RenameRow(*r) for r in rows]


def gone(connection: sqlite3.Connection, keys: Iterable[Key]) -> list[Key]:
    """Those of ``keys`` that name no existing conversation (no rows, title, metadata or
    summary under them), in order."""
    return [
        key
        for key in sorted(set(keys), key=str)
        if connection.execute(
            f"SELECT 1 FROM conversations c WHERE c.workspace = ? AND c.conversation = ? "
            f"AND {_EXISTS}",
            (key.workspace, key.conversation),
        ).fetchone()
        is None
    ]


def forget_renames(connection: sqlite3.Connection, keys: Iterable[Key]) -> list[RenameRow]:
    """Delete the rename records of those of ``keys`` that no longer exist; returns them."""
    forgotten: list[RenameRow] = []
    for key in gone(connection, keys):
        where = (key.workspace, key.conversation)
        row = connection.execute(
            "SELECT workspace, conversation, was, came_from, renamed_at FROM "
            "conversation_renames WHERE workspace = ? AND conversation = ?",
            where,
        ).fetchone()
        if row is None:
            continue
        connection.execute(
            "DELETE FROM conversation_renames WHERE workspace = ? AND conversation = ?", where
        )
        forgotten.append(RenameRow(*row))
    return forgotten


def record_folder(connection: sqlite3.Connection, row: FolderRow) -> None:
    connection.execute(
        "INSERT INTO workspace_folders (workspace, machine, folder, remote, inner_path, "
        "recorded_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (workspace, machine) DO UPDATE SET "
        "folder = excluded.folder, remote = excluded.remote, inner_path = excluded.inner_path, "
        "recorded_at = excluded.recorded_at",
        (row.workspace, row.machine, row.folder, row.remote, row.inner_path, row.recorded_at),
    )


def forget_folder(connection: sqlite3.Connection, workspace: str, machine: str) -> None:
    connection.execute(
        "DELETE FROM workspace_folders WHERE workspace = ? AND machine = ?", (workspace, machine)
    )


def folders(connection: sqlite3.Connection) -> list[FolderRow]:
    """Every recorded fingerprint, newest first."""
    rows: list[Any] = connection.execute(
        "SELECT workspace, machine, folder, remote, inner_path, recorded_at FROM "
        "workspace_folders ORDER BY recorded_at DESC"
    ).fetchall()
    return [FolderRow(*r) for r in rows]

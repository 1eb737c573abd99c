"""The database's own secrets: the key that authenticates ``listConversations`` cursors
(policy.cursor). Kept in the database, so every process on it accepts the cursors another
handed out and a database made anew refuses the old ones; drawn from the operating system's
random source (``secrets``), not SQLite's ``randomblob``, whose Windows seed is the clock."""

from __future__ import annotations

import secrets

from chat_history.store.engine import sqlite3

#: The table (schema version 8), idempotent like calibration's.
SCHEMA = """
CREATE TABLE IF NOT EXISTS server_keys (
    name TEXT PRIMARY KEY,
    secret BLOB NOT NULL
) WITHOUT ROWID
"""
CURSOR = "cursor"
KEY_BYTES = 32


def ensure(connection: sqlite3.Connection) -> None:
    """Give the database its keys when it has none (inside the migration's transaction)."""
    connection.execute(
        "INSERT OR IGNORE INTO server_keys (name, secret) VALUES (?, ?)",
        (CURSOR, secrets.token_bytes(KEY_BYTES)),
    )


def cursor_key(connection: sqlite3.Connection) -> bytes:
    """The key of this database's cursors."""
    row = connection.execute("SELECT secret FROM server_keys WHERE name = ?", (CURSOR,)).fetchone()
    if row is None:  # a file whose migration ran without it (never by this server)
        raise sqlite3.DatabaseError("the database has no cursor key")
    return bytes(row[0])

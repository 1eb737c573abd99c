"""The database's own secrets, one per use: the key that authenticates ``listConversations``
cursors (policy.cursor) and the key of every request's ``cacheKey`` (providers.cache_points). Kept
in the database, so every process on it accepts the cursors another handed out and derives the
same cache keys, and a database made anew refuses the old cursors; drawn from the operating
system's random source (``secrets``), not SQLite's ``randomblob``, whose Windows seed is the
clock."""

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
CACHE = "cacheKey"
#: Every key a database holds.
NAMES = (CURSOR, CACHE)
_KEY_BYTES = 32


def ensure(connection: sqlite3.Connection) -> None:
    """Give the database the keys it lacks (inside the migration's transaction; at every open
    too, so a file from a build that knew fewer keys gets the new ones); writes only when one
    is missing."""
    have = {row[0] for row in connection.execute("SELECT name FROM server_keys")}
    for name in NAMES:
        if name not in have:
            connection.execute(
                "INSERT OR IGNORE INTO server_keys (name, secret) VALUES (?, ?)",
                (name, secrets.token_bytes(_KEY_BYTES)),
            )


def secret(connection: sqlite3.Connection, name: str) -> bytes:
    """The key ``name`` of this database."""
    row = connection.execute("SELECT secret FROM server_keys WHERE name = ?", (name,)).fetchone()
    if row is None:  # a file whose migration ran without it (never by this server)
        raise sqlite3.DatabaseError(f"the database has no {name} key")
    return bytes(row[0])


def cursor_key(connection: sqlite3.Connection) -> bytes:
    """The key of this database's cursors."""
    return secret(connection, CURSOR)

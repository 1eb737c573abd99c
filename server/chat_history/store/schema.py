"""The database schema, versioned with ``PRAGMA user_version``; each migration keeps every row."""

from __future__ import annotations

from chat_history.store import (
    calibration,
    changes,
    keys,
    provider_state,
    replies,
    search_index,
    workspaces,
)
from chat_history.store.engine import sqlite3

SCHEMA_VERSION = 16
DATABASE_FILE = "chat-history.sqlite3"

_V1 = """
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_calls TEXT,
    tool_call_id TEXT,
    name TEXT,
    attachments TEXT,
    timestamp INTEGER NOT NULL,
    provider_data TEXT,
    metadata TEXT,
    tokens INTEGER NOT NULL
);
-- Reading one conversation never scans another's rows.
CREATE INDEX messages_by_conversation ON messages (workspace, conversation, id);
-- Per-conversation totals, so the retention check does not read the history.
CREATE TABLE conversations (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    message_count INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    last_turn INTEGER NOT NULL,
    turn_start_id INTEGER NOT NULL,
    oldest_timestamp INTEGER,
    last_activity INTEGER NOT NULL,
    PRIMARY KEY (workspace, conversation)
) WITHOUT ROWID;
CREATE INDEX conversations_by_activity ON conversations (workspace, last_activity);
CREATE TABLE summaries (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    summary TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    covers_through_id INTEGER,
    PRIMARY KEY (workspace, conversation)
) WITHOUT ROWID;
"""

#: The columns of one turn's figures: policy.prepare.context.TurnFigures's fields, in order
#: (asserted by tests/unit/test_readplan.py; the store does not import the policy).
FIGURES = (
    "turns",
    "spoken_rows",
    "spoken_tokens",
    "kept_rows",
    "sent_tokens",
    "collapsed_rows",
    "collapsed_turns",
    "tool_dependent",
)

# Version 2 lets a request read what it sends, not the whole conversation: system rows without
# the rest, and per completed turn its figures (policy.prepare.context.TurnFigures) with the running
# sums of every earlier turn's, so the totals of any range of old turns take two lookups. A turn
# written before version 2 has no figures, and a request that would need them reads every row.
_V2 = f"""
CREATE INDEX messages_system ON messages (workspace, conversation, id) WHERE role = 'system';
CREATE TABLE turn_figures (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    {", ".join(f"{name} INTEGER NOT NULL" for name in FIGURES)},
    {", ".join(f"earlier_{name} INTEGER NOT NULL" for name in FIGURES)},
    PRIMARY KEY (workspace, conversation, turn)
) WITHOUT ROWID;
"""

_MESSAGE_COLUMNS = """
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_calls TEXT,
    tool_call_id TEXT,
    name TEXT,
    attachments TEXT,
    timestamp INTEGER NOT NULL,
    provider_data TEXT,
    metadata TEXT,
    tokens INTEGER NOT NULL
"""

# Version 3 takes two page writes off every append, keeping what they gave:
# - Ids are still never reused, but without AUTOINCREMENT, which rewrote sqlite_sequence on every
#   insert: ``id_floor`` holds the highest id ever deleted from the top, written only by deletes,
#   and an insert takes one more than the larger of it and the highest id left (store.queries).
# - The index of conversations by activity is gone: every append changed last_activity, so it
#   cost a page per append, while the listing it served sorts one workspace's conversation rows,
#   which the primary key finds.
_V3 = f"""
DROP INDEX IF EXISTS conversations_by_activity;
CREATE TABLE id_floor (highest_deleted INTEGER NOT NULL);
INSERT INTO id_floor SELECT COALESCE(
    (SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0);
CREATE TABLE messages_v3 (id INTEGER PRIMARY KEY, {_MESSAGE_COLUMNS});
INSERT INTO messages_v3 SELECT * FROM messages;
DROP TABLE messages;
DELETE FROM sqlite_sequence WHERE name = 'messages';
ALTER TABLE messages_v3 RENAME TO messages;
CREATE INDEX messages_by_conversation ON messages (workspace, conversation, id);
CREATE INDEX messages_system ON messages (workspace, conversation, id) WHERE role = 'system'
"""

# Version 4 gives each conversation a record (protocol.md "Version 2" → Conversations): the
# client's title and metadata (NULL when empty), and when it was created — for a conversation
# from before, its oldest row (else its summary, else its last activity). A conversation with
# only a summary gets a record too, so the listing reads one table. The automatic title is not
# stored: it is read from the first real user rows, so every old conversation has one at once.
# Rows of a turn are found by an index, so deleting or editing turns costs what they hold.
_V4 = """
ALTER TABLE conversations ADD COLUMN title TEXT;
ALTER TABLE conversations ADD COLUMN metadata TEXT;
ALTER TABLE conversations ADD COLUMN created_at INTEGER;
UPDATE conversations SET created_at = COALESCE(oldest_timestamp, (SELECT s.updated_at FROM
    summaries s WHERE s.workspace = conversations.workspace
    AND s.conversation = conversations.conversation), last_activity);
INSERT INTO conversations (workspace, conversation, message_count, tokens, last_turn,
    turn_start_id, oldest_timestamp, last_activity, created_at)
    SELECT s.workspace, s.conversation, 0, 0, 0, 0, NULL, s.updated_at, s.updated_at
    FROM summaries s WHERE NOT EXISTS (SELECT 1 FROM conversations c
    WHERE c.workspace = s.workspace AND c.conversation = s.conversation);
CREATE INDEX messages_by_turn ON messages (workspace, conversation, turn)
"""

# Version 5 adds the full-text search index: the ``folded`` column, the FTS5 table, its triggers
# and the catch-up mark (store.search_index). Rows written before it are indexed by the first
# searches.
_V5 = search_index.SCHEMA

#: MIGRATIONS[n] upgrades a database at user_version n to n + 1.
MIGRATIONS: dict[int, str] = {0: _V1, 1: _V2, 2: _V3, 3: _V4, 4: _V5}

# Version 6 (issue 15): the calibration samples of ``reportUsage`` (store/calibration.py). Its
# statements are idempotent, so it works whether or not versions 4 and 5 (issue 14's steps) ran
# before it; until they land, they are empty steps here.
MIGRATIONS.setdefault(3, "")
MIGRATIONS.setdefault(4, "")
MIGRATIONS[5] = calibration.SCHEMA
# Version 7 (issue 22): folds that no writer can leave missing or stale (store.search_index).
MIGRATIONS[6] = search_index.SCHEMA_V7

# Version 8 (issues 22 and 23): the database's own secrets (store/keys.py): the key of the
# cursors and the key of every request's cacheKey; the keys themselves are drawn in Python and
# written by ``keys.ensure`` in the same transaction. Idempotent, like version 6.
MIGRATIONS[7] = keys.SCHEMA
MIGRATIONS[7] = keys.SCHEMA

# Version 9 (issue 24): the folder fingerprints of workspace identities (store/workspaces.py).
MIGRATIONS[8] = workspaces.SCHEMA

# Version 10 (issue 34): replies in flight: each row's status, and the streaming replies with
# their leases and their parts (store/replies.py). Every older row is complete (status NULL).
MIGRATIONS[9] = replies.SCHEMA

# Version 11 (issue 35 item 15): the change marks, so the change watch and the cache read what
# another process changed, not every conversation (store/changes.py). A database before it has
# no marks: each reader's first look after the upgrade reads everything once, as at its start.
MIGRATIONS[10] = changes.SCHEMA

# Version 12 (issue 35 item 5): the record of each conversation that re-keying renamed because
# its id was taken where it went (store/workspaces.py), which listWorkspaces says. A database
# before it renamed no conversation on record: its earlier renames were said in the log only.
MIGRATIONS[11] = workspaces.RENAMES_SCHEMA

# Version 13: the change counter's floor: the marks of a conversation whose history is gone are
# deleted at its commit, so its name leaves the file (store/changes.py). Readers below the floor
# check which of their conversations still exist.
MIGRATIONS[12] = changes.FLOOR_SCHEMA

# Version 14 (issue 42): each row's origin and fences, and a conversation's native compaction
# (store/provider_state.py). Every older row has no origin: version 4's rule sends its state.
MIGRATIONS[13] = provider_state.SCHEMA
# Version 15 (issue 41): conversation trees (store/tree.py; PostgreSQL's version 11): each row's
# parent, a leaf's last activity (``active_at``: when it stopped being the active leaf), the
# inactive branches, what the retention check reads of them (``branches``, ``branch_expiry``) and
# the change watch's count of switches. Every existing conversation becomes one path: each row
# follows the row before it in id order, its newest row the active leaf.
MIGRATIONS[14] = """
ALTER TABLE messages ADD COLUMN parent_id INTEGER;
ALTER TABLE messages ADD COLUMN active_at INTEGER;
UPDATE messages SET parent_id = (SELECT MAX(p.id) FROM messages p
    WHERE p.workspace = messages.workspace AND p.conversation = messages.conversation
    AND p.id < messages.id);
ALTER TABLE conversations ADD COLUMN branches INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN branch_expiry INTEGER;
ALTER TABLE conversations ADD COLUMN switches INTEGER NOT NULL DEFAULT 0;
CREATE TABLE branches (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    head INTEGER NOT NULL,
    parent INTEGER,
    row_count INTEGER NOT NULL,
    newest INTEGER NOT NULL,
    activity INTEGER,
    PRIMARY KEY (workspace, conversation, head)
) WITHOUT ROWID;
"""
# Version 16 (issue 41's benchmark): each row's children by index (store/tree.py; PostgreSQL's
# version 12), so that a switch reads the branch it moves and ``getTree`` counts its page's
# children, not the conversation's every parked row.
MIGRATIONS[15] = """
CREATE INDEX messages_by_parent ON messages (workspace, conversation, parent_id);
"""


def statements(script: str) -> list[str]:
    """The SQL statements of a migration step, in order (a trigger's body kept whole)."""
    found: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                found.append(pending.strip())
            pending = ""
    return found


class NewerSchema(Exception):
    """The database was written by a newer server: it is left as it is, and this server refuses to
    open it."""

    def __init__(self, found: int) -> None:
        super().__init__(
            f"the database has schema version {found}, newer than this server's {SCHEMA_VERSION}; "
            "upgrade chat-history-server (the file was left unchanged)"
        )


def check_version(connection: sqlite3.Connection) -> int:
    """The file's schema version (reading it fails on a file that is not SQLite); a newer one is
    refused before anything writes to the file."""
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise NewerSchema(version)
    return version


def migrate(connection: sqlite3.Connection) -> None:
    """Bring the schema to SCHEMA_VERSION inside one write transaction; refuse a newer one."""
    if check_version(connection) == SCHEMA_VERSION:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = check_version(connection)
        while version < SCHEMA_VERSION:
            for statement in statements(MIGRATIONS[version]):
                connection.execute(statement)
            version += 1
            connection.execute(f"PRAGMA user_version = {version}")
        keys.ensure(connection)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise

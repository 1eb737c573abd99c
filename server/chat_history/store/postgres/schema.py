"""The PostgreSQL schema and its migrations (``schema_version``; run under an advisory lock in one
transaction, so several servers starting at once migrate once and the others wait, then find it
done). Version 1 here holds what SQLite's version 6 holds, with PostgreSQL's own parts:

- ``owner`` on every table of history (default ``current_user``), in every key, and row-level
  security forced on (``owner = current_user``): each database role sees, changes and deletes only
  its own rows, even with plain SQL (the table owner included; superusers bypass it, as always).
- row ids from the sequence ``message_ids`` (never reused), which only its owner can move
  (members may take ids, not set them: version 4), unique per role (``(owner, id)``), so no role
  can make another's next id one that is taken;
- the search index: a GIN trigram index (pg_trgm) over the folded text, the same expression the
  search reads (``FOLDED``): the Python fold where it differs from ASCII lower-casing, else
  ``lower(content COLLATE "C")``, which lower-cases ASCII only, exactly as SQLite's ``lower``;
  kept in step by PostgreSQL on every write (no catch-up mark: with concurrent writers a
  later-committed lower id would be skipped);
- ``store_version``: each role's version counter, which its writes bump (the coherence check,
  store.py) and which stamps the change marks (version 6, store/changes.py); ``write_locks``:
  each role's lock rows, which its writes lock first (locks.py); ``write_tokens``: each
  backend's token of its newest write, committed with it (store.py's lost commit). Row-level
  security keeps every role to its own rows of the three, and no role holds a table-wide
  privilege on them that could lock the whole table (``LOCK TABLE`` needs ``UPDATE``, ``DELETE``
  or ``TRUNCATE`` on the table: members have ``UPDATE`` on a column);
- the tables of history guarded (versions 8 and 9, guard.py): members hold ``SELECT, INSERT`` and
  column-level ``UPDATE`` on them, so none can ``LOCK TABLE`` one in a mode that blocks another
  role's writes; a delete flags the rows ``gone`` as the caller and a ``SECURITY DEFINER``
  trigger of the owner deletes exactly those rows;
- ``search_state``: a view that says nothing waits to be indexed (the SQLite catch-up's mark),
  so the shared delete code never takes FTS5's bulk path here.
"""

from __future__ import annotations

import secrets
from typing import Any

from chat_history.store import keys
from chat_history.store.postgres import guard
from chat_history.store.schema import FIGURES as _FIGURES

SCHEMA_VERSION = 9
#: pg_advisory_xact_lock key of migrations ('chmi').
MIGRATION_LOCK = 0x63686D69

#: The folded text of a row (``{row}``: its alias and a dot, or nothing), as indexed and as
#: searched: one expression, so that the planner matches the search to the index.
_FOLD = 'coalesce({row}folded, lower({row}content COLLATE "C"))'
#: The folded text of a row ``m`` (what the search reads).
FOLDED = _FOLD.format(row="m.")
_INDEXED = f"({_FOLD.format(row='')})"

#: Tables of history (row-level security on each).
OWNED = ("messages", "conversations", "summaries", "turn_figures", "calibration_samples")


def _owned(table: str, grant: str = "SELECT, INSERT, UPDATE, DELETE") -> str:
    """Row-level security on ``table``: each role sees, changes and deletes only its rows (the
    privileges ``grant`` on it, to every role)."""
    return f"""
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON {table} USING (owner = current_user) WITH CHECK (owner = current_user);
GRANT {grant} ON {table} TO PUBLIC;
"""


_V1 = f"""
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE SEQUENCE message_ids;
CREATE TABLE messages (
    id BIGINT PRIMARY KEY DEFAULT nextval('message_ids'),
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    turn BIGINT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_calls TEXT,
    tool_call_id TEXT,
    name TEXT,
    attachments TEXT,
    timestamp BIGINT NOT NULL,
    provider_data TEXT,
    metadata TEXT,
    tokens BIGINT NOT NULL,
    folded TEXT,
    owner TEXT NOT NULL DEFAULT current_user
);
ALTER SEQUENCE message_ids OWNED BY messages.id;
CREATE INDEX messages_by_conversation ON messages (owner, workspace, conversation, id);
CREATE INDEX messages_system ON messages (owner, workspace, conversation, id)
    WHERE role = 'system';
CREATE INDEX messages_by_turn ON messages (owner, workspace, conversation, turn);
CREATE INDEX messages_search ON messages USING gin ({_INDEXED} gin_trgm_ops);
CREATE TABLE conversations (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    message_count BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    last_turn BIGINT NOT NULL,
    turn_start_id BIGINT NOT NULL,
    oldest_timestamp BIGINT,
    last_activity BIGINT NOT NULL,
    title TEXT,
    metadata TEXT,
    created_at BIGINT,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, workspace, conversation)
);
CREATE TABLE summaries (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    summary TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    covers_through_id BIGINT,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, workspace, conversation)
);
CREATE TABLE turn_figures (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    turn BIGINT NOT NULL,
    {", ".join(f"{name} BIGINT NOT NULL" for name in _FIGURES)},
    {", ".join(f"earlier_{name} BIGINT NOT NULL" for name in _FIGURES)},
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, workspace, conversation, turn)
);
CREATE TABLE calibration_samples (
    id BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL,
    model TEXT,
    ratio DOUBLE PRECISION NOT NULL,
    owner TEXT NOT NULL DEFAULT current_user
);
CREATE INDEX calibration_by_key ON calibration_samples (owner, kind, model, id);
CREATE TABLE store_version (id INTEGER PRIMARY KEY CHECK (id = 0), version BIGINT NOT NULL);
INSERT INTO store_version VALUES (0, 0);
CREATE VIEW search_state AS SELECT 0 AS id, 0::BIGINT AS indexed_through;
GRANT SELECT, UPDATE ON store_version TO PUBLIC;
GRANT SELECT ON search_state TO PUBLIC;
GRANT USAGE, SELECT, UPDATE ON SEQUENCE message_ids, calibration_samples_id_seq TO PUBLIC;
""" + "".join(_owned(table) for table in OWNED)

# Version 2: the folder fingerprints of workspace identities (store/workspaces.py).
_V2 = """
CREATE TABLE workspace_folders (
    workspace TEXT NOT NULL,
    machine TEXT NOT NULL,
    folder TEXT NOT NULL,
    remote TEXT,
    inner_path TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, workspace, machine)
);
""" + _owned("workspace_folders")

# Version 3: the database's own secrets (store/keys.py): shared by every role of the database,
# as the cursors they authenticate are (the rows a cursor pages through stay behind RLS).
_V3 = """
CREATE TABLE server_keys (name TEXT PRIMARY KEY, secret BYTEA NOT NULL);
GRANT SELECT ON server_keys TO PUBLIC;
"""

# Version 4 (issue 35 item 7): no role reaches what allocates or serializes another's writes. The
# sequences may be advanced by every role, set only by their owner; ids are unique per role (a
# row with an id another role took, or will take, never blocks one's own); the version counter,
# the lock rows and the commit tokens are per role (row-level security) with no table-wide
# UPDATE or DELETE, so no role can lock them whole.
_V4 = (
    """
REVOKE ALL ON SEQUENCE message_ids, calibration_samples_id_seq FROM PUBLIC;
GRANT USAGE ON SEQUENCE message_ids, calibration_samples_id_seq TO PUBLIC;
ALTER TABLE messages DROP CONSTRAINT messages_pkey, ADD PRIMARY KEY (owner, id);
ALTER TABLE calibration_samples DROP CONSTRAINT calibration_samples_pkey,
    ADD PRIMARY KEY (owner, id);
DROP TABLE store_version;
CREATE TABLE store_version (
    owner TEXT PRIMARY KEY DEFAULT current_user,
    version BIGINT NOT NULL
);
CREATE TABLE write_locks (
    lock BIGINT NOT NULL,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, lock)
);
CREATE TABLE write_tokens (
    backend INTEGER NOT NULL DEFAULT pg_backend_pid(),
    token BYTEA NOT NULL,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, backend)
);
"""
    + _owned("store_version", "SELECT, INSERT")
    + _owned("write_locks", "SELECT, INSERT")
    + _owned("write_tokens", "SELECT, INSERT")
    + """
GRANT UPDATE (version) ON store_version TO PUBLIC;
GRANT UPDATE (lock) ON write_locks TO PUBLIC;
GRANT UPDATE (token) ON write_tokens TO PUBLIC;
"""
)

# Version 5 (issue 34): replies in flight (store/replies.py): each row's status, the streaming
# replies with their leases, and their parts; one streaming reply per conversation and role.
_V5 = (
    """
ALTER TABLE messages ADD COLUMN status TEXT;
CREATE TABLE replies (
    id BIGINT NOT NULL,
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    content TEXT NOT NULL,
    length BIGINT NOT NULL,
    parts BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    writer TEXT NOT NULL,
    lease_until BIGINT NOT NULL,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, id)
);
CREATE UNIQUE INDEX replies_one_per_conversation ON replies (owner, workspace, conversation);
CREATE INDEX replies_by_lease ON replies (lease_until);
CREATE TABLE reply_parts (
    reply BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    text TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, reply, seq)
);
CREATE FUNCTION forget_deleted_reply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM reply_parts WHERE reply = OLD.id AND owner = OLD.owner;
    DELETE FROM replies WHERE id = OLD.id AND owner = OLD.owner;
    RETURN NULL;
END $$;
CREATE TRIGGER messages_reply_delete AFTER DELETE ON messages
    FOR EACH ROW WHEN (OLD.status = 'streaming') EXECUTE FUNCTION forget_deleted_reply();
"""
    + _owned("replies")
    + _owned("reply_parts")
)

# Version 6 (issue 35 item 15): the change marks (store/changes.py), stamped with
# ``store_version`` at each commit; ``change_counter`` is the counter under SQLite's name, so
# the readers' SQL is shared. Each role sees only its own marks (and counter).
_V6 = (
    """
CREATE TABLE change_marks (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    seq BIGINT NOT NULL,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, workspace, conversation)
);
CREATE INDEX change_marks_by_seq ON change_marks (seq);
-- A role sees its own counter; a superuser, whom row-level security does not hold, sees every
-- role's, whose stamps are not in one order: -1 then, and each reader reads every mark.
CREATE VIEW change_counter AS SELECT 1 AS only,
    CASE WHEN count(*) > 1 THEN -1 ELSE coalesce(max(version), 0) END AS seq FROM store_version;
GRANT SELECT ON change_counter TO PUBLIC;
"""
    + _owned("change_marks", "SELECT, INSERT")
    + "GRANT UPDATE (seq) ON change_marks TO PUBLIC;\n"
)

# Version 7 (issue 35 item 5): the record of each conversation re-keying renamed
# (store/workspaces.py ``RENAMES_SCHEMA``, SQLite's version 12), each role's own.
_V7 = """
CREATE TABLE conversation_renames (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    was TEXT NOT NULL,
    came_from TEXT NOT NULL,
    renamed_at BIGINT NOT NULL,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, workspace, conversation)
);
""" + _owned("conversation_renames")

#: MIGRATIONS[n] upgrades a database at version n to n + 1.
MIGRATIONS: dict[int, str] = {0: _V1, 1: _V2, 2: _V3, 3: _V4, 4: _V5, 5: _V6, 6: _V7}
MIGRATIONS.update({7: guard.V8, 8: guard.V9})  # guard.py: the tables no member can lock


class NewerSchema(Exception):
    def __init__(self, found: int) -> None:
        super().__init__(
            f"the database has schema version {found}, newer than this server's "
            f"{SCHEMA_VERSION}; upgrade chat-history-server (the database was left unchanged)"
        )


def _version(raw: Any) -> int | None:
    """The schema version, None when the database has no schema yet."""
    row = raw.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    if not row[0]:
        return None
    found = raw.execute("SELECT version FROM schema_version").fetchone()
    return int(found[0]) if found else 0


def _has_keys(raw: Any) -> bool:
    """Whether the database holds every key this server knows (store.keys.NAMES)."""
    have = {row[0] for row in raw.execute("SELECT name FROM server_keys").fetchall()}
    return set(keys.NAMES) <= have


def migrate(raw: Any) -> None:
    """Bring the schema to SCHEMA_VERSION (``raw``: an autocommit psycopg connection). Nothing
    is written when it is current, so a role that may not create tables can use a database an
    administrator set up."""
    found = _version(raw)
    if found is not None and found > SCHEMA_VERSION:
        raise NewerSchema(found)
    if found == SCHEMA_VERSION and _has_keys(raw):
        return
    # A session lock taken before the transaction begins: the transaction then sees the catalog
    # as another server's migration left it (a lock taken inside would leave this backend's
    # catalog cache as it was when the transaction began).
    raw.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        _migrate_locked(raw)
    finally:
        raw.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def _migrate_locked(raw: Any) -> None:
    raw.execute("BEGIN")
    try:
        found = _version(raw)  # another server may have migrated meanwhile
        if found is None:
            raw.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            raw.execute("INSERT INTO schema_version VALUES (0)")
            raw.execute("GRANT SELECT ON schema_version TO PUBLIC")
            found = 0
        if found > SCHEMA_VERSION:
            raise NewerSchema(found)
        while found < SCHEMA_VERSION:
            raw.execute(MIGRATIONS[found])
            found += 1
            raw.execute("UPDATE schema_version SET version = %s", (found,))
        for name in keys.NAMES:
            raw.execute(
                "INSERT INTO server_keys (name, secret) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (name, secrets.token_bytes(32)),
            )
        raw.execute("COMMIT")
    except BaseException:
        raw.execute("ROLLBACK")
        raise

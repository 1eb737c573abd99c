"""The PostgreSQL schema's migrations after version 1 (``tables``) up to version 7 and from version
10 on, each fixed once released (schema.MIGRATIONS indexes them; versions 8 and 9 are guard.py's).
A later migration's text goes here too."""

from __future__ import annotations

from chat_history.store.postgres.guard import V11_TABLES, guarded, member_columns, owned

# Version 2: the folder fingerprints of workspace identities (store/workspaces.py).
V2 = """
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
""" + owned("workspace_folders")

# Version 3: the database's own secrets (store/keys.py): shared by every role of the database,
# as the cursors they authenticate are (the rows a cursor pages through stay behind RLS).
V3 = """
CREATE TABLE server_keys (name TEXT PRIMARY KEY, secret BYTEA NOT NULL);
GRANT SELECT ON server_keys TO PUBLIC;
"""

# Version 4 (issue 35 item 7): no role reaches what allocates or serializes another's writes. The
# sequences may be advanced by every role, set only by their owner; ids are unique per role (a
# row with an id another role took, or will take, never blocks one's own); the version counter,
# the lock rows and the commit tokens are per role (row-level security) with no table-wide
# UPDATE or DELETE, so no role can lock them whole.
V4 = (
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
    + owned("store_version", "SELECT, INSERT")
    + owned("write_locks", "SELECT, INSERT")
    + owned("write_tokens", "SELECT, INSERT")
    + """
GRANT UPDATE (version) ON store_version TO PUBLIC;
GRANT UPDATE (lock) ON write_locks TO PUBLIC;
GRANT UPDATE (token) ON write_tokens TO PUBLIC;
"""
)

# Version 5 (issue 34): replies in flight (store/replies.py): each row's status, the streaming
# replies with their leases, and their parts; one streaming reply per conversation and role.
V5 = (
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
    + owned("replies")
    + owned("reply_parts")
)

# Version 6 (issue 35 item 15): the change marks (store/changes.py), stamped with
# ``store_version`` at each commit; ``change_counter`` is the counter under SQLite's name, so
# the readers' SQL is shared. Each role sees only its own marks (and counter).
V6 = (
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
    + owned("change_marks", "SELECT, INSERT")
    + "GRANT UPDATE (seq) ON change_marks TO PUBLIC;\n"
)

# Version 7 (issue 35 item 5): the record of each conversation re-keying renamed
# (store/workspaces.py ``RENAMES_SCHEMA``, SQLite's version 12), each role's own.
V7 = """
CREATE TABLE conversation_renames (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    was TEXT NOT NULL,
    came_from TEXT NOT NULL,
    renamed_at BIGINT NOT NULL,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, workspace, conversation)
);
""" + owned("conversation_renames")

# Version 11 (issue 41): conversation trees (store/tree.py, SQLite's version 15): each row's
# parent, a leaf's last activity, the inactive branches (guarded like every table of history)
# and what the retention check reads of them. Every existing conversation becomes one path, each
# row following the one before it: for every role's rows, so the migrating owner (whom
# row-level security holds too, ``FORCE``) reads past it for that one statement, inside the
# migration's transaction (``ALTER TABLE`` holds the table's lock until its commit). The member
# grants of the new columns (``member_columns``) follow, as guard.py's rule says.
V11 = (
    """
ALTER TABLE messages ADD COLUMN parent_id BIGINT;
ALTER TABLE messages ADD COLUMN active_at BIGINT;
ALTER TABLE messages NO FORCE ROW LEVEL SECURITY;
UPDATE messages m SET parent_id = p.before FROM (SELECT owner, id, LAG(id) OVER (
    PARTITION BY owner, workspace, conversation ORDER BY id) AS before FROM messages) AS p
    WHERE m.owner = p.owner AND m.id = p.id AND p.before IS NOT NULL;
ALTER TABLE messages FORCE ROW LEVEL SECURITY;
ALTER TABLE conversations ADD COLUMN branches BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN branch_expiry BIGINT;
ALTER TABLE conversations ADD COLUMN switches BIGINT NOT NULL DEFAULT 0;
CREATE TABLE branches (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    head BIGINT NOT NULL,
    parent BIGINT,
    row_count BIGINT NOT NULL,
    newest BIGINT NOT NULL,
    activity BIGINT,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, workspace, conversation, head)
);
"""
    + owned("branches")
    + "".join(guarded(table, key) for table, key in V11_TABLES.items())
    + member_columns("messages")
    + member_columns("conversations")
)

# Version 12 (issue 41's benchmark): each row's children by index (store/tree.py, SQLite's
# version 16), so that a switch reads the branch it moves and ``getTree`` counts its page's
# children, not the conversation's every parked row.
V12 = """
CREATE INDEX messages_by_parent ON messages (owner, workspace, conversation, parent_id);
"""

"""Version 1 of the PostgreSQL schema (what SQLite's version 6 holds, with PostgreSQL's own
parts: schema.py), fixed once released, and the folded text its search index and the search
share (``FOLDED``)."""

from __future__ import annotations

from chat_history.store.postgres.guard import owned
from chat_history.store.schema import FIGURES as _FIGURES

#: The folded text of a row (``{row}``: its alias and a dot, or nothing), as indexed and as
#: searched: one expression, so that the planner matches the search to the index.
_FOLD = 'coalesce({row}folded, lower({row}content COLLATE "C"))'
#: The folded text of a row ``m`` (what the search reads).
FOLDED = _FOLD.format(row="m.")
_INDEXED = f"({_FOLD.format(row='')})"

#: Tables of history (row-level security on each).
OWNED = ("messages", "conversations", "summaries", "turn_figures", "calibration_samples")

V1 = f"""
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
""" + "".join(owned(table) for table in OWNED)

"""The store's version counter on PostgreSQL, one row per role (schema version 4), and the change
marks its commits stamp with it (schema version 6, store.changes): the statements of the commit
(store.py) and of the coherence check.

Schema version 9: the marks of a conversation whose history is gone (``Transaction.gone``) are
deleted at its commit, so its id and workspace leave the tables with its rows (flagged ``gone``
as the member and deleted by the owner's trigger, as every delete: guard.py), and the role's
counter remembers that commit as its ``floor``. A reader whose position is below the floor
cannot learn from the marks which conversations went: it drops what it cached and the watch
checks which of its conversations still exist (as on SQLite: store.changes)."""

from __future__ import annotations

from collections.abc import Collection

from chat_history.model import Key

#: The role's version counter (a superuser, whom row-level security does not hold, sees every
#: role's: their sum moves whenever any of them commits).
VERSION = "SELECT coalesce(sum(version), 0) FROM store_version"
#: The bump of the role's counter (its row made at its first write).
BUMP = (
    "INSERT INTO store_version (version) VALUES (1) ON CONFLICT (owner) DO UPDATE "
    "SET version = store_version.version + 1 RETURNING version"
)
#: The bump of a commit that deletes marks: the counter's floor moves with it.
_FLOORED_BUMP = (
    "INSERT INTO store_version (version, floor) VALUES (1, 1) ON CONFLICT (owner) DO UPDATE "
    "SET version = store_version.version + 1, floor = store_version.version + 1 RETURNING version"
)
_MARKED = (
    "marked AS (INSERT INTO change_marks (workspace, conversation, seq) "
    "SELECT t.w, t.c, bumped.version FROM bumped, unnest(%s::text[], %s::text[]) AS t(w, c) "
    "ON CONFLICT (owner, workspace, conversation) DO UPDATE SET seq = excluded.seq) "
)
#: The bump with the change marks of the write's conversations (store.changes).
MARKED_BUMP = f"WITH bumped AS ({BUMP}), {_MARKED}SELECT version FROM bumped"
#: The same, with the marks of the gone keys (two more arrays) deleted and the floor moved.
FORGETTING_BUMP = (
    f"WITH bumped AS ({_FLOORED_BUMP}), {_MARKED}, forgotten AS (UPDATE change_marks SET "
    "gone = TRUE FROM unnest(%s::text[], %s::text[]) AS g(w, c) "
    "WHERE workspace = g.w AND conversation = g.c) SELECT version FROM bumped"
)


def commit_statement(
    touched: Collection[Key], gone: Collection[Key]
) -> tuple[str, tuple[list[str], ...]]:
    """The bump of a commit that changed ``touched`` (its marks stamped) and made ``gone``
    (their marks deleted, the floor moved), with its arguments."""
    if not gone:
        return MARKED_BUMP, mark_arrays(touched)
    forgotten = set(gone)
    kept = mark_arrays([key for key in touched if key not in forgotten])
    return FORGETTING_BUMP, (*kept, *mark_arrays(forgotten))


#: Version 9 (see above): ``change_marks`` guarded (members delete by a flag), the counter's
#: floor, and ``change_counter`` with it (a superuser who sees several roles' counters gets the
#: largest floor there is: every look of theirs checks, as every look of theirs reads all marks).
SCHEMA_V9 = """
ALTER TABLE store_version ADD COLUMN floor BIGINT NOT NULL DEFAULT 0;
GRANT UPDATE (floor) ON store_version TO PUBLIC;
CREATE OR REPLACE VIEW change_counter AS SELECT 1 AS only,
    CASE WHEN count(*) > 1 THEN -1 ELSE coalesce(max(version), 0) END AS seq,
    CASE WHEN count(*) > 1 THEN 9223372036854775807 ELSE coalesce(max(floor), 0) END AS floor
    FROM store_version;
"""


def mark_arrays(keys: Collection[Key]) -> tuple[list[str], list[str]]:
    """The workspaces and ids of ``keys``, in a stable order, as two arrays for ``unnest``."""
    ordered = sorted(keys, key=str)
    return [k.workspace for k in ordered], [k.conversation for k in ordered]

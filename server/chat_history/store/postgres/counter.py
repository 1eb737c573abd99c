"""The store's version counter on PostgreSQL, one row per role (schema version 4), and the change
marks its commits stamp with it (schema version 6, store.changes): the statements of the commit
(store.py) and of the coherence check."""

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
#: The bump with the change marks of the write's conversations (store.changes).
MARKED_BUMP = (
    f"WITH bumped AS ({BUMP}), "
    "marked AS (INSERT INTO change_marks (workspace, conversation, seq) "
    "SELECT t.w, t.c, bumped.version FROM bumped, unnest(%s::text[], %s::text[]) AS t(w, c) "
    "ON CONFLICT (owner, workspace, conversation) DO UPDATE SET seq = excluded.seq) "
    "SELECT version FROM bumped"
)


def mark_arrays(keys: Collection[Key]) -> tuple[list[str], list[str]]:
    """The workspaces and ids of ``keys``, in a stable order, as two arrays for ``unnest``."""
    ordered = sorted(keys, key=str)
    return [k.workspace for k in ordered], [k.conversation for k in ordered]

"""The PostgreSQL schema's version and the runner of its migrations (``schema_version``; run under
an advisory lock in one transaction, so several servers starting at once migrate once and the
others wait, then find it done). The texts: version 1 in ``tables``, versions 2 to 7 in
``migrations``, 8 to 10 in ``guard`` (with the role setup every version uses: ``owned``,
``guarded``), 11 (conversation trees) and 12 (children by index) in ``migrations``;
``MIGRATIONS`` indexes them. Version 1 holds what SQLite's version 6 holds, with PostgreSQL's
own parts:

- ``owner`` on every table of history (default ``current_user``), in every key, and row-level
  security forced on (``owner = current_user``, ``guard.owned``): each database role sees,
  changes and deletes only its own rows, even with plain SQL (the table owner included;
  superusers bypass it, as always).
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
from chat_history.store.postgres import guard, migrations, tables

SCHEMA_VERSION = 12
#: pg_advisory_xact_lock key of migrations ('chmi').
MIGRATION_LOCK = 0x63686D69

#: MIGRATIONS[n] upgrades a database at version n to n + 1.
MIGRATIONS: dict[int, str] = {
    0: tables.V1,
    1: migrations.V2,
    2: migrations.V3,
    3: migrations.V4,
    4: migrations.V5,
    5: migrations.V6,
    6: migrations.V7,
    7: guard.V8,  # guard.py: the tables no member can lock
    8: guard.V9,
    9: guard.V10,  # guard.py: origins and native compactions (issue 42)
    10: migrations.V11,  # conversation trees (issue 41)
    11: migrations.V12,  # children by index (issue 41's benchmark)
}


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

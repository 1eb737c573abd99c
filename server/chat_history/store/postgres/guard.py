"""What keeps the database roles apart in the tables of history: row-level security (``owned``,
every table since version 1) and tables no member can lock whole (``guarded``: schema version 8,
issue 35 item 7).

``LOCK TABLE`` in a mode that blocks other writers needs table-level ``UPDATE``, ``DELETE`` or
``TRUNCATE`` (column-level ``UPDATE`` does not count; ``INSERT`` reaches ``ROW EXCLUSIVE``, which
blocks no writer). ``guarded(table, key)`` takes those from every member and keeps deletes
working:

- a column ``gone``; members hold ``SELECT, INSERT`` and ``UPDATE`` on every column but
  ``owner`` (``gone`` included), and no table-level ``UPDATE`` or ``DELETE``;
- a delete is ``UPDATE table SET gone = TRUE WHERE …`` (``dialect`` rewrites the shared SQL's
  ``DELETE FROM``), made as the member: row-level security still chooses the rows, and the row
  count is the delete's;
- ``AFTER INSERT OR UPDATE OF gone`` row trigger ``WHEN (NEW.gone)`` runs ``<table>_forget_gone``,
  a ``SECURITY DEFINER`` function of the schema owner (search path fixed to ``pg_catalog``, the
  table's schema, then ``pg_temp``; the table named with its schema), which deletes exactly that
  row by its key (``owner`` and the table's key columns), and raises when it could not (the
  statement fails whole, rather than leave a flagged row). It acts only on rows the caller's own
  statement passed through the caller's policy: a member cannot name another role's rows to it;
- row-level security is forced on the owner too: the owner's policies ``gone_rows_read`` and
  ``gone_rows_delete`` (``TO`` the migrating role) let it see and delete flagged rows, and only
  those, of other roles (a ``DELETE`` with a ``WHERE`` reads the row, so it needs both).

A flagged row never outlives the statement that flagged it (the trigger runs at its end), so no
read needs to skip ``gone`` rows. A table of history added later gets the same guard with one
call in its migration (and its name in ``GUARDED``); a column added later to a guarded table
needs its member grant (``member_columns(table)``) in the same migration.
"""

from __future__ import annotations

from chat_history.store.postgres.counter import SCHEMA_V9

#: The tables version 8 guards, each with its key without ``owner`` (its primary key is
#: ``owner`` and these). Fixed: a migration's text never changes once released.
V8_TABLES: dict[str, tuple[str, ...]] = {
    "messages": ("id",),
    "conversations": ("workspace", "conversation"),
    "summaries": ("workspace", "conversation"),
    "turn_figures": ("workspace", "conversation", "turn"),
    "calibration_samples": ("id",),
    "workspace_folders": ("workspace", "machine"),
    "replies": ("id",),
    "reply_parts": ("reply", "seq"),
    "conversation_renames": ("workspace", "conversation"),
}
#: Every guarded table (``dialect`` turns their deletes into flags): version 8's, and a table
#: guarded by a later migration (``guarded(table, key)`` there) is added here.
#: The tables version 9 guards: the change marks (counter.py: a gone conversation's are deleted).
V9_TABLES: dict[str, tuple[str, ...]] = {"change_marks": ("workspace", "conversation")}
#: The tables version 10 guards: native compactions (store/provider_state.py, issue 42).
V10_TABLES: dict[str, tuple[str, ...]] = {"compactions": ("workspace", "conversation")}
#: The table version 11 guards: the inactive branches of conversation trees (store/tree.py).
V11_TABLES: dict[str, tuple[str, ...]] = {"branches": ("workspace", "conversation", "head")}
GUARDED: dict[str, tuple[str, ...]] = {**V8_TABLES, **V9_TABLES, **V10_TABLES, **V11_TABLES}


def owned(table: str, grant: str = "SELECT, INSERT, UPDATE, DELETE") -> str:
    """Row-level security on ``table``: each role sees, changes and deletes only its rows (the
    privileges ``grant`` on it, to every role)."""
    return f"""
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON {table} USING (owner = current_user) WITH CHECK (owner = current_user);
GRANT {grant} ON {table} TO PUBLIC;
"""


#: The schema of ``{table}`` (a DO block's expression), where its guard's function lives.
_SCHEMA = "(SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = '{table}'::regclass)"


def member_columns(table: str) -> str:
    """``UPDATE`` on each column of ``table`` but ``owner``, to every role (after a revoke of
    the table-level privilege, which takes the column grants with it)."""
    return f"""
DO $grant$ BEGIN
EXECUTE (SELECT format('GRANT UPDATE (%s) ON {table} TO PUBLIC',
    string_agg(quote_ident(attname), ', ' ORDER BY attnum))
    FROM pg_attribute WHERE attrelid = '{table}'::regclass AND attnum > 0
    AND NOT attisdropped AND attname <> 'owner');
END $grant$;
"""


def guarded(table: str, key: tuple[str, ...]) -> str:
    """The guard of ``table`` (its primary key: ``owner`` and ``key``), to run as its owner."""
    match = " AND ".join(f"{column} = NEW.{column}" for column in ("owner", *key))
    return f"""
ALTER TABLE {table} ADD COLUMN gone BOOLEAN NOT NULL DEFAULT FALSE;
REVOKE UPDATE, DELETE, TRUNCATE ON {table} FROM PUBLIC;
GRANT SELECT, INSERT ON {table} TO PUBLIC;
DO $guard$ BEGIN
EXECUTE format($f$
CREATE FUNCTION %1$I.{table}_forget_gone() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, %1$I, pg_temp AS $body$
BEGIN
    DELETE FROM %1$I.{table} WHERE {match};
    IF NOT FOUND THEN
        RAISE EXCEPTION 'a row of {table} flagged gone was not deleted';
    END IF;
    RETURN NULL;
END $body$$f$, {_SCHEMA.format(table=table)});
END $guard$;
REVOKE ALL ON FUNCTION {table}_forget_gone() FROM PUBLIC;
CREATE TRIGGER {table}_gone AFTER INSERT OR UPDATE OF gone ON {table}
    FOR EACH ROW WHEN (NEW.gone) EXECUTE FUNCTION {table}_forget_gone();
CREATE POLICY gone_rows_read ON {table} FOR SELECT TO CURRENT_USER USING (gone);
CREATE POLICY gone_rows_delete ON {table} FOR DELETE TO CURRENT_USER USING (gone);
""" + member_columns(table)


# Version 8: the guard on every table of history; a streaming row's reply and its parts are
# flagged gone with it, as the caller (``messages_forget_reply``: row-level security chooses
# them as the caller's; it fires before ``messages_gone``, names in order). The delete trigger of
# version 5 stays for a plain ``DELETE`` by the owner or a superuser.
V8 = (
    "".join(guarded(table, key) for table, key in V8_TABLES.items())
    + """
CREATE FUNCTION forget_gone_reply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE reply_parts SET gone = TRUE WHERE reply = NEW.id AND owner = NEW.owner;
    UPDATE replies SET gone = TRUE WHERE id = NEW.id AND owner = NEW.owner;
    RETURN NULL;
END $$;
CREATE TRIGGER messages_forget_reply AFTER UPDATE OF gone ON messages
    FOR EACH ROW WHEN (NEW.gone AND NEW.status = 'streaming') EXECUTE FUNCTION forget_gone_reply();
"""
)

# Version 9: the change marks guarded, and the counter's floor (counter.py).
V9 = "".join(guarded(table, key) for table, key in V9_TABLES.items()) + SCHEMA_V9

# Version 10 (issue 42): each row's origin and fences (a column of the guarded ``messages``: its
# member grant again), and the native compactions, owned and guarded (store/provider_state.py).
V10 = (
    """
ALTER TABLE messages ADD COLUMN IF NOT EXISTS origin TEXT;
CREATE TABLE compactions (
    workspace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    covers_through_id BIGINT NOT NULL,
    items TEXT NOT NULL,
    origin TEXT NOT NULL,
    saved_at BIGINT NOT NULL,
    owner TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (owner, workspace, conversation)
);
"""
    + owned("compactions")
    + member_columns("messages")
    + "".join(guarded(table, key) for table, key in V10_TABLES.items())
)

"""The store's shared SQL, spoken to PostgreSQL: a connection with the face of the ``sqlite3``
module's (``execute`` → a cursor with ``fetchone``/``fetchall``/``fetchmany``, ``rowcount``,
``lastrowid``, iteration; ``executemany``) over a psycopg 3 connection, so that ``queries``,
``records``, ``edits``, ``tail`` and ``calibration`` run unchanged on both engines.

What differs between the engines is here, and only here:

- placeholders (``?`` → ``%s``), ``IS ?`` (→ ``IS NOT DISTINCT FROM``), SQLite's two-argument
  ``MAX`` and ``NOT INDEXED`` hints, upserts keyed by the owner too (row-level security: every
  key is per database role), a boolean literal where SQLite mixes 1 and booleans;
- row ids: a sequence (``message_ids``, never reused, never read under row-level security as
  ``MAX(id)`` would be, set only by its owner) instead of SQLite's ``id_floor``;
- ``PRAGMA data_version``: the store's version counter (``PostgresStore.data_version``), which
  changes when another connection committed, as SQLite's does;
- ``numeric`` results (``SUM`` of ``bigint``) come back as ``int``;
- a ``DELETE FROM`` a guarded table (``guard.GUARDED``, schema version 8) is ``UPDATE … SET
  gone = TRUE`` of the same rows (members hold no table-level ``DELETE``; the owner's trigger
  deletes each flagged row), with the same row count.

Each distinct statement is translated once (``_translate`` is cached)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from chat_history.store import edits, queries
from chat_history.store.postgres.guard import GUARDED

if TYPE_CHECKING:
    import psycopg

#: Statements whose PostgreSQL form is not a mechanical rewrite of the SQLite one, by the name
#: the shared SQL gives them (``module.CONSTANT``): the text is the shared module's own, so an
#: edit of it keeps its rewrite, and a name that is gone fails at import.
BY_NAME: dict[str, str] = {
    # A new row's id comes from the sequence.
    "queries._INSERT_MESSAGE": (
        "INSERT INTO messages (workspace, conversation, turn, role, content, tool_calls, "
        "tool_call_id, name, attachments, timestamp, provider_data, metadata, tokens, folded, "
        "status, origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
    ),
    # The sequence never hands out an id twice: nothing to raise.
    "queries._RAISE_ID_FLOOR": "SELECT 1",
    # The id before a block of fresh ids (the copy then moves the sequence past it, see
    # ``_past_the_copies``). A fork's write locks its role's whole history (it names no
    # conversations: manager.fork), so no other writer of the role takes ids between; another
    # role's ids in the block are its own ((owner, id) is the key).
    "edits.ID_BEFORE_COPY": "SELECT nextval('message_ids') - 1",
}
#: Statements run as the shared SQL has them, then followed by a step of PostgreSQL's own.
AFTER_NAMED = ("queries._INSERT_MESSAGE", "edits.COPY_ROWS")


def statement(name: str) -> str:
    """The shared SQL's statement ``name`` (``module.CONSTANT``)."""
    module, constant = name.split(".")
    text = getattr({"queries": queries, "edits": edits}[module], constant)
    assert isinstance(text, str), name
    return text


_EXACT = {statement(name): text for name, text in BY_NAME.items()}
_INSERT_MESSAGE, _COPY_ROWS = (statement(name) for name in AFTER_NAMED)

_REWRITES: tuple[tuple[str, str], ...] = (
    ("ON CONFLICT (workspace,", "ON CONFLICT (owner, workspace,"),
    (" NOT INDEXED", ""),
    # overview.conversations: a summary-only conversation's has_summary, as the other branch's
    # boolean (SQLite has no boolean type; PostgreSQL will not unite boolean with integer).
    ("s.updated_at, 1 FROM summaries", "s.updated_at, TRUE FROM summaries"),
    ("instr(", "strpos("),
    (" LIMIT -1", " LIMIT ALL"),
    # A streaming row's text (store.rows.STREAMING_TEXT).
    ("group_concat(", "string_agg("),
    # store.changes' fingerprint: each lookup names the role, so its index (which leads with
    # the owner) serves a superuser too, whom row-level security adds no owner condition for.
    (
        "WHERE m.workspace = c.workspace AND m.conversation = c.conversation",
        "WHERE m.owner = c.owner AND m.workspace = c.workspace AND m.conversation = c.conversation",
    ),
    ("ON s.workspace = c.workspace AND", "ON s.owner = c.owner AND s.workspace = c.workspace AND"),
    ("ON r.workspace = c.workspace AND", "ON r.owner = c.owner AND r.workspace = c.workspace AND"),
    ("GROUP BY c.workspace, c.conversation,", "GROUP BY c.owner, c.workspace, c.conversation,"),
)
#: A delete of a guarded table, at the statement's start: its rows are flagged instead.
_DELETE = re.compile(rf"^(\s*)DELETE FROM ({'|'.join(GUARDED)}) WHERE ")
_IS_PARAM = re.compile(r"\bIS \?")
#: SQLite's ``a IS b`` between columns (NULL-safe equality).
_IS_COLUMN = re.compile(r"\bIS (?!NOT\b|NULL\b|TRUE\b|FALSE\b|DISTINCT\b)([a-z_]+\.[a-z_]+)")


@lru_cache(maxsize=1024)
def _translate(sql: str) -> str:
    text = _DELETE.sub(r"\1UPDATE \2 SET gone = TRUE WHERE ", _EXACT.get(sql, sql))
    for old, new in _REWRITES:
        text = text.replace(old, new)
    text = _IS_PARAM.sub("IS NOT DISTINCT FROM ?", text)
    text = _IS_COLUMN.sub(r"IS NOT DISTINCT FROM \1", text)
    return text.replace("%", "%%").replace("?", "%s")


class Cursor:
    """What the shared SQL reads from a statement's result, as ``sqlite3.Cursor`` offers it."""

    def __init__(self, cursor: psycopg.Cursor[Any], lastrowid: int | None = None) -> None:
        self._cursor = cursor
        self.lastrowid = lastrowid
        self.rowcount = cursor.rowcount

    def fetchone(self) -> Any:
        if self._cursor.description is None:
            return None
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        if self._cursor.description is None:
            return []
        return self._cursor.fetchall()

    def fetchmany(self, size: int) -> list[Any]:
        if self._cursor.description is None:
            return []
        return self._cursor.fetchmany(size)

    def __iter__(self) -> Iterator[Any]:
        if self._cursor.description is None:
            return iter(())
        return iter(self._cursor)

    def close(self) -> None:
        self._cursor.close()


class Connection:
    """A psycopg connection (autocommit: the store begins and ends its transactions itself)
    that runs the shared SQL. ``data_version`` answers ``PRAGMA data_version``."""

    def __init__(self, raw: psycopg.Connection[Any], data_version: Callable[[], int]) -> None:
        self.raw = raw
        self._data_version = data_version

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        if sql == "PRAGMA data_version":
            return _Constant(self._data_version())
        cursor = self.raw.cursor()
        cursor.execute(_translate(sql), tuple(params))
        if sql == _INSERT_MESSAGE:
            row = cursor.fetchone()
            return Cursor(cursor, int(row[0]) if row else None)
        if sql == _COPY_ROWS:
            self._past_the_copies(cursor.rowcount)
        return Cursor(cursor)

    def _past_the_copies(self, copied: int) -> None:
        """After edits.COPY_ROWS (ids base + 1 .. base + copied, base + 1 taken by
        edits.ID_BEFORE_COPY): the sequence moved past the block by taking its ids (only the
        sequence's owner may set it). Ids other roles take meanwhile are theirs ((owner, id) is
        the key), and no writer of this role runs beside a fork."""
        self.raw.execute(
            "SELECT count(nextval('message_ids')) FROM generate_series(2, %s)", (copied,)
        )

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.raw.cursor() as cursor:
            cursor.executemany(_translate(sql), [tuple(r) for r in rows])


class _Constant(Cursor):
    """A one-row, one-column result computed without a statement."""

    def __init__(self, value: int) -> None:
        self.lastrowid = None
        self.rowcount = 1
        self._value = value

    def fetchone(self) -> Any:
        return (self._value,)

    def fetchall(self) -> list[Any]:
        return [(self._value,)]

    def fetchmany(self, size: int) -> list[Any]:
        return [(self._value,)]

    def __iter__(self) -> Iterator[Any]:
        return iter([(self._value,)])

    def close(self) -> None:
        pass


#: PostgreSQL's text cannot hold NUL, which a message may (SQLite keeps it). Text is stored with
#: NUL as ESCAPE + "0" and ESCAPE itself (U+FFFE, a noncharacter) doubled, and read back exactly.
ESCAPE = "\ufffe"


def escape_text(text: str) -> str:
    if "\x00" not in text and ESCAPE not in text:
        return text
    return text.replace(ESCAPE, ESCAPE + ESCAPE).replace("\x00", ESCAPE + "0")


def unescape_text(text: str) -> str:
    if ESCAPE not in text:
        return text
    out: list[str] = []
    index = 0
    while True:
        found = text.find(ESCAPE, index)
        if found < 0 or found + 1 >= len(text):
            out.append(text[index:])
            return "".join(out)
        out.append(text[index:found])
        out.append("\x00" if text[found + 1] == "0" else ESCAPE)
        index = found + 2


def register_types(raw: psycopg.Connection[Any]) -> None:
    """``numeric`` (what ``SUM`` of ``bigint`` gives) as ``int`` when whole, like SQLite's;
    text with NUL escaped both ways (``escape_text``)."""
    from psycopg.types.numeric import NumericLoader
    from psycopg.types.string import StrDumperUnknown, TextLoader

    class EscapingDumper(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(escape_text(obj))

    class UnescapingLoader(TextLoader):
        def load(self, data: Any) -> Any:
            text = super().load(data)
            return unescape_text(text) if isinstance(text, str) else text

    raw.adapters.register_dumper(str, EscapingDumper)
    for name in ("text", "varchar", "name", "bpchar"):
        raw.adapters.register_loader(name, UnescapingLoader)

    class WholeNumeric(NumericLoader):
        def load(self, data: Any) -> Any:
            value = super().load(data)
            if isinstance(value, Decimal) and value == value.to_integral_value():
                return int(value)
            return float(value)

    raw.adapters.register_loader("numeric", WholeNumeric)

"""The PostgreSQL engine (protocol.md "Version 3" → Storage engines), one file per job:

- ``store.py``    ``PostgresStore``: its sections (read, snapshot; the steps of the shared
  write section, ``store.commit``), the look that begins each, the commit
- ``readings.py`` the ``Reading``/``Transaction`` it hands out (PostgreSQL's search)
- ``link.py``     its connection (``Link``): opened with its bounds, again when lost; results
  and errors read
- ``locks.py``    the locks every write takes first
- ``tokens.py``   the token that settles a commit whose connection was lost
- ``counter.py``  the version counter a commit bumps, and the change marks it stamps
- ``marks.py``    each section's look (the counter and the change marks past it) and the marks
  remembered; ``folded.py``: the marked conversations' fingerprints read with them
- ``purge.py``    the physical purge of deleted text (``VACUUM FULL``) on a schedule
- ``dialect.py``  the shared SQL as PostgreSQL runs it (a ``sqlite3``-shaped connection)
- ``schema.py``   the schema's version and its migrations, run under an advisory lock
- ``tables.py``   version 1 (the tables of history) and the folded text searched;
  ``migrations.py``: versions 2 to 7
- ``guard.py``    row-level security and the tables no member can lock whole (versions 8, 9)
- ``search.py``   search through a GIN trigram index over the folded text
- ``url.py``      the ``database`` option: checked, never holding a password
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chat_history.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]


def __getattr__(name: str) -> object:
    """``PostgresStore``, its modules imported at the first use: a process on SQLite imports
    only ``url.py`` (store/choice.py checks the ``database`` option with it), not the engine
    (issue 45: ~6 ms of every start, the server's, ``chat-history mcp``'s and ``acp``'s)."""
    if name == "PostgresStore":
        from chat_history.store.postgres.store import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The SQLite engine every connection of the store (server and CLI) uses: sqlean.py, whose
bundled SQLite (3.50) has FTS5's ``secure-delete``, without which the search index would keep
pieces of deleted text in the file (the stdlib module links the system's SQLite, 3.40 on many
machines). sqlean.py is a drop-in build of the stdlib ``sqlite3`` module, so to the type checker
it *is* ``sqlite3`` (it ships no stubs of its own); import it from here only, as ``sqlite3``:
its exceptions are not the stdlib module's. Its bundled extensions stay off: one of them replaces
``lower()``, which the search index's triggers rely on (store.search_index)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3 as sqlite3
else:
    import sqlean as sqlite3

__all__ = ["sqlite3"]

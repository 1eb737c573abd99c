"""The PostgreSQL engine (protocol.md "Version 3" → Storage engines), one file per job:

- ``store.py``    ``PostgresStore``: its sections (read, snapshot, write), coherence, commit
- ``readings.py`` the ``Reading``/``Transaction`` it hands out (PostgreSQL's search)
- ``link.py``     its connection: opened with its bounds, results and errors read
- ``locks.py``    the locks every write takes first
- ``purge.py``    the physical purge of deleted text (``VACUUM FULL``) on a schedule
- ``dialect.py``  the shared SQL as PostgreSQL runs it (a ``sqlite3``-shaped connection)
- ``schema.py``   the schema, row-level security and migrations under an advisory lock
- ``search.py``   search through a GIN trigram index over the folded text
- ``url.py``      the ``database`` option: checked, never holding a password
"""

from chat_history.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]

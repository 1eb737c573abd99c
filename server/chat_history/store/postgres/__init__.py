"""The PostgreSQL engine (protocol.md "Version 3" → Storage engines), one file per job:

- ``store.py``   ``PostgresStore``: connection, sections, per-conversation locks, coherence, purge
- ``dialect.py`` the shared SQL as PostgreSQL runs it (a ``sqlite3``-shaped connection)
- ``schema.py``  the schema, row-level security and migrations under an advisory lock
- ``search.py``  search through a GIN trigram index over the folded text
- ``url.py``     the ``database`` option: checked, never holding a password
"""

from chat_history.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]

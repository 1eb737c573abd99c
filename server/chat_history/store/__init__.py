"""Storage: the seam (``seam.HistoryStore``), the SQLite engine (one file per job below) and the
PostgreSQL engine (``postgres/``, reusing the shared SQL through its dialect):

- ``seam.py``        ``HistoryStore``: the documented contract of an engine; ``write_retried``
- ``commit.py``      ``WritePath``: the write section, written once; each engine supplies its steps
- ``choice.py``      which engine: the ``database`` option, else SQLite in the storage folder
- ``workspaces.py``  stateless SQL of workspace identities: re-keying, folder fingerprints
- ``postgres/``      the PostgreSQL engine (its own ``__init__`` lists its files)
- ``connection.py``  ``Store``: the connection, read/snapshot sections, SQLite's write steps,
  failure mapping
- ``reading.py``     ``Reading``: every query an operation makes; ``sync_cache``
- ``transaction.py`` ``Transaction``: every change an operation makes; ``removed_text``, purged
  at the commit
- ``queries.py``     stateless SQL on one conversation, and the records it returns
- ``records.py``     stateless SQL of conversation records: title, metadata, the paged listing
- ``edits.py``       stateless SQL of the edits: truncate, delete turns, edit a row, copy
- ``search_index.py`` stateless SQL of the full-text search index: schema, catch-up, bulk delete
- ``search_lookup.py`` stateless SQL of a search: the best rows of a scope, ranked in SQL
- ``overview.py``    stateless SQL on the whole database: the totals of ``stats``
- ``rows.py``        a row's columns and its conversion to and from ``StoredMessage``
- ``tail.py``        what the connection remembers of a conversation's end
- ``conversation_cache.py`` the bounded LRU of whole conversations
- ``wal.py``         the WAL reset after a commit that removed text, retried until it finishes
- ``failures.py``    the busy timeout and readable reasons of SQLite's failures
- ``files.py``       the folder and files on disk, owner-only
- ``schema.py``      the schema and its migrations
- ``engine.py``      the SQLite engine (APSW, for FTS5 secure-delete) every connection uses
- ``changes.py``     the change watch's fingerprints of conversations (stateless SQL)
- ``keys.py``        the database's own secrets: the key of listConversations' cursors
- ``calibration.py`` the usage ratios of ``reportUsage`` per (provider kind, model), remembered
- ``keys.py``        the database's own secrets (the key of every request's ``cacheKey``)
"""

from chat_history.model import Key, Summary
from chat_history.store.choice import EngineOptions, database_option, open_store, purge_option
from chat_history.store.connection import Store
from chat_history.store.overview import DatabaseStats
from chat_history.store.queries import ConversationTotals, RowMetaRecord
from chat_history.store.schema import DATABASE_FILE
from chat_history.store.seam import HistoryStore
from chat_history.store.transaction import Reading, Transaction

__all__ = [
    "DATABASE_FILE",
    "ConversationTotals",
    "DatabaseStats",
    "EngineOptions",
    "HistoryStore",
    "Key",
    "Reading",
    "RowMetaRecord",
    "Store",
    "Summary",
    "Transaction",
    "database_option",
    "open_store",
    "purge_option",
]

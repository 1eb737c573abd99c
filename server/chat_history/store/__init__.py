"""SQLite storage: schema and migrations, queries, and the bounded fast-path cache."""

from chat_history.store.db import ConversationTotals, Key, Store, StoredSummary

__all__ = ["ConversationTotals", "Key", "Store", "StoredSummary"]

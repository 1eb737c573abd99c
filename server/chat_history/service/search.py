"""The search family (``wire/methods/search``): ``chatHistory/search`` over the store's index,
with retention run for every conversation with hits before answering (``policy.search`` parses
the query, ``policy.search.rank`` ranks the candidates)."""

from __future__ import annotations

import attrs

from chat_history.model import Key
from chat_history.policy.search.query import parse_query
from chat_history.policy.search.rank import SearchHit, SearchScope, rank
from chat_history.service.manager import ChatHistoryManager


@attrs.frozen
class SearchResult:
    """``search``: the page of hits, most relevant first then newest, and whether more rows
    matched."""

    hits: tuple[SearchHit, ...]
    has_more: bool


def search(manager: ChatHistoryManager, scope: SearchScope, query: str, limit: int) -> SearchResult:
    """The ``limit`` rows in ``scope`` that best match ``query`` (policy.search), with
    snippets and highlights, and whether more matched. Indexes the rows written since the
    last search first (store.search_index), and runs retention for every conversation with
    hits before answering, so only rows a ``get`` would return now are found.
    Raises StorageError."""
    parsed = parse_query(query)
    if not parsed.searchable or not scope.roles:
        return SearchResult((), False)
    retention = manager.retention
    with manager.lock:
        now = manager.clock()
        with manager.store.read() as reading:
            backlog = reading.search_backlog()
        if backlog:
            manager.write((), lambda tx: tx.index_for_search())
        checked: set[Key] = set()
        while True:  # until every conversation on the page has had its retention
            with manager.store.snapshot() as reading:
                rows = reading.search_best(scope, parsed, limit + 1)
                keys = dict.fromkeys(Key(row.workspace, row.conversation) for row in rows)
                due = [
                    key
                    for key in keys
                    if key not in checked and not retention.nothing_due(reading, key, now)
                ]
                checked.update(keys)
            if not due:
                break
            for key in due:
                retention.run(key, now)
        hits, more = rank(rows, parsed, limit)
        return SearchResult(tuple(hits), more)

"""The ``Reading`` and ``Transaction`` a PostgreSQL section hands out: the shared ones, with
PostgreSQL's search (``search``) and nothing waiting to be indexed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from chat_history.policy.search import SearchQuery
from chat_history.policy.search_rank import SearchRow, SearchScope
from chat_history.store.postgres import search
from chat_history.store.postgres.dialect import Connection
from chat_history.store.transaction import Reading, Transaction

if TYPE_CHECKING:
    import psycopg


class PostgresReading(Reading):
    """``Reading`` whose search is PostgreSQL's (``search``); nothing waits to be indexed."""

    def search_backlog(self) -> bool:
        return False

    def search_best(self, scope: SearchScope, query: SearchQuery, count: int) -> list[SearchRow]:
        return search.best_rows(_raw(self), scope, query, count)


class PostgresTransaction(PostgresReading, Transaction):
    def index_for_search(self) -> int:
        return 0


def _raw(reading: Reading) -> psycopg.Connection[Any]:
    return cast(Connection, reading.connection).raw

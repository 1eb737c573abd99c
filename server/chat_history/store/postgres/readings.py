"""The ``Reading`` and ``Transaction`` a PostgreSQL section hands out: the shared ones, with
PostgreSQL's search (``search``), nothing waiting to be indexed, and the change watch's reads
in fewer round trips (the change marks this connection remembers, ``marks``; the marked
conversations' fingerprints and growth in one statement)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, cast

from chat_history.policy.changes import Fingerprint, Growth
from chat_history.policy.search.query import SearchQuery
from chat_history.policy.search.rank import SearchRow, SearchScope
from chat_history.store.postgres import search
from chat_history.store.postgres.dialect import Connection
from chat_history.store.postgres.folded import Folded
from chat_history.store.postgres.marks import Marks
from chat_history.store.transaction import Reading, Transaction

if TYPE_CHECKING:
    import psycopg

#: store.changes' fingerprint of the named conversations (``unnest``: each with the newest id
#: the watch saw), with their growth past that id (NULL: not asked) in the same statement. Each
#: conversation is looked up by its whole key, the owner among the roles that wrote
#: (``store_version``: one row a role; without it the primary key was scanned for the
#: workspace and conversation, ~1 ms at 10,000 conversations; ``OFFSET 0`` keeps the planner
#: from joining the workspace's every conversation instead: 10,001 rows and ~20 ms for a role
#: under row-level security on tables not analyzed yet), its growth on the ids' index (``ORDER
#: BY``: not every row of the conversation on the turns' index).
REFRESH = """
SELECT c.conversation,
    (SELECT MAX(m.id) FROM messages m
     WHERE m.owner = c.owner AND m.workspace = c.workspace AND m.conversation = c.conversation),
    (SELECT MIN(m.id) FROM messages m
     WHERE m.owner = c.owner AND m.workspace = c.workspace AND m.conversation = c.conversation),
    c.message_count, c.tokens, c.last_activity, c.title, c.metadata, s.updated_at,
    r.id * 4294967296 + r.revision, g.rows, g.tokens
FROM unnest(%s::text[], %s::bigint[]) AS k(conversation, after_id)
CROSS JOIN (SELECT owner FROM store_version) AS o
CROSS JOIN LATERAL (SELECT * FROM conversations c WHERE c.owner = o.owner
    AND c.workspace = %s AND c.conversation = k.conversation OFFSET 0) AS c
LEFT JOIN summaries s ON s.owner = c.owner AND s.workspace = c.workspace
    AND s.conversation = c.conversation
LEFT JOIN replies r ON r.owner = c.owner AND r.workspace = c.workspace
    AND r.conversation = c.conversation
LEFT JOIN LATERAL (SELECT count(*) AS rows, coalesce(sum(n.tokens), 0) AS tokens
    FROM (SELECT m.tokens FROM messages m WHERE k.after_id IS NOT NULL AND m.owner = c.owner
    AND m.workspace = c.workspace AND m.conversation = c.conversation AND m.id > k.after_id
    ORDER BY m.id) AS n) AS g ON TRUE
"""


class PostgresReading(Reading):
    """``Reading`` whose search is PostgreSQL's (``search``); nothing waits to be indexed."""

    #: one statement reads the marked conversations' fingerprints and growth (``refresh``)
    REFRESH_IN_ONE_STATEMENT = True
    #: the change marks this connection remembers (set by the store)
    marks: Marks | None = None
    #: what the looks read of the watched workspace's marked conversations (set by the store)
    folded: Folded | None = None

    def search_backlog(self) -> bool:
        return False

    def search_best(self, scope: SearchScope, query: SearchQuery, count: int) -> list[SearchRow]:
        return search.best_rows(_raw(self), scope, query, count)

    def change_position(self) -> int:
        """The change counter the section's look read (with the marks past the one before)."""
        if self.marks is not None and self.marks.position is not None:
            return self.marks.position
        return super().change_position()

    def change_floor(self) -> int:
        """The counter's floor the section's look read (counter.py: marks deleted below it)."""
        return self.marks.forgot if self.marks is not None else super().change_floor()

    def changed_in(self, workspace: str, after: int) -> set[str]:
        """From the marks this connection remembers when they reach back to ``after``."""
        known = self.marks.changed_in(workspace, after) if self.marks is not None else None
        return known if known is not None else super().changed_in(workspace, after)

    def refresh(
        self, workspace: str, before: Mapping[str, Fingerprint], marked: Collection[str]
    ) -> tuple[dict[str, Fingerprint], dict[str, Growth]]:
        """What the look read with the marks (``folded``) where it covers a conversation; the
        others in one statement (``REFRESH``), none when it covers them all."""
        now: dict[str, Fingerprint] = {}
        growth: dict[str, Growth] = {}
        unread: list[str] = []
        for conversation in marked:
            found = self.folded.get(workspace, conversation) if self.folded else None
            old = before.get(conversation)
            if found is None:
                unread.append(conversation)
                continue
            fingerprint = old if found.own else found.fingerprint
            if fingerprint is None:
                continue
            if old is not None and old != fingerprint:
                grew = found.growth(old.last_id or 0)
                if grew is None:
                    unread.append(conversation)
                    continue
                growth[conversation] = grew
            now[conversation] = fingerprint
        if unread:
            read_now, read_growth = self._refresh_read(workspace, before, unread)
            now.update(read_now)
            growth.update(read_growth)
        return now, growth

    def _refresh_read(
        self, workspace: str, before: Mapping[str, Fingerprint], marked: Collection[str]
    ) -> tuple[dict[str, Fingerprint], dict[str, Growth]]:
        ordered = sorted(marked)
        after = [
            (old.last_id or 0) if (old := before.get(c)) is not None else None for c in ordered
        ]
        now: dict[str, Fingerprint] = {}
        growth: dict[str, Growth] = {}
        for row in _raw(self).execute(REFRESH, (ordered, after, workspace)):
            conversation = str(row[0])
            now[conversation] = Fingerprint(*row[1:10])
            if row[10] is not None:
                growth[conversation] = Growth(int(row[10]), int(row[11]))
        return now, {c: g for c, g in growth.items() if before.get(c) != now.get(c)}


class PostgresTransaction(PostgresReading, Transaction):
    def index_for_search(self) -> int:
        return 0


def _raw(reading: Reading) -> psycopg.Connection[Any]:
    return cast(Connection, reading.connection).raw

"""The history family (``wire/methods/history``): append, get, clear, format, prepare and the
summary, each one transaction on the manager with retention applied on every read and write
(``storage_retention``); ``whole`` and ``cache_key`` for the CLI and the recorders. Every read
is of the active path (protocol.md "Version 5": a conversation tree reads as the line of rows
it shows); ``append`` may start a new branch (``tree_steps``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Follow, Key, Message, PruneReport, StoredMessage, Summary
from chat_history.policy.budget import resolve_route
from chat_history.policy.retention import RetentionPlan
from chat_history.service import replies
from chat_history.service.body_memo import BodyMemo
from chat_history.service.manager import ChatHistoryManager, record_in
from chat_history.service.tree_steps import follow_in, with_siblings
from chat_history.store import Reading, Transaction
from chat_history.store.keys import CACHE

if TYPE_CHECKING:  # preparation and providers load every provider: imported when a request needs it
    from chat_history.policy.prepare.request import Prepared
    from chat_history.service.preparation import (
        CompactionProposal,
        PreparedRequest,
        PrepareOptions,
        ProviderRequest,
        StandingIn,
    )


@attrs.frozen
class AppendResult:
    """``append``: the rows as stored, and what retention pruned in the same transaction."""

    messages: tuple[StoredMessage, ...]
    pruned: PruneReport | None


@attrs.frozen
class GetResult:
    """``get``: a page of rows in order, the summary, what retention pruned before the read,
    and whether older rows exist."""

    messages: tuple[StoredMessage, ...]
    summary: Summary | None
    pruned: PruneReport | None
    has_more: bool


def append(
    manager: ChatHistoryManager,
    key: Key,
    messages: Sequence[Message],
    follow: Follow | None = None,
) -> AppendResult:
    """Record ``messages`` at the end of the conversation (created on first append) by the
    recording rules, then apply retention in the same write transaction. With ``follow``
    (version 5's ``parentId``) the rows follow the row it names: one off the active path's end
    starts a new branch there, nothing deleted (``tree_steps.follow_in``); the last new row is
    the active leaf.

    Returns the stored rows (ids, turns, tokens, timestamps, siblings) and what retention
    pruned. Raises InvalidParams (a tool row answering no pending call, a ``parent_id`` of no
    row here, ...), ReplyInProgress (a new branch would leave a streaming reply), StorageError."""
    with manager.lock:
        now = manager.clock()
        cut = manager.settings.max_tool_result_chars

        def record(tx: Transaction) -> tuple[Sequence[StoredMessage], RetentionPlan]:
            totals = follow_in(tx, key, follow, now)
            stored, after = record_in(
                tx, key, totals, messages, max_tool_result_chars=cut, now=now, follow=follow
            )
            plan = manager.retention.apply(tx, key, now, after)
            return with_siblings(tx, key, stored), plan

        stored, plan = manager.write((key,), record)
        manager.retention.finish(key, plan)
        return AppendResult(tuple(stored), plan.report)


def get(
    manager: ChatHistoryManager, key: Key, limit: int | None = None, before_id: int | None = None
) -> GetResult:
    """The conversation's rows after retention, in order: those before ``before_id`` (every
    row when None), only the newest ``limit`` of them when given; with its summary.

    Returns rows, summary, what retention pruned and whether older rows exist.
    Raises StorageError."""
    with manager.lock:
        return manager.retained_read(
            key, lambda tx, pruned: _read_page(tx, key, limit, before_id, pruned)
        )


def _read_page(
    tx: Reading, key: Key, limit: int | None, before_id: int | None, pruned: PruneReport | None
) -> GetResult:
    if limit is None:
        rows = tx.all_rows(key)
        if before_id is not None:
            rows = [row for row in rows if row.id < before_id]
        has_more = False
    else:
        rows, has_more = tx.page(key, limit, before_id)
    return GetResult(with_siblings(tx, key, rows), tx.summary(key), pruned, has_more)


def whole(manager: ChatHistoryManager, key: Key) -> tuple[list[StoredMessage], Summary | None]:
    """The whole history after retention and its summary (format, the CLI, the recorders).
    Raises StorageError."""
    with manager.lock:
        manager.retention.before_read(key, manager.clock())
        with manager.store.read() as tx:
            return tx.all_rows(key), tx.summary(key)


def format(
    manager: ChatHistoryManager, key: Key, provider: str | None = None, model: str | None = None
) -> ProviderRequest:
    """The whole history after retention as the body of ``provider`` (the active one when
    None) for ``model``. Raises InvalidParams (an unknown provider), StorageError."""
    # Lazily: the providers (every one of them) load with the first request that formats.
    from chat_history.providers import format_body
    from chat_history.providers.state_rules import Target
    from chat_history.service.preparation import ProviderRequest

    settings = manager.settings
    route = resolve_route(provider or settings.active_provider, model, settings)
    rows, _ = whole(manager, key)
    breakpoints = settings.context.prompt_cache == "auto"
    body = format_body(
        route.kind, rows, route.model, breakpoints=breakpoints, target=Target.of(route)
    )
    return ProviderRequest(
        provider=route.name, model=route.model, body=body, cache_key=cache_key(manager, key)
    )


def cache_key(manager: ChatHistoryManager, key: Key) -> str:
    """The ``cacheKey`` of every request of ``key``'s conversation (providers.cache_points).
    Raises StorageError."""
    from chat_history.providers import cache_points  # lazily, as ``format``'s

    return cache_points.cache_key(manager.store.secret(CACHE), key)


def prepare(manager: ChatHistoryManager, key: Key, options: PrepareOptions) -> PreparedRequest:
    """The request to send now: the history after retention, the summary standing in for
    the turns it covers, fitted to the route's budget (turn limit, token budget, tool-context
    collapse, recovery) with estimates calibrated by the route's usage reports, and
    formatted for the provider; with a compaction proposal when the history nears the
    budget. Reads only what it can send when the recorded turn figures allow
    (``policy.prepare.readplan``). Sends the request's ``chatHistory/trimmed`` events.

    Returns the body with its estimates, budget, window, what was trimmed, collapsed or
    compacted, and the proposal. Raises InvalidParams (an unknown provider),
    ContextOverflow, StorageError."""
    from chat_history.service import preparation  # lazily, as ``format``'s

    settings = manager.settings
    route = resolve_route(options.provider or settings.active_provider, options.model, settings)
    with manager.lock:
        memo = manager.kept(preparation.ProposalMemo)
        bodies = manager.kept(BodyMemo)
        key_of_cache = cache_key(manager, key)

        def prepare_in(
            tx: Reading,
        ) -> tuple[Prepared, CompactionProposal | None, StandingIn]:
            replies.check_continue(tx, key, options.continue_id)
            return preparation.prepare_in(
                tx,
                settings,
                key,
                route,
                options,
                cache_key=key_of_cache,
                memo=memo,
                bodies=bodies,
            )

        prepared, compaction, standing = manager.retained_read(key, lambda tx, _: prepare_in(tx))
    if prepared.events:
        manager.notify(key, prepared.events)
    return preparation.prepared_request(
        route,
        prepared,
        compaction,
        cache_key=key_of_cache,
        breakpoints=settings.context.prompt_cache == "auto",
        continuing=options.continue_id is not None,
        standing=standing,
        bodies=bodies,
    )


def save_summary(
    manager: ChatHistoryManager, key: Key, summary: str, covers_through_id: int | None = None
) -> Summary:
    """Save (or replace) the conversation's summary, stamped now, as a client's write (the
    conversation is active since); ``covers_through_id`` is the newest row it covers and must be
    a row of the conversation. Returns the saved summary.
    Raises InvalidParams ``covers_through_id`` (then nothing changed), StorageError."""
    with manager.lock:
        saved = Summary(
            summary=summary, updated_at=manager.clock(), covers_through_id=covers_through_id
        )

        def save(tx: Transaction) -> bool:
            if covers_through_id is not None and not tx.has_row(key, covers_through_id):
                raise InvalidParams("covers_through_id", "is not a row of this conversation")
            tx.touch(key, saved.updated_at)
            return tx.save_summary(key, saved)

        manager.write((key,), save)  # a replaced summary is purged at the commit
        return saved


def get_summary(manager: ChatHistoryManager, key: Key) -> Summary | None:
    """The conversation's summary after retention (an expired one is deleted), or None.
    Raises StorageError."""
    with manager.lock:  # one snapshot when retention has nothing due (the common case)
        return manager.retained_read(key, lambda tx, _pruned: tx.summary(key))


def delete_summary(manager: ChatHistoryManager, key: Key) -> bool:
    """Delete the summary as a client's write (the conversation is active since); returns
    whether there was one. Raises StorageError."""
    with manager.lock:

        def delete(tx: Transaction) -> bool:
            deleted = tx.delete_summary(key)
            if deleted:
                tx.touch(key, manager.clock())
            return deleted

        return manager.write((key,), delete)


def clear(manager: ChatHistoryManager, key: Key) -> int:
    """Delete the conversation: its rows, summary and totals. Returns the rows deleted.
    Raises StorageError."""
    with manager.lock:
        return manager.write((key,), lambda tx: tx.clear(key))

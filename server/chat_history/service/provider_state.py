"""The provider state family (``wire/methods/provider_state``; protocol.md "Version 5" →
Provider state that stays valid): ``saveCompaction`` stores what a provider's own compaction
returned, and ``reportProviderError`` fences the state a provider refused, each one write
transaction on the manager. Which state goes where is ``providers.state_rules``; which answer
is a refusal, ``providers.refusals`` (both loaded with the first call, as ``format``'s
providers are). The error a client reports is read once and never stored, logged or echoed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Fence, Key, NativeCompaction, Origin, StoredMessage
from chat_history.policy.budget import resolve_route
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import Transaction

if TYPE_CHECKING:  # the providers load with the first call (as ``format``'s do)
    from chat_history.providers.state_rules import Target


@attrs.frozen
class Fenced:
    """``reportProviderError``'s answer: how many rows (and compactions) the report fenced,
    and the refusal it was (None: no refusal of provider state; nothing was fenced)."""

    fenced: int
    reason: str | None


def save_compaction(
    manager: ChatHistoryManager,
    key: Key,
    covers_through_id: int,
    items: Sequence[Any],
    origin: Origin,
) -> NativeCompaction:
    """Store (or replace) the conversation's native compaction: ``items`` as the provider
    returned them, for its rows through ``covers_through_id``, minted at ``origin`` (a kind
    with a compaction of its own: ``providers.native_compaction.KINDS``); stamped now, a
    client's write. Raises InvalidParams ``origin.provider``, ``covers_through_id`` (then
    nothing changed), StorageError."""
    from chat_history.providers.native_compaction import KINDS

    if origin.provider not in KINDS:
        raise InvalidParams(
            "origin.provider", f"has no native compaction; one of {', '.join(KINDS)}"
        )
    with manager.lock:
        saved = NativeCompaction(
            items=tuple(items),
            covers_through_id=covers_through_id,
            origin=origin,
            saved_at=manager.clock(),
        )

        def save(tx: Transaction) -> None:
            if not tx.has_row(key, covers_through_id):
                raise InvalidParams("covers_through_id", "is not a row of this conversation")
            tx.touch(key, saved.saved_at)
            tx.save_compaction(key, saved)

        manager.write((key,), save)
        return saved


def report_error(
    manager: ChatHistoryManager,
    key: Key,
    provider: str,
    model: str | None,
    status: int,
    body: Any,
) -> Fenced:
    """A provider's error answer to a request of this conversation: when it refused provider
    state (``providers.refusals``), the state of that kind which would go to the target
    (``provider`` and ``model``, resolved as a request's) is fenced from it, on every row and
    the native compaction that carry it, so that the next ``prepare`` leaves it out. Any other
    error fences nothing. Raises InvalidParams ``provider``, StorageError."""
    from chat_history.providers import refusals
    from chat_history.providers.state_rules import Target

    route = resolve_route(provider, model, manager.settings)
    refusal = refusals.classify(route.kind, status, body)
    if refusal is None:
        return Fenced(0, None)
    target = Target.of(route)
    with manager.lock:

        def fence_in(tx: Transaction) -> int:
            rows = _fenced_rows(tx.all_rows(key), refusal.states, target, refusal.missing)
            tx.set_fences(key, rows)
            compaction = tx.compaction(key)
            fenced_compaction = _fenced_compaction(compaction, refusal.states, target)
            if fenced_compaction is not None:
                tx.fence_compaction(key, fenced_compaction)
            return len(rows) + (fenced_compaction is not None)

        return Fenced(manager.write((key,), fence_in), refusal.reason)


def _fenced_rows(
    rows: Sequence[StoredMessage], states: Sequence[str], target: Target, missing: bool
) -> list[StoredMessage]:
    """The rows whose state of ``states`` goes to ``target``, each with its new fences; when the
    refusal was of state ``missing`` (Gemini's missing signature), the rows that call a tool
    without it instead, which then get what stands in (the placeholder)."""
    from chat_history.providers.state_rules import BY_NAME, fence_of, fenced, sent_states

    changed: list[StoredMessage] = []
    for row in rows:
        if row.role != "assistant" or row.status == "streaming":
            continue
        sent = sent_states(row, target)
        added: list[Fence] = []
        for name in states:
            rule = BY_NAME[name]
            if rule.kind != target.kind or fenced(rule, row.fences, target):
                continue
            if missing:
                wanted = rule.instead is not None and bool(row.tool_calls) and name not in sent
            else:
                wanted = name in sent
            if wanted:
                added.append(fence_of(rule, target))
        if added:
            changed.append(attrs.evolve(row, fences=(*row.fences, *added)))
    return changed


def _fenced_compaction(
    compaction: NativeCompaction | None, states: Sequence[str], target: Target
) -> NativeCompaction | None:
    """The native compaction with a fence for ``target``, when its items go there and one of
    ``states`` names them; else None."""
    from chat_history.providers.state_rules import COMPACTION_RULES, compaction_sent, fence_of

    if compaction is None or not compaction_sent(compaction, target):
        return None
    rule = COMPACTION_RULES[compaction.origin.provider]
    if rule.name not in states:
        return None
    return attrs.evolve(compaction, fences=(*compaction.fences, fence_of(rule, target)))

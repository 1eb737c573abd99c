"""The usage family (``wire/methods/usage``): ``chatHistory/reportUsage``, which calibrates later
estimates, and the database's upkeep the CLI runs: ``stats``, ``retain`` (``prune``) and
``purge``."""

from __future__ import annotations

from chat_history.model import Key
from chat_history.policy.calibration import (
    Calibration,
    calibration_of,
    check_usage,
    usage_key,
    usage_ratio,
)
from chat_history.policy.retention import RetentionPlan
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import DatabaseStats


def report(
    manager: ChatHistoryManager,
    provider: str | None,
    model: str | None,
    estimated_tokens: int,
    prompt_tokens: int,
) -> Calibration:
    """Record ``prompt_tokens / estimated_tokens`` (clipped) for the calibration of
    ``provider`` (kind or alias; None: the active provider) and ``model``, shared by every
    conversation and process. Returns the new calibration of that key.
    Raises InvalidParams (a figure below 1, an unknown provider), StorageError."""
    estimated, prompt = check_usage(estimated_tokens, prompt_tokens)
    with manager.lock:
        key = usage_key(provider, model, manager.settings)
        ratio = usage_ratio(estimated, prompt)
        # Shared by every conversation: the write names none (it takes the whole database).
        ratios = manager.write((), lambda tx: tx.add_calibration_ratio(key.kind, key.model, ratio))
        return calibration_of(ratios)


def stats(manager: ChatHistoryManager) -> DatabaseStats:
    """Counts (a conversation counts as the listing shows it) and the oldest/newest
    timestamps of the whole database. Raises StorageError."""
    with manager.lock, manager.store.read() as tx:
        return tx.stats()


def retain(manager: ChatHistoryManager, key: Key, *, dry_run: bool = False) -> RetentionPlan:
    """Storage retention of one conversation now (the CLI's ``prune``). With ``dry_run``,
    the same plan on the same row metadata, and nothing deleted.

    Returns the plan (ids deleted, report, events, whether the summary expired).
    Raises StorageError."""
    with manager.lock:
        now = manager.clock()
        if dry_run:
            return manager.retention.dry_run(key, now)
        return manager.retention.run(key, now)


def purge(manager: ChatHistoryManager) -> bool:
    """The engine's purge of deleted text, now (the CLI's ``purge``)."""
    return manager.store.purge_now()

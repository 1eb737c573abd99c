"""The CLI's ``--json`` answers in the wire's spelling (``show``, ``stats``, ``prune``,
``conversations``): the server's own results translated as the wire would."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from chat_history.wire.protocol import wire, wire_summary

if TYPE_CHECKING:  # the manager's result types, translated below (no import at run time)
    from chat_history.service.conversations import ConversationInfo
    from chat_history.service.history import GetResult
    from chat_history.service.storage_retention import PruneRun
    from chat_history.store import DatabaseStats


def wire_history(workspace: str, conversation: str, result: GetResult) -> dict[str, Any]:
    """``chat-history show --json``: one conversation's rows and summary."""
    return {
        "workspace": workspace,
        "conversationId": conversation,
        "messages": wire(result.messages),
        "summary": wire_summary(result.summary),
    }


def wire_stats(
    path: str,
    file_bytes: int,
    wal_bytes: int,
    stats: DatabaseStats,
    settings: Mapping[str, Any],
    sources: Mapping[str, str],
) -> dict[str, Any]:
    """``chat-history stats --json``."""
    return {
        "database": path,
        "fileBytes": file_bytes,
        "walBytes": wal_bytes,
        "messages": stats.messages,
        "conversations": stats.conversations,
        "workspaces": stats.workspaces,
        "summaries": stats.summaries,
        "oldestMessage": stats.oldest_timestamp,
        "newestMessage": stats.newest_timestamp,
        "settings": dict(settings),
        "settingSources": dict(sources),
    }


def wire_listing(conversations: Sequence[ConversationInfo]) -> dict[str, Any]:
    """Conversations as ``listConversations`` lists them (``chat-history conversations --json``
    prints the same entries, grouped by workspace)."""
    return {"conversations": wire(conversations)}


def wire_prune_run(run: PruneRun) -> dict[str, Any]:
    """``chat-history prune --json``: a storage retention run, in the wire's spelling."""
    return {
        "dryRun": run.dry_run,
        "conversationsChecked": run.checked,
        "droppedMessages": run.dropped_messages,
        "deletedSummaries": run.deleted_summaries,
        "reasons": {
            rule: {"messages": m, "turns": t, "conversations": c}
            for rule, (m, t, c) in run.per_rule.items()
        },
        "conversations": [
            {
                "workspace": item.key.workspace,
                "conversationId": item.key.conversation,
                "droppedMessages": item.dropped_messages,
                "retainedTurns": item.retained_turns,
                "reasons": {
                    rule: {"messages": m, "turns": t} for rule, (m, t) in item.reasons.items()
                },
                "summaryDeleted": item.summary_deleted,
            }
            for item in run.conversations
        ],
    }

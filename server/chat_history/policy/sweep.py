"""The orphan sweep (semantics.md, prepare step 8): the safety net that makes even an inconsistent
history (restored, hand-edited) pair every tool result with its call and every call with a result.

Whole-turn operations never orphan anything; this only repairs what was already broken.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from chat_history.model import Message, ToolCall
from chat_history.policy.turns import is_real_user


def sweep_orphans(rows: Sequence[Message]) -> list[Message]:
    """Drop tool rows that answer no pending call of the nearest structured carrier before them,
    strip unanswered call ids from carriers, and drop a carrier left with no calls and no text."""
    answered: set[tuple[int, str]] = set()
    keep_tool: list[bool] = [True] * len(rows)
    carrier_at: int | None = None
    pending: set[str] = set()
    for index, row in enumerate(rows):
        if row.role == "assistant" and row.tool_calls:
            carrier_at = index
            pending = {call.id for call in row.tool_calls}
        elif row.role == "tool":
            call_id = row.tool_call_id
            if carrier_at is not None and call_id in pending:
                pending.discard(call_id)
                answered.add((carrier_at, call_id))
            else:
                keep_tool[index] = False
        elif row.role == "user" and is_real_user(row):
            # A real prompt closes the exchange: later tool rows cannot answer earlier calls.
            carrier_at = None
            pending = set()
    out: list[Message] = []
    for index, row in enumerate(rows):
        if row.role == "tool":
            if keep_tool[index]:
                out.append(row)
            continue
        if row.role == "assistant" and row.tool_calls:
            kept: dict[str, ToolCall] = {}
            for call in row.tool_calls:  # one result answers one call: a repeated id is dropped
                if (index, call.id) in answered and call.id not in kept:
                    kept[call.id] = call
            calls = tuple(kept.values())
            if len(calls) == len(row.tool_calls):
                out.append(row)
            elif calls or row.content.strip():
                # A row sent changed carries no provider state: a thinking signature or a
                # thought signature is bound to the calls the model made with it
                # (providers.state_rules).
                out.append(attrs.evolve(row, tool_calls=calls, provider_data={}))
            continue
        out.append(row)
    return out

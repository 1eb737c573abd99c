"""Edit, rewind and branch (protocol.md "Version 2" → Edit, rewind, branch; semantics.md
"Rewinding and turn numbers"): which stored rows ``truncate``, ``deleteTurns`` and ``fork``
select, what happens to the summary, and which edits are allowed.

Every function takes the conversation's stored rows oldest first and validates what the client
named against them, raising InvalidParams with the wire field. Turn numbers are the stored ones
(the ``turn`` of StoredMessage): none of these operations renumbers anything, and the turn of a
row appended afterwards continues from :func:`last_turn_after`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Message, StoredMessage
from chat_history.policy.recording import truncate_tool_result
from chat_history.policy.turns import is_real_user

#: ``deleteTurns`` names 1–1,000 turns.
MAX_TURNS = 1_000

R = TypeVar("R", bound=StoredMessage)


def row_by_id(rows: Sequence[R], row_id: int, field: str) -> R:
    """The row of this conversation with ``row_id``, or InvalidParams ``field`` (ids are always
    scoped to the request's conversation: another conversation's id is unknown here)."""
    for row in rows:
        if row.id == row_id:
            return row
    raise InvalidParams(field, "is not a message of this conversation")


def last_turn_after(remaining: Sequence[StoredMessage]) -> int:
    """The turn the next append continues from: the highest remaining turn (0 when nothing
    remains). A real user message then opens this + 1; any other row joins it."""
    return max((row.turn for row in remaining), default=0)


# --- truncate ------------------------------------------------------------------------------------


@attrs.frozen
class TruncatePlan:
    """``truncate(fromId)``: the rows to delete (``fromId`` and every later row) and whether the
    summary goes with them."""

    deleted: tuple[StoredMessage, ...]
    remaining: tuple[StoredMessage, ...]
    summary_deleted: bool


def plan_truncate(
    rows: Sequence[StoredMessage], from_id: int, summary_covers_through: int | None
) -> TruncatePlan:
    """Row ``from_id`` and every later row go; a summary whose ``coversThroughId`` ≥ ``from_id``
    goes too (one without coverage stays). ``from_id`` must be a row here (InvalidParams
    ``fromId``)."""
    row_by_id(rows, from_id, "from_id")
    deleted = tuple(row for row in rows if row.id >= from_id)
    remaining = tuple(row for row in rows if row.id < from_id)
    summary = summary_covers_through is not None and summary_covers_through >= from_id
    return TruncatePlan(deleted, remaining, summary)


# --- deleteTurns ---------------------------------------------------------------------------------


def check_turns(turns: Sequence[int]) -> frozenset[int]:
    """The turn numbers ``deleteTurns`` names: 1–1,000 of them (InvalidParams ``turns``), none
    negative (InvalidParams ``turns[i]``)."""
    if not turns:
        raise InvalidParams("turns", "must name at least one turn")
    if len(turns) > MAX_TURNS:
        raise InvalidParams("turns", f"must name at most {MAX_TURNS} turns, got {len(turns)}")
    for index, turn in enumerate(turns):
        if turn < 0:
            raise InvalidParams(f"turns[{index}]", f"must be 0 or more, got {turn}")
    return frozenset(turns)


@attrs.frozen
class DeleteTurnsPlan:
    """``deleteTurns``: the rows to delete, and how many of the named turns had rows."""

    deleted: tuple[StoredMessage, ...]
    deleted_turns: int


def plan_delete_turns(rows: Sequence[StoredMessage], turns: Sequence[int]) -> DeleteTurnsPlan:
    """Every row of the named turns, system rows included; turn 0 is the leading system rows and
    the rows before the first real user message (they are stored with turn 0). Numbers naming no
    turn are ignored; ``deleted_turns`` counts the named turns that had rows. The summary
    stays."""
    named = check_turns(turns)
    deleted = tuple(row for row in rows if row.turn in named)
    return DeleteTurnsPlan(deleted, len({row.turn for row in deleted}))


# --- editMessage ---------------------------------------------------------------------------------


def edited_content(row: Message, content: str, max_tool_result_chars: int) -> str:
    """The content an edit stores: a tool result is cut by ``maxToolResultChars`` as on append.
    An edit that would change whether a ``user`` row is a real user message (so its turn) is
    InvalidParams ``content``."""
    if row.role == "user":
        was = is_real_user(row)
        if is_real_user(attrs.evolve(row, content=content)) != was:
            raise InvalidParams(
                "content",
                "would turn a real user message into an in-turn row such as [Tool results]"
                if was
                else "would turn an in-turn user row (such as [Tool results]) into a real user "
                "message",
            )
    if row.role == "tool":
        return truncate_tool_result(content, max_tool_result_chars)
    return content


# --- fork ----------------------------------------------------------------------------------------


def fork_end(rows: Sequence[StoredMessage], through_id: int) -> int:
    """The id ``fork`` copies through when asked for ``through_id`` (protocol.md "Version 3"):
    a row inside a tool exchange (a call at or before it answered after it) takes the copy
    through the last of those answers, so the copy never holds a call without its result.
    ``rows``: the rows around ``through_id`` (its turn is enough: answers join their call's
    turn), in order."""
    calls = {
        call.id
        for row in rows
        if row.id <= through_id and row.role == "assistant"
        for call in row.tool_calls
    }
    answers = [
        row.id
        for row in rows
        if row.id > through_id and row.role == "tool" and row.tool_call_id in calls
    ]
    return max(answers, default=through_id)


def fork_through(
    last_id: int | None, through_id: int | None, around: Sequence[StoredMessage]
) -> int:
    """The id ``fork`` copies through: the source's newest row (``last_id``) by default, else
    ``through_id`` carried through the answers of a tool exchange it falls inside
    (``fork_end``). ``around``: the rows of ``through_id``'s turn, oldest first (empty when it is
    no row of the source). A source without rows is InvalidParams ``conversation_id``; a
    ``through_id`` that is not a row of the source is InvalidParams ``through_id``."""
    if last_id is None:
        raise InvalidParams("conversation_id", "has no messages to fork")
    if through_id is None:
        return last_id
    row_by_id(around, through_id, "through_id")
    return fork_end(around, through_id)


def fork_summary_cover(
    covers_through: int | None, through: int, covered_rows: int, base: int
) -> int | None:
    """The ``coversThroughId`` of the fork's copy of the summary, or None when the summary is not
    copied: one without coverage, whose coverage reaches past the copy (``through``), or that
    covers no copied row, is not. ``covered_rows``: how many source rows have ids ≤
    ``covers_through``; the copy of the n-th source row has id ``base`` + n. Coverage maps to the
    copy of the newest copied row at or before it (the covered row itself when it still exists),
    so the copy stands in for the same turns."""
    if covers_through is None or covers_through > through or covered_rows == 0:
        return None
    return base + covered_rows

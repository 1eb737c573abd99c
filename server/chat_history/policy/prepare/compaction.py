"""Compaction (semantics.md "Version 2": Summary standing in, When compaction is proposed; and
step 7, the context note): pure rules on a conversation's turns, used by
``policy/prepare/context.py``.

- **Standing in** (step 2½): a summary whose ``coversThroughId`` is X stands in for every
  completed turn whose rows all have ids ≤ X (a prefix of the turns; never the newest turn).
  Those turns are not sent; their system rows move up; the summary goes in the context note.
  A summary whose X lies before every stored non-system row (storage retention deleted all it
  covered) still goes in the note, standing in for turns no longer stored (``precedes``).
- **The context note** (step 7): one ``user`` row after the system block, when turns were
  dropped (steps 4-6) or stood in for.
- **Proposals**: when the request nears the budget, the span of uncovered turns before the
  newest ``keepRecentTurns`` that a compaction request can hold, and that request's rows.

This module knows turns, rows and estimates, not how ``prepare`` trims: ``context.py`` hands it
each turn as step 3 sends it.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import attrs

from chat_history.model import Message, StoredMessage, Summary
from chat_history.policy.calibration import Calibration
from chat_history.policy.sweep import sweep_orphans
from chat_history.policy.tokens import row_tokens
from chat_history.policy.turns import Turn, segment
from chat_history.settings import ContextSettings

#: The context note's line when steps 4-6 dropped turns.
BREADCRUMB = "[earlier turns omitted to fit the context window]"
#: Opens the summary's part of the context note.
SUMMARY_HEADER = "[Summary of earlier turns]\n"
#: Joins the note's parts (the breadcrumb line, the summary).
NOTE_SEPARATOR = "\n\n"

#: The built-in compaction prompt (``context.compaction.prompt`` replaces it).
DEFAULT_PROMPT = (
    "Summarize the conversation above for your own later use: this summary will replace those "
    "turns, so keep everything needed to continue the work without them. Include the user's "
    "goals and constraints; the decisions made and why; the files, commands, names and values "
    "involved; what was done and what remains open; and the user's own short requests, quoted "
    "verbatim. If a summary of earlier turns is given above, carry what still matters from it "
    "into this one. Use at most {max_tokens} tokens. Reply with the summary only, without any "
    "introduction or closing remark."
)


def summary_text(summary: str | None) -> str | None:
    """The summary as the note sends it; a blank summary is no summary."""
    if summary is None or not summary.strip():
        return None
    return summary


def context_note(
    summary: str | None, *, has_coverage: bool, stands_in: bool, dropped: bool
) -> Message | None:
    """Step 7's note, or None when it has nothing to say: the breadcrumb line when steps 4-6
    dropped turns; then the summary when it stands in for turns (it covers stored turns, or
    ``precedes`` the stored ones), or when it has no ``coversThroughId`` (a summary of the kind
    ``004`` injects) and turns were dropped."""
    parts: list[str] = []
    if dropped:
        parts.append(BREADCRUMB)
    text = summary_text(summary)
    if text is not None and (stands_in or (dropped and not has_coverage)):
        parts.append(SUMMARY_HEADER + text)
    if not parts:
        return None
    return Message(role="user", content=NOTE_SEPARATOR.join(parts))


def note_of(rows: Sequence[Message]) -> Message | None:
    """The context note of a request's ``rows`` (as ``prepare_rows`` or ``propose`` built
    them), or None: the first row after the system rows when it is one this module made, a
    user row that is not stored whose text opens with the breadcrumb or the summary header
    (a stored row, whatever its text, is never the note)."""
    first = next((row for row in rows if row.role != "system"), None)
    if first is None or first.role != "user" or isinstance(first, StoredMessage):
        return None
    return first if first.content.startswith((BREADCRUMB, SUMMARY_HEADER)) else None


# -- step 2½: the summary stands in for the turns it covers ---------------------------------------


@attrs.frozen
class Coverage:
    """What a summary stands in for: the oldest ``turns`` turns, their system rows (which move
    up) and their other stored rows (``compactedMessages``)."""

    turns: int = 0
    moved_system: tuple[Message, ...] = ()
    messages: int = 0


NO_COVERAGE = Coverage()


def _last_id(rows: Sequence[Message]) -> int | None:
    """The largest id of a turn's rows; None when a row is not a stored row."""
    newest = -1
    for row in rows:
        if not isinstance(row, StoredMessage):
            return None
        newest = max(newest, row.id)
    return newest


def honoured_coverage(summary: Summary | None) -> int | None:
    """The ``coversThroughId`` that ``prepare`` honours: None without one, or for a blank
    summary (which is no summary)."""
    if summary is None or summary_text(summary.summary) is None:
        return None
    return summary.covers_through_id


def oldest_spoken_id(rows: Sequence[Message]) -> int | None:
    """The id of the oldest non-system row of a conversation's ``rows`` (in order); None when
    there is none, or it is not a stored row."""
    first = next((row for row in rows if row.role != "system"), None)
    return first.id if isinstance(first, StoredMessage) else None


def precedes(covers_through_id: int | None, oldest_spoken: int | None) -> bool:
    """Whether a summary's coverage lies before every stored non-system row (the oldest is
    ``oldest_spoken``): all it covered was deleted (storage retention), so it stands in for
    turns no longer stored and still goes in the context note. (A ``truncate`` at or before X
    deletes the summary, and every turn starts with a non-system row, so a coverage inside a
    stored turn, the running one included, never precedes.)"""
    if covers_through_id is None or oldest_spoken is None:
        return False
    return covers_through_id < oldest_spoken


def covered_row_ids(rows: Sequence[StoredMessage], summary: Summary | None) -> frozenset[int]:
    """The ids of the stored rows (not system rows, which are still sent) that ``summary``
    stands in for, among a conversation's ``rows`` (what the CLI's ``show`` marks)."""
    messages: Sequence[Message] = rows
    segmented = segment(messages)
    count = coverage(segmented.turns, honoured_coverage(summary)).turns
    return frozenset(
        row.id
        for turn in segmented.turns[:count]
        for row in turn.rows
        if isinstance(row, StoredMessage) and row.role != "system"
    )


def coverage(turns: Sequence[Turn[Message]], covers_through_id: int | None) -> Coverage:
    """The completed turns whose rows all have ids ≤ ``covers_through_id``: a prefix, since ids
    grow in insertion order, and never the newest turn (which may still be running)."""
    if covers_through_id is None:
        return NO_COVERAGE
    count = messages = 0
    moved: list[Message] = []
    for turn in turns[:-1]:
        last = _last_id(turn.rows)
        if last is None or last > covers_through_id:
            break
        count += 1
        for row in turn.rows:
            if row.role == "system":
                moved.append(row)
            else:
                messages += 1
    if count == 0:
        return NO_COVERAGE
    return Coverage(turns=count, moved_system=tuple(moved), messages=messages)


# -- proposals ------------------------------------------------------------------------------------


def compaction_due(
    estimate: int, budget: int, settings: ContextSettings, uncovered_turns: int
) -> bool:
    """Whether ``prepare`` proposes a compaction: enabled, a positive budget, the (calibrated)
    estimate after steps 2½-3 above budget x ``triggerRatio``, and more than ``keepRecentTurns``
    turns (the running one included) after the current coverage."""
    if not settings.compaction_enabled or budget <= 0:
        return False
    if uncovered_turns <= settings.compaction_keep_recent_turns:
        return False
    # Decimal of the ratio as written, as the budget's ratio is (0.8 x 1000 is 800, not more).
    return estimate > Decimal(budget) * Decimal(repr(settings.compaction_trigger_ratio))


def prompt_row(settings: ContextSettings) -> Message:
    """The compaction request's last row: the ``prompt`` setting, else the built-in prompt (a
    blank setting counts as none: it would send an empty user message)."""
    custom = settings.compaction_prompt
    if custom is not None and custom.strip():
        return Message(role="user", content=custom)
    max_tokens = settings.compaction_max_summary_tokens
    return Message(role="user", content=DEFAULT_PROMPT.format(max_tokens=f"{max_tokens:,}"))


@attrs.frozen
class SpanTurn:
    """One uncovered turn a proposal may cover: its rows as step 3 sends them, and the turn."""

    sent: tuple[Message, ...]
    turn: Turn[Message]


@attrs.frozen(kw_only=True)
class Proposal:
    """``PreparedRequest.compaction`` before formatting: save the reply to ``rows`` as the
    summary with ``coversThroughId = through_id``; it then stands in for ``covered_turns``."""

    through_id: int
    covered_turns: int
    estimated_tokens: int
    raw_estimated_tokens: int
    rows: tuple[Message, ...]


def propose(
    *,
    system_block: Sequence[Message],
    summary: str | None,
    span: Sequence[SpanTurn],
    covered_turns: int,
    settings: ContextSettings,
    budget: int,
    calibration: Calibration,
) -> Proposal | None:
    """The proposal over the longest prefix of ``span`` (the uncovered turns before the newest
    ``keepRecentTurns``) whose compaction request fits budget - ``maxSummaryTokens``; None when
    not even one turn fits.

    The request is the system block (leading rows and those of covered turns), the note with the
    current summary (cumulative summaries), the span's turns as steps 3 and 8 send them, then the
    prompt. Its estimate grows with every turn, so the longest fitting prefix is what lowering
    ``throughId`` turn by turn from the whole span arrives at; the orphan sweep repairs within a
    turn (a real prompt closes every exchange), so each turn is swept on its own."""
    limit = budget - settings.compaction_max_summary_tokens
    text = summary_text(summary)
    head = list(system_block)
    if text is not None:
        head.append(Message(role="user", content=SUMMARY_HEADER + text))
    prompt = prompt_row(settings)
    raw = sum(row_tokens(row) for row in head) + row_tokens(prompt)
    body: list[Message] = []
    through: int | None = None
    taken = 0
    for item in span:
        swept = sweep_orphans(item.sent)
        cost = sum(row_tokens(row) for row in swept)
        last = _last_id(item.turn.rows)
        if last is None or calibration.apply(raw + cost) > limit:
            break
        raw += cost
        body.extend(swept)
        through = last
        taken += 1
    if through is None:
        return None
    return Proposal(
        through_id=through,
        covered_turns=covered_turns + taken,
        estimated_tokens=calibration.apply(raw),
        raw_estimated_tokens=raw,
        rows=(*head, *body, prompt),
    )

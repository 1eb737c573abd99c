"""What one request asks of ``prepare_rows`` (``RequestOptions``) and what it gets
(``Prepared``, with its ``RequestTrim`` report), and the options worked out once
(``_Request``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Message, Summary, ToolSpec, Trimmed
from chat_history.policy.budget import Route
from chat_history.policy.calibration import UNCALIBRATED, Calibration
from chat_history.policy.prepare.collapse import TurnFigures
from chat_history.policy.prepare.compaction import (
    Proposal,
    summary_text,
)
from chat_history.policy.prepare.steps import Steps
from chat_history.policy.prepare.window import OmittedTurns, RequestTrimReason
from chat_history.policy.tokens import row_tokens
from chat_history.settings import ContextSettings


@attrs.frozen(kw_only=True)
class RequestTrim:
    """``PreparedRequest.trimmed``: totals over steps 4-6; ``reason`` names the last step that
    dropped turns. ``tokens_before`` is the estimate after the collapse, before step 4; both
    token figures are calibrated.

    ``dropped_messages`` counts the dropped turns' stored rows other than their system rows
    (which move up), whatever step 3 had made of them (semantics.md step 10): every stored row is
    sent, collapsed in a sent turn (``collapsed_tool_rows``), dropped or compacted."""

    dropped_messages: int
    dropped_turns: int
    retained_turns: int
    reason: RequestTrimReason
    tokens_before: int
    tokens_after: int


@attrs.frozen(kw_only=True)
class Prepared:
    """What ``prepare`` sends, with its report.

    ``rows`` are ready for the provider formatter; ``budget`` is None when proactive trimming is
    off; ``events`` are the ``chatHistory/trimmed`` notifications (scope ``request``), one per
    step that dropped turns. ``estimated_tokens`` and the token figures of ``trimmed`` and
    ``events`` are calibrated by ``calibration``; ``raw_estimated_tokens`` is not.
    ``collapsed_*`` count sent turns only; ``compacted_*`` the turns the summary stood in for and
    their stored rows other than system rows. ``compaction`` is the proposal, if any."""

    rows: tuple[Message, ...]
    estimated_tokens: int
    budget: int | None
    context_window: int | None
    trimmed: RequestTrim | None
    collapsed_tool_rows: int
    collapsed_turns: int
    events: tuple[Trimmed, ...]
    raw_estimated_tokens: int
    calibration: Calibration
    compacted_turns: int
    compacted_messages: int
    compaction: Proposal | None


def _check_non_negative(field: str, value: int) -> None:
    if value < 0:
        raise InvalidParams(field, "must be at least 0")


def _summary_parts(summary: str | Summary | None) -> tuple[str | None, int | None]:
    """The summary's text (None when blank) and its coverage; a plain string covers nothing."""
    if isinstance(summary, Summary):
        text = summary_text(summary.summary)
        return text, summary.covers_through_id if text is not None else None
    return summary_text(summary), None


def _note_tokens(note: Message | None) -> int:
    return row_tokens(note) if note is not None else 0


@attrs.frozen(kw_only=True)
class RequestOptions:
    """What one request asks of ``prepare_rows`` besides its rows.

    ``summary`` is the conversation's summary: a ``Summary`` with ``covers_through_id`` stands
    in for the turns it covers (rows must then be stored rows, whose ids it compares); a string
    or a summary without coverage is only sent after the breadcrumb. ``tools`` decides which
    prompt-mode calls count as carriers (None: any name) and adds its schemas to every estimate,
    as does ``extra_tokens``. ``keep_tool_context_turns`` overrides the setting (and its
    preset). ``calibration`` scales every estimate compared or reported. With
    ``propose_compaction``, the result carries the compaction proposal the settings call for.
    ``omitted`` stands for the conversation's oldest turns when the rows leave them out (see
    OmittedTurns). ``head``, called only when a due proposal needs them, answers the rows of
    the oldest uncovered turns that ``omitted`` left out: the system rows before them, then
    whole turns, oldest first (all of the left-out ones, or at least those through the first
    that no proposal can hold); none: OmittedTurnsKept."""

    settings: ContextSettings
    route: Route
    summary: str | Summary | None = None
    tools: Sequence[ToolSpec] | None = None
    extra_tokens: int = 0
    overflow_recovery: bool = False
    keep_tool_context_turns: int | None = None
    omitted: OmittedTurns | None = None
    calibration: Calibration = UNCALIBRATED
    propose_compaction: bool = False
    head: Callable[[], Sequence[Message]] | None = None


@attrs.frozen
class _Request:
    """The options worked out once: the collapse depth, the tool names, the fixed tokens (tool
    schemas and ``extraTokens``), the budget, the summary's text and coverage, and the omitted
    turns (groups dropped whole, then the covered ones)."""

    keep: int
    tool_names: frozenset[str] | None
    fixed: int
    budget: int
    text: str | None
    covers_through_id: int | None
    left_out: list[TurnFigures]
    omitted_turns: int
    pre_covered: TurnFigures
    #: the stable prefix's grids (trimLowWater below 1), else None
    steps: Steps | None

"""The window a request is cut from: each turn as it would be sent (``_Unit``, remembered on the
row tuples), the turns a caller left out and vouches for (``OmittedTurns``), and ``_Window``,
the units the limit, the budget and recovery drop whole turns from."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import attrs

from chat_history.model import Message, Trimmed
from chat_history.policy.calibration import Calibration
from chat_history.policy.prepare.collapse import TurnFigures, collapse_turn, request_floor
from chat_history.policy.prepare.memo import TurnMemo
from chat_history.policy.tokens import row_tokens

#: Which limit trimmed a request (the ``reason`` of its ``RequestTrim``).
RequestTrimReason = Literal["turnLimit", "tokenBudget", "overflowRecovery"]


@attrs.frozen
class OmittedTurns:
    """The oldest turns of a conversation, left out of ``prepare_rows``'s rows (their system rows
    stay in, as leading system rows). The caller vouches for what makes the result equal to the
    full one: the summary stands in for the ``covered`` turns, the oldest (its coverage is
    ``covers_through_id``, which must be the summary's own); each other omitted turn is older
    than the newest ``keepToolContextTurns + 1`` (so it is collapsed); the turn limit drops the
    ``beyond_limit`` turns; the token budget drops the ``within_limit`` ones, which the turn
    limit keeps. ``oldest_spoken_id`` is the id of the conversation's oldest non-system row,
    which the summary's coverage is compared with when uncovered turns are left out (a summary
    that precedes it stands in for deleted turns)."""

    beyond_limit: TurnFigures = attrs.field(factory=TurnFigures)
    within_limit: TurnFigures = attrs.field(factory=TurnFigures)
    covered: TurnFigures = attrs.field(default=TurnFigures(), kw_only=True)
    covers_through_id: int | None = attrs.field(default=None, kw_only=True)
    oldest_spoken_id: int | None = attrs.field(default=None, kw_only=True)


class OmittedTurnsKept(ValueError):
    """The request would have sent an omitted turn: it needs every row."""


@attrs.frozen
class _Unit:
    """One turn as it would be sent: its rows, their estimate, its system rows, its stored rows
    other than system rows (``dropped_messages`` when it is dropped, whatever step 3 made of it)
    and the rows step 3 left out."""

    rows: tuple[Message, ...]
    tokens: int
    system_rows: tuple[Message, ...]
    system_tokens: int
    spoken_rows: int
    collapsed_rows: int


# A request re-reads mostly the turns the previous one read, as the same row objects (the store
# remembers a conversation's newest rows), and a turn's collapse, floor and unit depend on its
# rows alone: these are remembered on the row tuples (policy.prepare.memo), bounded in turns and in
# the bytes of the rows they keep alive.
_TURN_CACHE = 256  # turns: a few requests of a few conversations
_TURN_CACHE_BYTES = 32 * 1024 * 1024
_collapsed_memo: TurnMemo[tuple[tuple[Message, ...], int]] = TurnMemo(
    _TURN_CACHE, _TURN_CACHE_BYTES
)
_floor_memo: TurnMemo[int] = TurnMemo(_TURN_CACHE, _TURN_CACHE_BYTES)
_unit_memo: TurnMemo[_Unit] = TurnMemo(_TURN_CACHE, _TURN_CACHE_BYTES)


def _collapsed(
    rows: tuple[Message, ...], tools: frozenset[str] | None
) -> tuple[tuple[Message, ...], int]:
    return _collapsed_memo.get(rows, tools, lambda: collapse_turn(rows, tools))


def turn_floor(rows: tuple[Message, ...]) -> int:
    """``request_floor`` of one turn's rows, remembered (the window asks it of every turn it
    reads)."""
    return _floor_memo.get(rows, None, lambda: request_floor(rows))


def _unit(rows: tuple[Message, ...], *, running: bool, synthetic: int, removed: int) -> _Unit:
    return _unit_memo.get(
        rows,
        (running, synthetic, removed),
        lambda: _new_unit(rows, running=running, synthetic=synthetic, removed=removed),
    )


def _new_unit(rows: tuple[Message, ...], *, running: bool, synthetic: int, removed: int) -> _Unit:
    tokens = system_tokens = 0
    system: list[Message] = []
    for row in rows:
        cost = row_tokens(row, dispatch_tool_images=running)
        tokens += cost
        if row.role == "system":
            system.append(row)
            system_tokens += cost  # images are dispatched differently on tool rows only
    return _Unit(
        rows=rows,
        tokens=tokens,
        system_rows=tuple(system),
        system_tokens=system_tokens,
        spoken_rows=len(rows) - len(system) - synthetic + removed,
        collapsed_rows=removed,
    )


class _Window:
    """The request being trimmed: the system block (leading system rows plus the system rows of
    covered and dropped turns), the retained turns, and a running (raw) estimate that includes
    the context note: ``note_tokens`` before any turn is dropped (0 when there is no note),
    ``dropped_note_tokens`` once one is."""

    def __init__(
        self,
        leading: Sequence[Message],
        units: list[_Unit],
        note_tokens: tuple[int, int],
        fixed: int,
        omitted: list[TurnFigures],
        calibration: Calibration,
        numbers: list[int] | None = None,
    ) -> None:
        self.system_block = list(leading)
        self.units = units
        #: the units' stored turn numbers and grid positions (``policy.prepare.steps``), with
        #: trimLowWater below 1 only: the positions of the omitted groups' first turns, then of
        #: the units
        self.numbers = numbers or []
        self.positions: list[int] = []
        #: each unit's tokens beyond what it adds to the positions (its kept tool context; all
        #: of the running turn): the estimate less their sum is the settled part of the request
        self.excess: list[int] = []
        self.excess_total = 0
        #: omitted turns, oldest group first: each group is dropped whole, before any unit
        self.omitted = [group for group in omitted if group.turns]
        self.note_tokens, dropped_note_tokens = note_tokens
        self.crumb_tokens = dropped_note_tokens - self.note_tokens
        self.calibration = calibration
        self.dropped_turns = 0
        self.dropped_messages = 0
        self.events: list[Trimmed] = []
        self.last_reason: RequestTrimReason | None = None
        self.estimate = (
            fixed
            + self.note_tokens
            + sum(row_tokens(row) for row in leading)
            + sum(group.sent_tokens for group in self.omitted)
            + sum(u.tokens for u in units)
        )

    def calibrated(self) -> int:
        return self.calibration.apply(self.estimate)

    def turns(self) -> int:
        return sum(group.turns for group in self.omitted) + len(self.units)

    def drop_oldest(self) -> None:
        if self.omitted:
            group = self.omitted.pop(0)
            if self.positions:
                self.positions.pop(0)
            self.estimate -= group.sent_tokens
            if self.dropped_turns == 0:
                self.estimate += self.crumb_tokens
            self.dropped_turns += group.turns
            self.dropped_messages += group.spoken_rows
            return
        unit = self.units.pop(0)
        if self.numbers:
            self.numbers.pop(0)
        if self.positions:
            self.positions.pop(0)
        if self.excess:
            self.excess_total -= self.excess.pop(0)
        self.system_block.extend(unit.system_rows)
        self.estimate -= unit.tokens - unit.system_tokens
        if self.dropped_turns == 0:
            self.estimate += self.crumb_tokens
        self.dropped_turns += 1
        self.dropped_messages += unit.spoken_rows

    def trim(self, reason: RequestTrimReason, budget: int | None, over: Callable[[], bool]) -> None:
        """One of steps 4-6: drop oldest turns while ``over()`` holds, never the newest, and
        record the step's event (calibrated figures) when it dropped any."""
        before, turns, messages = self.calibrated(), self.dropped_turns, self.dropped_messages
        while self.turns() > 1 and over():
            self.drop_oldest()
        if self.dropped_turns == turns:
            return
        self.last_reason = reason
        self.events.append(
            Trimmed(
                scope="request",
                reason=reason,
                dropped_messages=self.dropped_messages - messages,
                dropped_turns=self.dropped_turns - turns,
                retained_turns=self.turns(),
                tokens_before=before,
                tokens_after=self.calibrated(),
                budget=budget,
            )
        )

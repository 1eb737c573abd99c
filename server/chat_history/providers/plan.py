"""The exchange plan every formatter walks: the rows as items in order, tool results right after
their call (in call order), rows with nothing to send skipped, call ids made valid, and the
application's system rows after the assistant's last reply (or, for kinds that ask, later in
the conversation) as a user turn of its own. The kind modules turn a plan into their body
shape. Pure functions on rows; no I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from chat_history.model import Message
from chat_history.policy.turns import is_real_user
from chat_history.providers.calls import Call, Result
from chat_history.providers.ids import IdAllocator, IdCheck, IdMaker, any_nonempty, hashed_suffix
from chat_history.providers.images import Segment, user_segments

#: First line of the user turn that carries system rows trailing the assistant's last reply
#: (an instruction the application appended): see ``plan``.
APPLICATION_INSTRUCTION = "[Application instruction]"


@attrs.frozen
class SystemText:
    """A system row with text; ``leading`` when no other row came before it."""

    text: str
    leading: bool


@attrs.frozen
class UserTurn:
    """A user row (a real prompt or a prompt-mode row) with something to send."""

    row: Message
    segments: tuple[Segment, ...]


@attrs.frozen
class AssistantTurn:
    """An assistant row: its text (may be blank when it only calls) and its answered calls."""

    row: Message
    calls: tuple[Call, ...]

    @property
    def text(self) -> str:
        """The assistant's text."""
        return self.row.content

    @property
    def has_text(self) -> bool:
        """Whether the text is more than blank (a row that only calls has none to send)."""
        return bool(self.row.content.strip())


@attrs.frozen
class ToolResults:
    """The results of the assistant turn just before, one per call, in call order."""

    results: tuple[Result, ...]


Item = SystemText | UserTurn | AssistantTurn | ToolResults


def plan(
    rows: Sequence[Message],
    *,
    valid_id: IdCheck = any_nonempty,
    make_id: IdMaker | None = None,
    later_system: str = "in_place",
) -> list[Item]:
    """The rows as items a formatter walks in order.

    - A carrier is followed directly by its results, in call order; rows that stood between a
      call and its result come after the results.
    - A tool row answers the nearest carrier before it (a real user prompt closes the exchange),
      as in the orphan sweep; anything still unpaired (a hand-built list, a call id used twice in
      one carrier) is dropped here so no formatter can emit half an exchange.
    - Rows with nothing to send (blank text and no images, an assistant row with neither text nor
      answered calls) are skipped. Attachments of assistant and system rows are not sent: these
      providers take images from the user (and in tool results) only.
    - Call ids are made valid for the provider (``valid_id``/``make_id``) and unique across the
      body; a call and its result always carry the same id.
    - System rows after the assistant's last reply (no user row or tool result after it) become
      one user turn, ``[Application instruction]`` and their texts (``trailing_instruction``), so
      no body ends on an assistant turn that the API would continue as a prefill.
    - ``later_system`` says what becomes of the other system rows after the first non-system
      row (``later_instructions``): ``"in_place"`` keeps them as system items where they are;
      ``"instruction"`` makes each run of them the same user turn as trailing ones, in place,
      for kinds whose only system position is at the top (so the bytes before the row stay
      as they were); ``"after_user"`` does so except for a run right after a user turn, which
      stays a system item (Mistral takes a system message after a user message only).
    """
    answered = answered_calls(rows)
    provider_id = IdAllocator(valid_id, make_id or hashed_suffix(lambda s: s, 64))
    items: list[Item] = []
    seen_other = False
    for index, row in enumerate(rows):
        if row.role == "system":
            if row.content.strip():
                items.append(SystemText(row.content, leading=not seen_other))
            continue
        seen_other = True
        if row.role == "user":
            segments = user_segments(row)
            if segments:
                items.append(UserTurn(row, tuple(segments)))
        elif row.role == "assistant":
            items.extend(assistant_items(rows, row, answered.get(index, {}), provider_id))
    return later_instructions(trailing_instruction(items), later_system)


def answered_calls(rows: Sequence[Message]) -> dict[int, dict[str, int]]:
    """For each carrier's index, the index of the tool row that answers each of its call ids: the
    nearest carrier before a tool row (a real user prompt closes the exchange), first answer
    only."""
    answered: dict[int, dict[str, int]] = {}
    carrier: int | None = None
    for index, row in enumerate(rows):
        if row.role == "assistant" and row.tool_calls:
            carrier = index
            answered[index] = {}
        elif row.role == "tool":
            if carrier is None or row.tool_call_id is None:
                continue
            ids = {call.id for call in rows[carrier].tool_calls}
            if row.tool_call_id in ids and row.tool_call_id not in answered[carrier]:
                answered[carrier][row.tool_call_id] = index
        elif row.role == "user" and is_real_user(row):
            carrier = None
    return answered


def assistant_items(
    rows: Sequence[Message],
    row: Message,
    results_at: Mapping[str, int],
    provider_id: Callable[[str], str],
) -> list[Item]:
    """An assistant row as sent: its answered calls (each id once) followed directly by their
    results; nothing when it has neither text nor answered calls."""
    calls: list[Call] = []
    taken: set[str] = set()
    for source in row.tool_calls:
        if source.id in results_at and source.id not in taken:
            taken.add(source.id)
            calls.append(Call(provider_id(source.id), source))
    if not calls and not row.content.strip():
        return []
    items: list[Item] = [AssistantTurn(row, tuple(calls))]
    if calls:
        items.append(ToolResults(tuple(Result(c, rows[results_at[c.source.id]]) for c in calls)))
    return items


def trailing_instruction(items: list[Item]) -> list[Item]:
    """``items`` with the system texts that follow the last assistant reply (the last item other
    than a system text is an assistant turn) replaced by one user turn: the line
    ``[Application instruction]``, then those texts joined by a blank line. Every other system
    text stays a system text."""
    end = len(items)
    while end > 0 and isinstance(items[end - 1], SystemText):
        end -= 1
    if end == len(items) or end == 0 or not isinstance(items[end - 1], AssistantTurn):
        return items
    texts = [item.text for item in items[end:] if isinstance(item, SystemText)]
    return [*items[:end], instruction_turn(texts)]


def instruction_turn(texts: Sequence[str]) -> UserTurn:
    """System texts as one user turn: the line ``[Application instruction]``, then the texts
    joined by a blank line."""
    text = "\n".join([APPLICATION_INSTRUCTION, "\n\n".join(texts)])
    return UserTurn(Message(role="user", content=text), (text,))


def later_instructions(items: list[Item], later_system: str) -> list[Item]:
    """``items`` with each run of non-leading system texts made an ``instruction_turn`` in
    place (``later_system`` ``"instruction"``), except, with ``"after_user"``, a run right
    after a user turn; ``"in_place"`` returns ``items`` as they are."""
    if later_system == "in_place":
        return items
    out: list[Item] = []
    run: list[str] = []
    before: Item | None = None
    for item in [*items, None]:
        if isinstance(item, SystemText) and not item.leading:
            run.append(item.text)
            continue
        if run:
            keep = later_system == "after_user" and isinstance(before, UserTurn)
            out.extend(
                [SystemText(t, leading=False) for t in run] if keep else [instruction_turn(run)]
            )
            run = []
        if item is not None:
            out.append(item)
            before = item
    return out


def system_texts(items: Iterable[Item]) -> list[str]:
    """The texts of the system items, in order."""
    return [item.text for item in items if isinstance(item, SystemText)]


_NO_DATA: Mapping[str, Any] = MappingProxyType({})


def provider_data(row: Message, kind: str) -> Mapping[str, Any]:
    """``providerData[kind]`` when it is an object, else empty."""
    if not row.provider_data:
        return _NO_DATA
    value = row.provider_data.get(kind)
    return value if isinstance(value, Mapping) else _NO_DATA

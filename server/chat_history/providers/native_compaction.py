"""A provider's own compaction in a body (protocol.md "Version 5" → Native compaction): where a
request goes to the origin of a conversation's ``saveCompaction`` items (``state_rules``), they
stand in for the rows they cover. ``prepare`` runs its pipeline with a stand-in summary (the
items' JSON, so that its estimates price them); here the context note's summary part is taken
out again and the items put where the kind takes them:

- ``openai-responses``: the items first in ``input``, as ``/responses/compact`` returned them
  (a ``compaction`` item with its ``encrypted_content``, and any items returned with it);
- ``anthropic``: the compaction blocks as the first blocks of the conversation, in an assistant
  message of their own (the API refuses a compaction block that is not the conversation's
  first: ``compaction_block_misplaced``, anthropic SDK 2.17).

Pure functions; no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from chat_history.model import Message, compact_json
from chat_history.policy.prepare.compaction import NOTE_SEPARATOR, SUMMARY_HEADER

#: The kinds whose own compaction a conversation may store (``saveCompaction``'s origin).
KINDS = ("openai-responses", "anthropic")


@attrs.frozen
class Native:
    """A native compaction in a request: the stand-in text ``prepare`` ran with, and the items
    that replace it."""

    stand_in: str
    items: tuple[Any, ...]


def stand_in(items: Sequence[Any]) -> str:
    """The stand-in summary of ``items``: their JSON (what the estimate prices)."""
    return compact_json(list(items))


def without_stand_in(
    rows: Sequence[Message], native: Native
) -> tuple[list[Message], bool, Message | None, Message | None]:
    """``rows`` with the context note's stand-in summary taken out (the note dropped when
    nothing else is left in it), whether it was there, the note as it was, and the note as
    it is now (None: dropped)."""
    part = SUMMARY_HEADER + native.stand_in
    out: list[Message] = []
    found = False
    old: Message | None = None
    new: Message | None = None
    for row in rows:
        if not found and row.role == "user" and row.content.endswith(part):
            found = True
            old = row
            rest = row.content[: -len(part)].removesuffix(NOTE_SEPARATOR)
            if rest:
                new = attrs.evolve(row, content=rest)
                out.append(new)
            continue
        out.append(row)
    return out, found, old, new


def place(kind: str, body: dict[str, Any], items: Sequence[Any]) -> dict[str, Any]:
    """``body`` with ``items`` standing first in its conversation (a new body)."""
    if kind == "openai-responses":
        return {**body, "input": [*items, *body.get("input", [])]}
    if kind == "anthropic":
        first = {"role": "assistant", "content": list(items)}
        return {**body, "messages": [first, *body.get("messages", [])]}
    raise ValueError(f"{kind} has no native compaction")

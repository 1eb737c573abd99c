"""Prompt-cache breakpoints and the cache key (protocol.md "Version 3" → Prompt caches).

Anthropic and Bedrock serve a repeated prefix from their cache only up to a block the request
marks; the others cache exact prefixes by themselves and get no marker. With
``chatHistory.context.promptCache`` ``"auto"`` a formatted body gets at most 4 marks, chosen in
this order: the last block of the system prompt; the last block of the context note
(semantics step 7) when the request has one; the last block of the newest ``user`` message that
is not the final message; the last block of the final message. A block the same choice reaches
twice is marked once.

- **anthropic**: ``"cache_control": {"type": "ephemeral"}`` on the chosen block. A string
  ``system`` becomes a one-element list of a text block. A ``thinking`` or ``redacted_thinking``
  block is never marked, nor a ``tool_result`` without content (the API refuses a marker on an
  empty block; a result with content takes one): the nearest earlier block of the same message
  that may be is, else none.
- **bedrock**: a ``{"cachePoint": {"type": "default"}}`` block right after the chosen block (in
  ``system`` and in a message's ``content``), only when ``model`` is a model of the table in
  ``providers.bedrock_caching`` (AWS's list of models with prompt caching); any other model,
  or none, gets no cache point. A ``reasoningContent`` block is never followed by one, nor,
  for Nova, a ``toolResult`` block (the nearest earlier block, as above).

The context note is the first row of the request after its system rows
(``policy.prepare.compaction`` places it so); the formatters make it the first user message, one
block per segment of its text, so its last block is found by counting, without the formatters
knowing about caches.

``cache_key`` is the ``cacheKey`` of every request of a conversation: an HMAC-SHA256 of the
(workspace, conversation) pair under a secret kept in the database, so it is the same for
every request, process and restart on one database, differs between conversations, and cannot
be turned back into either name.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

from chat_history.model import Key, Message
from chat_history.providers.bedrock_caching import caching_model
from chat_history.providers.images import user_segments

#: The most breakpoints a request may carry (Anthropic refuses a fifth).
MAX_BREAKPOINTS = 4
CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
CACHE_POINT: dict[str, dict[str, str]] = {"cachePoint": {"type": "default"}}
_ANTHROPIC_THINKING = ("thinking", "redacted_thinking")
#: Hex digits of the cache key (128 bits).
KEY_LENGTH = 32


@functools.lru_cache(maxsize=256)  # the same pair on every request: hashed once
def cache_key(secret: bytes, key: Key) -> str:
    """The ``cacheKey`` of every request of ``key``'s conversation."""
    pair = json.dumps([key.workspace, key.conversation], ensure_ascii=True)
    return hmac.new(secret, pair.encode("ascii"), hashlib.sha256).hexdigest()[:KEY_LENGTH]


def bedrock_caches(model: str | None) -> bool:
    """Whether ``model`` names a Bedrock model that takes ``cachePoint`` blocks."""
    return caching_model(model) is not None


def note_blocks(rows: Sequence[Message], note: Message | None) -> int:
    """How many blocks the context note ``note`` makes at the start of the first user message:
    one per segment of its text; 0 when there is no note, or it is not the first row after the
    system rows."""
    if note is None:
        return 0
    first = next((row for row in rows if row.role != "system"), None)
    return len(user_segments(note)) if first is note else 0


def mark(kind: str, body: dict[str, Any], model: str | None, note_blocks: int) -> dict[str, Any]:
    """``body`` with its breakpoints (a new body; ``body`` is not changed). ``note_blocks`` is
    the number of blocks the context note opens the first user message with (0: no note)."""
    if kind == "anthropic":
        return _mark_anthropic(body, note_blocks)
    if kind == "bedrock":
        row = caching_model(model)
        if row is not None:
            return _mark_bedrock(body, note_blocks, after_tool_result=row.after_tool_result)
    return body


# -- choosing the blocks ----------------------------------------------------------------------

#: (message index or None for the system prompt, block index)
Place = tuple[int | None, int]


def _choices(
    system: list[dict[str, Any]] | None,
    messages: list[dict[str, Any]],
    note_blocks: int,
    may_mark: Any,
) -> list[Place]:
    """The chosen blocks in the order of choice, each once, at most MAX_BREAKPOINTS."""
    wanted: list[Place | None] = []
    if system:
        wanted.append(_last_markable(None, system, may_mark))
    if note_blocks and messages and messages[0]["role"] == "user":
        wanted.append(_last_markable(0, messages[0]["content"][:note_blocks], may_mark))
    final = len(messages) - 1
    newest_user = next((i for i in range(final - 1, -1, -1) if messages[i]["role"] == "user"), None)
    if newest_user is not None:
        wanted.append(_last_markable(newest_user, messages[newest_user]["content"], may_mark))
    if final >= 0:
        wanted.append(_last_markable(final, messages[final]["content"], may_mark))
    places: list[Place] = []
    for place in wanted:
        if place is not None and place not in places:
            places.append(place)
    return places[:MAX_BREAKPOINTS]


def _last_markable(message: int | None, blocks: Sequence[Any], may_mark: Any) -> Place | None:
    for index in range(len(blocks) - 1, -1, -1):
        if isinstance(blocks[index], dict) and may_mark(blocks[index]):
            return (message, index)
    return None


# -- anthropic ----------------------------------------------------------------------------------


def _anthropic_may_mark(block: dict[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "tool_result":
        return bool(block.get("content"))
    return kind not in _ANTHROPIC_THINKING


def _mark_anthropic(body: dict[str, Any], note_blocks: int) -> dict[str, Any]:
    system = body.get("system")
    system_blocks: list[dict[str, Any]] | None = None
    if isinstance(system, str):
        system_blocks = [{"type": "text", "text": system}]
    elif isinstance(system, list):
        system_blocks = list(system)
    messages = list(body.get("messages", []))
    views = [  # a string content read as its one text block; lists are not copied
        {"role": m["role"], "content": _blocks(m["content"])}
        if isinstance(m["content"], str)
        else m
        for m in messages
    ]
    for message, index in _choices(system_blocks, views, note_blocks, _anthropic_may_mark):
        if message is None:
            assert system_blocks is not None
            system_blocks[index] = {**system_blocks[index], "cache_control": dict(CACHE_CONTROL)}
            continue
        content = _blocks(messages[message]["content"])
        content[index] = {**content[index], "cache_control": dict(CACHE_CONTROL)}
        messages[message] = {**messages[message], "content": content}
    marked = dict(body)
    if system_blocks is not None:
        marked["system"] = system_blocks
    if "messages" in body:
        marked["messages"] = messages
    return marked


def _blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content as a new list of blocks (a string becomes one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


# -- bedrock ------------------------------------------------------------------------------------


def _bedrock_may_mark(after_tool_result: bool) -> Any:
    def may_mark(block: dict[str, Any]) -> bool:
        if "toolResult" in block:
            return after_tool_result
        return "reasoningContent" not in block and "cachePoint" not in block

    return may_mark


def _mark_bedrock(
    body: dict[str, Any], note_blocks: int, *, after_tool_result: bool
) -> dict[str, Any]:
    system = list(body["system"]) if body.get("system") else None
    messages = list(body.get("messages", []))
    places = _choices(system, messages, note_blocks, _bedrock_may_mark(after_tool_result))
    # insert from the end of each list, so earlier indices stay valid
    for message, index in sorted(places, key=lambda p: (-1 if p[0] is None else p[0], -p[1])):
        point = {"cachePoint": dict(CACHE_POINT["cachePoint"])}
        if message is None:
            assert system is not None
            system.insert(index + 1, point)
            continue
        content = list(messages[message]["content"])
        content.insert(index + 1, point)
        messages[message] = {**messages[message], "content": content}
    marked = dict(body)
    if system is not None:
        marked["system"] = system
    if "messages" in body:
        marked["messages"] = messages
    return marked

"""Anthropic Messages API: top-level ``system`` and ``messages`` (roles ``user``/``assistant``).

Rules applied:

- Every system row's text goes to the top-level ``system`` string, joined by a blank line, in
  order; omitted when there is none. A system row in mid-conversation is folded in there too
  (``role: "system"`` inside ``messages`` is only for a few models), so it keeps system authority
  and never splits a tool exchange.
- Content is always a list of blocks; no text block is empty or whitespace-only.
- User images: ``{"type": "image", "source": {"type": "base64", media_type, data}}`` for png,
  jpeg, gif and webp data, ``{"type": "url", url}`` sources for http(s) attachment URIs, a text
  note for anything else.
- An assistant row is ``[thinking…, text?, tool_use…]``: ``providerData.anthropic.thinking``
  (``thinking``/``redacted_thinking`` blocks, echoed unchanged, signatures included) come first,
  then the text, then one ``tool_use {id, name, input}`` per call with ``input`` an object.
- All results of a call turn are ``tool_result`` blocks in the next user message, first in its
  content, in call order; a result's images go inside its ``tool_result`` content.
- Adjacent messages of one role are merged (results stay first, thinking blocks are moved to the
  front of a merged assistant message); a conversation that opens with the assistant gets a
  ``(continued)`` user message first (Claude on Bedrock and Vertex still requires a user first).
- Trailing whitespace is removed from the final assistant message's text (the API refuses it).
- Tool-use ids match ``^[a-zA-Z0-9_-]+$`` and are at most 64 characters (others are rewritten as
  cleaned head + hash), unique in the body; a call and its result share it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from chat_history.model import Message
from chat_history.providers.common import (
    COMMON_IMAGE_TYPES,
    CONTINUED,
    AssistantTurn,
    Image,
    Result,
    SystemText,
    UserTurn,
    arguments_object,
    hashed_suffix,
    image_note,
    merge_adjacent,
    plan,
    provider_data,
    system_texts,
)

KIND = "anthropic"
_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_NOT_ID_CHAR = re.compile(r"[^a-zA-Z0-9_-]")
_THINKING_TYPES = ("thinking", "redacted_thinking")


def _valid_id(call_id: str) -> bool:
    return _ID.fullmatch(call_id) is not None


def _clean_id(call_id: str) -> str:
    return _NOT_ID_CHAR.sub("_", call_id)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_block(image: Image) -> dict[str, Any]:
    if image.inline_of(COMMON_IMAGE_TYPES):
        source = {"type": "base64", "media_type": image.mime_type, "data": image.data}
        return {"type": "image", "source": source}
    if image.is_web_url and image.uri is not None:
        return {"type": "image", "source": {"type": "url", "url": image.uri}}
    return _text(image_note(image))


def _user(turn: UserTurn) -> dict[str, Any]:
    content = [_text(s) if isinstance(s, str) else image_block(s) for s in turn.segments]
    return {"role": "user", "content": content}


def _assistant(turn: AssistantTurn) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    thinking = provider_data(turn.row, KIND).get("thinking")
    if isinstance(thinking, list):
        content.extend(
            dict(block)
            for block in thinking
            if isinstance(block, dict) and block.get("type") in _THINKING_TYPES
        )
    if turn.has_text:
        content.append(_text(turn.text))
    content.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": arguments_object(c.source)}
        for c in turn.calls
    )
    return {"role": "assistant", "content": content}


def _tool_result(result: Result) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call.id}
    images = result.images()
    if images:
        content = [_text(result.text)] if result.text.strip() else []
        content.extend(image_block(image) for image in images)
        block["content"] = content
    elif result.text.strip():
        block["content"] = result.text
    return block


def _thinking_first(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] != "assistant":
        return message
    blocks = message["content"]
    thinking = [b for b in blocks if b.get("type") in _THINKING_TYPES]
    rest = [b for b in blocks if b.get("type") not in _THINKING_TYPES]
    return {**message, "content": thinking + rest}


def _strip_final_assistant(messages: list[dict[str, Any]]) -> None:
    if not messages or messages[-1]["role"] != "assistant":
        return
    content = list(messages[-1]["content"])
    if content and content[-1].get("type") == "text":
        stripped = content[-1]["text"].rstrip()
        if stripped:
            content[-1] = {**content[-1], "text": stripped}
        else:
            content.pop()
    if content:
        messages[-1] = {**messages[-1], "content": content}
    else:
        messages.pop()


def format(rows: Sequence[Message], model: str | None = None) -> dict[str, Any]:
    """The Messages API ``system`` (when any) and ``messages`` for ``rows`` (already swept)."""
    items = plan(rows, valid_id=_valid_id, make_id=hashed_suffix(_clean_id, 64))
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, SystemText):
            continue
        if isinstance(item, UserTurn):
            messages.append(_user(item))
        elif isinstance(item, AssistantTurn):
            messages.append(_assistant(item))
        else:
            content = [_tool_result(result) for result in item.results]
            messages.append({"role": "user", "content": content})
    merged = [_thinking_first(m) for m in merge_adjacent(messages, "role", "content")]
    _strip_final_assistant(merged)
    if merged and merged[0]["role"] != "user":
        merged.insert(0, {"role": "user", "content": [_text(CONTINUED)]})
    body: dict[str, Any] = {}
    system = system_texts(items)
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = merged
    return body

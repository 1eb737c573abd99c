"""Cohere v2 chat ``messages``.

Rules applied:

- Roles ``system``, ``user``, ``assistant``, ``tool``; system rows are messages, in place (v2
  replaced the v1 ``preamble`` with system messages).
- User content is the row's string, or ``text``/``image_url`` parts when it has images
  (``image_url: {url}`` with a data URL of png, jpeg, gif or webp, or an http(s) URL); any
  other image becomes a text note.
- An assistant row without calls is ``{content: text}``. With calls, its text is the
  ``tool_plan`` (the text a model writes before its calls) and the calls are
  ``tool_calls: [{id, type: "function", function: {name, arguments}}]`` with ``arguments`` a
  JSON string.
- Each result is ``{role: "tool", tool_call_id, content}`` right after its call, in call order.
  Tool content takes text and documents only: a result's images become text notes.
- Call ids are kept (made unique in the body); a call and its result share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_history.model import Message
from chat_history.providers.common import (
    COMMON_IMAGE_TYPES,
    AssistantTurn,
    Image,
    Result,
    SystemText,
    UserTurn,
    arguments_json,
    image_note,
    plan,
    with_notes,
)

KIND = "cohere"


def _image_part(image: Image) -> dict[str, Any]:
    if image.inline_of(COMMON_IMAGE_TYPES):
        return {"type": "image_url", "image_url": {"url": image.data_url()}}
    if image.is_web_url and image.uri is not None:
        return {"type": "image_url", "image_url": {"url": image.uri}}
    return {"type": "text", "text": image_note(image)}


def _user(turn: UserTurn) -> dict[str, Any]:
    texts = [s for s in turn.segments if isinstance(s, str)]
    content: str | list[dict[str, Any]]
    if len(texts) == len(turn.segments):
        content = "".join(texts)
    else:
        content = [
            {"type": "text", "text": s} if isinstance(s, str) else _image_part(s)
            for s in turn.segments
        ]
    return {"role": "user", "content": content}


def _assistant(turn: AssistantTurn) -> dict[str, Any]:
    if not turn.calls:
        return {"role": "assistant", "content": turn.text}
    message: dict[str, Any] = {"role": "assistant"}
    if turn.has_text:
        message["tool_plan"] = turn.text
    message["tool_calls"] = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": arguments_json(c.source)},
        }
        for c in turn.calls
    ]
    return message


def _tool(result: Result) -> dict[str, Any]:
    content = with_notes(result.text, [image_note(image) for image in result.images()])
    return {"role": "tool", "tool_call_id": result.call.id, "content": content}


def format(rows: Sequence[Message], model: str | None = None) -> dict[str, Any]:
    """The Cohere v2 ``messages`` for ``rows`` (already swept)."""
    messages: list[dict[str, Any]] = []
    for item in plan(rows):
        if isinstance(item, SystemText):
            messages.append({"role": "system", "content": item.text})
        elif isinstance(item, UserTurn):
            messages.append(_user(item))
        elif isinstance(item, AssistantTurn):
            messages.append(_assistant(item))
        else:
            messages.extend(_tool(result) for result in item.results)
    return {"messages": messages}

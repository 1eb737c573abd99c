"""Ollama ``/api/chat`` ``messages``.

Rules applied:

- Roles ``system``, ``user``, ``assistant``, ``tool``; system rows are messages, in place,
  except those after the assistant's last reply: as for every kind, they travel as an
  ``[Application instruction]`` user message (``plan.trailing_instruction``).
- ``content`` is always a string. Images are a message's ``images`` list of bare base64 strings
  (data URLs and attachments reduced to their data); Ollama takes no URLs, so a URI (or invalid
  data) becomes a text note appended to the content.
- An assistant row carries ``tool_calls: [{function: {name, arguments}}]`` with ``arguments`` an
  object.
- Each result is ``{role: "tool", content, tool_name}`` right after its call, in call order (the
  documented shape; ollama-python has no field for call ids, so none is sent). A result's images
  go on its ``images``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_history.model import Message
from chat_history.providers.calls import Result, arguments_object
from chat_history.providers.images import Image, image_note, with_notes
from chat_history.providers.messages import chat_messages
from chat_history.providers.plan import AssistantTurn, UserTurn, plan

KIND = "ollama"


def _with_images(message: dict[str, Any], text: str, images: Sequence[Image]) -> dict[str, Any]:
    notes = [image_note(image) for image in images if not image.is_inline]
    message["content"] = with_notes(text, notes)
    inline = [image.data for image in images if image.is_inline and image.data is not None]
    if inline:
        message["images"] = inline
    return message


def _user(turn: UserTurn) -> dict[str, Any]:
    text = "".join(s for s in turn.segments if isinstance(s, str))
    images = [s for s in turn.segments if isinstance(s, Image)]
    return _with_images({"role": "user"}, text, images)


def _assistant(turn: AssistantTurn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.calls:
        message["tool_calls"] = [
            {"function": {"name": c.name, "arguments": arguments_object(c.source)}}
            for c in turn.calls
        ]
    return message


def _tool(result: Result) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "tool"}
    _with_images(message, result.text, result.images())
    message["tool_name"] = result.call.name
    return message


def build_body(rows: Sequence[Message], model: str | None = None) -> dict[str, Any]:
    """The ``/api/chat`` ``messages`` for ``rows`` (already swept)."""
    messages = chat_messages(
        plan(rows),
        user=_user,
        assistant=_assistant,
        results=lambda results: [_tool(result) for result in results],
    )
    return {"messages": messages}

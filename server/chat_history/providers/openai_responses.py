"""OpenAI Responses API: ``instructions`` and ``input`` items.

Rules applied:

- The leading system rows are joined (blank line between) into ``instructions``, omitted when
  there are none. A system row later in the conversation stays in place as a
  ``{"type": "message", "role": "system"}`` item, which the Responses API documents for input;
  system rows after the assistant's last reply travel, as for every kind, as an
  ``[Application instruction]`` user message (``plan.trailing_instruction``).
- User rows are ``message`` items; content is the row's string, or ``input_text``/``input_image``
  parts when it has images (``image_url`` is a data URL of png, jpeg, gif or webp, or an http(s)
  URL; ``detail: "auto"``); any other image becomes a text note.
- Assistant text is a ``message`` item with string content (the API's "easy" input form);
  ``providerData["openai-responses"].phase`` is echoed on it.
- Each call is a ``function_call`` item ``{call_id, name, arguments}`` with ``arguments`` a JSON
  string; each result a ``function_call_output`` ``{call_id, output}`` right after the calls, in
  call order. ``output`` is the result text, or ``input_text``/``input_image`` items when the
  result has images (images are allowed in tool output here).
- ``providerData["openai-responses"].reasoning`` (a list of ``reasoning`` items, as the API
  returned them) is placed first among that row's items, so each reasoning item precedes the
  ``function_call``/message items it belongs to.
- Call ids are unique in the body and at most 64 characters (head + hash when longer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_history.model import Message
from chat_history.providers.calls import Result, arguments_json
from chat_history.providers.ids import id_rules
from chat_history.providers.images import Image, image_note, image_url, text_or_parts
from chat_history.providers.plan import (
    AssistantTurn,
    SystemText,
    ToolResults,
    UserTurn,
    plan,
    provider_data,
)

KIND = "openai-responses"
MAX_ID_LENGTH = 64
_VALID_ID, _MAKE_ID = id_rules(MAX_ID_LENGTH)


def _image_part(image: Image) -> dict[str, Any]:
    url = image_url(image)
    if url is None:
        return {"type": "input_text", "text": image_note(image)}
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _user(turn: UserTurn) -> dict[str, Any]:
    content = text_or_parts(turn.segments, _image_part, text_type="input_text")
    return {"type": "message", "role": "user", "content": content}


def _assistant(turn: AssistantTurn) -> list[dict[str, Any]]:
    data = provider_data(turn.row, KIND)
    items: list[dict[str, Any]] = []
    reasoning = data.get("reasoning")
    if isinstance(reasoning, list):
        items.extend(
            dict(entry)
            for entry in reasoning
            if isinstance(entry, dict) and entry.get("type") == "reasoning"
        )
    if turn.has_text:
        message: dict[str, Any] = {"type": "message", "role": "assistant", "content": turn.text}
        phase = data.get("phase")
        if phase in ("commentary", "final_answer"):
            message["phase"] = phase
        items.append(message)
    items.extend(
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": arguments_json(call.source),
        }
        for call in turn.calls
    )
    return items


def _output(result: Result) -> dict[str, Any]:
    images = result.images()
    output: str | list[dict[str, Any]]
    if images:
        output = [{"type": "input_text", "text": result.text}] if result.text.strip() else []
        output.extend(_image_part(image) for image in images)
    else:
        output = result.text
    return {"type": "function_call_output", "call_id": result.call.id, "output": output}


def build_body(rows: Sequence[Message], model: str | None = None) -> dict[str, Any]:
    """The Responses ``instructions`` (when any) and ``input`` for ``rows`` (already swept)."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for item in plan(rows, valid_id=_VALID_ID, make_id=_MAKE_ID):
        if isinstance(item, SystemText):
            if item.leading:
                instructions.append(item.text)
            else:
                items.append({"type": "message", "role": "system", "content": item.text})
        elif isinstance(item, UserTurn):
            items.append(_user(item))
        elif isinstance(item, AssistantTurn):
            items.extend(_assistant(item))
        elif isinstance(item, ToolResults):
            items.extend(_output(result) for result in item.results)
    body: dict[str, Any] = {}
    if instructions:
        body["instructions"] = "\n\n".join(instructions)
    body["input"] = items
    return body

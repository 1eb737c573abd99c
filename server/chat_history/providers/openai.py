"""OpenAI Chat Completions ``messages`` (also Groq, DeepSeek, vLLM and other compatible servers).

Rules applied:

- System rows are ``system`` messages, in place (Chat Completions takes them anywhere), except
  those after the assistant's last reply: as for every kind, they travel as an
  ``[Application instruction]`` user message (``plan.trailing_instruction``).
- User content is the row's string, or a list of ``text``/``image_url`` parts when it has images:
  attachments and ``[IMAGE:data:…]`` markers of png, jpeg, gif or webp become ``image_url``
  parts with a data URL; an attachment ``uri`` that is an http(s) URL is passed as the URL; any
  other image becomes a text note.
- An assistant row carries ``tool_calls: [{id, type: "function", function: {name, arguments}}]``
  with ``arguments`` a JSON string; ``content`` is null when the row has calls but no text.
- Each result is a ``tool`` message ``{tool_call_id, content}`` right after its call, in call
  order. Images are only allowed in user messages, so a result's images follow the results as one
  ``user`` message (a text line naming the call, then the images).
- Call ids longer than OpenAI's 40 characters are shortened (head + hash), and every id is unique
  in the body; a call and its result share it.
- ``providerData.openai.reasoning_content`` (DeepSeek/vLLM thinking mode) is echoed on its
  assistant message; no other internal field reaches a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_history.model import Message
from chat_history.providers.calls import Result, arguments_json
from chat_history.providers.ids import id_rules
from chat_history.providers.images import chat_image_part
from chat_history.providers.messages import chat_messages, chat_user
from chat_history.providers.plan import AssistantTurn, plan, provider_data

KIND = "openai"
MAX_ID_LENGTH = 40
_VALID_ID, _MAKE_ID = id_rules(MAX_ID_LENGTH)


def _assistant(turn: AssistantTurn) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": turn.text if turn.has_text or not turn.calls else None,
    }
    if turn.calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_json(call.source)},
            }
            for call in turn.calls
        ]
    reasoning = provider_data(turn.row, KIND).get("reasoning_content")
    if isinstance(reasoning, str):
        message["reasoning_content"] = reasoning
    return message


def _results(results: Sequence[Result]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": result.call.id, "content": result.text}
        for result in results
    ]
    images: list[dict[str, Any]] = []
    for result in results:
        result_images = result.images()
        if result_images:
            label = f"Images returned by the {result.call.name} call {result.call.id}:"
            images.append({"type": "text", "text": label})
            images.extend(chat_image_part(image) for image in result_images)
    if images:
        messages.append({"role": "user", "content": images})
    return messages


def build_body(rows: Sequence[Message], model: str | None = None) -> dict[str, Any]:
    """The Chat Completions ``messages`` for ``rows`` (already swept)."""
    items = plan(rows, valid_id=_VALID_ID, make_id=_MAKE_ID)
    messages = chat_messages(items, user=chat_user, assistant=_assistant, results=_results)
    return {"messages": messages}

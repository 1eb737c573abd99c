"""Cohere v2 chat ``messages``.

Rules applied:

- Roles ``system``, ``user``, ``assistant``, ``tool``; system rows are messages, in place (v2
  replaced the v1 ``preamble`` with system messages), except those after the assistant's last
  reply: as for every kind, they travel as an ``[Application instruction]`` user message
  (``plan.trailing_instruction``).
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
from chat_history.providers.calls import Result, arguments_json
from chat_history.providers.messages import chat_messages, chat_user
from chat_history.providers.plan import AssistantTurn, plan

KIND = "cohere"


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


def _tools(results: Sequence[Result]) -> list[dict[str, Any]]:
    return [
        {"role": "tool", "tool_call_id": result.call.id, "content": result.text_with_notes()}
        for result in results
    ]


def build_body(rows: Sequence[Message], model: str | None = None) -> dict[str, Any]:
    """The Cohere v2 ``messages`` for ``rows`` (already swept)."""
    messages = chat_messages(plan(rows), user=chat_user, assistant=_assistant, results=_tools)
    return {"messages": messages}

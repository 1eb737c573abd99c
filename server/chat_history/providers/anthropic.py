"""Anthropic Messages API: top-level ``system`` and ``messages`` (roles ``user``/``assistant``).

Rules applied:

- The leading system rows' texts (those before any other row) go to the top-level ``system``
  string, joined by a blank line, in order; omitted when there are none. A later system row
  stays in place as a user turn ``[Application instruction]\n<text>`` (a run of them joined by
  a blank line; ``plan.later_instructions``), the rendering a row after the assistant's last
  reply has for every kind: folded into ``system`` it would change the first cached block, and
  every request after it would pay a full cache write; ``role: "system"`` inside ``messages``
  is only for a few models. The label says the text is the application's, not the user's.
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

from collections.abc import Sequence
from typing import Any

from chat_history.model import Message
from chat_history.providers.calls import Result, arguments_object
from chat_history.providers.ids import id_rules
from chat_history.providers.images import COMMON_IMAGE_TYPES, Image, image_note
from chat_history.providers.messages import CONTINUED, alternating_turns, strip_final_assistant
from chat_history.providers.plan import AssistantTurn, UserTurn, plan, provider_data, system_texts

KIND = "anthropic"
_VALID_ID, _MAKE_ID = id_rules(64, "a-zA-Z0-9_-")
_THINKING_TYPES = ("thinking", "redacted_thinking")


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_block(image: Image) -> dict[str, Any]:
    """An image as Anthropic's content block: inline base64, a URL source, else a text note."""
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


def _results(results: Sequence[Result]) -> dict[str, Any]:
    return {"role": "user", "content": [_tool_result(result) for result in results]}


def _thinking_first(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] != "assistant":
        return message
    blocks = message["content"]
    thinking = [b for b in blocks if b.get("type") in _THINKING_TYPES]
    rest = [b for b in blocks if b.get("type") not in _THINKING_TYPES]
    return {**message, "content": thinking + rest}


def _settle(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    settled = [_thinking_first(message) for message in messages]
    strip_final_assistant(settled, lambda block: block.get("type") == "text")
    return settled


def build_body(rows: Sequence[Message], model: str | None = None) -> dict[str, Any]:
    """The Messages API ``system`` (when any) and ``messages`` for ``rows`` (already swept)."""
    items = plan(rows, valid_id=_VALID_ID, make_id=_MAKE_ID, later_system="instruction")
    messages = alternating_turns(
        items,
        user=_user,
        assistant=_assistant,
        results=_results,
        content_key="content",
        opener={"role": "user", "content": [_text(CONTINUED)]},
        settle=_settle,
    )
    body: dict[str, Any] = {}
    system = system_texts(items)
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = messages
    return body

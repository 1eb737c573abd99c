"""AWS Bedrock Converse: top-level ``system`` blocks and ``messages`` (``user``/``assistant``).

Rules applied:

- Every leading system row (before any other row) becomes one ``{"text": …}`` block of the
  top-level ``system`` list, in order; omitted when there is none. A later system row stays in
  place as a user turn ``[Application instruction]\n<text>`` (``plan.later_instructions``),
  as for Anthropic: in ``system`` it would move the system cache point and every cached
  message after it.
- Content is a list of blocks with exactly one key each; no text block is empty or
  whitespace-only.
- Images: ``{"image": {"format": png|jpeg|gif|webp, "source": {"bytes": <base64>}}}``. In this JSON
  body ``bytes`` is base64 text, as on Converse's HTTP wire; a boto3 caller passes
  ``base64.b64decode`` of it (boto3 encodes bytes itself). Other types and URIs become text notes
  (Converse takes no web URLs).
- An assistant row is ``[text?, toolUse…]`` with ``toolUse {toolUseId, name, input}`` and
  ``input`` an object. ``name`` fits Converse's ``[a-zA-Z0-9_-]{1,64}`` (``ToolName`` in the
  service model, checked server-side): a name that does not fit becomes its cleaned head, ``_``
  and a hash of the name (``calls.function_name``), so names never merge.
- All results of a call turn are ``toolResult {toolUseId, content}`` blocks in the next user
  message, first, in call order. ``content`` is the result text (``(no output)`` when empty, since
  Converse takes no empty text) followed by the result's images.
- Adjacent messages of one role are merged; a conversation that opens with the assistant gets a
  ``(continued)`` user message first (Converse requires a user first and strict alternation).
- Trailing whitespace is removed from the final assistant message's text.
- Tool-use ids match ``[a-zA-Z0-9_.:-]{1,64}`` (others are rewritten as cleaned head + hash),
  unique in the body; a call and its result share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_history.model import Message
from chat_history.providers.calls import Result, arguments_object, function_name
from chat_history.providers.ids import id_rules
from chat_history.providers.images import COMMON_IMAGE_TYPES, Image, image_note
from chat_history.providers.messages import CONTINUED, alternating_turns, strip_final_assistant
from chat_history.providers.plan import AssistantTurn, UserTurn, plan, system_texts

KIND = "bedrock"
EMPTY_RESULT = "(no output)"
_VALID_ID, _MAKE_ID = id_rules(64, "a-zA-Z0-9_.:-")


def image_block(image: Image) -> dict[str, Any]:
    """An image as Bedrock Converse's content block: inline bytes by format, else a text note (it
    takes no URLs)."""
    if image.inline_of(COMMON_IMAGE_TYPES) and image.mime_type:
        image_format = image.mime_type.removeprefix("image/")
        return {"image": {"format": image_format, "source": {"bytes": image.data}}}
    return {"text": image_note(image)}


def _user(turn: UserTurn) -> dict[str, Any]:
    content = [{"text": s} if isinstance(s, str) else image_block(s) for s in turn.segments]
    return {"role": "user", "content": content}


def _assistant(turn: AssistantTurn) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"text": turn.text}] if turn.has_text else []
    content.extend(
        {
            "toolUse": {
                "toolUseId": c.id,
                "name": function_name(c.name),
                "input": arguments_object(c.source),
            }
        }
        for c in turn.calls
    )
    return {"role": "assistant", "content": content}


def _tool_result(result: Result) -> dict[str, Any]:
    images = result.images()
    content: list[dict[str, Any]] = []
    if result.text.strip():
        content.append({"text": result.text})
    content.extend(image_block(image) for image in images)
    if not content:
        content.append({"text": EMPTY_RESULT})
    return {"toolResult": {"toolUseId": result.call.id, "content": content}}


def _results(results: Sequence[Result]) -> dict[str, Any]:
    return {"role": "user", "content": [_tool_result(result) for result in results]}


def _settle(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    strip_final_assistant(messages, lambda block: "text" in block)
    return messages


def build_body(rows: Sequence[Message], model: str | None = None) -> dict[str, Any]:
    """The Converse ``system`` (when any) and ``messages`` for ``rows`` (already swept)."""
    items = plan(rows, valid_id=_VALID_ID, make_id=_MAKE_ID, later_system="instruction")
    messages = alternating_turns(
        items,
        user=_user,
        assistant=_assistant,
        results=_results,
        content_key="content",
        opener={"role": "user", "content": [{"text": CONTINUED}]},
        settle=_settle,
    )
    body: dict[str, Any] = {}
    system = system_texts(items)
    if system:
        body["system"] = [{"text": text} for text in system]
    body["messages"] = messages
    return body

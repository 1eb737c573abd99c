"""Mistral chat completions ``messages``.

Rules applied (Mistral validates message order and ids server-side, as ``mistral-common`` does):

- Leading system rows are ``system`` messages at the start, in order. A later system row right
  after a user message stays a ``system`` message there (mistral-common allows system after
  user or system); one after an assistant or tool message, where Mistral refuses a system
  message, stays in place as a user message ``[Application instruction]\n<text>``
  (``plan.later_instructions``). Moved to the start, it would change the first message and
  every cached prefix after it.
- User content is the row's string, or ``text``/``image_url`` chunks when it has images
  (``image_url`` a data URL of png, jpeg, gif or webp, or an http(s) URL); any other image
  becomes a text note.
- Assistant text and calls are separate messages (text first): older Mistral models refuse an
  assistant message with both ``content`` and ``tool_calls``. The calls message is
  ``{content: "", tool_calls: [{id, type: "function", function: {name, arguments}}]}`` with
  ``arguments`` a JSON string.
- Each result is ``{role: "tool", tool_call_id, name, content}`` right after its call, in call
  order. Tool messages take no images here: a result's images become text notes.
- Function names fit Mistral's ``[a-zA-Z0-9_-]{1,64}`` (mistral-common refuses any other in a
  call or a result): a stored name that fits is kept, any other becomes its cleaned head, ``_``
  and a 12-hex-digit hash of the name (``calls.function_name``), so names never merge and map
  alike in every request; a call and its result carry the same name.
- A user message may not follow a tool message: a ``(continued)`` assistant message is put
  between them.
- A conversation that opens with the assistant (truncated, forked or imported) gets a
  ``(continued)`` user message after the system messages, as for Anthropic, Gemini and Bedrock:
  mistral-common's validators skip the first message when pairing calls with results, so a
  first message carrying calls has its results refused.
- A body that ends with the assistant's text asks the model to continue that text, as a final
  assistant turn does for Anthropic (a prefill): that message carries ``prefix: true``, as
  Mistral documents for continuations; without it Mistral refuses the request ("Expected last
  role User or Tool (or Assistant with prefix True) for serving but got assistant",
  mistral-common's serving validator at every version). A client that wants a new reply
  instead appends the user's prompt before ``prepare`` (the usual order), so the body ends
  with it; one that adds its own prompt to a returned body drops ``prefix`` (Mistral allows it
  on the last message only).
- Tool-call ids are exactly 9 characters of ``[a-zA-Z0-9]``: a stored id that already is one is
  kept, any other is replaced by the first 9 base-62 digits of its SHA-256 (with a salt on a
  clash), so the same history always gives the same ids; a call and its result share it.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any

from chat_history.model import Message
from chat_history.providers.calls import Result, arguments_json, function_name
from chat_history.providers.ids import digest
from chat_history.providers.images import Image, image_note, image_url, text_or_parts
from chat_history.providers.messages import CONTINUED, opened_by_user
from chat_history.providers.plan import AssistantTurn, SystemText, UserTurn, plan

KIND = "mistral"
ID_LENGTH = 9
_ID = re.compile(r"[a-zA-Z0-9]{9}")
_BASE62 = string.digits + string.ascii_letters


def _valid_id(call_id: str) -> bool:
    return _ID.fullmatch(call_id) is not None


def mistral_id(call_id: str, salt: int = 0) -> str:
    """The 9-character id derived from a stored call id."""
    number = int.from_bytes(digest(call_id, salt), "big")
    chars = []
    for _ in range(ID_LENGTH):
        number, remainder = divmod(number, len(_BASE62))
        chars.append(_BASE62[remainder])
    return "".join(chars)


def _image_chunk(image: Image) -> dict[str, Any]:
    url = image_url(image)
    if url is None:
        return {"type": "text", "text": image_note(image)}
    return {"type": "image_url", "image_url": url}


def _user(turn: UserTurn) -> dict[str, Any]:
    return {"role": "user", "content": text_or_parts(turn.segments, _image_chunk)}


def _assistant(turn: AssistantTurn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if turn.has_text:
        messages.append({"role": "assistant", "content": turn.text})
    if turn.calls:
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": function_name(c.name), "arguments": arguments_json(c.source)},
            }
            for c in turn.calls
        ]
        messages.append({"role": "assistant", "content": "", "tool_calls": calls})
    return messages


def _tool(result: Result) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": result.call.id,
        "name": function_name(result.call.name),
        "content": result.text_with_notes(),
    }


def build_body(rows: Sequence[Message], model: str | None = None) -> dict[str, Any]:
    """The Mistral ``messages`` for ``rows`` (already swept)."""
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for item in plan(rows, valid_id=_valid_id, make_id=mistral_id, later_system="after_user"):
        if isinstance(item, SystemText):
            (messages if messages else system).append({"role": "system", "content": item.text})
            continue
        if isinstance(item, UserTurn):
            if messages and messages[-1]["role"] == "tool":
                messages.append({"role": "assistant", "content": CONTINUED})
            messages.append(_user(item))
        elif isinstance(item, AssistantTurn):
            messages.extend(_assistant(item))
        else:
            messages.extend(_tool(result) for result in item.results)
    opener = {"role": "user", "content": CONTINUED}
    sent = system + opened_by_user(messages, opener)
    if sent and sent[-1]["role"] == "assistant" and not sent[-1].get("tool_calls"):
        sent[-1] = {**sent[-1], "prefix": True}
    return {"messages": sent}

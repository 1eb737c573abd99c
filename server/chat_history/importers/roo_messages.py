"""Roo Code's versioned task history: newer builds write ``api_conversation_history.json`` as
``{"version": 2, "messages": [...]}``, the messages in the AI SDK's ``ModelMessage`` shape with
Roo Code's metadata (``ts``, ``condenseId``, …), where older builds wrote a bare array of
Anthropic messages. Turned back here into the Anthropic shape ``task_history`` reads, so one set
of rules reads both.

The format as observed (Roo Code's ``src/core/task-persistence/rooMessage.ts`` and the
converter it uses for older files, ``converters/anthropicToRoo.ts``; this reads the reverse of
that converter):

- ``user``: ``content`` a string or parts ``text``, ``image`` (``image``: a data URL or a link,
  ``mediaType``), ``file`` and older ``tool_result`` blocks.
- ``assistant``: parts ``text``, ``tool-call`` (``toolCallId``, ``toolName``, ``input``),
  ``reasoning`` (``text``; Anthropic's signature in ``providerOptions.anthropic.signature``,
  redacted thinking as ``providerOptions.anthropic.redactedData``).
- ``tool``: parts ``tool-result`` (``toolCallId``, ``toolName``, ``output``: ``{type: "text" |
  "json" | "error-text" | "error-json" | "content", value}``; an error also as text that starts
  with ``[ERROR]``), written before the user message that carried them in older files.
- A message without ``role`` and with ``type: "reasoning"`` is OpenAI's encrypted reasoning:
  counted, not kept (Roo Code's own format, not the Responses API's items this server keeps).
"""

from __future__ import annotations

import json
import re
from typing import Any

from chat_history.importers.common import Tally

VERSION = 2
_DATA_URL = re.compile(r"^data:([a-z0-9.+/-]+);base64,(.+)$", re.S | re.I)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def versioned(value: Any) -> list[Any] | None:
    """The messages of a versioned history, or None (not one: an older file, or not Roo's)."""
    record = _obj(value)
    messages = record.get("messages")
    if record.get("version") == VERSION and isinstance(messages, list):
        return messages
    return None


def anthropic_messages(messages: list[Any], tally: Tally) -> list[dict[str, Any]]:
    """A versioned history's messages in the older Anthropic shape (``ts`` kept)."""
    found: list[dict[str, Any]] = []
    for message in messages:
        record = _obj(message)
        role, content = record.get("role"), record.get("content")
        if role is None and record.get("type") == "reasoning":
            tally.skip("reasoning item", "OpenAI's encrypted reasoning in Roo Code's own format")
            continue
        if isinstance(content, list):
            content = [_block(part) for part in content]
        found.append(
            {"role": "user" if role == "tool" else role, "content": content, **_ts(record)}
        )
    return found


def _ts(record: dict[str, Any]) -> dict[str, Any]:
    return {"ts": record["ts"]} if "ts" in record else {}


def _block(part: Any) -> Any:
    """One AI SDK part as the Anthropic block it was (others as they are: counted later)."""
    record = _obj(part)
    kind = record.get("type")
    if kind == "tool-call":
        name, cid = record.get("toolName"), record.get("toolCallId")
        return {"type": "tool_use", "id": cid, "name": name, "input": record.get("input")}
    if kind == "tool-result":
        text, failed = _output(record.get("output"))
        block = {"type": "tool_result", "tool_use_id": record.get("toolCallId"), "content": text}
        return {**block, "is_error": True} if failed else block
    if kind == "reasoning":
        anthropic = _obj(_obj(record.get("providerOptions")).get("anthropic"))
        if isinstance(anthropic.get("redactedData"), str):
            return {"type": "redacted_thinking", "data": anthropic["redactedData"]}
        thinking = {"type": "thinking", "thinking": record.get("text") or ""}
        signature = anthropic.get("signature")
        return {**thinking, "signature": signature} if isinstance(signature, str) else thinking
    if kind == "image":
        return _image(record)
    return part


def _image(record: dict[str, Any]) -> dict[str, Any]:
    image = record.get("image")
    found = _DATA_URL.match(image) if isinstance(image, str) else None
    if found:
        source = {"type": "base64", "media_type": found[1], "data": found[2]}
        return {"type": "image", "source": source}
    return {"type": "image", "source": {"type": "url", "url": image}}  # a link: counted


def _output(output: Any) -> tuple[str, bool]:
    """A tool result's text, and whether it failed."""
    if isinstance(output, str):
        return output, output.lstrip().startswith("[ERROR]")
    record = _obj(output)
    kind, value = record.get("type"), record.get("value")
    if kind in {"text", "error-text"} and isinstance(value, str):
        text = value
    elif kind in {"json", "error-json"}:
        text = json.dumps(value)
    elif kind == "content" and isinstance(value, list):
        parts = [_obj(item).get("text") for item in value]
        text = "\n\n".join(p for p in parts if isinstance(p, str))
    else:
        text = ""
    failed = kind in {"error-text", "error-json"} or text.lstrip().startswith("[ERROR]")
    return text, failed

"""The reader of OpenCode's sessions in the shape ``opencode export`` prints: ``{"info": session,
"messages": [{"info": message, "parts": [part, …]}]}``. The storage tree (``tree``) and the
SQLite database of builds from 2026 (``database``) are gathered into this shape, so an export
file reads the same and these rules apply to all three.

The format as observed (OpenCode's session, message and part schemas, 0.x to 1.x; checked
against its ``packages/opencode/src/session/message-v2.ts``):

- A session: ``id``, ``projectID``, ``directory`` (the project folder), ``parentID`` (a
  sub-agent's session: a conversation of its own), ``title``, ``time.created``/``updated``
  (epoch ms).
- A message: ``id`` (ascending in time), ``sessionID``, ``role`` (``user``/``assistant``),
  ``time.created``, and for replies ``modelID``, ``providerID`` (the reply's origin, scope
  ``import:opencode``, where it names a kind: ``KINDS``), ``error``.
- Parts, in id order: ``text`` (``text``; ``synthetic`` when OpenCode wrote it), ``reasoning``
  (``text``, ``metadata`` with the provider's data: Anthropic's ``signature`` kept as
  ``providerData.anthropic.thinking``), ``tool`` (``callID``, ``tool``, ``state``: ``status``
  ``completed`` with ``input`` and ``output``, ``error`` with ``error``, ``pending``/``running``
  never finished), ``file`` (``mime``, ``url``: a data URL is an image), and the bookkeeping
  parts ``step-start``, ``step-finish``, ``snapshot``, ``patch``, ``agent``, ``compaction``.
- A reply whose text comes after its tool calls is split there: text and calls, their results,
  then the later text, as the model produced them.
"""

from __future__ import annotations

import re
from typing import Any

from chat_history.importers.common import Session, Tally, first_line_title, json_value, timestamp_ms
from chat_history.model import Attachment, Message, Origin, ToolCall
from chat_history.policy.origins import import_origin

SOURCE = "opencode"
BOOKKEEPING = {"step-start", "step-finish", "snapshot", "patch", "agent", "compaction", "retry"}
_DATA_URL = re.compile(r"^data:(image/[a-z0-9.+-]+);base64,(.+)$", re.S)
#: OpenCode's ``providerID`` of a reply → the provider kind whose API it speaks (OpenCode sends
#: OpenAI's models through the Responses API); another provider leaves the reply's origin unknown.
KINDS = {"anthropic": "anthropic", "openai": "openai-responses", "google": "gemini"}


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _created(info: dict[str, Any]) -> int | None:
    time = info.get("time")
    return timestamp_ms(time.get("created")) if isinstance(time, dict) else None


def _user(parts: list[Any], at: int | None, tally: Tally) -> list[Message]:
    texts: list[str] = []
    images: list[Attachment] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            if part.get("synthetic") is True:
                tally.skip("synthetic text", "written by OpenCode, not typed by the user")
            else:
                texts.append(part["text"])
        elif kind == "file":
            found = _DATA_URL.match(part["url"]) if isinstance(part.get("url"), str) else None
            if found:
                images.append(Attachment(kind="image", mime_type=found[1], data=found[2]))
            else:
                tally.skip("file part", "not an inline image")
        else:
            tally.skip(f"{kind or 'unknown'} part", "not carried over")
    text = "\n\n".join(t for t in texts if t)
    return (
        [Message(role="user", content=text, attachments=tuple(images), timestamp=at)]
        if text or images
        else []
    )


class _Reply:
    """An assistant message's parts as rows: text and calls, each call's result after them."""

    def __init__(self, at: int | None, tally: Tally, origin: Origin | None = None) -> None:
        self.at, self.tally, self.origin = at, tally, origin
        self.rows: list[Message] = []
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.results: list[Message] = []
        self.thinking: list[dict[str, Any]] = []

    def flush(self) -> None:
        text = "\n\n".join(t for t in self.texts if t)
        if text or self.calls:
            data = {"anthropic": {"thinking": self.thinking}} if self.thinking else {}
            self.rows.append(
                Message(
                    role="assistant",
                    content=text,
                    tool_calls=tuple(self.calls),
                    timestamp=self.at,
                    provider_data=data,
                    origin=self.origin,
                )
            )
            self.rows.extend(self.results)
            self.thinking = []
        self.texts, self.calls, self.results = [], [], []

    def part(self, part: Any) -> None:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            if self.calls:
                self.flush()
            self.texts.append(part["text"])
        elif kind == "reasoning":
            self._reasoning(part)
        elif kind == "tool":
            self._tool(part)
        elif kind in BOOKKEEPING:
            self.tally.skip(f"{kind} part", "OpenCode's bookkeeping, not the conversation")
        else:
            self.tally.skip(f"{kind or 'unknown'} part", "not carried over")

    def _reasoning(self, part: dict[str, Any]) -> None:
        metadata = _obj(part.get("metadata"))
        anthropic = _obj(metadata.get("anthropic"))
        signature = anthropic.get("signature")
        if isinstance(signature, str) and signature and not self.calls and not self.texts:
            text = _str(part.get("text"))
            self.thinking.append({"type": "thinking", "thinking": text, "signature": signature})
        else:
            self.tally.skip("reasoning part", "not signed where its reply starts: not sendable")

    def _tool(self, part: dict[str, Any]) -> None:
        state = _obj(part.get("state"))
        cid, status = part.get("callID"), state.get("status")
        if not isinstance(cid, str) or not cid or status not in {"completed", "error"}:
            self.tally.skip("tool part", "never finished, or no call id")
            return
        if status == "completed":
            output = state.get("output")
            text = output if isinstance(output, str) else ""
        else:
            text = f"Error: {state.get('error')}" if state.get("error") else "Error"
        name = _str(part.get("tool")) or "tool"
        arguments = _obj(state.get("input"))
        time = _obj(state.get("time"))
        self.calls.append(ToolCall(id=cid, name=name, arguments=arguments))
        when = timestamp_ms(time.get("end")) or self.at
        self.results.append(Message(role="tool", content=text, tool_call_id=cid, timestamp=when))


def _origin(head: dict[str, Any]) -> Origin | None:
    """A reply's origin: its provider's kind and ``modelID``, scope ``import:opencode``."""
    kind = KINDS.get(_str(head.get("providerID")))
    return import_origin(SOURCE, kind, _str(head.get("modelID")) or None) if kind else None


def read(data: bytes, session_id: str) -> list[Session]:
    """The conversation of one OpenCode session in ``opencode export``'s shape."""
    tally = Tally()
    try:
        bundle = json_value(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return []
    info = bundle.get("info") if isinstance(bundle, dict) else None
    messages = bundle.get("messages") if isinstance(bundle, dict) else None
    if not isinstance(info, dict) or not isinstance(messages, list):
        return []
    rows: list[Message] = []
    for message in messages:
        head = message.get("info") if isinstance(message, dict) else None
        parts = message.get("parts") if isinstance(message, dict) else None
        if not isinstance(head, dict) or not isinstance(parts, list):
            tally.skip("message", "no info or no parts")
            continue
        at = _created(head)
        if head.get("role") == "user":
            rows.extend(_user(parts, at, tally))
        elif head.get("role") == "assistant":
            reply = _Reply(at, tally, _origin(head))
            for part in parts:
                reply.part(part)
            reply.flush()
            rows.extend(reply.rows)
        else:
            tally.skip("message", "neither the user's nor a reply")
    if not rows:
        return []
    sid = _str(info.get("id")) or session_id
    folder = _str(info.get("directory"))
    title = _str(info.get("title"))
    if not title.strip() or title.startswith(("New session - ", "Child session - ")):
        title = first_line_title(next((r.content for r in rows if r.role == "user"), "")) or ""
    return [Session(SOURCE, sid, folder or None, title or None, tuple(rows), tally.items())]

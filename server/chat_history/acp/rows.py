"""Pure rules between ACP messages and stored rows (no I/O): a reply's updates coalesced as they
stream (adjacent text chunks of one kind merged, everything else kept in order), the rows a
prompt and its reply make, the updates that replay them, and the context block that carries an
earlier conversation into a new agent session's first prompt, and what a session's metadata
notes of its turns for a history view.

A prompt is one user row (its text; the content blocks in ``provider_data["acp"]``); a reply is
one assistant row (the agent's message text; its tool calls; the coalesced updates in
``provider_data["acp"]``, the key no provider formatter reads) and one tool row per tool call
that finished with content. Replaying a user row sends its blocks as ``user_message_chunk``; an
assistant row sends its stored updates. When a reply ends, the conversation's metadata notes
under ``"acp"`` when (``lastTurnEndedAt``, epoch ms) and the newest ``usage_update`` the agent
sent (its ``cost``, and ``used`` and ``size``): a history view reads them from the record alone,
not from the rows.

A message's ``messageId`` (the ACP draft's message ids: a prompt's, given by the editor, and the
one every chunk of a reply carries, given by the agent) is kept with its row, and ``message_row``
finds the row a ``session/fork``'s ``messageId`` names: by those ids, else by the store's row id
written in decimal (the id the panel, the MCP tools and ``getTree`` show)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from chat_history.model import Message, StoredMessage, ToolCall

#: The key of a row's ``provider_data`` that holds what ACP sent (no provider kind is "acp").
ACP = "acp"
#: Chunk kinds whose adjacent text chunks are merged (ACP streams them a few tokens at a time).
CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")
#: The conversation id of a session.
PREFIX = "acp:"


def conversation_id(session_id: str) -> str:
    """The conversation of an ACP session."""
    return PREFIX + session_id


def session_of(conversation: str) -> str | None:
    """The ACP session of a conversation id, or None for a conversation of another client."""
    return conversation[len(PREFIX) :] if conversation.startswith(PREFIX) else None


def block_text(block: Mapping[str, Any]) -> str:
    """The text a content block contributes to a row: a text block's text, an embedded text
    resource's text, a link's uri; nothing for images and audio."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "resource":
        resource = block.get("resource") or {}
        return str(resource.get("text", "")) if isinstance(resource, Mapping) else ""
    if kind == "resource_link":
        return str(block.get("uri", ""))
    return ""


def prompt_row(blocks: Sequence[Mapping[str, Any]], message_id: str | None = None) -> Message:
    """The user row of a ``session/prompt`` (``message_id``: the prompt's ``messageId``)."""
    text = "\n".join(t for t in (block_text(b) for b in blocks) if t)
    data: dict[str, Any] = {"prompt": list(blocks)}
    if message_id is not None:
        data["messageId"] = message_id
    return Message(role="user", content=text, provider_data={ACP: data})


def message_row(rows: Iterable[StoredMessage], message_id: str) -> int | None:
    """The id of the row of ``rows`` (a conversation's, on every branch) that ``message_id``
    names: the prompt whose ``messageId`` it is, or the reply whose chunks carry it; else the
    row whose id it writes in decimal. None: no row."""
    by_number: int | None = None
    number = int(message_id) if message_id.isascii() and message_id.isdigit() else None
    for row in rows:
        if message_id in _message_ids(row):
            return row.id
        if row.id == number:
            by_number = row.id
    return by_number


def _message_ids(row: StoredMessage) -> set[str]:
    """The ACP message ids recorded with ``row``."""
    data = row.provider_data.get(ACP) if row.provider_data else None
    if not isinstance(data, Mapping):
        return set()
    if row.role == "user":
        own = data.get("messageId")
        return {own} if isinstance(own, str) else set()
    updates = data.get("updates")
    return {
        update["messageId"]
        for update in (updates if isinstance(updates, list) else ())
        if isinstance(update, Mapping) and isinstance(update.get("messageId"), str)
    }


@attrs.define
class Reply:
    """A reply as it streams: the coalesced updates, the message text, the tool calls in the
    order they started and each call's latest title, input, status and content."""

    updates: list[dict[str, Any]] = attrs.field(factory=list)
    text: list[str] = attrs.field(factory=list)
    calls: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    dirty: bool = False
    #: the newest ``usage_update`` of the reply
    usage: dict[str, Any] | None = None

    def add(self, update: Mapping[str, Any]) -> None:
        """One ``session/update``'s ``update`` object."""
        kind = update.get("sessionUpdate")
        self.dirty = True
        if kind == "usage_update":
            self.usage = dict(update)
        last = self.updates[-1] if self.updates else None
        content = update.get("content")
        if kind in CHUNKS and _is_text(content):
            text = str(content["text"])  # type: ignore[index]
            if kind == "agent_message_chunk":
                self.text.append(text)
            if (
                last is not None
                and last.get("sessionUpdate") == kind
                and _is_text(last.get("content"))
                and set(update) <= {"sessionUpdate", "content", "messageId"}
                and set(last) == set(update)
                and last.get("messageId") == update.get("messageId")
            ):
                last["content"] = {"type": "text", "text": last["content"]["text"] + text}
                return
        self.updates.append(json.loads(json.dumps(update)))
        if kind in ("tool_call", "tool_call_update") and isinstance(update.get("toolCallId"), str):
            call = self.calls.setdefault(update["toolCallId"], {})
            call.update({k: v for k, v in update.items() if v is not None})

    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The calls as the assistant row holds them (name: the call's kind, else its title)."""
        return tuple(
            ToolCall(
                id=call_id,
                name=str(call.get("kind") or call.get("title") or "tool"),
                arguments=call.get("rawInput") if isinstance(call.get("rawInput"), dict) else {},
            )
            for call_id, call in self.calls.items()
        )

    def provider_data(self) -> dict[str, Any]:
        """What the assistant row keeps to replay the reply."""
        return {ACP: {"updates": self.updates}}

    def tool_rows(self) -> list[Message]:
        """One tool row per finished call (completed or failed), its content as text."""
        rows = []
        for call_id, call in self.calls.items():
            if call.get("status") not in ("completed", "failed"):
                continue
            text = "\n".join(_tool_content_text(call.get("content") or ()))
            if not text and call.get("rawOutput") is not None:
                text = json.dumps(call["rawOutput"], ensure_ascii=False)
            rows.append(Message(role="tool", tool_call_id=call_id, content=text or call["status"]))
        return rows


def _is_text(content: object) -> bool:
    return (
        isinstance(content, Mapping)
        and content.get("type") == "text"
        and set(content)
        <= {
            "type",
            "text",
        }
    )


def _tool_content_text(items: Iterable[Any]) -> Iterable[str]:
    for item in items:
        if isinstance(item, Mapping) and item.get("type") == "content":
            inner = item.get("content")
            if isinstance(inner, Mapping):
                yield block_text(inner)
        elif isinstance(item, Mapping) and item.get("type") == "diff":
            yield f"diff of {item.get('path', '')}"


def replay(rows: Iterable[StoredMessage]) -> list[dict[str, Any]]:
    """The ``update`` objects that replay ``rows`` (tool rows replay through their call's
    updates, stored with the assistant row)."""
    updates: list[dict[str, Any]] = []
    for row in rows:
        data = row.provider_data.get(ACP) if row.provider_data else None
        if row.role == "user":
            blocks = data.get("prompt") if isinstance(data, Mapping) else None
            own = data.get("messageId") if isinstance(data, Mapping) else None
            named = {"messageId": own} if isinstance(own, str) else {}
            for block in blocks or [{"type": "text", "text": row.content}]:
                updates.append({"sessionUpdate": "user_message_chunk", "content": block, **named})
        elif row.role == "assistant":
            stored = data.get("updates") if isinstance(data, Mapping) else None
            if stored is None:  # a row another client wrote: its text
                stored = [{"sessionUpdate": "agent_message_chunk", "content": _text(row.content)}]
            updates.extend(stored)
    return updates


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def turn_note(reply: Reply, ended_at: int) -> dict[str, Any]:
    """What the conversation's metadata notes under ``"acp"`` when ``reply`` ended at
    ``ended_at`` (epoch ms): the time, and what its newest ``usage_update`` holds (checked;
    nothing of usage when it sent none, so an earlier reply's figures stay)."""
    note: dict[str, Any] = {"lastTurnEndedAt": ended_at}
    if reply.usage is not None:
        cost = _cost(reply.usage.get("cost"))
        if cost is not None:
            note["cost"] = cost
        for name in ("used", "size"):
            if _count(reply.usage.get(name)):
                note[name] = reply.usage[name]
    return note


def noted(metadata: dict[str, Any], note: Mapping[str, Any]) -> bool:
    """Merge a turn's ``note`` into the metadata's ``"acp"`` object; whether it changed."""
    kept = metadata.get(ACP)
    old = dict(kept) if isinstance(kept, Mapping) else {}
    new = {**old, **note}
    if new == kept:
        return False
    metadata[ACP] = new
    return True


@attrs.frozen
class Facts:
    """What a conversation's metadata says of the session for a history view: archived or not,
    when its last turn ended (epoch ms), and the agent's newest ``cost`` (ACP's ``Cost``),
    ``used`` and ``size`` (each None when not noted, or not well formed)."""

    archived: bool = False
    ended_at: int | None = None
    cost: dict[str, Any] | None = None
    used: int | None = None
    size: int | None = None


def facts(metadata: str | None) -> Facts:
    """The facts of a conversation's metadata (its compact JSON text; None: empty)."""
    if metadata is None or not ('"archived"' in metadata or f'"{ACP}"' in metadata):
        return Facts()
    try:
        value = json.loads(metadata)
    except ValueError:
        return Facts()
    if not isinstance(value, dict):
        return Facts()
    note = value.get(ACP)
    note = note if isinstance(note, dict) else {}
    ended, used, size = (note.get(n) for n in ("lastTurnEndedAt", "used", "size"))
    return Facts(
        archived=value.get("archived") is True,
        ended_at=ended if _count(ended) else None,
        cost=_cost(note.get("cost")),
        used=used if _count(used) else None,
        size=size if _count(size) else None,
    )


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value < 2**63


def _cost(value: object) -> dict[str, Any] | None:
    """ACP's ``Cost`` as the agent sent it, when it is one: a finite ``amount`` and a
    ``currency`` code (at most 16 characters)."""
    if not isinstance(value, Mapping):
        return None
    amount, currency = value.get("amount"), value.get("currency")
    if not isinstance(amount, int | float) or isinstance(amount, bool):
        return None
    if not math.isfinite(amount) or not isinstance(currency, str) or not 0 < len(currency) <= 16:
        return None
    return {"amount": amount, "currency": currency}


def context_block(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The text block that carries an earlier conversation (a prepared body's messages, in the
    OpenAI chat shape) into a new agent session's first prompt."""
    lines = [
        "<earlier-conversation>",
        "This session continues an earlier conversation; it is repeated here for context.",
    ]
    for message in messages:
        role = str(message.get("role", ""))
        content = message.get("content")
        text = content if isinstance(content, str) else _parts_text(content)
        for call in message.get("tool_calls") or ():
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            text += f"\n[tool call {function.get('name', '')}: {function.get('arguments', '')}]"
        if role == "tool":
            role = f"tool result {message.get('tool_call_id', '')}".rstrip()
        lines.append(f"{role}: {text.strip()}")
    lines.append("</earlier-conversation>")
    return _text("\n".join(lines))


def _parts_text(parts: object) -> str:
    if not isinstance(parts, list):
        return ""
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))

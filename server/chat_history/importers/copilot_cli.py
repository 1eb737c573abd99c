"""GitHub Copilot CLI sessions: ``~/.copilot/session-state/<session id>/events.jsonl``
(``$COPILOT_HOME`` instead of ``~/.copilot``). The older single-file sessions
(``history-session-state/*.json``) are not read.

The format as observed (the CLI's session events, 0.0.3xx to 1.x; the CLI ships a JSON schema
of them under a proprietary licence, not read here; shapes from the MIT-licensed SDK's event
types as other readers use them):

- One event a line: ``{type, data, id, parentId, timestamp (ISO 8601), ephemeral?}``.
- ``session.start``: ``data.sessionId``, ``data.context.cwd`` (the project folder).
- ``user.message``: ``data.content`` (``transformedContent``: what the CLI sent, with its own
  additions: not used). ``assistant.message``: ``data.messageId``, ``data.content``,
  ``data.toolRequests`` (``toolCallId``, ``name``, ``arguments``). ``tool.execution_start``
  (``toolCallId``, ``toolName``, ``arguments``) and ``tool.execution_complete`` (``toolCallId``,
  ``success``, ``result.content``, ``error.message``): a call's result, paired with its
  request (or, when the reply listed no requests, with the start event's call).
- Not messages, counted: ephemeral events (deltas, usage, idle), turn, hook, permission,
  model-change and info events; events of a sub-agent (``parentToolCallId``) are counted too.
"""

from __future__ import annotations

from typing import Any

import attrs

from chat_history.importers.common import (
    Session,
    Tally,
    first_line_title,
    json_lines,
    json_value,
    timestamp_ms,
)
from chat_history.model import Message, ToolCall

SOURCE = "copilot-cli"


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str) and raw.strip():
        try:
            parsed = json_value(raw)
        except ValueError:
            return {"input": raw}
        return parsed if isinstance(parsed, dict) else {"input": raw}
    return {}


@attrs.define
class _Events:
    tally: Tally
    rows: list[Message] = attrs.field(factory=list)
    requested: set[str] = attrs.field(factory=set)
    started: dict[str, ToolCall] = attrs.field(factory=dict)

    def user(self, data: dict[str, Any], at: int | None) -> None:
        self.settle()
        content = data.get("content")
        if isinstance(content, str) and content.strip():
            self.rows.append(Message(role="user", content=content, timestamp=at))

    def assistant(self, data: dict[str, Any], at: int | None) -> None:
        self.settle()
        calls: list[ToolCall] = []
        for request in data.get("toolRequests") or []:
            cid = request.get("toolCallId") if isinstance(request, dict) else None
            if not isinstance(cid, str) or not cid:
                self.tally.skip("tool request", "no call id")
                continue
            name = request.get("name") if isinstance(request.get("name"), str) else None
            calls.append(
                ToolCall(
                    id=cid, name=name or "tool", arguments=_arguments(request.get("arguments"))
                )
            )
        said = data.get("content")
        content = said if isinstance(said, str) else ""
        if content or calls:
            self.rows.append(
                Message(role="assistant", content=content, tool_calls=tuple(calls), timestamp=at)
            )
            self.requested = {call.id for call in calls}

    def start(self, data: dict[str, Any]) -> None:
        cid, name = data.get("toolCallId"), data.get("toolName")
        if isinstance(cid, str) and cid:
            call_name = name if isinstance(name, str) and name else "tool"
            self.started[cid] = ToolCall(
                id=cid, name=call_name, arguments=_arguments(data.get("arguments"))
            )

    def complete(self, data: dict[str, Any], at: int | None) -> None:
        cid = data.get("toolCallId")
        if not isinstance(cid, str) or (cid not in self.requested and not self._adopt(cid)):
            self.tally.skip("tool result", "no tool call before it")
            return
        self.requested.discard(cid)
        result = _obj(data.get("result"))
        error = _obj(data.get("error"))
        if data.get("success") is False:
            text = f"Error: {error.get('message') or result.get('content') or 'failed'}"
        else:
            content = result.get("content")
            text = content if isinstance(content, str) else ""
        self.rows.append(Message(role="tool", content=text, tool_call_id=cid, timestamp=at))

    def _adopt(self, cid: str) -> bool:
        """A completed call the reply did not list: added to the reply before its results."""
        call = self.started.get(cid)
        index = next(
            (i for i in range(len(self.rows) - 1, -1, -1) if self.rows[i].role == "assistant"), None
        )
        if call is None or index is None or any(r.role == "user" for r in self.rows[index:]):
            return False
        if any(r.role == "tool" for r in self.rows[index + 1 :]):
            return False  # results already follow: a call added now would come after them
        row = self.rows[index]
        self.rows[index] = attrs.evolve(row, tool_calls=(*row.tool_calls, call))
        return True

    def settle(self) -> None:
        """Requests never completed, taken out of their reply (a provider refuses them)."""
        for cid in self.requested:
            self.tally.skip("tool request", "never completed")
            for index in range(len(self.rows) - 1, -1, -1):
                row = self.rows[index]
                if any(call.id == cid for call in row.tool_calls):
                    kept = tuple(call for call in row.tool_calls if call.id != cid)
                    if kept or row.content:
                        self.rows[index] = attrs.evolve(row, tool_calls=kept)
                    else:
                        del self.rows[index]
                    break
        self.requested = set()


def read(data: bytes, session_id: str) -> list[Session]:
    """The conversation of one ``events.jsonl`` (``session_id``: the session folder's name,
    unless ``session.start`` names the session)."""
    tally = Tally()
    events = _Events(tally)
    named: str | None = None
    folder: str | None = None
    for _, event in json_lines(data, tally):
        kind, body = event.get("type"), event.get("data")
        payload: dict[str, Any] = body if isinstance(body, dict) else {}
        at = timestamp_ms(event.get("timestamp"))
        if not isinstance(kind, str):
            tally.skip("event", "no type")
        elif event.get("ephemeral") is True:
            tally.skip("ephemeral event", "a live update, not the record")
        elif payload.get("parentToolCallId"):
            tally.skip(f"{kind} event", "a sub-agent's, inside a tool call")
        elif kind == "session.start":
            context = _obj(payload.get("context"))
            cwd = context.get("cwd") or payload.get("cwd")
            folder = cwd if isinstance(cwd, str) and cwd else folder
            sid = payload.get("sessionId")
            named = sid if isinstance(sid, str) and sid else named
        elif kind == "user.message":
            events.user(payload, at)
        elif kind == "assistant.message":
            events.assistant(payload, at)
        elif kind == "tool.execution_start":
            events.start(payload)
        elif kind == "tool.execution_complete":
            events.complete(payload, at)
        else:
            tally.skip(f"{kind} event", "not a message")
    events.settle()
    if not events.rows:
        return []
    first = next((r.content for r in events.rows if r.role == "user"), "")
    return [
        Session(
            SOURCE,
            named or session_id,
            folder,
            first_line_title(first),
            tuple(events.rows),
            tally.items(),
        )
    ]

"""GitHub Copilot CLI sessions: ``~/.copilot/session-state/<session id>/events.jsonl``
(``$COPILOT_HOME`` instead of ``~/.copilot``), and the older single-file sessions of builds
before the event log, ``~/.copilot/history-session-state/session_<session id>_<epoch ms>.json``,
told apart by their content (one JSON object with ``chatMessages``). A session in both is read
from its event log. Every project's sessions are kept together, each event log recording its
folder.

The event log as observed (the CLI's session events, 0.0.3xx to 1.x; the CLI ships a JSON
schema of them under a proprietary licence, not read here; shapes from the MIT-licensed SDK's
event types as other readers use them):

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

The single-file session as observed (builds of autumn 2025, as readers of it parse it; no
schema was published): ``{sessionId, startTime (ISO 8601), chatMessages, timeline}``.

- ``chatMessages``: the conversation as the model was sent it, in the Chat Completions shape:
  ``{role: user|assistant|tool|system, content, tool_calls: [{id, type: "function",
  function: {name, arguments (a JSON string)}}], tool_call_id}``. Read here, with the same
  pairing rules as the event log (a result without its call before it is counted, a call never
  answered is taken out of its reply); ``system`` messages are the CLI's instructions, counted.
- ``timeline``: what the CLI showed, each entry with ``id``, ``timestamp`` and ``type``:
  ``user`` (``text``, ``expandedText``), ``copilot`` (``text``), ``tool_call_requested`` and
  ``tool_call_completed`` (``callId``, ``name``, ``toolTitle``, ``intentionSummary``,
  ``arguments`` — an object, or a JSON string —, ``result: {type: success|error, log}``),
  ``info``. Beside ``chatMessages`` only its times are used: a prompt's is its ``user`` entry's
  (in order), a reply's its ``copilot`` entry's (else its first call's request), a result's its
  call's completion; else the row before's, else ``startTime``.
- Some files keep ``chatMessages`` empty and the conversation only in the timeline: then the
  rows come from it — a ``user`` entry's ``text`` is a prompt, a ``copilot`` entry's a reply,
  and the calls completed together (``tool_call_completed`` entries with nothing between them)
  are one round: the calls of the reply just before when it has none yet (else of a reply of
  their own, at the first call's request), each followed by its result (``log``, an ``error``
  as ``Error: …``). A request never completed and the ``info`` entries are counted.
- No project folder is recorded: such a session needs the workspace named.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from chat_history.importers.common import (
    Session,
    Tally,
    first_line_title,
    json_lines,
    json_value,
    text_of,
    timestamp_ms,
)
from chat_history.importers.files import listed
from chat_history.importers.source import Importer
from chat_history.model import Message, Role, ToolCall

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


#: A tool request as the readers give it: (call id, name, raw arguments), each as found.
Request = tuple[Any, Any, Any]


def _outcome(data: dict[str, Any]) -> str:
    """A ``tool.execution_complete`` event's result as the tool row's text."""
    result = _obj(data.get("result"))
    error = _obj(data.get("error"))
    if data.get("success") is False:
        return f"Error: {error.get('message') or result.get('content') or 'failed'}"
    content = result.get("content")
    return content if isinstance(content, str) else ""


@attrs.define
class _Events:
    tally: Tally
    rows: list[Message] = attrs.field(factory=list)
    requested: set[str] = attrs.field(factory=set)
    started: dict[str, ToolCall] = attrs.field(factory=dict)

    def user(self, content: Any, at: int | None) -> None:
        self.settle()
        if isinstance(content, str) and content.strip():
            self.rows.append(Message(role="user", content=content, timestamp=at))

    def assistant(self, said: Any, requests: list[Request], at: int | None) -> None:
        """A reply: its text and its tool requests, each (call id, name, raw arguments)."""
        self.settle()
        calls: list[ToolCall] = []
        for cid, name, raw in requests:
            if not isinstance(cid, str) or not cid:
                self.tally.skip("tool request", "no call id")
                continue
            named = name if isinstance(name, str) and name else "tool"
            calls.append(ToolCall(id=cid, name=named, arguments=_arguments(raw)))
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

    def complete(self, cid: Any, text: str, at: int | None) -> None:
        """A call's result, after its request (or adopted from its start event)."""
        if not isinstance(cid, str) or (cid not in self.requested and not self._adopt(cid)):
            self.tally.skip("tool result", "no tool call before it")
            return
        self.requested.discard(cid)
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
    """The conversation of one ``events.jsonl``, or of one older single-file session
    (``session_id``: the session folder's name, or the id in the file's name, unless the file
    names the session)."""
    whole = _single_file(data)
    if whole is not None:
        return _history(whole, session_id)
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
            events.user(payload.get("content"), at)
        elif kind == "assistant.message":
            requests = [_obj(r) for r in payload.get("toolRequests") or []]
            listed = [(r.get("toolCallId"), r.get("name"), r.get("arguments")) for r in requests]
            events.assistant(payload.get("content"), listed, at)
        elif kind == "tool.execution_start":
            events.start(payload)
        elif kind == "tool.execution_complete":
            events.complete(payload.get("toolCallId"), _outcome(payload), at)
        else:
            tally.skip(f"{kind} event", "not a message")
    events.settle()
    return _session(named or session_id, folder, events.rows, tally)


def _session(sid: str, folder: str | None, rows: list[Message], tally: Tally) -> list[Session]:
    if not rows:
        return []
    first = next((r.content for r in rows if r.role == "user"), "")
    return [Session(SOURCE, sid, folder, first_line_title(first), tuple(rows), tally.items())]


def _single_file(data: bytes) -> dict[str, Any] | None:
    """The older single-file session in ``data``, or None (not one: an event log)."""
    if not data.lstrip().startswith(b"{"):
        return None
    try:
        value = json_value(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None  # an event log's lines, or a file cut short: read as lines
    if isinstance(value, dict) and any(
        isinstance(value.get(key), list) for key in ("chatMessages", "timeline")
    ):
        return value
    return None


class _Times:
    """The times of a single-file session's rows, from its timeline (see the module's notes)."""

    def __init__(self, timeline: Any, start: int | None) -> None:
        self.last = start
        self.prompts: deque[int | None] = deque()
        self.replies: deque[int | None] = deque()
        self.requested: dict[str, int | None] = {}
        self.completed: dict[str, int | None] = {}
        for entry in timeline if isinstance(timeline, list) else []:
            kind = entry.get("type") if isinstance(entry, dict) else None
            at = timestamp_ms(entry.get("timestamp")) if isinstance(entry, dict) else None
            call = entry.get("callId") if isinstance(entry, dict) else None
            if kind == "user":
                self.prompts.append(at)
            elif kind == "copilot":
                self.replies.append(at)
            elif kind == "tool_call_requested" and isinstance(call, str):
                self.requested.setdefault(call, at)
            elif kind == "tool_call_completed" and isinstance(call, str):
                self.completed[call] = at

    def _at(self, found: int | None) -> int | None:
        self.last = found if found is not None else self.last
        return self.last

    def prompt(self) -> int | None:
        return self._at(self.prompts.popleft() if self.prompts else None)

    def reply(self, said: bool, calls: list[str]) -> int | None:
        found = self.replies.popleft() if said and self.replies else None
        if found is None:
            found = next((self.requested[c] for c in calls if self.requested.get(c)), None)
        return self._at(found)

    def result(self, cid: Any) -> int | None:
        return self._at(self.completed.get(cid) if isinstance(cid, str) else None)


def _history(value: dict[str, Any], session_id: str) -> list[Session]:
    """The conversation of an older single-file session: its ``chatMessages``, else (none
    there) its timeline."""
    tally = Tally()
    events = _Events(tally)
    times = _Times(value.get("timeline"), timestamp_ms(value.get("startTime")))
    messages = value.get("chatMessages")
    for message in messages if isinstance(messages, list) else []:
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(message, dict) or role not in {"user", "assistant", "tool", "system"}:
            tally.skip("chat message", "not a message of a known role")
            continue
        content = message.get("content")
        text = content if isinstance(content, str) else text_of(content)
        if role == "user":
            events.user(text, times.prompt())
        elif role == "assistant":
            requests = [_request(call) for call in message.get("tool_calls") or []]
            at = times.reply(bool(text.strip()), [c for c, _, _ in requests if isinstance(c, str)])
            events.assistant(text, requests, at)
        elif role == "tool":
            cid = message.get("tool_call_id")
            events.complete(cid, text, times.result(cid))
        else:
            tally.skip("system message", "the CLI's instructions, not the conversation")
    events.settle()
    sid = value.get("sessionId")
    named = sid if isinstance(sid, str) and sid else session_id
    if not events.rows:
        return _from_timeline(value, named)
    return _session(named, None, events.rows, tally)


@attrs.define
class _Timeline:
    """The rows of a timeline (see the module's notes): a round of completed calls is held
    until an entry that is not a completion ends it."""

    tally: Tally
    at: int | None
    rows: list[Message] = attrs.field(factory=list)
    requested: dict[str, int | None] = attrs.field(factory=dict)
    calls: list[ToolCall] = attrs.field(factory=list)
    results: list[Message] = attrs.field(factory=list)

    def said(self, role: Role, text: Any) -> None:
        self.flush()
        if isinstance(text, str) and text.strip():
            self.rows.append(Message(role=role, content=text, timestamp=self.at))

    def completed(self, entry: dict[str, Any]) -> None:
        cid, name = entry.get("callId"), entry.get("name")
        if not isinstance(cid, str) or not cid:
            self.tally.skip("tool call", "no call id")
            return
        named = name if isinstance(name, str) and name else "tool"
        self.calls.append(
            ToolCall(id=cid, name=named, arguments=_arguments(entry.get("arguments")))
        )
        result = _obj(entry.get("result"))
        log = result.get("log")
        said = log if isinstance(log, str) else ""
        text = f"Error: {said or 'failed'}" if result.get("type") == "error" else said
        self.results.append(Message(role="tool", content=text, tool_call_id=cid, timestamp=self.at))

    def flush(self) -> None:
        """The round of calls: on the reply just before when it has none, else on its own."""
        if not self.calls:
            return
        last = self.rows[-1] if self.rows else None
        if last is not None and last.role == "assistant" and not last.tool_calls:
            self.rows[-1] = attrs.evolve(last, tool_calls=tuple(self.calls))
        else:
            asked = next(
                (self.requested[c.id] for c in self.calls if self.requested.get(c.id)), None
            )
            at = asked if asked is not None else self.results[0].timestamp
            self.rows.append(
                Message(role="assistant", content="", tool_calls=tuple(self.calls), timestamp=at)
            )
        self.rows.extend(self.results)
        for call in self.calls:
            self.requested.pop(call.id, None)
        self.calls, self.results = [], []


def _from_timeline(value: dict[str, Any], session_id: str) -> list[Session]:
    """The conversation of an older single-file session whose ``chatMessages`` is empty: its
    timeline's prompts, replies and completed calls."""
    tally = Tally()
    rows = _Timeline(tally, timestamp_ms(value.get("startTime")))
    timeline = value.get("timeline")
    for entry in timeline if isinstance(timeline, list) else []:
        kind = entry.get("type") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(kind, str):
            tally.skip("timeline entry", "not an entry of a known type")
            continue
        rows.at = timestamp_ms(entry.get("timestamp")) or rows.at
        if kind == "tool_call_completed":
            rows.completed(entry)
            continue
        rows.flush()
        if kind in {"user", "copilot"}:
            rows.said("user" if kind == "user" else "assistant", entry.get("text"))
        elif kind == "tool_call_requested" and isinstance(entry.get("callId"), str):
            rows.requested.setdefault(entry["callId"], rows.at)
        else:
            tally.skip(f"{kind} entry", "not a message")
    rows.flush()
    if rows.requested:
        tally.skip("tool request", "never completed", len(rows.requested))
    return _session(session_id, None, rows.rows, tally)


def _request(call: Any) -> Request:
    """A Chat Completions tool call as (call id, name, raw arguments)."""
    function = _obj(_obj(call).get("function"))
    return _obj(call).get("id"), function.get("name"), function.get("arguments")


def _locate(env: Mapping[str, str], home: Path) -> Path:
    """``~/.copilot``: ``session-state/`` and the older ``history-session-state/`` in it."""
    base = env.get("COPILOT_HOME")
    return Path(base) if base else home / ".copilot"


def _discover(root: Path, folder: str | None) -> list[Path]:
    """The sessions under ``root`` (``~/.copilot``, ``session-state``, one session's folder, or
    ``history-session-state``): the event logs first, then the older single-file sessions."""
    own = root / "events.jsonl"
    if listed(own):
        return [own]
    state = root / "session-state" if (root / "session-state").is_dir() else root
    older = root / "history-session-state" if (root / "history-session-state").is_dir() else root
    logs = sorted(state.glob("*/events.jsonl"))
    return [*logs, *sorted(p for p in older.glob("session_*.json") if listed(p))]


def _session_id(path: Path) -> str:
    """An event log's session folder, or the id in an older file's name."""
    return _id_in_name(path.stem) if path.suffix == ".json" else path.parent.name


def _id_in_name(stem: str) -> str:
    """The session id in an older file's name, ``session_<id>_<epoch ms>``."""
    core = stem.removeprefix("session_")
    head, _, tail = core.rpartition("_")
    return head if head and tail.isdigit() else core


IMPORTER = Importer(
    source=SOURCE,
    read=read,
    locate=_locate,
    discover=_discover,
    session_id=_session_id,
    folder_inside=True,
)

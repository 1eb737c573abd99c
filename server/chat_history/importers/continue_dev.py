"""Continue sessions: ``~/.continue/sessions/<session id>.json`` (``$CONTINUE_GLOBAL_DIR``
instead of ``~/.continue``), listed in ``sessions.json`` beside them (``[{sessionId, title,
dateCreated, workspaceDirectory}]``). Every project's sessions are kept together, each recording
its folder.

The format as observed (Continue's ``Session`` and ``ChatHistoryItem`` types in
``core/index.d.ts``, 0.8 to 1.x; no published schema):

- One JSON object: ``sessionId``, ``title``, ``workspaceDirectory`` (the project folder, a path
  or a ``file:`` URI), ``history[]`` of items ``{message, contextItems, toolCallStates?
  (toolCallState in older builds), reasoning?, promptLogs?}``.
- ``message`` is a chat message: ``user`` (``content`` a string or parts: ``{type: "text",
  text}``, ``{type: "imageUrl", imageUrl: {url}}`` — a data URL is an image), ``assistant``
  (``content``, ``toolCalls: [{id, type: "function", function: {name, arguments (a JSON
  string)}}]``), ``thinking`` (``content``, with Anthropic's ``signature`` or
  ``redactedThinking``: kept as ``providerData.anthropic.thinking`` of the next assistant row,
  whose origin is then Anthropic in scope ``import:continue``),
  ``tool`` (``content``, ``toolCallId``), ``system``.
- A tool call's result is its ``tool`` message; builds that kept it only in the call's
  ``toolCallStates[].output`` (context items with ``content``) are read from there.
- No message records its time: each row gets the session's ``dateCreated`` (one time for the
  whole session, so a re-import recognises every row), the file's own when it has one, else the
  one ``sessions.json`` beside it gives. A file with neither (Continue's CLI's, seen without a
  ``sessions.json``): its rows are left undated, and the import dates them
  (``service.imports``: the file's time at the first import, kept by every later one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from chat_history.importers.common import (
    Session,
    Tally,
    first_line_title,
    json_value,
    text_of,
    timestamp_ms,
)
from chat_history.importers.files import SIDE_FILE_BYTES, read_regular
from chat_history.importers.source import Importer
from chat_history.model import Attachment, Message, ToolCall
from chat_history.policy.origins import import_origin

SOURCE = "continue"
_DATA_URL = re.compile(r"^data:(image/[a-z0-9.+-]+);base64,(.+)$", re.S)


def _content(content: Any, tally: Tally) -> tuple[str, list[Attachment]]:
    if isinstance(content, str):
        return content, []
    images: list[Attachment] = []
    for part in content if isinstance(content, list) else []:
        url = part.get("imageUrl", {}).get("url") if isinstance(part, dict) else None
        if isinstance(part, dict) and part.get("type") == "imageUrl":
            found = _DATA_URL.match(url) if isinstance(url, str) else None
            if found:
                images.append(Attachment(kind="image", mime_type=found[1], data=found[2]))
            else:
                tally.skip("image", "a link, not inline data")
    return text_of(content), images


def _calls(message: dict[str, Any], tally: Tally) -> list[ToolCall]:
    calls: list[ToolCall] = []
    raw_calls = message.get("toolCalls")
    for raw in raw_calls if isinstance(raw_calls, list) else []:
        function = raw.get("function") if isinstance(raw, dict) else None
        cid = raw.get("id") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(cid, str) or not cid:
            tally.skip("tool call", "no id or no function")
            continue
        try:
            arguments = json_value(function.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = None
        if not isinstance(arguments, dict):
            tally.skip("tool call", "its arguments are not a JSON object")
            continue
        name = function.get("name") if isinstance(function.get("name"), str) else None
        calls.append(ToolCall(id=cid, name=name or "tool", arguments=arguments))
    return calls


def _state_outputs(item: dict[str, Any]) -> dict[str, str]:
    states = item.get("toolCallStates")
    if not isinstance(states, list):
        states = [item["toolCallState"]] if isinstance(item.get("toolCallState"), dict) else []
    outputs: dict[str, str] = {}
    for state in states:
        if not isinstance(state, dict) or not isinstance(state.get("toolCallId"), str):
            continue
        output = state.get("output")
        items: list[Any] = output if isinstance(output, list) else []
        texts = [
            i["content"] for i in items if isinstance(i, dict) and isinstance(i.get("content"), str)
        ]
        if texts:
            outputs[state["toolCallId"]] = "\n\n".join(texts)
    return outputs


def _thinking(message: dict[str, Any], text: str, tally: Tally) -> dict[str, Any] | None:
    if isinstance(message.get("redactedThinking"), str):
        return {"type": "redacted_thinking", "data": message["redactedThinking"]}
    if isinstance(message.get("signature"), str) and message["signature"]:
        return {"type": "thinking", "thinking": text, "signature": message["signature"]}
    tally.skip("thinking message", "no signature: no provider would take it back")
    return None


def _rows(history: list[Any], tally: Tally) -> list[Message]:
    """The rows of ``history``: thinking joined to the next reply, each result after its call."""
    rows: list[Message] = []
    thinking: list[dict[str, Any]] = []
    pending: dict[str, str | None] = {}  # call id → its result from toolCallStates, if any
    for item in history:
        message = item.get("message") if isinstance(item, dict) else None
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(message, dict) or role not in {"user", "assistant", "thinking", "tool"}:
            tally.skip(f"{role or 'unknown'} message", "not carried over")
            continue
        if role != "tool":
            _answer_from_states(rows, pending, tally)
        text, images = _content(message.get("content"), tally)
        if role == "thinking":
            block = _thinking(message, text, tally)
            thinking.extend([block] if block else [])
        elif role == "tool":
            cid = message.get("toolCallId")
            if not isinstance(cid, str) or cid not in pending:
                tally.skip("tool result", "no tool call before it")
                continue
            del pending[cid]
            rows.append(Message(role="tool", content=text, tool_call_id=cid))
        elif role == "user":
            context = item.get("contextItems")
            if isinstance(context, list) and context:
                tally.skip("context item", "the editor's files given with a prompt", len(context))
            if text.strip() or images:
                rows.append(Message(role="user", content=text, attachments=tuple(images)))
        else:
            calls = _calls(message, tally)
            data = {"anthropic": {"thinking": thinking}} if thinking else {}
            thinking = []
            if text or calls:
                # Signed thinking is Anthropic's; the model is not recorded.
                made = import_origin(SOURCE, "anthropic", None) if data else None
                rows.append(
                    Message(
                        role="assistant",
                        content=text,
                        tool_calls=tuple(calls),
                        provider_data=data,
                        origin=made,
                    )
                )
            outputs = _state_outputs(item)
            pending.update({call.id: outputs.get(call.id) for call in calls})
    _answer_from_states(rows, pending, tally)
    return rows


def _answer_from_states(rows: list[Message], pending: dict[str, str | None], tally: Tally) -> None:
    """Calls still unanswered by a ``tool`` message: their result from ``toolCallStates``; a
    call with none is taken out of its reply (a provider refuses a call without a result)."""
    for cid, output in list(pending.items()):
        del pending[cid]
        if output is not None:
            rows.append(Message(role="tool", content=output, tool_call_id=cid))
            continue
        tally.skip("tool call", "no result recorded")
        for index in range(len(rows) - 1, -1, -1):
            row = rows[index]
            if any(call.id == cid for call in row.tool_calls):
                kept = tuple(call for call in row.tool_calls if call.id != cid)
                if kept or row.content:
                    rows[index] = attrs.evolve(row, tool_calls=kept)
                else:
                    del rows[index]
                break


def read(data: bytes, session_id: str) -> list[Session]:
    """The conversation of one Continue session file (its rows without times: see the module)."""
    tally = Tally()
    try:
        session = json_value(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return []
    history = session.get("history") if isinstance(session, dict) else None
    if not isinstance(history, list):
        return []
    rows = _rows(history, tally)
    if not rows:
        return []
    at = _created_ms(session.get("dateCreated"))  # the file's own, when it records one
    if at is not None:
        rows = [attrs.evolve(m, timestamp=at) for m in rows]
    named, folder = session.get("sessionId"), session.get("workspaceDirectory")
    title = session.get("title") if isinstance(session.get("title"), str) else None
    if title in {None, "", "New Session"}:
        title = first_line_title(next((r.content for r in rows if r.role == "user"), ""))
    return [
        Session(
            SOURCE,
            named if isinstance(named, str) and named else session_id,
            folder if isinstance(folder, str) and folder else None,
            title,
            tuple(rows),
            tally.items(),
        )
    ]


def _locate(env: Mapping[str, str], home: Path) -> Path:
    base = env.get("CONTINUE_GLOBAL_DIR")
    return (Path(base) if base else home / ".continue") / "sessions"


def _discover(root: Path, folder: str | None) -> list[Path]:
    return sorted(p for p in root.glob("*.json") if p.name != "sessions.json")


def _place(
    path: Path, sessions: list[Session], folder: str | None, here: str | None
) -> list[Session]:
    return [_timed(s, path) for s in sessions]


def _timed(session: Session, path: Path) -> Session:
    """A session's undated rows at the ``dateCreated`` that ``sessions.json`` beside it gives
    (no message of Continue records its time); none given: left undated (see the module)."""
    try:
        index = json.loads(read_regular(path.parent / "sessions.json", SIDE_FILE_BYTES))
    except (OSError, ValueError):
        index = []
    created = next(
        (
            entry.get("dateCreated")
            for entry in (index if isinstance(index, list) else [])
            if isinstance(entry, dict) and entry.get("sessionId") == session.session_id
        ),
        None,
    )
    at = _created_ms(created)
    if at is None:
        return session
    rows = tuple(m if m.timestamp else attrs.evolve(m, timestamp=at) for m in session.messages)
    return attrs.evolve(session, messages=rows)


def _created_ms(created: Any) -> int | None:
    """A ``dateCreated`` (epoch ms as a number or as a string of digits) as epoch ms."""
    return timestamp_ms(int(created) if isinstance(created, str) and created.isdigit() else created)


IMPORTER = Importer(
    source=SOURCE,
    read=read,
    locate=_locate,
    discover=_discover,
    folder_inside=True,
    place=_place,
)

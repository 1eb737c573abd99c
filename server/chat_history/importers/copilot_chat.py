"""VS Code's chat sessions (GitHub Copilot Chat): ``<user data>/User/workspaceStorage/<hash>/
chatSessions/<session id>.json`` (older builds) or ``.jsonl`` (newer), the folder of ``<hash>``
in ``workspace.json`` beside it (``{"folder": "file:///…"}``), which places the sessions (a
project's are those of the workspaces naming its folder); windows without a folder keep theirs in
``globalStorage/emptyWindowChatSessions``.

The format as observed (VS Code's ``ISerializableChatData`` version 3, 2024–2026; no published
schema):

- Older: one JSON object, ``{version, sessionId, creationDate, customTitle?, requests[]}``.
  Newer: an object-mutation log of JSON lines, replayed in order: ``{"kind": 0, "v": {…}}`` the
  whole session (again after a compaction: it replaces the state), ``{"kind": 1, "k": path,
  "v": value}`` sets the value at a path of keys and indexes, ``{"kind": 2, "k": path, "v":
  [items], "i"?: index}`` cuts the array at ``i`` (when given) then appends the items,
  ``{"kind": 3, "k": path}`` deletes.
- A request: ``requestId``, ``timestamp`` (epoch ms), ``message.text`` (the prompt),
  ``variableData`` (attached context: files, selections), ``response`` (the parts the panel
  shows: markdown parts as ``{value}`` or ``{kind: "markdownContent", content: {value}}``,
  ``toolInvocationSerialized``, ``inlineReference``, ``textEditGroup``, ``thinking``, …),
  ``result`` (``errorDetails``, ``timings``, and Copilot's own ``metadata.toolCallRounds`` —
  ``[{response, toolCalls: [{id, name, arguments (a JSON string)}]}]`` — and
  ``metadata.toolCallResults`` — ``{call id: {content: [{value}]}}``), ``isCanceled``,
  ``modelId``.
- With ``toolCallRounds``, each round is an assistant row with its calls, each call followed
  by its result; without them (other participants, older builds), the reply's markdown parts
  are the assistant row, and the panel-only tool invocations (no arguments, no result) are
  counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chat_history.importers.common import (
    Session,
    Tally,
    first_line_title,
    json_lines,
    json_value,
    timestamp_ms,
)
from chat_history.importers.files import SIDE_FILE_BYTES, listed, read_regular
from chat_history.importers.places import vscode_user
from chat_history.importers.source import Importer, folder_or
from chat_history.model import Message, ToolCall
from chat_history.policy.identity import normalize_uri

SOURCE = "copilot-chat"


def replay(data: bytes, tally: Tally) -> dict[str, Any] | None:
    """The session object of a whole-file JSON, or of a mutation log replayed; None when the
    file holds neither."""
    try:
        whole = json_value(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        whole = None
    if isinstance(whole, dict) and isinstance(whole.get("requests"), list):
        return whole
    state: dict[str, Any] | None = None
    for _, entry in json_lines(data, tally):
        kind = entry.get("kind")
        if kind == 0 and isinstance(entry.get("v"), dict):
            state = entry["v"]
        elif state is None or kind not in (1, 2, 3) or not _path(entry.get("k")):
            tally.skip("log entry", "not a change of a session this reader knows")
        elif not _apply(state, entry):
            tally.skip("log entry", "its path is not in the session")
    return state


def _path(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(k, str | int) for k in value)


def _walk(state: Any, keys: list[Any]) -> Any:
    for key in keys:
        if isinstance(state, dict) and isinstance(key, str):
            state = state.get(key)
        elif isinstance(state, list) and isinstance(key, int) and 0 <= key < len(state):
            state = state[key]
        else:
            return None
    return state


def _apply(state: dict[str, Any], entry: dict[str, Any]) -> bool:
    keys: list[Any] = entry["k"]
    kind = entry["kind"]
    if kind == 2:
        target = _walk(state, keys)
        if not isinstance(target, list):
            return False
        if isinstance(entry.get("i"), int) and not isinstance(entry["i"], bool):
            del target[entry["i"] :]
        items = entry.get("v")
        target.extend(items if isinstance(items, list) else [])
        return True
    parent, last = _walk(state, keys[:-1]), keys[-1]
    if isinstance(parent, dict) and isinstance(last, str):
        if kind == 1:
            parent[last] = entry.get("v")
        else:
            parent.pop(last, None)
        return True
    if isinstance(parent, list) and isinstance(last, int) and 0 <= last <= len(parent):
        if kind == 1:
            parent[last : last + 1] = [entry.get("v")]
        elif last < len(parent):
            del parent[last]
        return True
    return False


def _arguments(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json_value(raw) if raw.strip() else {}
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return {} if raw is None else None


def _result(results: Any, call_id: str) -> str | None:
    entry = results.get(call_id) if isinstance(results, dict) else None
    content = entry.get("content") if isinstance(entry, dict) else None
    if not isinstance(content, list):
        return None
    texts = [p["value"] for p in content if isinstance(p, dict) and isinstance(p.get("value"), str)]
    return "\n".join(texts) if texts else None


def _rounds(rounds: list[Any], results: Any, at: int | None, tally: Tally) -> list[Message]:
    rows: list[Message] = []
    for round_ in rounds:
        if not isinstance(round_, dict):
            continue
        calls: list[ToolCall] = []
        outputs: list[Message] = []
        for call in round_.get("toolCalls") or []:
            cid = call.get("id") if isinstance(call, dict) else None
            arguments = _arguments(call.get("arguments")) if isinstance(call, dict) else None
            output = _result(results, cid) if isinstance(cid, str) and cid else None
            if not isinstance(cid, str) or arguments is None or output is None:
                tally.skip("tool call", "no id, no JSON arguments or no recorded result")
                continue
            name = call["name"] if isinstance(call.get("name"), str) and call["name"] else "tool"
            calls.append(ToolCall(id=cid, name=name, arguments=arguments))
            outputs.append(Message(role="tool", content=output, tool_call_id=cid, timestamp=at))
        said = round_.get("response")
        text = said if isinstance(said, str) else ""
        if text or calls:
            rows.append(
                Message(role="assistant", content=text, tool_calls=tuple(calls), timestamp=at)
            )
            rows.extend(outputs)
    return rows


def _markdown(parts: Any, tally: Tally) -> str:
    texts: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("kind")
        if kind is None and isinstance(part.get("value"), str):
            texts.append(part["value"])
        elif kind == "markdownContent" and isinstance(part.get("content"), dict):
            value = part["content"].get("value")
            texts.append(value if isinstance(value, str) else "")
        elif kind == "toolInvocationSerialized":
            tally.skip("tool invocation", "the panel's record only: no arguments, no result")
        elif kind is not None:
            tally.skip(f"{kind} part", "shown by the panel, not text of the reply")
    return "".join(texts).strip()


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _request(request: dict[str, Any], tally: Tally) -> list[Message]:
    at = timestamp_ms(request.get("timestamp"))
    message = request.get("message")
    prompt = message.get("text") if isinstance(message, dict) else None
    if not isinstance(prompt, str) or not prompt.strip():
        tally.skip("request", "no prompt text")
        return []
    variables = request.get("variableData")
    attached = variables.get("variables") if isinstance(variables, dict) else None
    if isinstance(attached, list) and attached:
        tally.skip("attached context", "a reference to the editor's files, not kept", len(attached))
    rows = [Message(role="user", content=prompt, timestamp=at)]
    result = _object(request.get("result"))
    metadata = _object(result.get("metadata"))
    rounds = metadata.get("toolCallRounds")
    if isinstance(rounds, list) and rounds:
        replies = _rounds(rounds, metadata.get("toolCallResults"), at, tally)
    else:
        text = _markdown(request.get("response"), tally)
        replies = [Message(role="assistant", content=text, timestamp=at)] if text else []
    if not replies:
        tally.skip("reply", "empty (cancelled or failed)")
    return rows + replies


def read(data: bytes, session_id: str) -> list[Session]:
    """The conversation of one chat session file (``session_id``: the file's stem, unless the
    session names its own ``sessionId``)."""
    tally = Tally()
    state = replay(data, tally)
    requests = state.get("requests") if isinstance(state, dict) else None
    if not isinstance(state, dict) or not isinstance(requests, list):
        return []
    rows: list[Message] = []
    for request in requests:
        if isinstance(request, dict):
            rows.extend(_request(request, tally))
        else:
            tally.skip("request", "not an object")
    if not rows:
        return []
    named = state.get("sessionId")
    sid = named if isinstance(named, str) and named else session_id
    custom = state.get("customTitle")
    title = custom.strip() if isinstance(custom, str) and custom.strip() else None
    return [
        Session(
            SOURCE,
            sid,
            None,
            title or first_line_title(rows[0].content),
            tuple(rows),
            tally.items(),
        )
    ]


def workspace_folder(workspace_json: str) -> str | None:
    """The folder URI of a ``workspace.json`` (None: not a folder's, or not readable)."""
    try:
        value = json.loads(workspace_json)
    except ValueError:
        return None
    folder = value.get("folder") if isinstance(value, dict) else None
    return folder if isinstance(folder, str) and folder else None


def _discover(root: Path, folder: str | None) -> list[Path]:
    """The chat session files under ``root`` (``workspaceStorage``, one workspace's folder or
    its ``chatSessions``): when ``root`` is ``workspaceStorage`` and ``folder`` is given, those
    of the workspaces whose ``workspace.json`` names that folder."""
    if root.name == "chatSessions":
        chats = [root]
    elif (root / "chatSessions").is_dir():
        chats = [root / "chatSessions"]
    else:
        wanted = normalize_uri(Path(folder).as_uri()) if folder else None
        chats = [
            ws / "chatSessions"
            for ws in sorted(root.iterdir())
            if ws.is_dir() and (wanted is None or _workspace_uri(ws) == wanted)
        ]
    found = {p for c in chats for pattern in ("*.json", "*.jsonl") for p in c.glob(pattern)}
    return sorted(path for path in found if listed(path))


def _workspace_uri(workspace: Path) -> str | None:
    """The normalized folder URI a workspace storage folder belongs to."""
    try:
        text = read_regular(workspace / "workspace.json", SIDE_FILE_BYTES).decode("utf-8")
        uri = workspace_folder(text)
    except (OSError, UnicodeDecodeError):
        return None
    return normalize_uri(uri) if uri else None


IMPORTER = Importer(
    source=SOURCE,
    read=read,
    locate=lambda env, home: vscode_user(env, home) / "workspaceStorage",
    discover=_discover,
    # the sessions record no folder: the one they were found for, else workspace.json's
    place=folder_or(lambda path, here: _workspace_uri(path.parent.parent)),
)

"""Gemini CLI sessions: ``~/.gemini/tmp/<project>/chats/session-<time>-<id8>.json`` (older
builds) or ``.jsonl`` (newer), sub-agents' in ``chats/<parent id>/<id>.jsonl``; ``<project>`` is
the SHA-256 of the project folder (builds to 0.1x) or the name ``~/.gemini/projects.json`` maps
the folder to (``{"projects": {"<folder>": "<name>"}}``, newer builds). ``$GEMINI_CLI_HOME``
replaces the home folder.

The format as observed (the recording service's own types, ``ConversationRecord``; builds 0.1x
to 0.6x):

- Older: one JSON object, ``{sessionId, projectHash, startTime, lastUpdated, messages[],
  summary?}``. Newer: a log of JSON lines replayed in order — a metadata line (the same fields
  without ``messages``, or with an empty list), message records, each written again in full
  whenever its tool calls, results or tokens change (the later record of an id replaces the
  earlier one, in place), ``{"$set": {...}}`` patches of the metadata (``$set.messages``
  replaces the whole list: a rolled-back turn, a compression), and ``{"$rewindTo": id}``, which
  drops that message and every later one (an unknown id drops them all). Replayed as the tool
  does, so the import is the conversation ``gemini --resume`` shows.
- A message: ``id``, ``timestamp`` (ISO 8601), ``type`` (``user``, ``gemini``, and the UI's
  ``info``, ``error``, ``warning``: not messages, counted), ``content`` (a string in older
  builds; a Gemini ``PartListUnion`` in newer: a string, a part or a list of parts with
  ``text``, ``inlineData`` images, ``thought`` parts). A ``gemini`` message adds ``toolCalls``
  (``id``, ``name``, ``args``, ``result`` — parts whose ``functionResponse.response`` holds
  ``output`` or ``error`` —, ``status``, ``timestamp``), ``thoughts`` (``subject`` and
  ``description`` summaries: not signed, so no provider would take them back: counted),
  ``tokens`` and ``model``.
- The project folder is not in the file (only its hash, or the name of its folder): it is the
  folder the files were found for, else the one ``projects.json`` names for their project
  folder (by name, or whose SHA-256 it is), else the current folder when its SHA-256 names it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
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
from chat_history.importers.places import same_folder
from chat_history.importers.source import Importer, folder_or
from chat_history.model import Attachment, Message, ToolCall
from chat_history.policy.origins import import_origin

SOURCE = "gemini-cli"
NOTICES = {"info", "error", "warning"}
#: A prompt that is a command of the CLI (``/clear``, ``/chat save x``), not sent to the model.
SLASH_COMMAND = re.compile(r"^/[a-z][\w-]*(\s|$)")


def replay(data: bytes, tally: Tally) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the session's metadata, its message records in order) of a whole-file JSON or of a
    JSON-lines log replayed as the recording service does."""
    records: list[dict[str, Any]]
    try:
        whole = json_value(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        whole = None
    records = [whole] if isinstance(whole, dict) else [line for _, line in json_lines(data, tally)]
    metadata: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    for record in records:
        if isinstance(record.get("$rewindTo"), str):
            ids = list(messages)
            target = record["$rewindTo"]
            for mid in ids[ids.index(target) :] if target in messages else ids:
                del messages[mid]
        elif isinstance(record.get("id"), str) and isinstance(record.get("type"), str):
            messages[record["id"]] = record
        else:
            change = record.get("$set")
            patch: dict[str, Any] = change if isinstance(change, dict) else record
            metadata.update({k: v for k, v in patch.items() if k != "messages"})
            if isinstance(patch.get("messages"), list):
                messages = {
                    m["id"]: m
                    for m in patch["messages"]
                    if isinstance(m, dict) and isinstance(m.get("id"), str)
                }
    return metadata, list(messages.values())


def _parts(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [content] if content is not None else []


def _text_and_images(content: Any, tally: Tally) -> tuple[str, list[Attachment]]:
    texts: list[str] = []
    images: list[Attachment] = []
    for part in _parts(content):
        if isinstance(part, str):
            texts.append(part)
        elif not isinstance(part, dict):
            tally.skip("part", "neither text nor an object")
        elif part.get("thought") is True:
            tally.skip("thought part", "not signed: no provider would take it back")
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("inlineData"), dict):
            inline = part["inlineData"]
            mime, data = inline.get("mimeType"), inline.get("data")
            if isinstance(mime, str) and mime.startswith("image/") and isinstance(data, str):
                images.append(Attachment(kind="image", mime_type=mime, data=data))
            else:
                tally.skip("inline data", "not an image")
        else:
            tally.skip("part", "not carried over")
    return "\n\n".join(t for t in texts if t), images


def _result_text(call: dict[str, Any]) -> str | None:
    """A tool call's result as text; None when it has none."""
    result = call.get("result")
    if isinstance(result, str):
        return result
    texts: list[str] = []
    for part in _parts(result):
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            inner = response.get("response")
            if isinstance(inner, dict) and isinstance(inner.get("output"), str):
                texts.append(inner["output"])
            elif isinstance(inner, dict) and isinstance(inner.get("error"), str):
                texts.append(f"Error: {inner['error']}")
            elif inner is not None:
                texts.append(json.dumps(inner, ensure_ascii=False))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    if texts:
        return "\n\n".join(texts)
    display = call.get("resultDisplay")
    return display if isinstance(display, str) and display else None


def _gemini(record: dict[str, Any], at: int | None, tally: Tally) -> list[Message]:
    text, images = _text_and_images(record.get("content"), tally)
    if images:
        tally.skip("image in a reply", "not carried over (only prompts carry images)")
    thoughts = record.get("thoughts")
    if isinstance(thoughts, list) and thoughts:
        tally.skip("thought summary", "not signed: no provider would take it back", len(thoughts))
    calls: list[ToolCall] = []
    results: list[Message] = []
    raw = record.get("toolCalls")
    raw_calls: list[Any] = raw if isinstance(raw, list) else []
    for call in raw_calls:
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
            tally.skip("tool call", "no id")
            continue
        output = _result_text(call)
        if output is None:
            tally.skip("tool call", "no result recorded (cancelled or still running)")
            continue
        name = call["name"] if isinstance(call.get("name"), str) and call["name"] else "tool"
        args = call.get("args") if isinstance(call.get("args"), dict) else {}
        calls.append(ToolCall(id=call["id"], name=name, arguments=args))
        when = timestamp_ms(call.get("timestamp"))
        results.append(
            Message(role="tool", content=output, tool_call_id=call["id"], timestamp=when or at)
        )
    if not text and not calls:
        tally.skip("gemini message", "no text and no tool call")
        return []
    model = record.get("model") if isinstance(record.get("model"), str) else None
    row = Message(
        role="assistant",
        content=text,
        tool_calls=tuple(calls),
        timestamp=at,
        origin=import_origin(SOURCE, "gemini", model or None),
    )
    return [row, *results]


def read(data: bytes, session_id: str) -> list[Session]:
    """The conversation of one Gemini CLI session file (``session_id``: the file's, unless the
    file names its own ``sessionId``)."""
    tally = Tally()
    metadata, records = replay(data, tally)
    rows: list[Message] = []
    for record in records:
        kind = record.get("type")
        at = timestamp_ms(record.get("timestamp"))
        if kind in NOTICES:
            tally.skip(f"{kind} message", "a notice of the CLI, not the conversation")
        elif kind == "user":
            text, images = _text_and_images(record.get("content"), tally)
            if SLASH_COMMAND.match(text.strip()) and not images:
                tally.skip("user message", "a command of the CLI, not sent to the model")
            elif text or images:
                rows.append(
                    Message(role="user", content=text, attachments=tuple(images), timestamp=at)
                )
        elif kind == "gemini":
            rows.extend(_gemini(record, at, tally))
        else:
            tally.skip(f"{kind} message", "unknown to this reader")
    if not rows:
        return []
    named = metadata.get("sessionId")
    sid = named if isinstance(named, str) and named else session_id
    summary = metadata.get("summary")
    first = next((row.content for row in rows if row.role == "user" and row.content), "")
    title = summary.strip() if isinstance(summary, str) and summary.strip() else None
    return [
        Session(SOURCE, sid, None, title or first_line_title(first), tuple(rows), tally.items())
    ]


def _locate(env: Mapping[str, str], home: Path) -> Path:
    base = env.get("GEMINI_CLI_HOME")
    return (Path(base) if base else home) / ".gemini" / "tmp"


def _discover(root: Path, folder: str | None) -> list[Path]:
    """The session files under ``root`` (the ``tmp`` folder, a project's folder or a ``chats``
    folder): when ``root`` is ``tmp`` and ``folder`` is given, that project's only (the
    folder's SHA-256, or its name in ``projects.json``)."""
    if root.name == "tmp":
        if folder:
            names = {_project_hash(folder), *_names(root, folder)}
            projects = [root / name for name in sorted(names)]
        else:
            projects = [path for path in root.iterdir() if path.is_dir()]
        chats = [project / "chats" for project in projects]
    else:
        chats = [root] if root.name == "chats" else [root / "chats"]
    found: set[Path] = set()
    for folder_of_chats in chats:
        for pattern in ("session-*.json", "session-*.jsonl", "*/*.jsonl"):
            found.update(folder_of_chats.glob(pattern))
    return sorted(path for path in found if listed(path))


def _projects(tmp: Path) -> dict[str, str]:
    """``projects.json`` beside ``tmp``: folder → the name of its folder under ``tmp``."""
    try:
        value = json.loads(read_regular(tmp.parent / "projects.json", SIDE_FILE_BYTES))
    except (OSError, ValueError):
        return {}
    projects = value.get("projects") if isinstance(value, dict) else None
    if not isinstance(projects, dict):
        return {}
    return {k: v for k, v in projects.items() if isinstance(k, str) and isinstance(v, str)}


def _names(tmp: Path, folder: str) -> list[str]:
    wanted = same_folder(folder)
    return [name for path, name in _projects(tmp).items() if same_folder(path) == wanted]


def _project_hash(folder: str) -> str:
    """The name older builds give a project's folder under ``tmp``: the SHA-256 of its absolute
    path, as the CLI hashes its own folder."""
    return hashlib.sha256(folder.encode()).hexdigest()


def _recorded_folder(path: Path, here: str | None) -> str | None:
    """The project folder of a session file: the folder ``projects.json`` names, or whose
    SHA-256 is the name of the file's project folder, the current folder ``here`` too (None:
    none is known)."""
    for parent in path.parents:
        if parent.parent.name == "tmp" and (parent / "chats").is_dir():
            for folder, name in _projects(parent.parent).items():
                if parent.name in {name, _project_hash(folder)}:
                    return folder
            return here if here and parent.name == _project_hash(here) else None
    return None


def _session_id(path: Path) -> str:
    if path.parent.name != "chats":
        return f"{path.parent.name}/{path.stem}"  # a sub-agent's file
    return path.stem


IMPORTER = Importer(
    source=SOURCE,
    read=read,
    locate=_locate,
    discover=_discover,
    session_id=_session_id,
    # the sessions record no folder: the one they were found for, else the one their project
    # folder's name stands for (projects.json's, or the current folder's hash)
    place=folder_or(_recorded_folder),
)

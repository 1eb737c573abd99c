"""What Cline and Roo Code share (Roo Code began as a fork of Cline): a task folder
``tasks/<task id>/`` whose ``api_conversation_history.json`` is the conversation as the model
saw it — a JSON array of Anthropic Messages API messages (``role``, ``content`` a string or
blocks: ``text``, ``image``, ``tool_use``, ``tool_result``, ``thinking`` with its
``signature``), each with ``ts`` (epoch ms) in newer builds — beside ``ui_messages.json`` (what
the panel showed) and ``task_metadata.json``, in the extension's folder of VS Code's
``User/globalStorage``. Every project's tasks are kept together, each naming its folder.

The format as observed (Cline 3.x, Roo Code 3.x; no published schema):

- The first prompt is wrapped in ``<task>…</task>``; the extension adds
  ``<environment_details>`` blocks to user messages (visible files, open tabs, the time, the
  folder: ``# Current Working Directory (<folder>) Files`` in Cline, ``# Current Workspace
  Directory (<folder>) Files`` in Roo Code, without ``Files`` in Roo Code builds that list no
  files): the folder is read from them, the blocks are not carried over (counted).
- Older builds call tools in XML inside the reply's text (``<read_file><path>…``) and answer
  them in the next user message's text (``[read_file for '…'] Result:``): kept as the text it is.
  Newer builds use native ``tool_use``/``tool_result`` blocks: paired as tool calls and results.
- Newer Roo Code builds wrap the messages as ``{"version": 2, "messages": [...]}`` in the AI
  SDK's shape: turned back into the Anthropic shape first (``roo_messages``).
- A message without ``ts`` takes the time of the one before it, or the task's (Cline's task id
  is its creation time in epoch ms); a task with no time at all is not imported (counted).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chat_history.importers import roo_messages
from chat_history.importers.claude_code import Builder
from chat_history.importers.common import (
    Session,
    Tally,
    first_line_title,
    json_value,
    timestamp_ms,
)
from chat_history.importers.files import listed
from chat_history.importers.places import vscode_user
from chat_history.importers.source import Importer, Reader

#: The folder line of the extension's details: ``# Current Working Directory (<folder>) Files``
#: (Cline), ``# Current Workspace Directory (<folder>) Files`` (Roo Code), without ``Files`` in
#: Roo Code builds that list no files, ``##`` in some.
_FOLDER = re.compile(
    r"^#{1,2} Current (?:Working|Workspace) Directory \((.+?)\)(?: Files)?[ \t]*$", re.M
)
_TASK = re.compile(r"^\s*<task>\s*(.*?)\s*</task>\s*$", re.S)
TASK_FILE = "api_conversation_history.json"


def _clean(content: Any, tally: Tally) -> tuple[Any, str | None]:
    """``content`` without the extension's ``<environment_details>`` blocks (counted) and with
    the first prompt's ``<task>`` unwrapped; the folder the details name."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return content, None
    folder: str | None = None
    kept: list[Any] = []
    for block in blocks:
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str) and text.lstrip().startswith("<environment_details>"):
            found = _FOLDER.search(text)
            folder = folder or (found[1] if found else None)
            tally.skip("environment details", "added by the extension, not typed by the user")
            continue
        task = _TASK.match(text) if isinstance(text, str) else None
        kept.append({**block, "text": task[1]} if task else block)
    return kept, folder


def read_tasks(source: str, data: bytes, task_id: str) -> list[Session]:
    """The conversation of one task's ``api_conversation_history.json``."""
    tally = Tally()
    try:
        messages = json_value(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return []
    versioned = roo_messages.versioned(messages)
    if versioned is not None:
        messages = roo_messages.anthropic_messages(versioned, tally)
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return []
    builder = Builder(tally)
    folder: str | None = None
    at = timestamp_ms(int(task_id)) if task_id.isdigit() else None
    for message in messages:
        at = timestamp_ms(message.get("ts")) or at
        if at is None:
            tally.skip("message", "no time recorded, none for the task")
            continue
        role = message.get("role")
        if role == "user":
            content, named = _clean(message.get("content"), tally)
            folder = folder or named
            builder.user(message, content, at)
        elif role == "assistant":
            builder.assistant({"content": message.get("content")}, at)
        else:
            tally.skip(f"{role or 'unknown'} message", "not carried over")
    rows = builder.rows
    if not rows:
        return []
    first = next((r.content for r in rows if r.role == "user" and r.content), "")
    return [Session(source, task_id, folder, first_line_title(first), tuple(rows), tally.items())]


def task_importer(source: str, extension: str, read: Reader) -> Importer:
    """The import of the tasks of the VS Code extension ``extension``, read by ``read``."""

    def locate(env: Mapping[str, str], home: Path) -> Path:
        return vscode_user(env, home) / "globalStorage" / extension / "tasks"

    return Importer(
        source=source,
        read=read,
        locate=locate,
        discover=_discover,
        session_id=lambda path: path.parent.name,  # the task's folder
        folder_inside=True,
    )


def _discover(root: Path, folder: str | None) -> list[Path]:
    """The task files under ``root`` (``tasks``, or one task's folder)."""
    own = root / TASK_FILE
    return [own] if listed(own) else sorted(root.glob(f"*/{TASK_FILE}"))

"""Claude Code sessions: ``~/.claude/projects/<encoded cwd>/<session id>.jsonl``
(``$CLAUDE_CONFIG_DIR`` instead of ``~/.claude``), and sub-agent transcripts beside them in
``<session id>/subagents/agent-<id>.jsonl`` (newer builds). A project's sessions are those of its
folder's encoded name.

The format as observed (builds 1.0.x to 2.1.x; no published schema):

- One JSON object per line. ``type`` ``"user"`` and ``"assistant"`` lines carry ``message``
  (Anthropic's Messages API shape: ``role`` and ``content``, a string or a list of blocks),
  ``uuid``/``parentUuid`` (the chain), ``sessionId``, ``cwd`` (the project folder), ``version``
  (the build), ``timestamp`` (ISO 8601), ``isSidechain`` and ``isMeta``.
- An assistant reply is written over several lines that share ``message.id``, one content
  block each in newer builds: merged into one row here.
- Blocks: ``text``; ``thinking`` with its ``signature`` and ``redacted_thinking`` (kept as
  ``providerData.anthropic.thinking``, each reply with its origin: Anthropic, the line's
  ``message.model``, scope ``import:claude-code``, so that only where that scope is named
  gets them back); ``tool_use`` (``id``, ``name``, ``input``) → a tool call; ``tool_result``
  (in a user line: ``tool_use_id``, ``content`` a string or blocks, ``is_error``) → a tool
  row; ``image`` (base64 ``source``) → an attachment.
- Not messages, counted as skipped: ``summary`` lines (their text becomes the title),
  ``file-history-snapshot``, ``queue-operation``, ``progress``, ``system`` lines, and
  ``isMeta`` user lines (text the tool inserted: caveats, command output, reminders).
- ``isSidechain`` lines (older builds: a sub-agent inside the main file) form a conversation of
  their own, ``<session id>/sidechain``; a ``subagents/agent-<id>.jsonl`` file is read as the
  session ``<session id>/agent-<id>`` (its path names it).
- Rewinds (protocol version 5): ``parentUuid`` chains every line, a line that is no message too
  (a ``compact_boundary`` ``system`` line starts a new chain: its ``logicalParentUuid`` names the
  line before it). A rewound prompt is written after the rest, its ``parentUuid`` the line it
  went back to: the file is a tree. A prompt (a user line with text or an image) whose parent
  line is not where the rows so far end starts a branch at that line's row; every other line
  follows the rows as they come (parallel tool calls chain their lines oddly in some builds,
  and a reply's lines are one row). The session keeps every branch, the newest line's branch
  active; one without a rewind is a line, as before version 5. A sidechain stays a line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from chat_history.importers.common import (
    Session,
    Tally,
    first_line_title,
    json_lines,
    text_of,
    timestamp_ms,
)
from chat_history.importers.source import Importer
from chat_history.model import Attachment, Message, Origin, ToolCall
from chat_history.policy.origins import import_origin

SOURCE = "claude-code"
NOT_MESSAGES = {"file-history-snapshot", "queue-operation", "progress", "system", "attachment"}


@attrs.define
class Builder:
    """The rows of one conversation as the lines come: an assistant reply's lines merged, tool
    results paired with the calls before them."""

    tally: Tally
    rows: list[Message] = attrs.field(factory=list)
    pending: set[str] = attrs.field(factory=set)
    reply_id: str | None = None
    #: the row each row follows (None: a first row), and the row new rows follow now
    parents: list[int | None] = attrs.field(factory=list)
    tip: int | None = None
    #: the tool calls still unanswered after each row (a branch picks them up again)
    pending_after: dict[int, frozenset[str]] = attrs.field(factory=dict)
    #: each line's uuid → the row it ended at (None: before the first row)
    row_of: dict[str, int | None] = attrs.field(factory=dict)

    def _add(self, row: Message) -> None:
        self.rows.append(row)
        self.parents.append(self.tip)
        self.tip = len(self.rows) - 1

    def branch_to(self, row: int | None) -> None:
        """New rows follow ``row`` (a rewind went back to it): its unanswered calls again."""
        if row == self.tip:
            return
        self.tip = row
        self.pending = set(self.pending_after.get(row, ())) if row is not None else set()
        self.reply_id = None

    def settle(self, uuid: Any, at: int | None) -> None:
        """After a line: the calls pending at the row it ended at, and where line ``uuid`` is
        (``at``: the row it leaves the rows at)."""
        if self.tip is not None:
            self.pending_after[self.tip] = frozenset(self.pending)
        if isinstance(uuid, str):
            self.row_of[uuid] = at

    def tree(self) -> tuple[tuple[int | None, ...] | None, int | None]:
        """The rows' parents and the active row, or (None, None) for a line."""
        line = all(parent == index - 1 for index, parent in enumerate(self.parents) if index)
        if line and self.tip == len(self.rows) - 1:
            return None, None
        return tuple(self.parents), self.tip

    def user(self, line: dict[str, Any], content: Any, at: int | None) -> None:
        self.reply_id = None
        if isinstance(content, str):
            if content.strip():
                self._add(Message(role="user", content=content, timestamp=at))
            return
        if not isinstance(content, list):
            self.tally.skip("user line", "content is neither text nor blocks")
            return
        texts: list[str] = []
        images: list[Attachment] = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                self._tool_result(block, at)
            elif kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "image":
                image = _image(block)
                if image is None:
                    self.tally.skip("image", "not inline base64")
                else:
                    images.append(image)
            else:
                self.tally.skip(f"{kind or 'unknown'} block", "not carried over")
        text = "\n\n".join(t for t in texts if t)
        if text or images:
            self._add(Message(role="user", content=text, attachments=tuple(images), timestamp=at))

    def _tool_result(self, block: dict[str, Any], at: int | None) -> None:
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str) or call_id not in self.pending:
            self.tally.skip("tool result", "no tool call before it")
            return
        self.pending.discard(call_id)
        content = block.get("content")
        text = text_of(content) if not isinstance(content, str) else content
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "image" for b in content
        ):
            self.tally.skip("image in a tool result", "kept as text only")
        if block.get("is_error") is True:
            text = f"Error: {text}" if text else "Error"
        self._add(Message(role="tool", content=text, tool_call_id=call_id, timestamp=at))

    def assistant(self, message: dict[str, Any], at: int | None) -> None:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            self.tally.skip("assistant line", "content is neither text nor blocks")
            return
        blocks: list[Any] = content
        texts: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[dict[str, Any]] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "tool_use" and isinstance(block.get("id"), str):
                name = block.get("name") if isinstance(block.get("name"), str) else "tool"
                arguments = block.get("input") if isinstance(block.get("input"), dict) else {}
                calls.append(ToolCall(id=block["id"], name=name, arguments=arguments))
            elif kind == "thinking" and isinstance(block.get("signature"), str):
                thinking.append(
                    {
                        "type": "thinking",
                        "thinking": str(block.get("thinking", "")),
                        "signature": block["signature"],
                    }
                )
            elif kind == "redacted_thinking" and isinstance(block.get("data"), str):
                thinking.append({"type": "redacted_thinking", "data": block["data"]})
            elif kind == "thinking":
                self.tally.skip("thinking block", "no signature: Anthropic would refuse it")
            else:
                self.tally.skip(f"{kind or 'unknown'} block", "not carried over")
        reply = message.get("id") if isinstance(message.get("id"), str) else None
        model = message.get("model") if isinstance(message.get("model"), str) else None
        if reply is not None and reply == self.reply_id and self.tip is not None:
            self._extend_last(texts, calls, thinking)
        else:
            origin = import_origin(SOURCE, "anthropic", model or None)
            self._add(_assistant_row(texts, calls, thinking, at, origin))
        self.reply_id = reply
        self.pending.update(call.id for call in calls)

    def _extend_last(
        self, texts: list[str], calls: list[ToolCall], thinking: list[dict[str, Any]]
    ) -> None:
        assert self.tip is not None
        last = self.rows[self.tip]
        earlier = list(last.provider_data.get("anthropic", {}).get("thinking", ()))
        text = "\n\n".join(t for t in [last.content, *texts] if t)
        self.rows[self.tip] = _assistant_row(
            [text], [*last.tool_calls, *calls], [*earlier, *thinking], last.timestamp, last.origin
        )


def _assistant_row(
    texts: Iterable[str],
    calls: list[ToolCall],
    thinking: list[dict[str, Any]],
    at: int | None,
    origin: Origin | None,
) -> Message:
    provider_data = {"anthropic": {"thinking": thinking}} if thinking else {}
    return Message(
        role="assistant",
        content="\n\n".join(t for t in texts if t),
        tool_calls=tuple(calls),
        timestamp=at,
        provider_data=provider_data,
        origin=origin,
    )


def _image(block: dict[str, Any]) -> Attachment | None:
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        return None
    data, mime = source.get("data"), source.get("media_type")
    if not isinstance(data, str) or not isinstance(mime, str) or not mime.startswith("image/"):
        return None
    return Attachment(kind="image", mime_type=mime, data=data)


def read(data: bytes, session_id: str) -> list[Session]:
    """The conversations of one Claude Code session file: the session (``session_id``, the file
    name's stem, unless its lines name another) and, when it holds sidechain lines, the sidechain
    as a second conversation."""
    tally = Tally()
    main, side = Builder(tally), Builder(tally)
    agent_file = "/" in session_id  # a sub-agent's own file: every line is its sidechain
    folder: str | None = None
    titles: list[str] = []
    named: str | None = None
    for _, line in json_lines(data, tally):
        kind = line.get("type")
        if kind == "summary":
            if isinstance(line.get("summary"), str) and line["summary"].strip():
                titles.append(line["summary"].strip())
            continue
        builder = side if line.get("isSidechain") is True and not agent_file else main
        known, parent = _parent_row(builder, line)
        uuid = line.get("uuid")
        message = line.get("message")
        if kind in NOT_MESSAGES:
            tally.skip(f"{kind} line", "not a message")
        elif kind not in {"user", "assistant"}:
            tally.skip(f"{kind or 'untyped'} line", "unknown to this reader")
        elif not isinstance(message, dict):
            tally.skip(f"{kind} line", "no message")
        else:
            if folder is None and isinstance(line.get("cwd"), str) and line["cwd"]:
                folder = line["cwd"]
            if named is None and isinstance(line.get("sessionId"), str) and line["sessionId"]:
                named = line["sessionId"]
            at = timestamp_ms(line.get("timestamp"))
            if kind == "assistant":
                builder.assistant(message, at)
                builder.settle(uuid, builder.tip)
                continue
            if line.get("isMeta") is not True:
                if builder is main and known and _prompt(message.get("content")):
                    builder.branch_to(parent)
                builder.user(line, message.get("content"), at)
                builder.settle(uuid, builder.tip)
                continue
            tally.skip("meta line", "inserted by the tool, not typed by the user")
        # a line that is no row: the lines that follow it follow its parent's row
        builder.settle(uuid, parent if known else builder.tip)
    sid = session_id if named is None or session_id.startswith(f"{named}/") else named
    parents, active = main.tree()
    sessions = [_session(sid, folder, titles, main.rows, tally, parents, active)]
    if side.rows:
        sessions.append(_session(f"{sid}/sidechain", folder, [], side.rows, Tally()))
    return [s for s in sessions if s.messages]


def _parent_row(builder: Builder, line: dict[str, Any]) -> tuple[bool, int | None]:
    """Whether the line's parent line is known, and the row it ended at (None: a first line, a
    typed prompt with a null ``parentUuid`` that no compaction wrote). Not known (the line follows
    the rows as they come): no ``parentUuid`` (older builds), a line not in the file, a null
    one on another line."""
    if "parentUuid" not in line:
        return False, None
    parent = line.get("parentUuid")
    if parent is None:
        parent = line.get("logicalParentUuid")  # a compaction's new chain: the line before it
    if parent is None:
        typed = line.get("type") == "user" and line.get("isMeta") is not True
        return typed and line.get("isCompactSummary") is not True, None
    if not isinstance(parent, str) or parent not in builder.row_of:
        return False, None
    return True, builder.row_of[parent]


def _prompt(content: Any) -> bool:
    """Whether a user line's content is a prompt (text or an image), not only tool results."""
    if isinstance(content, str):
        return bool(content.strip())
    if not isinstance(content, list):
        return False
    return any(
        isinstance(block, dict)
        and (
            (block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"])
            or block.get("type") == "image"
        )
        for block in content
    )


def _session(
    sid: str,
    folder: str | None,
    titles: list[str],
    rows: list[Message],
    tally: Tally,
    parents: tuple[int | None, ...] | None = None,
    active: int | None = None,
) -> Session:
    first = next((row.content for row in rows if row.role == "user" and row.content), "")
    title = titles[-1] if titles else first_line_title(first)
    return Session(SOURCE, sid, folder, title, tuple(rows), tally.items(), parents, active)


def project_folder_name(folder: str) -> str:
    """The folder name Claude Code keeps a project's sessions under: its path with every
    character that is not a letter or digit written as ``-`` (``/home/me/app`` →
    ``-home-me-app``)."""
    return "".join(c if c.isalnum() else "-" for c in folder)


def _locate(env: Mapping[str, str], home: Path) -> Path:
    base = env.get("CLAUDE_CONFIG_DIR")
    return (Path(base) if base else home / ".claude") / "projects"


def _discover(root: Path, folder: str | None) -> list[Path]:
    """The sessions under ``root`` (``projects``: of the project ``folder`` when given)."""
    base = root / project_folder_name(folder) if folder and root.name == "projects" else root
    if not base.is_dir():
        return []
    return sorted({*base.glob("*.jsonl"), *base.glob("*/subagents/agent-*.jsonl")})


def _session_id(path: Path) -> str:
    if path.parent.name == "subagents":
        return f"{path.parent.parent.name}/{path.stem}"
    return path.stem


IMPORTER = Importer(
    source=SOURCE, read=read, locate=_locate, discover=_discover, session_id=_session_id
)

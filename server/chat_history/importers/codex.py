"""Codex CLI sessions: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl``
(``$CODEX_HOME`` instead of ``~/.codex``; and ``~/.codex/archived_sessions/``). Every project's
sessions are kept together, each recording its folder.

The format as observed (codex-cli 0.2x to 0.5x; its protocol types are Rust, no schema file):

- One JSON object per line: ``{"timestamp", "type", "payload"}``. ``session_meta`` (``id``,
  ``cwd``, ``cli_version``, ``originator``), ``turn_context`` (``cwd``, ``model``),
  ``response_item`` (the model's items, as the Responses API has them) and ``event_msg`` (a
  second, UI-level copy of the same turns: never read, so nothing is imported twice).
- Older rollouts (before mid-2025) have no envelope: a first line ``{"id", "timestamp",
  "instructions"}`` and then the items themselves, one per line.
- Items: ``message`` (``role`` user, assistant or developer; ``content`` blocks ``input_text``,
  ``output_text``, ``input_image``); ``function_call`` (``name``, ``arguments`` as a JSON
  string, ``call_id``) and ``function_call_output`` (``call_id``, ``output``: text, blocks, or
  older ``{"content", "success"}``); ``custom_tool_call`` (``input`` as text) and its output;
  ``local_shell_call`` (``action.command``) and its output; ``reasoning`` (``summary``,
  ``encrypted_content``), kept as ``providerData["openai-responses"].reasoning`` on the row
  after it, so that only the Responses API, which encrypted it, gets it back — when it has an
  ``id`` (older rollouts): newer ones drop it, and an input item without one is refused.
  Each reply's origin: the Responses API, the turn's model (``turn_context``), scope
  ``import:codex``.
- Not carried over (counted): ``developer`` messages and the user messages Codex writes itself
  (``<environment_context>``, ``<user_instructions>``, AGENTS.md instructions), ``web_search_call``
  and other items this reader does not know, and every ``event_msg``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
from chat_history.model import Message, ToolCall
from chat_history.policy.origins import import_origin

SOURCE = "codex"
KIND = "openai-responses"
#: How the user messages Codex writes itself begin.
INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
)
ITEM_TYPES = {
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "web_search_call",
}


@attrs.define
class _Builder:
    tally: Tally
    rows: list[Message] = attrs.field(factory=list)
    pending: set[str] = attrs.field(factory=set)
    reasoning: list[dict[str, Any]] = attrs.field(factory=list)
    #: the model of the turn (``turn_context``), the origin of the replies after it
    model: str | None = None

    def _data(self) -> dict[str, Any]:
        if not self.reasoning:
            return {}
        data = {KIND: {"reasoning": list(self.reasoning)}}
        self.reasoning.clear()
        return data

    def item(self, item: dict[str, Any], at: int | None) -> None:
        kind = item.get("type")
        if kind == "message":
            self._message(item, at)
        elif kind == "reasoning":
            if not isinstance(item.get("id"), str) or not item["id"]:
                # newer rollouts drop the id, which a Responses API input item must have
                self.tally.skip("reasoning item", "no id: the Responses API would refuse it")
            elif isinstance(item.get("encrypted_content"), str) or item.get("summary"):
                self.reasoning.append(item)
        elif kind in {"function_call", "custom_tool_call", "local_shell_call"}:
            self._call(item, at)
        elif kind in {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}:
            self._output(item, at)
        else:
            self.tally.skip(f"{kind or 'untyped'} item", "not carried over")

    def _message(self, item: dict[str, Any], at: int | None) -> None:
        role = item.get("role")
        text = text_of(item.get("content"))
        if role == "user":
            if text.lstrip().startswith(INJECTED):
                self.tally.skip("user message", "written by Codex, not typed by the user")
                return
            if any(
                isinstance(b, dict) and b.get("type") == "input_image"
                for b in item.get("content") or []
            ):
                self.tally.skip("image", "not carried over (Codex keeps a path or URL)")
            if text:
                self.rows.append(Message(role="user", content=text, timestamp=at))
        elif role == "assistant":
            self._assistant(text, None, at)
        else:
            self.tally.skip(f"{role or 'unknown'} message", "instructions, not the conversation")

    def _assistant(self, text: str, call: ToolCall | None, at: int | None) -> None:
        last = self.rows[-1] if self.rows else None
        calls = (call,) if call else ()
        # calls right after the reply's text (or after other calls) belong to the same turn row
        if call and last is not None and last.role == "assistant" and not self.reasoning:
            self.rows[-1] = attrs.evolve(last, tool_calls=(*last.tool_calls, call))
        else:
            data = self._data()
            self.rows.append(
                Message(
                    role="assistant",
                    content=text,
                    tool_calls=calls,
                    timestamp=at,
                    provider_data=data,
                    origin=import_origin(SOURCE, KIND, self.model),
                )
            )
        if call:
            self.pending.add(call.id)

    def _call(self, item: dict[str, Any], at: int | None) -> None:
        call_id = item.get("call_id") or item.get("id")
        if not isinstance(call_id, str):
            self.tally.skip("tool call", "no call id")
            return
        given = item.get("name")
        name = given if isinstance(given, str) and given else "shell"
        if item.get("type") == "function_call":
            arguments: Any = _arguments(item.get("arguments"))
        elif item.get("type") == "custom_tool_call":
            text = item.get("input")
            arguments = {"input": text if isinstance(text, str) else ""}
        else:
            action = item.get("action")
            command = action.get("command", []) if isinstance(action, dict) else []
            arguments = {"command": command}
        self._assistant("", ToolCall(id=call_id, name=name, arguments=arguments), at)

    def _output(self, item: dict[str, Any], at: int | None) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or call_id not in self.pending:
            self.tally.skip("tool output", "no tool call before it")
            return
        self.pending.discard(call_id)
        self.rows.append(
            Message(role="tool", content=_output_text(item.get("output")), tool_call_id=call_id,
                    timestamp=at)
        )  # fmt: skip


def _arguments(value: Any) -> Any:
    """A function call's arguments: the JSON object its string holds, else the string itself."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return value if isinstance(value, dict) else {}


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, dict):  # older rollouts: {"content": "...", "success": bool}
        return _output_text(output.get("content", ""))
    return text_of(output)


def read(data: bytes, session_id: str) -> list[Session]:
    """The conversation of one Codex rollout file (``session_id``: from the file name, unless the
    file's ``session_meta`` names it)."""
    tally = Tally()
    builder = _Builder(tally)
    folder: str | None = None
    named: str | None = None
    for number, line in json_lines(data, tally):
        kind = line.get("type")
        at = timestamp_ms(line.get("timestamp"))
        payload = line.get("payload")
        if kind == "session_meta" and isinstance(payload, dict):
            named = named or (payload.get("id") if isinstance(payload.get("id"), str) else None)
            folder = folder or (payload.get("cwd") if isinstance(payload.get("cwd"), str) else None)
        elif kind == "turn_context" and isinstance(payload, dict):
            folder = folder or (payload.get("cwd") if isinstance(payload.get("cwd"), str) else None)
            model = payload.get("model")
            builder.model = model if isinstance(model, str) and model else builder.model
        elif kind == "response_item" and isinstance(payload, dict):
            builder.item(payload, at)
        elif kind == "event_msg":
            tally.skip("event_msg line", "a second copy of the turns (the items are read)")
        elif kind in ITEM_TYPES and payload is None:  # an older rollout's bare item
            builder.item(line, at)
        elif kind is None and number == 1 and isinstance(line.get("id"), str):
            named = line["id"]  # an older rollout's first line
        else:
            tally.skip(f"{kind or 'untyped'} line", "unknown to this reader")
    if builder.reasoning:
        tally.skip("reasoning item", "no reply after it", len(builder.reasoning))
    first = next((r.content for r in builder.rows if r.role == "user" and r.content), "")
    session = Session(
        SOURCE,
        named or session_id,
        folder,
        first_line_title(first),
        tuple(builder.rows),
        tally.items(),
    )
    return [session] if session.messages else []


def session_id_of(file_name: str) -> str:
    """The session id in a rollout's file name (``rollout-2026-01-02T03-04-05-<uuid>.jsonl``):
    its last five dash-separated parts, else the stem."""
    stem = file_name.rsplit("/", 1)[-1].removesuffix(".jsonl")
    parts = stem.split("-")
    return "-".join(parts[-5:]) if len(parts) >= 6 else stem


def _locate(env: Mapping[str, str], home: Path) -> Path:
    base = env.get("CODEX_HOME")
    return (Path(base) if base else home / ".codex") / "sessions"


def _discover(root: Path, folder: str | None) -> list[Path]:
    return sorted(root.rglob("rollout-*.jsonl"))


IMPORTER = Importer(
    source=SOURCE,
    read=read,
    locate=_locate,
    discover=_discover,
    session_id=lambda path: session_id_of(path.name),
    folder_inside=True,
)

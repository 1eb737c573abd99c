"""History from other tools (protocol.md "Version 4" → History from other tools): one pure reader
per source — a session file's bytes in, conversations of rows and counts of what was skipped
out — each documenting the format as observed. Which files to read, and the writing, are
``service.imports``'s.

Readers: ``claude_code`` (Claude Code's session JSONL), ``codex`` (Codex CLI's rollout JSONL),
``gemini_cli`` (Gemini CLI's session JSON, and its newer JSON-lines log replayed),
``copilot_chat`` (VS Code's chat sessions: the whole-file JSON and the mutation log replayed),
``continue_dev`` (Continue's session JSON), ``opencode`` (OpenCode's storage tree or database,
gathered by the service into the shape of its export), ``cline`` and ``roo_code`` (their task
folders, ``task_history``), ``copilot_cli`` (Copilot CLI's session events, and its older
single-file sessions).
Every source the spec names has its reader."""

from __future__ import annotations

from collections.abc import Callable

from chat_history.importers import (
    claude_code,
    cline,
    codex,
    continue_dev,
    copilot_chat,
    copilot_cli,
    gemini_cli,
    opencode,
    roo_code,
)
from chat_history.importers.common import Session, Skipped

Reader = Callable[[bytes, str], list[Session]]

#: Every source the spec names, in its order.
SOURCES: tuple[str, ...] = (
    "claude-code",
    "codex",
    "copilot-chat",
    "copilot-cli",
    "gemini-cli",
    "cline",
    "roo-code",
    "continue",
    "opencode",
)
#: The sources this server reads.
READERS: dict[str, Reader] = {
    claude_code.SOURCE: claude_code.read,
    codex.SOURCE: codex.read,
    gemini_cli.SOURCE: gemini_cli.read,
    copilot_chat.SOURCE: copilot_chat.read,
    continue_dev.SOURCE: continue_dev.read,
    opencode.SOURCE: opencode.read,
    cline.SOURCE: cline.read,
    roo_code.SOURCE: roo_code.read,
    copilot_cli.SOURCE: copilot_cli.read,
}

__all__ = ["READERS", "SOURCES", "Reader", "Session", "Skipped"]

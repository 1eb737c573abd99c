"""History from other tools (protocol.md "Version 4" → History from other tools): one module (or
folder) per source, each declaring its ``IMPORTER`` (``importers.source``) — where the tool keeps
its data, which files to read, a pure reader (file bytes in, conversations of rows and counts of
what was skipped out, the format documented as observed), the session id a path gives, and how a
session is placed — and this registry of them, in the spec's order. Writing is
``service.imports``'s, the same for every source.

Sources: ``claude_code`` (Claude Code's session JSONL), ``codex`` (Codex CLI's rollout JSONL),
``copilot_chat`` (VS Code's chat sessions: the whole-file JSON and the mutation log replayed),
``copilot_cli`` (Copilot CLI's session events, and its older single-file sessions),
``gemini_cli`` (Gemini CLI's session JSON, and its newer JSON-lines log replayed), ``cline`` and
``roo_code`` (their task folders, ``task_history``), ``continue_dev`` (Continue's session JSON),
``opencode`` (OpenCode's database, storage tree or export). Every source the spec names has its
module."""

from __future__ import annotations

from chat_history.errors import InvalidParams
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
from chat_history.importers.source import Importer, Reader

#: Every source, by name, in the spec's order (a new source: its module's IMPORTER, here).
IMPORTERS: dict[str, Importer] = {
    importer.source: importer
    for importer in (
        claude_code.IMPORTER,
        codex.IMPORTER,
        copilot_chat.IMPORTER,
        copilot_cli.IMPORTER,
        gemini_cli.IMPORTER,
        cline.IMPORTER,
        roo_code.IMPORTER,
        continue_dev.IMPORTER,
        opencode.IMPORTER,
    )
}
SOURCES: tuple[str, ...] = tuple(IMPORTERS)


def importer(source: str) -> Importer:
    """The importer of ``source``, or InvalidParams ``source``."""
    found = IMPORTERS.get(source)
    if found is None:
        raise InvalidParams("source", f"must be one of {', '.join(SOURCES)}")
    return found


__all__ = ["IMPORTERS", "SOURCES", "Importer", "Reader", "Session", "Skipped", "importer"]

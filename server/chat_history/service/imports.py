"""Importing another tool's history (protocol.md "Version 4" → History from other tools), the
same for every source (``importers``: each declares where its tool keeps its files, which to
read and how): the files found, each read within a size bound, and each session written as one
conversation in one transaction — idempotent: the conversation id is ``SOURCE:`` + the tool's
session id, and what is already stored is skipped (``policy.imports``), so importing again adds
nothing and a longer session adds only its tail.

A dry run reads and compares, and writes nothing."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from chat_history.errors import InvalidParams
from chat_history.importers import SOURCES, Importer, Session, Skipped, importer
from chat_history.importers.places import folder_key
from chat_history.model import Key, PruneReport
from chat_history.policy.identity import normalize_uri
from chat_history.policy.imports import match_stored, retention_after_import
from chat_history.service.conversations import ConversationUpdate
from chat_history.service.manager import ChatHistoryManager, now_ms
from chat_history.service.workspaces import real_identity

#: A session file larger than this is not read (one session is one conversation; memory is
#: bounded by the largest one).
MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_TITLE = 200
#: Every source (importers.SOURCES), for the CLI's help.
SUPPORTED: tuple[str, ...] = SOURCES


@attrs.frozen
class PlannedImport:
    """One conversation of an import: what it is and what the import does (or would do)."""

    source: str
    source_id: str
    conversation_id: str
    workspace: str
    title: str | None
    messages: int
    #: rows the import adds (0: "unchanged")
    new_messages: int
    status: str  # "new" | "updated" | "unchanged"
    skipped: tuple[Skipped, ...]
    #: the oldest message's time (epoch ms; None: none has one)
    oldest: int | None
    #: what retention under the settings in force deletes of it at its next read, once
    #: imported (policy.imports.retention_after_import; None: nothing)
    retention: PruneReport | None


def check_source(source: str) -> str:
    """``source``, or InvalidParams ``source``."""
    return importer(source).source


def data_folder(source: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``source`` keeps its sessions on this machine (``environ``: default, the process's)."""
    return importer(source).data_folder(environ)


def within(path: Path, folder: Path) -> Path:
    """``path`` resolved (links followed), or InvalidParams ``path`` when it is not inside the
    tool's data folder ``folder`` (the method reads nothing else)."""
    resolved = path.expanduser().resolve()
    root = folder.expanduser().resolve()
    if resolved != root and root not in resolved.parents:
        raise InvalidParams("path", "must be inside the tool's own data folder")
    return resolved


def sessions_of(
    source: str, root: Path, folder: str | None, confine: Path | None = None
) -> Iterator[tuple[Path, Session]]:
    """Every session under ``root`` (of the project ``folder`` when given), one file at a time
    (a file of many sessions: one session at a time); with ``confine``, a file that resolves
    outside that folder (a link out of the tool's data folder) is InvalidParams ``path`` naming
    it, before anything is read. A session found again (OpenCode's database and its older tree,
    Copilot CLI's event log and its older file) is read from the first file that holds it (each
    source lists its newer format first)."""
    tool = importer(source)
    wanted = folder_key(folder) if folder else None
    files = tool.session_files(root, folder)
    for path in files:  # every file checked before any is read: refused whole, or imported
        if confine is not None:
            _confined(path, confine)
        if tool.sized(path):
            _bounded(path)
    seen: set[str] = set()
    for path in files:
        for session in _read(tool, path, folder):
            if session.conversation_id in seen:
                continue
            seen.add(session.conversation_id)
            elsewhere = session.folder is None or folder_key(session.folder) != wanted
            if wanted is not None and tool.folder_inside and elsewhere:
                continue
            yield path, session


def _read(tool: Importer, path: Path, folder: str | None) -> Iterator[Session]:
    """The sessions of one file, placed; InvalidParams ``path`` naming the file when it cannot
    be read or is too large."""
    try:
        if tool.sized(path):
            _bounded(path)
        for session_id, data in tool.contents(path, MAX_FILE_BYTES):
            yield from tool.place(path, tool.read(data, session_id), folder)
    except OSError as exc:
        raise InvalidParams("path", f"{path}: cannot be read ({exc.strerror})") from None


def _bounded(path: Path) -> None:
    """InvalidParams ``path`` naming a session file larger than MAX_FILE_BYTES."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InvalidParams("path", f"{path}: cannot be read ({exc.strerror})") from None
    if size > MAX_FILE_BYTES:
        raise InvalidParams("path", f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB, not read")


def _confined(path: Path, folder: Path) -> None:
    resolved, root = path.resolve(), folder.expanduser().resolve()
    if root not in resolved.parents:
        raise InvalidParams("path", f"{path}: links outside the tool's own data folder, not read")


def workspace_of(
    session: Session, given: str | None, place: Callable[[str], str] | None = None
) -> str:
    """The workspace a session goes into: ``given``, else the folder the tool recorded, as a
    normalized identity (a symlinked folder by its target), through ``place`` when given (the
    server's session maps its own folder to its identity); a session without a folder:
    ``given`` is required."""
    if given is not None:
        return given
    if session.folder is None:
        raise InvalidParams("workspace", "the session records no folder; name the workspace")
    recorded = real_identity(
        normalize_uri(
            Path(session.folder).as_uri() if os.path.isabs(session.folder) else session.folder
        )
    )
    return place(recorded) if place is not None else recorded


def import_sessions(
    manager: ChatHistoryManager,
    sessions: Iterator[tuple[Path, Session]],
    workspace: str | None,
    *,
    dry_run: bool,
    place: Callable[[str], str] | None = None,
) -> list[PlannedImport]:
    """Each session compared with what is stored under its key and, unless ``dry_run``,
    written (one transaction each); what was (or would be) done. ``place``: see workspace_of."""
    planned: list[PlannedImport] = []
    for _, session in sessions:
        key = Key(workspace_of(session, workspace, place), session.conversation_id)
        stored, _ = manager.history(key)
        start = match_stored(stored, session.messages).start if stored else 0
        new = len(session.messages) - start
        status = "new" if not stored else ("updated" if new else "unchanged")
        if not dry_run and new:
            manager.import_conversation(key, session.messages)
            if status == "new":
                _describe(manager, key, session)
        planned.append(
            PlannedImport(
                source=session.source,
                source_id=session.session_id,
                conversation_id=key.conversation,
                workspace=key.workspace,
                title=session.title,
                messages=len(session.messages),
                new_messages=new,
                status=status,
                skipped=session.skipped,
                oldest=min((m.timestamp for m in session.messages if m.timestamp), default=None),
                retention=retention_after_import(
                    stored, session.messages[start:], manager.settings, now_ms()
                ),
            )
        )
    return planned


def _describe(manager: ChatHistoryManager, key: Key, session: Session) -> None:
    """A new conversation's title (the tool's) and where it came from (its metadata), so that a
    listing can show its source."""
    title = session.title[:MAX_TITLE] if session.title else None
    metadata = {"import": {"source": session.source, "session": session.session_id}}
    manager.update_conversation(
        key, ConversationUpdate(set_title=title is not None, title=title, metadata=metadata)
    )

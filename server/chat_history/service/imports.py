"""Importing another tool's history (protocol.md "Version 4" → History from other tools): the
files ``service.import_files`` finds, each read within a size bound, and each session written
as one conversation in one transaction — idempotent: the conversation id is ``SOURCE:`` + the
tool's session id, and what is already stored is skipped (``policy.imports``), so importing
again adds nothing and a longer session adds only its tail.

A dry run reads and compares, and writes nothing."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import attrs

from chat_history.errors import InvalidParams
from chat_history.importers import READERS, Session, Skipped
from chat_history.model import Key, PruneReport
from chat_history.policy.identity import normalize_uri
from chat_history.policy.imports import match_stored, retention_after_import
from chat_history.service.conversations import ConversationUpdate
from chat_history.service.import_files import data_folder as data_folder
from chat_history.service.import_files import folder_key, placed, session_id, unsupported
from chat_history.service.import_files import session_files as session_files
from chat_history.service.manager import ChatHistoryManager, now_ms
from chat_history.service.opencode_db import in_opencode_db, opencode_sessions
from chat_history.service.opencode_tree import in_opencode_tree, opencode_bundle
from chat_history.service.workspaces import real_identity

log = logging.getLogger("chat_history")

#: A session file larger than this is not read (one session is one conversation; memory is
#: bounded by the largest one).
MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_TITLE = 200
#: Sources that keep every project's sessions together, each naming its folder.
NAMED_FOLDERS = frozenset({"codex", "continue", "opencode", "cline", "roo-code", "copilot-cli"})
#: The sources read (importers.READERS), for the CLI's help and the errors.
SUPPORTED: tuple[str, ...] = tuple(READERS)


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
    if source not in READERS:
        raise InvalidParams("source", unsupported(source))
    return source


def within(path: Path, folder: Path) -> Path:
    """``path`` resolved (links followed), or InvalidParams ``path`` when it is not inside the
    tool's data folder ``folder`` (the method reads nothing else)."""
    resolved = path.expanduser().resolve()
    root = folder.expanduser().resolve()
    if resolved != root and root not in resolved.parents:
        raise InvalidParams("path", "must be inside the tool's own data folder")
    return resolved


def read_file(source: str, path: Path) -> list[Session]:
    """The sessions of one file; InvalidParams ``path`` naming the file when it cannot be read or
    is too large."""
    if in_opencode_db(source, path):
        return list(_database(source, path))
    try:
        _bounded(path)
        data = opencode_bundle(path, MAX_FILE_BYTES) if in_opencode_tree(source, path) else None
        data = path.read_bytes() if data is None else data
    except OSError as exc:
        raise InvalidParams("path", f"{path}: cannot be read ({exc.strerror})") from None
    return READERS[source](data, session_id(source, path))


def _database(source: str, path: Path) -> Iterator[Session]:
    """The sessions of an OpenCode database, one at a time (each bounded as one file is)."""
    for sid, bundle in opencode_sessions(path, MAX_FILE_BYTES):
        yield from READERS[source](bundle, sid)


def sessions_of(
    source: str, root: Path, folder: str | None, confine: Path | None = None
) -> Iterator[tuple[Path, Session]]:
    """Every session under ``root`` (of the project ``folder`` when given), one file at a time;
    with ``confine``, a file that resolves outside that folder (a link out of the tool's data
    folder) is InvalidParams ``path`` naming it, before anything is read. A session found again
    (OpenCode's database and its older tree, Copilot CLI's event log and its older file) is read
    from the first file that holds it (``session_files`` lists the newer format first)."""
    wanted = folder_key(folder) if folder else None
    files = session_files(source, root, folder)
    for path in files:  # every file checked before any is read: refused whole, or imported
        if confine is not None:
            _confined(path, confine)
        if not in_opencode_db(source, path):  # a database is bounded by each of its sessions
            _bounded(path)
    seen: set[str] = set()
    for path in files:
        found: Iterable[Session] = (
            _database(source, path)  # one session at a time: no other source's rule applies
            if in_opencode_db(source, path)
            else placed(source, path, read_file(source, path), folder)
        )
        for session in found:
            if session.conversation_id in seen:
                continue
            seen.add(session.conversation_id)
            elsewhere = session.folder is None or folder_key(session.folder) != wanted
            if wanted is not None and source in NAMED_FOLDERS and elsewhere:
                continue
            yield path, session


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

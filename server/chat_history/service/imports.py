"""Importing another tool's history (protocol.md "Version 4" → History from other tools), the
same for every source (``importers``: each declares where its tool keeps its files, which to
read and how): the files found, only regular ones, each read within a size bound
(``importers.files``), and each session written as one conversation in one transaction —
idempotent: the conversation id is ``SOURCE:`` + the tool's session id, and what is already
stored is skipped (``policy.imports``), so importing again adds nothing and a longer session adds
only its tail. A session whose transcript is a tree (Claude Code's rewinds: ``Session.parents``)
keeps every branch, the tool's last leaf active (``import_writes.import_tree``). A conversation
of that id that an import did not create (the user's own) is never merged into: the session goes
beside it (``SOURCE:<id>~2``). What yields no message is said,
file by file (``Unread``); a session that records no folder goes into the current folder's
workspace, and the answer says so.

A dry run reads and compares, and writes nothing."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from chat_history.errors import InvalidParams
from chat_history.importers import SOURCES, Importer, Session, Skipped, importer
from chat_history.importers.files import NotRegular, TooLarge, regular
from chat_history.importers.places import folder_key
from chat_history.model import Key, Message, PruneReport, StoredMessage
from chat_history.policy.identity import normalize_uri
from chat_history.policy.imports import (
    fingerprint,
    match_stored,
    match_tree,
    path_indices,
    retention_after_import,
)
from chat_history.service import branches, conversations, history, import_writes
from chat_history.service.conversations import ConversationInfo, ConversationUpdate, empty_info
from chat_history.service.import_writes import ImportTree
from chat_history.service.manager import ChatHistoryManager, now_ms
from chat_history.service.workspaces import real_identity

#: A session file larger than this is not read (one session is one conversation; memory is
#: bounded by the largest one).
MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_TITLE = 200
#: The conversations an import looks through for its own before it gives up: the tool's id,
#: then ``~2``, ``~3``, … beside conversations of that id it did not create.
MAX_BESIDE = 100
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
    #: where ``workspace`` came from: "given" (named by the caller), "recorded" (the folder
    #: the tool recorded for the session) or "current" (the session records none: the current
    #: folder's, the window's workspace for the method)
    workspace_from: str
    #: the conversation of the session's own id that the import did not create (the user's),
    #: which it left alone, importing beside it as ``conversation_id``; None: no such
    beside: str | None


@attrs.frozen
class Unread:
    """A file an import read no session from, and why (a warning, never silent)."""

    path: str
    why: str


def check_source(source: str) -> str:
    """``source``, or InvalidParams ``source``."""
    return importer(source).source


def data_folder(source: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``source`` keeps its sessions on this machine (``environ``: default, the process's)."""
    return importer(source).data_folder(environ)


def within(path: Path, folder: Path) -> Path:
    """``path`` resolved (links followed), or InvalidParams ``path`` when it is not inside the
    tool's data folder ``folder`` (the method reads nothing else) or holds a NUL (no file
    system names one)."""
    if "\0" in str(path):
        raise InvalidParams("path", "must not contain NUL")
    resolved = path.expanduser().resolve()
    root = folder.expanduser().resolve()
    if resolved != root and root not in resolved.parents:
        raise InvalidParams("path", "must be inside the tool's own data folder")
    return resolved


def sessions_of(
    source: str,
    root: Path,
    folder: str | None,
    confine: Path | None = None,
    *,
    here: str | None = None,
    unread: list[Unread] | None = None,
) -> Iterator[tuple[Path, Session]]:
    """Every session under ``root`` (of the project ``folder`` when given), one file at a time
    (a file of many sessions: one session at a time); with ``confine``, a file that resolves
    outside that folder (a link out of the tool's data folder) is InvalidParams ``path`` naming
    it, before anything is read. A session found again (OpenCode's database and its older tree,
    Copilot CLI's event log and its older file) is read from the first file that holds it (each
    source lists its newer format first). ``here``: the current folder, which a source may
    recognise as a session's (Gemini CLI's hash of it). Each file that yields nothing — not a
    regular file, no message in it, nothing there — is added to ``unread`` with why."""
    tool = importer(source)
    notes = unread if unread is not None else []
    if not root.exists() and not root.is_symlink():
        notes.append(Unread(str(root), "no such file or folder"))
        return
    wanted = folder_key(folder) if folder else None
    seen: set[str] = set()
    for path in _checked(tool, tool.session_files(root, folder), confine, notes):
        found, noted = False, len(notes)
        for session in _read(tool, path, folder, here, notes):
            found = True
            if session.conversation_id in seen:
                continue
            seen.add(session.conversation_id)
            elsewhere = session.folder is None or folder_key(session.folder) != wanted
            if wanted is not None and tool.folder_inside and elsewhere:
                if session.folder is None:
                    notes.append(Unread(str(path), _NO_FOLDER))
                continue
            yield path, session
        if not found and len(notes) == noted:  # nothing read, and nothing said yet
            why = f"no message in it that {tool.source}'s reader carries over"
            notes.append(Unread(str(path), f"{why} (empty, or not its session)"))


_NO_FOLDER = (
    "records no project folder, so it is not known to be this one's: name it as PATH to "
    "import it into this folder's workspace"
)


def _checked(
    tool: Importer, files: list[Path], confine: Path | None, notes: list[Unread]
) -> list[Path]:
    """The files to read, every one checked before any is read (refused whole, or imported): a
    file linking out of ``confine`` or larger than MAX_FILE_BYTES is InvalidParams ``path``
    naming it; one that is not a regular file (a FIFO, a device) is left out, noted."""
    kept: list[Path] = []
    for path in files:
        if confine is not None:
            _confined(path, confine)
        if tool.sized(path):
            try:
                size = regular(path).st_size
            except NotRegular as exc:
                notes.append(Unread(str(path), str(exc.strerror)))
                continue
            except OSError as exc:
                raise InvalidParams("path", f"{path}: cannot be read ({exc.strerror})") from None
            if size > MAX_FILE_BYTES:
                raise _too_large(path)
        kept.append(path)
    return kept


def _read(
    tool: Importer, path: Path, folder: str | None, here: str | None, notes: list[Unread]
) -> Iterator[Session]:
    """The sessions of one file, placed; InvalidParams ``path`` naming the file when it cannot
    be read or is too large; noted when it is not a regular file (swapped since it was
    checked)."""
    try:
        for session_id, data in tool.contents(path, MAX_FILE_BYTES):
            yield from tool.place(path, tool.read(data, session_id), folder, here)
    except NotRegular as exc:
        notes.append(Unread(str(path), str(exc.strerror)))
    except TooLarge:
        raise _too_large(path) from None
    except OSError as exc:
        raise InvalidParams("path", f"{path}: cannot be read ({exc.strerror})") from None


def _too_large(path: Path) -> InvalidParams:
    return InvalidParams("path", f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB, not read")


def _confined(path: Path, folder: Path) -> None:
    resolved, root = path.resolve(), folder.expanduser().resolve()
    if root not in resolved.parents:
        raise InvalidParams("path", f"{path}: links outside the tool's own data folder, not read")


def workspace_of(
    session: Session,
    given: str | None,
    place: Callable[[str], str] | None = None,
    default: str | None = None,
) -> str:
    """The workspace a session goes into: ``given``, else the folder the tool recorded, as a
    normalized identity (a symlinked folder by its target), through ``place`` when given (the
    server's session maps its own folder to its identity); a session without a folder: ``default``
    (the current folder's workspace), else InvalidParams ``workspace``."""
    if given is not None:
        return given
    if session.folder is None:
        if default is not None:
            return default
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
    default: str | None = None,
) -> list[PlannedImport]:
    """Each session compared with what is stored under its key and, unless ``dry_run``,
    written (one transaction each); what was (or would be) done. ``place``, ``default``: see
    workspace_of. The key is the session's own unless a conversation of that id is not an
    import's (see _own_conversation)."""
    planned: list[PlannedImport] = []
    for path, session in sessions:
        own = Key(workspace_of(session, workspace, place, default), session.conversation_id)
        key, stored, messages = _own_conversation(manager, own, session, path)
        tree = _tree(manager, key, session, messages, stored)
        if tree is None:
            start = match_stored(stored, messages).start if stored else 0
            adding = messages[start:]
        else:
            adding = tree[1]
        new = len(adding)
        status = "new" if not stored else ("updated" if new else "unchanged")
        if not dry_run and new:
            if tree is None:
                import_writes.import_conversation(manager, key, messages)
            else:
                import_writes.import_tree(manager, key, tree[0])
            if status == "new":
                _describe(manager, key, session)
        planned.append(
            PlannedImport(
                source=session.source,
                source_id=session.session_id,
                conversation_id=key.conversation,
                workspace=key.workspace,
                title=session.title,
                messages=len(messages),
                new_messages=new,
                status=status,
                skipped=session.skipped,
                oldest=min((m.timestamp for m in messages if m.timestamp), default=None),
                retention=retention_after_import(
                    stored,
                    adding if tree is None else tree[2],
                    manager.settings,
                    now_ms(),
                ),
                workspace_from=_workspace_from(session, workspace),
                beside=own.conversation if key != own else None,
            )
        )
    return planned


def _tree(
    manager: ChatHistoryManager,
    key: Key,
    session: Session,
    messages: tuple[Message, ...],
    stored: list[StoredMessage],
) -> tuple[ImportTree, tuple[Message, ...], tuple[Message, ...]] | None:
    """A session whose transcript is a tree (``Session.parents``): the tree, the messages an
    import adds (policy.imports.match_tree against the rows of every branch) and those of
    them on its active path (what retention weighs). None: a line."""
    if session.parents is None:
        return None
    tree = ImportTree(messages, session.parents, session.active)
    every = list(branches.whole_tree(manager, key).rows) if stored else []
    adding = match_tree(every, messages, session.parents).new
    active = len(messages) - 1 if session.active is None else session.active
    on_path = set(path_indices(session.parents, active))
    return (
        tree,
        tuple(messages[i] for i in adding),
        tuple(messages[i] for i in adding if i in on_path),
    )


def _workspace_from(session: Session, given: str | None) -> str:
    """PlannedImport.workspace_from: where workspace_of took the workspace from."""
    if given is not None:
        return "given"
    return "recorded" if session.folder is not None else "current"


def _own_conversation(
    manager: ChatHistoryManager, key: Key, session: Session, path: Path
) -> tuple[Key, list[StoredMessage], tuple[Message, ...]]:
    """Where the session goes, what is stored there and the session's rows dated (_dated): the
    conversation ``key`` names when it does not exist or an import of this session created it,
    else the first such of ``key~2``, ``key~3``, …: an import never merges into a conversation
    it did not create (the user's own, of the same id)."""
    for n in range(1, MAX_BESIDE + 1):
        candidate = key if n == 1 else Key(key.workspace, f"{key.conversation}~{n}")
        info = conversations.info(manager, candidate)
        stored, _ = history.whole(manager, candidate)
        messages = _dated(session.messages, stored, path)
        if _absent(info) or _imported(info, session, stored, messages):
            return candidate, stored, messages
    raise InvalidParams(
        "path", f"{path}: {MAX_BESIDE} conversations of this session's id are not imports"
    )


def _absent(info: ConversationInfo) -> bool:
    """Whether there is no such conversation (nothing of anyone's: no row, title, metadata)."""
    return info == empty_info(info.key)


def _imported(
    info: ConversationInfo,
    session: Session,
    stored: list[StoredMessage],
    messages: tuple[Message, ...],
) -> bool:
    """Whether an import of ``session`` created the conversation: its metadata says so (what
    _describe writes), or — the metadata lost (an import stopped between its two writes, or a
    client replaced it) — every row it holds is one of the session's (times included: no
    conversation of the user's is that)."""
    try:
        value = info.metadata.value()
    except ValueError:
        value = None
    marker = value.get("import") if isinstance(value, dict) else None
    if isinstance(marker, dict):
        return marker.get("source") == session.source and marker.get("session") == (
            session.session_id
        )
    incoming = {fingerprint(m) for m in messages}
    return bool(stored) and all(fingerprint(row) in incoming for row in stored)


def _dated(
    messages: tuple[Message, ...], stored: list[StoredMessage], path: Path
) -> tuple[Message, ...]:
    """The rows, each one the tool left undated (Continue's CLI records no time) at the time an
    earlier import gave them (the oldest stored row's: one time for the session), else at the
    file's modification time: the same at every import, so a re-import recognises them."""
    if all(m.timestamp is not None for m in messages):
        return messages
    at = min((row.timestamp for row in stored if row.timestamp is not None), default=None)
    if at is None:
        try:
            at = os.stat(path).st_mtime_ns // 1_000_000
        except OSError:
            at = now_ms()
    return tuple(m if m.timestamp is not None else attrs.evolve(m, timestamp=at) for m in messages)


def _describe(manager: ChatHistoryManager, key: Key, session: Session) -> None:
    """A new conversation's title (the tool's) and where it came from (its metadata), so that a
    listing can show its source and a later import knows it as its own."""
    title = session.title[:MAX_TITLE] if session.title else None
    metadata = {"import": {"source": session.source, "session": session.session_id}}
    conversations.update(
        manager,
        key,
        ConversationUpdate(set_title=title is not None, title=title, metadata=metadata),
    )

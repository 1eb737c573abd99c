"""The workspaces family (``wire/methods/workspaces``; protocol.md "Version 3" → Workspace
identity): identity that follows the project, each operation one transaction on the manager,
composing the pure rules (``policy.identity``) with what the folder is in git (``gitfolder``).
No SQL and no pygls here.

- ``resolve``: a session's identity from its raw workspace URI and ``workspaceIdentity`` (a
  local folder by its real path); ``real_identity`` and ``named_workspace`` the same step for a
  workspace that a request, the CLI's ``--workspace`` or an import names (a symlink, or a path
  through one, names its target's history);
- ``open_identity``: run once per identity before the session's first request: re-keys
  conversations stored under an unnormalized spelling of any folder's URI (a conversation id
  already taken under the normalized one moves under a new id, said in the log and, from its
  stored record, in ``list_all``), and those of
  the symlink the client named to its target folder, takes the history of a moved git folder
  (never from a folder that still exists), records the folder's fingerprint, and in
  ``"repository"`` mode takes the folder's history when the repository identity has none;
- ``move``, ``list_all``: ``moveWorkspace`` and ``listWorkspaces``, and the CLI's
  ``move-workspace`` and ``workspaces``; ``recall`` and ``has_history``: the MCP server's scope.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import attrs

from chat_history.errors import InvalidParams
from chat_history.policy.identity import (
    REPOSITORY_PREFIX,
    Fingerprint,
    folder_of,
    folder_uri,
    identity_problem,
    moved_from,
    normalize_remote,
    normalize_uri,
    renamed_id,
    repository_identity,
)
from chat_history.service.gitfolder import GitFolder, git_folder
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import Reading, Transaction
from chat_history.store.workspaces import FolderRow, RenameRow

log = logging.getLogger("chat_history")

#: The file beside the database that names this machine (never the host name alone).
MACHINE_FILE = "machine-id"


def machine_id(folder: Path) -> str:
    """This machine's stable id: kept in ``folder`` (the storage folder), made on first use."""
    path = folder / MACHINE_FILE
    try:
        text = path.read_text(encoding="ascii").strip()
        if text:
            return text
    except OSError:
        pass
    made = uuid.uuid4().hex
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(made + "\n")
    except FileExistsError:
        try:
            return path.read_text(encoding="ascii").strip() or made
        except OSError:
            log.warning("cannot read this machine's id in %s; moved folders are not followed", path)
    except OSError:
        log.warning("cannot keep this machine's id in %s; moved folders are not followed", path)
    return made


@attrs.frozen
class Identity:
    """A session's workspace identity and what it came from."""

    #: the identity in force
    workspace: str
    #: the normalized folder URI (the identity in "folder" mode; a symlinked folder's target)
    folder_identity: str
    #: the local folder it names (None: not a local ``file:`` URI, or not there)
    folder: str | None = None
    git: GitFolder | None = None
    mode: str = "folder"
    #: the workspace as the client spelled it, when another spelling names the folder (a
    #: symlink to it, a ``rootPath``): its history, if any, is re-keyed to ``folder_identity``
    #: on opening, and requests that name it mean the session's identity
    link: str | None = None


def real_identity(identity: str) -> str:
    """``identity`` (normalized) with the local folder it names by its real path: a folder URI
    that is a symlink, or passes through one, names its target (as a session's does); any other
    identity (not a local folder, not there, or over the bound once resolved) as it is."""
    folder = folder_of(identity)
    if folder is None or not os.path.isdir(folder):
        return identity
    try:
        real = folder_uri(os.path.realpath(folder))
    except (OSError, ValueError):
        return identity
    return real if identity_problem(real) is None else identity


def _spelled(raw: str) -> str:
    """``raw`` normalized, an absolute path of a local folder (a ``rootPath``, a path typed on
    the command line) as the folder's URI."""
    if raw.startswith("/") and os.path.isdir(raw) and identity_problem(folder_uri(raw)) is None:
        return folder_uri(raw)
    return normalize_uri(raw)


def named_workspace(raw: str) -> str:
    """A workspace as a person or a client names it (the CLI's ``--workspace``, a request's
    ``workspace``): normalized, a folder's path as its URI, a local folder by its real path."""
    return real_identity(_spelled(raw))


def resolve(raw: str, mode: str) -> Identity:
    """The identity of a session whose workspace is ``raw``, in ``mode`` ("folder" or
    "repository"). A local folder is named by its real path's URI (a symlink by its target, a
    ``rootPath`` such as ``/home/me/proj`` as ``file:///home/me/proj``), and a repository
    identity over the length bound gives way to the folder identity."""
    normalized = normalize_uri(raw)
    spelling = None  # the client's own spelling, when another names the folder
    if (uri := _spelled(raw)) != normalized:
        normalized, spelling = uri, raw
    folder = folder_of(normalized)
    if folder is None or not os.path.isdir(folder):
        return Identity(normalized, normalized, None, None, mode)
    real = real_identity(normalized)
    if real != normalized:
        normalized, spelling = real, spelling or normalized
        folder = folder_of(real) or folder
    git = git_folder(Path(folder))
    if mode == "repository" and git is not None and git.remote is not None:
        repository = repository_identity(git.remote, git.inner_path)
        if identity_problem(repository) is None:
            return Identity(repository, normalized, folder, git, mode, spelling)
        log.warning("the repository identity of %s is too long; the folder identity is used", raw)
    return Identity(normalized, normalized, folder, git, mode, spelling)


# -- the operations --------------------------------------------------------------------------------


def open_identity(manager: ChatHistoryManager, identity: Identity, machine: str) -> list[str]:
    """Before a session's first request under ``identity``: re-key other spellings and a
    moved folder's history, record the fingerprint (one transaction). Returns what moved."""
    with manager.lock:  # it re-keys across workspaces: the whole database
        with manager.store.snapshot() as reading:
            if not needs_opening(reading, identity):
                return []
        return manager.write(
            (), lambda tx: _open_identity_in(tx, identity, machine, manager.clock())
        )


def has_history(manager: ChatHistoryManager, workspace: str) -> bool:
    """Whether ``workspace`` holds any conversation."""
    with manager.lock, manager.store.snapshot() as tx:
        return bool(tx.conversation_ids(workspace))


def recall(manager: ChatHistoryManager, identity: Identity, machine: str) -> str:
    """The workspace whose history a read-only reader of ``identity`` sees (the MCP server's
    scope): the identity, else its moved folder's history; nothing is moved or recorded."""
    with manager.lock, manager.store.snapshot() as tx:
        return _recall_in(tx, identity, machine, manager.clock())


def move(manager: ChatHistoryManager, source: str, target: str) -> int:
    """Re-key every conversation of ``source`` to ``target`` (one transaction); returns how
    many. Raises InvalidParams ``to`` when a conversation id is in both, StorageError."""
    with manager.lock:  # every conversation of two workspaces: the whole database
        return manager.write((), lambda tx: _move_in(tx, source, target))


def list_all(manager: ChatHistoryManager, machine: str) -> list[WorkspaceInfo]:
    """``listWorkspaces``: every workspace with conversations, newest activity first."""
    with manager.lock, manager.store.snapshot() as tx:
        return _list_in(tx, machine)


# -- the steps, each on the operation's transaction ------------------------------------------------


def _take(tx: Transaction, source: str, into: str, why: str, now: int) -> str:
    """Re-key ``source``'s conversations to ``into``; a conversation id present in both moves
    under a new id (policy.identity.renamed_id), so both histories stay reachable, and each
    rename is recorded (``listWorkspaces`` says it). Returns the log line that says what
    moved."""
    clash = tx.move_workspace(source, into)
    if not clash:
        return f"history of {source} moved to {into} ({why})"
    taken = tx.conversation_ids(into) | tx.conversation_ids(source)
    renames: dict[str, str] = {}
    for conversation in sorted(clash):
        renames[conversation] = renamed_id(conversation, taken)
        taken.add(renames[conversation])
    tx.move_workspace(source, into, renames)  # the new ids are free in both: it moves
    for old, new in sorted(renames.items()):
        tx.record_rename(RenameRow(into, new, old, source, now))
    told = ", ".join(f"{old!r} is now {new!r}" for old, new in sorted(renames.items()))
    return f"history of {source} moved to {into} ({why}); ids taken there: {told}"


def rekey_spellings(tx: Transaction, now: int) -> list[str]:
    """Re-key every conversation stored under an unnormalized spelling of a folder's URI (what
    servers before version 3 wrote) to the normalized one, this folder's or another's: requests
    name normalized identities only, so a key left unnormalized could be listed and not reached.
    Returns the log lines."""
    moved: list[str] = []
    for row in tx.workspace_rows():
        normalized = normalize_uri(row.workspace)
        if normalized == row.workspace:
            continue
        if identity_problem(normalized) is not None:  # no request could name it either way
            log.warning("a stored workspace is too long once normalized; left as it is")
            continue
        moved.append(_take(tx, row.workspace, normalized, "another spelling of its URI", now))
    return moved


def needs_opening(reading: Reading, identity: Identity) -> bool:
    """Whether ``open_identity`` has anything to do (else a session opens on a snapshot alone,
    without a write): a git folder to record, a symlink's history, or an old spelling."""
    if identity.git is not None and identity.folder is not None:
        return True
    if identity.link is not None and reading.conversation_ids(identity.link):
        return True
    return any(normalize_uri(row.workspace) != row.workspace for row in reading.workspace_rows())


def _open_identity_in(tx: Transaction, identity: Identity, machine: str, now: int) -> list[str]:
    """The steps run before a session's first request (see the module); returns what moved, as
    log lines."""
    moved = rekey_spellings(tx, now)
    target = identity.folder_identity
    if identity.link is not None and tx.conversation_ids(identity.link):
        moved.append(_take(tx, identity.link, target, "another name of the folder", now))
    git = identity.git
    if git is not None and identity.folder is not None:
        moved += _follow_git(tx, identity, git, machine, now)
    for line in moved:
        log.info("%s", line)
    return moved


def _follow_git(
    tx: Transaction, identity: Identity, git: GitFolder, machine: str, now: int
) -> list[str]:
    """A git folder's steps: take a moved folder's history, record the fingerprint, and in
    "repository" mode take the folder's history when the repository identity has none."""
    moved: list[str] = []
    target, folder = identity.folder_identity, identity.folder or ""
    remote = normalize_remote(git.remote) if git.remote else None
    current = Fingerprint(target, machine, folder, remote, git.inner_path, now)
    if not tx.conversation_ids(target):
        source = moved_from(
            current,
            tx.folder_records(),
            lambda workspace: bool(tx.conversation_ids(workspace)),
            os.path.isdir,
        )
        if source is not None:
            moved.append(
                _take(tx, source.workspace, target, f"the folder moved from {source.folder}", now)
            )
            tx.forget_folder(source.workspace, machine)
    tx.record_folder(current)
    if identity.workspace != target:
        if not tx.conversation_ids(identity.workspace) and tx.conversation_ids(target):
            moved.append(
                _take(tx, target, identity.workspace, "workspaceIdentity is repository", now)
            )
        tx.record_folder(
            FolderRow(identity.workspace, machine, folder, remote, git.inner_path, now)
        )
    return moved


def _move_in(tx: Transaction, source: str, target: str) -> int:
    """Re-key every conversation of ``source`` to ``target`` in this transaction; returns how
    many. A conversation id present under both is InvalidParams ``to`` and nothing moves. Both
    are normalized, as a session's identity is, and ``source`` names every spelling stored for
    it (an old unnormalized key that no session has opened since moves too)."""
    target = normalize_uri(target)
    wanted = normalize_uri(source)
    spellings = {source, wanted} | {
        row.workspace for row in tx.workspace_rows() if normalize_uri(row.workspace) == wanted
    }
    count = 0
    for spelling in sorted(spellings - {target}):
        count += len(tx.conversation_ids(spelling))
        clash = tx.move_workspace(spelling, target)
        if clash:
            # the stored id that clashes, not a value the client sent: naming it tells what to do
            first = sorted(clash)[0]
            raise InvalidParams(
                "to", f"conversation {first!r} exists in both workspaces ({len(clash)} in all)"
            )
    return count


@attrs.frozen
class Renamed:
    """A conversation of the workspace that re-keying renamed: its id there now, its id before,
    the workspace spelling it came from, and when (ms)."""

    conversation_id: str
    was: str
    from_: str
    at: int


@attrs.frozen
class WorkspaceInfo:
    workspace: str
    conversations: int
    last_activity: int | None
    folder: str | None
    folder_exists: bool | None
    repository: str | None
    #: the workspace's conversations renamed by re-keying, newest first (empty: none)
    renamed: tuple[Renamed, ...] = ()


def _list_in(reading: Reading, machine: str) -> list[WorkspaceInfo]:
    """Every workspace with conversations, newest activity first, with its recorded folder
    (this machine's record first; ``folderExists`` null for one recorded elsewhere) and its
    repository (normalized remote URL, or the one a ``repo:`` identity names), and its
    conversations that re-keying renamed."""
    records: dict[str, FolderRow] = {}
    for record in reading.folder_records():  # newest first
        known = records.get(record.workspace)
        if known is None or (known.machine != machine and record.machine == machine):
            records[record.workspace] = record
    renamed: dict[str, list[Renamed]] = {}
    for rename in reading.rename_records():  # newest first
        renamed.setdefault(rename.workspace, []).append(
            Renamed(rename.conversation, rename.was, rename.came_from, rename.renamed_at)
        )
    found: list[WorkspaceInfo] = []
    for row in reading.workspace_rows():
        recorded = records.get(row.workspace)
        folder = recorded.folder if recorded is not None else None
        exists = None
        if recorded is not None and recorded.machine == machine:
            exists = os.path.isdir(recorded.folder)
        repository = recorded.remote if recorded is not None else None
        if repository is None and row.workspace.startswith(REPOSITORY_PREFIX):
            repository = row.workspace[len(REPOSITORY_PREFIX) :].rsplit("/", 1)[0] or None
        found.append(
            WorkspaceInfo(
                row.workspace,
                row.conversations,
                row.last_activity,
                folder,
                exists,
                repository,
                tuple(renamed.get(row.workspace, ())),
            )
        )
    return found


def _recall_in(reading: Reading, identity: Identity, machine: str, now: int) -> str:
    """The workspace a read-only reader of ``identity`` (the MCP server) reads: the identity
    itself when it holds history, else the moved folder's history that ``open_identity`` would
    bring to it (the same rule, ``moved_from``), found without moving anything."""
    if reading.conversation_ids(identity.workspace):
        return identity.workspace
    git = identity.git
    if git is None or identity.folder is None or git.remote is None:
        return identity.workspace
    current = Fingerprint(
        identity.folder_identity,
        machine,
        identity.folder,
        normalize_remote(git.remote),
        git.inner_path,
        now,
    )
    source = moved_from(
        current,
        reading.folder_records(),
        lambda workspace: bool(reading.conversation_ids(workspace)),
        os.path.isdir,
    )
    return identity.workspace if source is None else source.workspace

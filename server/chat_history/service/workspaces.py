"""Identity that follows the project (protocol.md "Version 3" → Workspace identity): each step on
one store transaction, composing the pure rules (``policy.identity``) with what the folder is in
git (``gitfolder``). No SQL and no pygls here.

- ``resolve``: a session's identity from its raw workspace URI and ``workspaceIdentity``;
- ``open_identity``: run once per identity before the session's first request: re-keys
  conversations stored under an unnormalized spelling of any folder's URI, takes the history
  of a moved git folder (never from a folder that still exists), records the folder's
  fingerprint, and in ``"repository"`` mode takes the folder's history when the repository
  identity has none;
- ``move_workspace``, ``list_workspaces``: the methods of the same names and the CLI's
  ``move-workspace`` and ``workspaces``.
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
    moved_from,
    normalize_remote,
    normalize_uri,
    repository_identity,
)
from chat_history.service.gitfolder import GitFolder, git_folder
from chat_history.store import Reading, Transaction
from chat_history.store.workspaces import FolderRow

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
    #: the normalized folder URI (the identity in "folder" mode)
    folder_identity: str
    #: the local folder it names (None: not a local ``file:`` URI, or not there)
    folder: str | None = None
    git: GitFolder | None = None
    mode: str = "folder"


def resolve(raw: str, mode: str) -> Identity:
    """The identity of a session whose workspace is ``raw``, in ``mode`` ("folder" or
    "repository")."""
    normalized = normalize_uri(raw)
    folder = folder_of(normalized)
    if folder is None or not os.path.isdir(folder):
        return Identity(normalized, normalized, None, None, mode)
    git = git_folder(Path(folder))
    if mode == "repository" and git is not None and git.remote is not None:
        return Identity(
            repository_identity(git.remote, git.inner_path), normalized, folder, git, mode
        )
    return Identity(normalized, normalized, folder, git, mode)


def open_identity(tx: Transaction, identity: Identity, machine: str, now: int) -> list[str]:
    """The steps run before a session's first request (see the module); returns what moved, as
    log lines."""
    moved: list[str] = []
    target = identity.folder_identity

    def take(source: str, why: str, into: str) -> None:
        clash = tx.move_workspace(source, into)
        if clash:
            log.warning(
                "history of %s was not moved to %s (%s): conversation ids in both",
                source,
                into,
                why,
            )
        else:
            moved.append(f"history of {source} moved to {into} ({why})")

    # Every stored spelling, not only this folder's: requests name normalized identities only,
    # so an old spelling left for later could be reached by moveWorkspace alone.
    for row in tx.workspace_rows():
        normalized = normalize_uri(row.workspace)
        if normalized != row.workspace:
            take(row.workspace, "another spelling of the folder's URI", normalized)
    git = identity.git
    if git is not None and identity.folder is not None:
        current = Fingerprint(
            target,
            machine,
            identity.folder,
            normalize_remote(git.remote) if git.remote else None,
            git.inner_path,
            now,
        )
        if not tx.conversation_ids(target):
            source = moved_from(
                current,
                tx.folder_records(),
                lambda workspace: bool(tx.conversation_ids(workspace)),
                os.path.isdir,
            )
            if source is not None:
                take(source.workspace, f"the folder moved from {source.folder}", target)
                tx.forget_folder(source.workspace, machine)
        tx.record_folder(
            FolderRow(target, machine, identity.folder, current.remote, git.inner_path, now)
        )
        if identity.workspace != target:
            if not tx.conversation_ids(identity.workspace) and tx.conversation_ids(target):
                take(target, "workspaceIdentity is repository", identity.workspace)
            tx.record_folder(
                FolderRow(
                    identity.workspace,
                    machine,
                    identity.folder,
                    current.remote,
                    git.inner_path,
                    now,
                )
            )
    for line in moved:
        log.info("%s", line)
    return moved


def move_workspace(tx: Transaction, source: str, target: str) -> int:
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
            raise InvalidParams("to", f"{len(clash)} conversation id(s) exist in both workspaces")
    return count


@attrs.frozen
class WorkspaceInfo:
    workspace: str
    conversations: int
    last_activity: int | None
    folder: str | None
    folder_exists: bool | None
    repository: str | None


def list_workspaces(reading: Reading, machine: str) -> list[WorkspaceInfo]:
    """Every workspace with conversations, newest activity first, with its recorded folder
    (this machine's record first; ``folderExists`` null for one recorded elsewhere) and its
    repository (normalized remote URL, or the one a ``repo:`` identity names)."""
    records: dict[str, FolderRow] = {}
    for record in reading.folder_records():  # newest first
        known = records.get(record.workspace)
        if known is None or (known.machine != machine and record.machine == machine):
            records[record.workspace] = record
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
                row.workspace, row.conversations, row.last_activity, folder, exists, repository
            )
        )
    return found


def recall_workspace(reading: Reading, identity: Identity, machine: str, now: int) -> str:
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

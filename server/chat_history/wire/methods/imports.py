"""``chatHistory/importFrom`` (protocol.md "Version 4" → History from other tools): its params,
their checks and its handler over ``service.imports``. A dry run unless the client says
``dryRun: false``; it reads only the tool's own data folder (a ``path`` elsewhere, or a file
linking out of it, is -32602 ``path``); without ``path``, the sessions the tool recorded for the
session's folder. Each session goes into ``workspace`` when given, else the workspace of the
folder the tool recorded (the session's own folder being the session's identity), else — the
session records none — the session's own workspace. The answer's ``warnings`` name each file
that yielded nothing, with why (the CLI's ``--json`` prints the same answer)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from chat_history.errors import InvalidParams
from chat_history.policy.identity import folder_of, request_workspace
from chat_history.service.manager import ChatHistoryManager
from chat_history.wire import checks, protocol
from chat_history.wire.methods.base import Method

if TYPE_CHECKING:
    from chat_history.service import imports

# ``service.imports`` (every importer) loads at the first import, not with the methods' table
# that a window's first request loads (issue 45).

#: A path longer than this is no session file of any tool.
MAX_PATH_CHARS = 4_096


@attrs.define
class ImportFromParams:
    """``chatHistory/importFrom``: which tool, where (default: its folder for this session's
    workspace), into which workspace, and whether only to preview (the default)."""

    source: str = attrs.field(kw_only=True)
    path: str | None = None
    workspace: str | None = None
    dry_run: bool = True


def source_root(
    params: ImportFromParams, session_folder: str
) -> tuple[str, Path, Path, str | None]:
    """(source, its data folder, the root to read, the project folder to keep), checked:
    InvalidParams ``source`` or ``path``."""
    from chat_history.service import imports

    source = imports.check_source(params.source)
    home = imports.data_folder(source)
    if params.path is not None:
        raw = checks.check_id(params.path, "path", MAX_PATH_CHARS)
        if "\0" in raw:  # before any path operation: each would raise ValueError
            raise InvalidParams("path", "must not contain NUL")
        try:
            path = Path(raw).expanduser()
        except RuntimeError:  # ~name of no user of this machine
            raise InvalidParams("path", "must be an absolute path") from None
        if not os.path.isabs(path):
            raise InvalidParams("path", "must be an absolute path")
        return source, home, imports.within(path, home), None
    folder = folder_of(session_folder)
    if folder is None:
        raise InvalidParams("path", "required when the session's workspace is not a local folder")
    return source, home, home, folder


def import_from(m: ChatHistoryManager, ls: Any, p: ImportFromParams) -> Any:
    """``chatHistory/importFrom``: what the import does (or, in a dry run, would do), one entry
    per session, and the files that yielded none: ``{"conversations": [...], "warnings":
    [...]}``. The current folder is the session's own."""
    from chat_history.service import imports, workspaces

    session = ls.session_workspace
    workspace = session.named(p.workspace) if p.workspace is not None else None
    source, home, root, folder = source_root(p, session.folder)
    unread: list[imports.Unread] = []
    here = folder_of(session.folder) if session.folder else None
    real_folder = workspaces.real_identity(session.folder)  # recorded folders are real paths
    planned = imports.import_sessions(
        m,
        imports.sessions_of(source, root, folder, confine=home, here=here, unread=unread),
        workspace,
        dry_run=p.dry_run,
        place=lambda recorded: request_workspace(recorded, session.identity, real_folder),
        default=session.identity,
    )
    return wire_import(planned, unread)


def wire_import(planned: list[imports.PlannedImport], unread: list[imports.Unread]) -> Any:
    """The answer of ``chatHistory/importFrom`` (and of ``import --from --json``)."""
    return {"conversations": protocol.wire(planned), "warnings": protocol.wire(unread)}


METHODS = (Method("chatHistory/importFrom", ImportFromParams, import_from, inline=False),)

"""The LSP lifecycle's handlers: ``initialize`` (the manager on the storage folder, the workspace
identity, the first settings), ``initialized`` (the settings pull, the change watch),
``workspace/didChangeConfiguration`` and ``shutdown`` (started requests answered first)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsprotocol import types

from chat_history.errors import InvalidParams
from chat_history.paths import default_storage_folder
from chat_history.policy.identity import checked_session_workspace, normalize_uri
from chat_history.service import watch
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import SECTION
from chat_history.store import database_option, purge_option
from chat_history.wire import protocol
from chat_history.wire.codes import to_jsonrpc
from chat_history.wire.session import ChatHistoryServer
from chat_history.wire.transport import memory


def _storage_folder(ls: ChatHistoryServer, options: protocol.InitOptions) -> Path:
    path = options.storage_path
    if isinstance(path, str) and path:
        return Path(path).expanduser()
    if path is not None:
        ls.tell(
            types.MessageType.Warning,
            "initializationOptions.storagePath must be a non-empty string; ignored",
        )
    return default_storage_folder()


def _workspace_identity(params: types.InitializeParams, options: protocol.InitOptions) -> str:
    """The workspace ``initialize`` names; InvalidParams naming its field when it is too long."""
    explicit = options.workspace
    if isinstance(explicit, str) and explicit:
        return checked_session_workspace(explicit, "initialization_options.workspace")
    if params.workspace_folders:
        return checked_session_workspace(
            params.workspace_folders[0].uri, "workspace_folders[0].uri"
        )
    if params.root_uri:
        return checked_session_workspace(params.root_uri, "root_uri")
    return checked_session_workspace(params.root_path or "default", "root_path")


def initialize(ls: ChatHistoryServer, params: types.InitializeParams) -> None:
    """Open the manager on the storage folder, fix the workspace identity and the first settings;
    with nothing known yet, requests wait for the pull that follows."""
    ls._loop = asyncio.get_running_loop()
    options = protocol.init_options(params.initialization_options)
    try:
        ls.raw_workspace = _workspace_identity(params, options)
    except InvalidParams as exc:
        raise to_jsonrpc(exc) from None
    ls.workspace_identity = ls.folder_identity = normalize_uri(ls.raw_workspace)
    mode = options.workspace_identity
    if mode is not None and mode not in ("folder", "repository"):
        ls.tell(
            types.MessageType.Warning,
            'initializationOptions.workspaceIdentity must be "folder" or "repository"; ignored',
        )
        mode = None
    ls.identity_option = mode
    folder = _storage_folder(ls, options)
    ls.storage_folder = folder
    try:
        url = database_option(options.engine())
        purge = purge_option(options.engine())
    except InvalidParams as exc:
        raise to_jsonrpc(exc) from None
    ls.manager = ChatHistoryManager.in_folder(
        folder, notify=ls.send_trimmed, database=url, purge_seconds=purge
    )
    memory.on_rest(ls.manager.rest, ls.requests)
    ls.watch = watch.ChangeWatch(ls.manager.store, lambda: ls.workspace_identity)
    raw = options.settings
    ls.barrier = ls._new_barrier(ls.checked_settings(raw))
    if raw is None and ls.pulls_configuration:
        # Nothing known yet: requests wait for the pull that follows `initialized`.
        ls.barrier.raise_()
        asyncio.get_running_loop().call_later(ls.barrier.bound, ls._check_late)
    where = f"storage folder {folder}" if url is None else "a PostgreSQL database"
    ls.tell(types.MessageType.Info, f"{where}, workspace {ls.workspace_identity}")


def initialized(ls: ChatHistoryServer, params: types.InitializedParams) -> None:
    """Pull the settings when the client can answer ``workspace/configuration``."""
    if ls.pulls_configuration:
        ls.start_pull()
    if ls.watch is not None and ls._watching is None:
        # The first look is the baseline: changes from then on are told.
        ls.requests.submit(ls.send_changes, poll=True)
        ls._watching = asyncio.get_running_loop().create_task(ls.watch_idle())


def did_change_configuration(
    ls: ChatHistoryServer, params: types.DidChangeConfigurationParams
) -> None:
    # Handled inline (not a task), so a request that arrives after it is sure to wait for it.
    """New settings: pushed ones apply to requests that arrive from now on; otherwise they are
    pulled again."""
    settings = params.settings
    if isinstance(settings, dict) and SECTION in settings:
        if settings[SECTION] is not None:
            ls.barrier.push(ls.checked_settings(settings[SECTION]))
    elif ls.pulls_configuration:
        ls.start_pull()


async def shutdown(ls: ChatHistoryServer, *args: Any) -> None:
    # A request that started is finished and answered before `shutdown` is; the others never run.
    """Answer ``shutdown`` after every started request is answered; queued ones never run."""
    ls.closing.set()
    ls.barrier.wake()
    # Each request's answer is written by a callback pygls added before this one's: awaiting
    # the request tasks means their answers are out before the answer to `shutdown`.
    await asyncio.gather(*ls.in_flight, return_exceptions=True)
    await asyncio.get_running_loop().run_in_executor(None, ls.release_replies)

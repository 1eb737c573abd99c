"""The LSP lifecycle's handlers: ``initialize`` (the manager on the storage folder, the workspace
identity, the first settings), ``initialized`` (the settings pull, the change watch),
``workspace/didChangeConfiguration`` and ``shutdown`` (started requests answered first). The
first three run on the thread that reads the messages, in their order, on the params as sent
(no lsprotocol: they are served before pygls has loaded); ``shutdown`` is pygls's."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import attrs

from chat_history import __version__
from chat_history.errors import InvalidParams
from chat_history.paths import default_storage_folder
from chat_history.policy.identity import checked_session_workspace, normalize_uri
from chat_history.service import watch
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import PROVIDER_KINDS, SECTION
from chat_history.store import database_option, purge_option
from chat_history.wire import protocol
from chat_history.wire.codes import INVALID_REQUEST, RpcError, to_jsonrpc
from chat_history.wire.session import PROTOCOL_VERSION, ChatHistoryServer, MessageType
from chat_history.wire.transport import memory

log = logging.getLogger("chat_history")


@attrs.define
class WorkspaceFolderIn:
    """One of ``initialize``'s ``workspaceFolders``."""

    uri: str
    name: str


@attrs.define
class InitializeIn:
    """``initialize``'s params: the members LSP defines, each checked for its JSON type (the
    server reads ``capabilities.workspace.configuration`` of the client's capabilities)."""

    capabilities: dict[str, Any]
    process_id: int | None = None
    client_info: dict[str, Any] | None = None
    locale: str | None = None
    root_path: str | None = None
    root_uri: str | None = None
    initialization_options: Any = None
    trace: str | None = None
    work_done_token: Any = None
    workspace_folders: list[WorkspaceFolderIn] | None = None


def initialize_params(raw: Any) -> InitializeIn:
    """The params of ``initialize`` structured; RpcError -32602 naming the field that does not
    fit, as a request whose params do not fit their type is answered."""
    try:
        return protocol.structure(raw, InitializeIn)
    except InvalidParams as exc:
        field = protocol.wire_field(exc.field)
        raise RpcError(-32602, f"Invalid params: {field}: {exc.why}", {"field": field}) from None


def _storage_folder(ls: ChatHistoryServer, options: protocol.InitOptions) -> Path:
    path = options.storage_path
    if isinstance(path, str) and path:
        return Path(path).expanduser()
    if path is not None:
        ls.tell(
            MessageType.Warning,
            "initializationOptions.storagePath must be a non-empty string; ignored",
        )
    return default_storage_folder()


def _workspace_identity(params: InitializeIn, options: protocol.InitOptions) -> str:
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


def _pulls_configuration(capabilities: dict[str, Any]) -> bool:
    workspace = capabilities.get("workspace")
    return isinstance(workspace, dict) and bool(workspace.get("configuration"))


def initialize(ls: ChatHistoryServer, raw: Any) -> dict[str, Any]:
    """Open the manager on the storage folder, fix the workspace identity and the first settings
    (with nothing known yet, requests wait for the pull that follows); the answer."""
    params = initialize_params(raw)
    if ls.manager is not None:
        # LSP allows one initialize; a second must not swap the storage folder mid-session.
        raise RpcError(INVALID_REQUEST, "initialize may only be sent once per session")
    options = protocol.init_options(params.initialization_options)
    try:
        ls.raw_workspace = _workspace_identity(params, options)
    except InvalidParams as exc:
        raise to_jsonrpc(exc) from None
    ls.workspace_identity = ls.folder_identity = normalize_uri(ls.raw_workspace)
    mode = options.workspace_identity
    if mode is not None and mode not in ("folder", "repository"):
        ls.tell(
            MessageType.Warning,
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
    ls.pulls_configuration = _pulls_configuration(params.capabilities)
    memory.on_rest(ls.manager.rest, ls.requests)
    ls.watch = watch.ChangeWatch(ls.manager.store, lambda: ls.workspace_identity)
    settings = options.settings
    ls.barrier = ls._new_barrier(ls.checked_settings(settings))
    if settings is None and ls.pulls_configuration:
        # Nothing known yet: requests wait for the pull that follows `initialized`.
        ls.barrier.raise_()
        ls.soon(ls.check_late_later)
    where = f"storage folder {folder}" if url is None else "a PostgreSQL database"
    ls.tell(MessageType.Info, f"{where}, workspace {ls.workspace_identity}")
    return protocol.initialize_result(PROTOCOL_VERSION, PROVIDER_KINDS, __version__)


def initialized(ls: ChatHistoryServer, raw: Any) -> None:
    """Pull the settings when the client can answer ``workspace/configuration``; start the
    change watch."""
    if ls.pulls_configuration:
        ls.start_pull()
    if ls.watch is not None and ls._watching is None:
        # The first look is the baseline: changes from then on are told.
        ls.requests.submit(ls.send_changes, poll=True)
        ls.soon(_watch, ls)


def _watch(ls: ChatHistoryServer) -> None:
    import asyncio

    if ls._watching is None:
        ls._watching = asyncio.get_running_loop().create_task(ls.watch_idle())


def did_change_configuration(ls: ChatHistoryServer, raw: Any) -> None:
    # Handled where it is read, so a request that arrives after it is sure to wait for it.
    """New settings: pushed ones apply to requests that arrive from now on; otherwise they are
    pulled again."""
    if not isinstance(raw, dict) or "settings" not in raw:
        log.warning("dropped a notification: Invalid params: settings: is required")
        return
    settings = raw["settings"]
    if isinstance(settings, dict) and SECTION in settings:
        if settings[SECTION] is not None:
            ls.barrier.push(ls.checked_settings(settings[SECTION]))
    elif ls.pulls_configuration:
        ls.start_pull()


async def shutdown(ls: ChatHistoryServer, *args: Any) -> None:
    # A request that started is finished and answered before `shutdown` is; the others never run.
    """Answer ``shutdown`` after every started request is answered; queued ones never run."""
    import asyncio

    ls.closing.set()
    ls.barrier.wake()
    await asyncio.gather(*(asyncio.wrap_future(f) for f in list(ls.in_flight)))
    await asyncio.get_running_loop().run_in_executor(None, ls.release_replies)

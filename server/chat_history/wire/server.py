"""The pygls language server: lifecycle, settings pull, and one-line handlers that translate the
wire to ChatHistoryManager calls. Domain errors become JSON-RPC errors here, in one place."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    lsp_method,
)

from chat_history import __version__
from chat_history.errors import (
    ContextOverflow,
    ConversationChanged,
    InvalidParams,
    StorageError,
    quoted,
)
from chat_history.model import Key, Trimmed
from chat_history.paths import default_storage_folder
from chat_history.policy.identity import normalize_uri
from chat_history.service import watch, workspaces
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import (
    PROVIDER_KINDS,
    SECTION,
    Settings,
    default_settings,
    load_settings,
)
from chat_history.store import database_option, purge_option
from chat_history.wire import frames, framing, lsp_adapter, protocol
from chat_history.wire.barrier import BOUND_SECONDS, SettingsBarrier
from chat_history.wire.methods.imports import METHODS

log = logging.getLogger("chat_history")
PROTOCOL_VERSION = 3
TRIMMED = "chatHistory/trimmed"
CHANGED = "chatHistory/changed"
EXPECTED_CODES = protocol.EXPECTED_CODES


class ContextOverflowError(JsonRpcException):
    """JSON-RPC error 1001: the conversation cannot fit the context budget (protocol.md, Errors)."""

    CODE = 1001
    MESSAGE = "Context overflow"


class StorageFailure(JsonRpcException):
    """JSON-RPC error 1002: the database failed; the message says why (protocol.md, Errors)."""

    CODE = 1002
    MESSAGE = "Storage error"


class ConversationChangedError(JsonRpcException):
    CODE = 1003
    MESSAGE = "Conversation changed"


def to_jsonrpc(exc: Exception) -> JsonRpcException:
    """The one mapping of domain errors to JSON-RPC error codes (protocol.md, Errors)."""
    if not isinstance(exc, InvalidParams | ContextOverflow | StorageError | ConversationChanged):
        raise exc
    message, data = protocol.wire_error(exc)
    if isinstance(exc, InvalidParams):
        return JsonRpcInvalidParams(message=message, data=data)
    if isinstance(exc, ContextOverflow):
        return ContextOverflowError(message=message, data=data)
    if isinstance(exc, ConversationChanged):
        return ConversationChangedError(message=message, data=data)
    return StorageFailure(message=message, data=data)


#: the converter pygls uses (tests share it)
_converter = lsp_adapter.converter


class ChatHistoryProtocol(lsp_adapter.AdaptedProtocol):
    """pygls's protocol with this server's lifecycle: one initialize per session, the capabilities
    it really has, document traffic dropped."""

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        """pygls's initialize, refused when repeated, answering with the chatHistory capabilities
        only."""
        if getattr(self.server, "manager", None) is not None:
            # LSP allows one initialize; a second must not swap the storage folder mid-session.
            raise JsonRpcInvalidRequest(message="initialize may only be sent once per session")
        result = yield from super().lsp_initialize(params)
        # Only what this server has: pygls would advertise text document sync, commands and
        # workspace folder notifications from its defaults, and editors would send that traffic.
        self.server_capabilities = result.capabilities = types.ServerCapabilities(
            experimental=protocol.capabilities(PROTOCOL_VERSION, PROVIDER_KINDS)
        )
        return result

    # Document traffic is not advertised; a client that sends it anyway is not kept in memory.
    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: Any) -> None:
        """Dropped: no document is kept."""
        return None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: Any) -> None:
        """Dropped: no document is kept."""
        return None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: Any) -> None:
        """Dropped: no document is kept."""
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def lsp_notebook_document__did_open(self, params: Any) -> None:
        """Dropped: no notebook is kept."""
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def lsp_notebook_document__did_change(self, params: Any) -> None:
        """Dropped: no notebook is kept."""
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def lsp_notebook_document__did_close(self, params: Any) -> None:
        """Dropped: no notebook is kept."""
        return None


#: What the request thread returns for a request cancelled (or refused by ``shutdown``) before
#: it started: it did nothing. A value, not an exception: at exit nobody may be left to read it.
_NOT_RUN = object()


class Job:
    """One request on the request thread: queued, then started or cancelled, never both. A
    started request runs to the end and is answered with its result (protocol: a request is
    done or not done at all, so a client never retries a write that was committed)."""

    def __init__(self, ticket: int, closing: threading.Event) -> None:
        self.ticket = ticket
        self._closing = closing
        self._state = "queued"
        self._lock = threading.Lock()

    def start(self) -> bool:
        """Move a queued request to started, unless it was cancelled or the server is closing;
        returns whether it runs."""
        with self._lock:
            if self._state == "queued" and not self._closing.is_set():
                self._state = "started"
            return self._state == "started"

    def cancel(self) -> bool:
        """True when the request will never run; False when it already started."""
        with self._lock:
            if self._state == "started":
                return False
            self._state = "cancelled"
            return True

    def stopped(self) -> bool:
        """Whether the request will not run: cancelled, or the server is closing (a wait for
        settings ends early)."""
        return self._state == "cancelled" or self._closing.is_set()


class ChatHistoryServer(LanguageServer):
    """The session: its manager (made by ``initialize``), the one request thread, the settings
    barrier, the workspace identity and what it tells the editor."""

    def __init__(self) -> None:
        super().__init__(
            "chat-history-server",
            __version__,
            protocol_cls=ChatHistoryProtocol,
            converter_factory=_converter,
            max_workers=5,
        )
        self.manager: ChatHistoryManager | None = None
        # One thread runs the requests, in the order they arrived: two appends a client sends
        # without waiting must be stored in that order (pygls's pool would race them for the
        # manager's lock; the manager serialises them anyway, so no parallelism is lost).
        self.requests = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chat-history")
        #: set by ``shutdown``: requests that have not started never will
        self.closing = threading.Event()
        #: the tasks of requests not yet answered (``shutdown`` waits for them)
        self.in_flight: set[asyncio.Task[Any]] = set()
        self.barrier = self._new_barrier(default_settings())
        self.workspace_identity = "default"
        #: the normalized folder URI the identity came from (the identity in "folder" mode)
        self.folder_identity = "default"
        #: the workspace as the client named it, and the identity mode initializationOptions
        #: fixed (None: the settings' ``workspaceIdentity``); the mode opened so far
        self.raw_workspace = "default"
        self.identity_option: str | None = None
        self._identity_mode: str | None = None
        self._identity_lock = threading.Lock()
        #: the storage folder, where this machine's id is kept (made when first needed)
        self.storage_folder: Path | None = None
        self._machine: str | None = None
        self.exit_code = 0
        self._reported: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pulls: set[asyncio.Task[None]] = set()
        #: the stdout writer ``start_io`` gave pygls (None until then)
        self._stdout: frames.FrameWriter | None = None
        #: what other processes change (None until ``initialize``)
        self.watch: watch.ChangeWatch | None = None
        self._watching: asyncio.Task[None] | None = None

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Error responses already reach the client; expected ones need no log line at all.
        """Log an unexpected server error; expected ones (the protocol's own codes) are already in
        their answers."""
        if isinstance(error, JsonRpcException) and error.code in EXPECTED_CODES:
            return
        log.error("server error: %s", error)

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """pygls's stdio server with ``framing.serve`` as its loop: every request that can be
        answered is answered, whatever arrives on stdin (see framing.py)."""
        stop = lsp_adapter.new_stop_event(self)
        self._stdout = frames.FrameWriter(stdout or sys.stdout.buffer)
        self.protocol.set_writer(self._stdout)
        reader = framing.StdinReader(stdin or sys.stdin.buffer, self.thread_pool)
        try:
            asyncio.run(framing.serve(reader, self.protocol, stop))
        except BrokenPipeError:
            log.error("the client closed the connection; shutting down")
        except KeyboardInterrupt:
            pass
        except SystemExit as exc:  # `exit`: 0 after `shutdown`, else 1 (LSP)
            self.exit_code = exc.code if isinstance(exc.code, int) else 1
        finally:
            self.barrier.abandon()  # requests waiting for settings must not hold up the exit
            self.shutdown()  # type: ignore[no-untyped-call]

    # -- telling the editor ----------------------------------------------------------------

    def tell(self, kind: types.MessageType, message: str, *, show: bool = False) -> None:
        """A notable event: to stderr, to ``window/logMessage``, and with ``show`` to
        ``window/showMessage`` too. Safe from any thread (sent from the event loop)."""
        log.log(_LOG_LEVELS.get(kind, logging.INFO), "%s", message)
        text = f"chat-history-server: {message}"

        def send() -> None:
            self.window_log_message(types.LogMessageParams(type=kind, message=text))
            if show:
                self.window_show_message(types.ShowMessageParams(type=kind, message=text))

        loop = self._loop
        if loop is None or _running_loop() is loop:
            send()
        elif not loop.is_closed():  # after the loop ended there is no client to tell
            loop.call_soon_threadsafe(send)

    # -- settings ----------------------------------------------------------------------------

    def _new_barrier(self, settings: Settings) -> SettingsBarrier:
        # The bound is fixed by the protocol; tests of its consequences may shorten it.
        try:
            bound = float(os.environ.get("CHAT_HISTORY_SETTINGS_WAIT", BOUND_SECONDS))
        except ValueError:
            bound = BOUND_SECONDS
        return SettingsBarrier(settings, bound=bound, on_expired=self._settings_late)

    def _settings_late(self) -> None:
        self.tell(
            types.MessageType.Warning,
            f"the editor has not answered workspace/configuration within "
            f"{self.barrier.bound:g} s; requests run with the settings known so far, and stored "
            "history is not pruned until the settings arrive.",
            show=True,
        )

    def checked_settings(self, raw: Any) -> Settings:
        """Settings from a ``chatHistory`` section; each bad value is reported once."""
        loaded = load_settings(raw)
        for problem in loaded.problems:
            message = problem.message()
            if message not in self._reported:
                self._reported.add(message)
                self.tell(types.MessageType.Warning, message, show=True)
        if loaded.unknown_keys:
            self.tell(
                types.MessageType.Warning,
                "ignoring unknown settings: " + ", ".join(loaded.unknown_keys),
            )
        return loaded.settings

    @property
    def pulls_configuration(self) -> bool:
        """Whether the client answers ``workspace/configuration`` (the settings are pulled, not only
        pushed)."""
        caps = self.client_capabilities.workspace
        return caps is not None and bool(caps.configuration)

    def start_pull(self) -> None:
        """Requests that arrive from now on wait for the answer (protocol.md, the barrier)."""
        pull = self.barrier.raise_()
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._pull(pull))
        self._pulls.add(task)  # a task nobody references may be collected mid-pull
        task.add_done_callback(self._pulls.discard)
        loop.call_later(self.barrier.bound, self._check_late)

    def _check_late(self) -> None:
        if self.barrier.expire_due():
            self._settings_late()

    async def _pull(self, pull: int) -> None:
        late = self.barrier.held
        try:
            answer = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            )
        except Exception as exc:  # an error answer (or one unreadable): nothing to tell
            self.tell(
                types.MessageType.Warning,
                f"workspace/configuration failed ({exc}); keeping the current settings",
            )
            answer = None
        value = answer[0] if isinstance(answer, list | tuple) and answer else None
        if not (value is None or isinstance(value, dict) or value == []):
            # Not a settings section (a string answer arrives as a list of its characters):
            # an answer all the same, which keeps the current settings.
            self.tell(
                types.MessageType.Warning,
                "workspace/configuration answered something that could not be read as "
                f"settings ({quoted(value)}); keeping the current settings",
            )
            value = None
        self.barrier.answer(pull, self.checked_settings(value) if value is not None else None)
        if late and not self.barrier.held:
            self.tell(types.MessageType.Info, "settings arrived; stored-history retention resumes")

    def send_trimmed(self, key: Key, events: Sequence[Trimmed]) -> None:
        """One request's ``chatHistory/trimmed`` notifications, written to stdout in one write
        (a prepare of a long conversation sends two, and every write wakes the client)."""
        params = [protocol.wire_trimmed(key.workspace, key.conversation, e) for e in events]
        lsp_adapter.notify_all(self.protocol, self._stdout, TRIMMED, params)

    # -- chatHistory/changed ------------------------------------------------------------------

    def send_changes(self, *, poll: bool) -> None:
        """Tell the client what other processes changed in its workspace (request thread only):
        with ``poll`` after looking at the store, else what the last writes found. A store that
        cannot be read now is looked at again later (nothing is lost)."""
        watcher = self.watch
        if watcher is None:
            return
        try:
            found = watcher.poll() if poll else watcher.take()
        except StorageError as exc:
            log.debug("change watch: %s", exc)
            return
        if found:
            params = [protocol.wire_changed(self.workspace_identity, change) for change in found]
            lsp_adapter.notify_all(self.protocol, self._stdout, CHANGED, params)

    async def watch_idle(self) -> None:
        """Look for others' changes every ``watch.IDLE_SECONDS`` on the request thread (queued
        behind requests, so never beside one), until ``shutdown``."""
        loop = asyncio.get_running_loop()
        while not self.closing.is_set():
            await asyncio.sleep(watch.IDLE_SECONDS)
            try:
                await loop.run_in_executor(self.requests, lambda: self.send_changes(poll=True))
            except RuntimeError:  # the request thread is gone: exiting
                return

    @property
    def machine(self) -> str:
        """This machine's id (kept in the storage folder): read or made on first use only, so
        a session that never needs it leaves the folder as it found it."""
        if self._machine is None:
            self._machine = workspaces.machine_id(self.storage_folder or default_storage_folder())
        return self._machine

    def open_identity(self, manager: ChatHistoryManager, settings: Settings) -> None:
        """Before the first request under an identity mode (``workspaceIdentity`` from
        initializationOptions, else the settings in force): the session's identity, and the
        steps that bring its history along (workspaces.open_identity). A failure (1002) fails
        this request and is tried again by the next."""
        mode = self.identity_option or settings.workspace_identity
        if mode == self._identity_mode:
            return
        with self._identity_lock:
            if mode == self._identity_mode:
                return
            identity = workspaces.resolve(self.raw_workspace, mode)
            self.workspace_identity = identity.workspace
            self.folder_identity = identity.folder_identity
            if identity.workspace.startswith(("file:", "repo:")):
                machine = self.machine if identity.git is not None else ""
                for line in manager.open_identity(identity, machine):
                    self.tell(types.MessageType.Info, line)
            self._identity_mode = mode

    def key(self, params: protocol.KeyParams) -> Key:
        """The request's conversation key, checked; the session's workspace when it names none."""
        workspace, conversation = protocol.check_key(params, self.session_workspace)
        return Key(workspace, conversation)

    @property
    def session_workspace(self) -> protocol.SessionWorkspace:
        """What a request's ``workspace`` is read against (protocol.SessionWorkspace)."""
        return protocol.SessionWorkspace(self.workspace_identity, self.folder_identity)


_LOG_LEVELS = {
    types.MessageType.Error: logging.ERROR,
    types.MessageType.Warning: logging.WARNING,
    types.MessageType.Info: logging.INFO,
    types.MessageType.Log: logging.DEBUG,
}


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _storage_folder(ls: ChatHistoryServer, options: dict[str, Any]) -> Path:
    path = options.get("storagePath")
    if isinstance(path, str) and path:
        return Path(path).expanduser()
    if path is not None:
        ls.tell(
            types.MessageType.Warning,
            "initializationOptions.storagePath must be a non-empty string; ignored",
        )
    return default_storage_folder()


def _workspace_identity(params: types.InitializeParams, options: dict[str, Any]) -> str:
    explicit = options.get("workspace")
    if isinstance(explicit, str) and explicit:
        return explicit
    if params.workspace_folders:
        return params.workspace_folders[0].uri
    return params.root_uri or params.root_path or "default"


def initialize(ls: ChatHistoryServer, params: types.InitializeParams) -> None:
    """Open the manager on the storage folder, fix the workspace identity and the first settings;
    with nothing known yet, requests wait for the pull that follows."""
    ls._loop = asyncio.get_running_loop()
    options = params.initialization_options
    if not isinstance(options, dict):
        options = {}
    ls.raw_workspace = _workspace_identity(params, options)
    ls.workspace_identity = ls.folder_identity = normalize_uri(ls.raw_workspace)
    mode = options.get("workspaceIdentity")
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
        url = database_option(options)
        purge = purge_option(options)
    except InvalidParams as exc:
        raise to_jsonrpc(exc) from None
    ls.manager = ChatHistoryManager.in_folder(
        folder, notify=ls.send_trimmed, database=url, purge_seconds=purge
    )
    ls.watch = watch.ChangeWatch(ls.manager.store, lambda: ls.workspace_identity)
    raw = options.get("settings")
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


Handler = Callable[[ChatHistoryManager, ChatHistoryServer, Any], Any]


def request(ls: ChatHistoryServer, method: str, params_cls: type, body: Handler) -> None:
    """Register a handler run on the request thread: settings barrier, initialize gate, params
    structuring, error mapping."""

    @ls.feature(method)
    async def handler(ls: ChatHistoryServer, raw: Any) -> Any:
        # Ticket and submission before the first await: in the order the requests arrived.
        job = Job(ls.barrier.ticket(), ls.closing)
        done = asyncio.wrap_future(ls.requests.submit(run, ls, job, raw))
        task = asyncio.current_task()
        if task is not None:
            ls.in_flight.add(task)
            task.add_done_callback(ls.in_flight.discard)
        while True:
            try:
                result = await asyncio.shield(done)
            except asyncio.CancelledError:
                if job.cancel():
                    ls.barrier.wake()
                    raise
                continue  # started: it finishes, and its result is the answer
            if result is _NOT_RUN:
                raise asyncio.CancelledError
            return result

    def run(ls: ChatHistoryServer, job: Job, raw: Any) -> Any:
        settings = ls.barrier.settings_for(job.ticket, job.stopped)
        if not job.start():
            return _NOT_RUN
        manager = ls.manager
        if manager is None:
            raise JsonRpcServerNotInitialized(
                message=f"{method}: the server is not initialized (send initialize first)"
            )
        manager.settings = settings
        ls.send_changes(poll=True)  # what others changed goes before this answer
        try:
            params: Any = protocol.structure(raw, params_cls)
            ls.open_identity(manager, settings)
            return body(manager, ls, params)
        except (InvalidParams, ContextOverflow, StorageError, ConversationChanged) as exc:
            raise to_jsonrpc(exc) from None
        finally:
            ls.send_changes(poll=False)  # what this request's writes found others did


# -- the custom methods: wire params -> one manager call -> wire result (protocol.py translates)


def append(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.AppendParams) -> Any:
    """``chatHistory/append``: store the messages (retention runs in the same write)."""
    return protocol.wire_append(m.append(ls.key(p), protocol.to_messages(p)))


def get(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.GetParams) -> Any:
    """``chatHistory/get``: the history after retention; the newest ``limit`` rows when paged."""
    return protocol.wire_get(m.get(ls.key(p), *protocol.get_args(p)))


def format_(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.FormatParams) -> Any:
    """``chatHistory/format``: the whole history as one provider's request body."""
    return protocol.wire(m.format(ls.key(p), *protocol.format_args(p)))


def prepare(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.PrepareParams) -> Any:
    """``chatHistory/prepare``: the history fitted to the model's window, as a provider request."""
    return protocol.wire(m.prepare(ls.key(p), protocol.prepare_options(p)))


def save_summary(
    m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.SaveSummaryParams
) -> Any:
    """``chatHistory/saveSummary``: store the conversation's summary, replacing any."""
    return protocol.wire(m.save_summary(ls.key(p), *protocol.summary_args(p)))


def get_summary(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.KeyParams) -> Any:
    """``chatHistory/getSummary``: the summary, or null."""
    return protocol.wire_summary(m.get_summary(ls.key(p)))


def clear(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.KeyParams) -> Any:
    """``chatHistory/clear``: delete the conversation whole: rows, summary, title, metadata."""
    return protocol.wire_cleared(m.clear(ls.key(p)))


def list_page(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.ListParams) -> Any:
    """``chatHistory/listConversations``: a page of the listing (version 1's call, without paging,
    is the whole listing in one page)."""
    return protocol.wire_page(
        m.list_conversations_page(*protocol.list_args(p, ls.session_workspace))
    )


# -- version 2: conversations and edits


def update_conversation(
    m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.UpdateConversationParams
) -> Any:
    """``chatHistory/updateConversation``: set the title and/or replace the metadata."""
    return protocol.wire(m.update_conversation(ls.key(p), protocol.update_args(p)))


def truncate(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.TruncateParams) -> Any:
    """``chatHistory/truncate``: delete row ``fromId`` and every later row."""
    from_id = protocol.row_id(p.from_id, "fromId")
    return protocol.wire(m.truncate(ls.key(p), from_id, protocol.expected_last(p)))


def delete_turns(
    m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.DeleteTurnsParams
) -> Any:
    """``chatHistory/deleteTurns``: delete every row of the named turns."""
    turns = protocol.turns_arg(p)
    return protocol.wire(m.delete_turns(ls.key(p), turns, protocol.expected_last(p)))


def edit_message(
    m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.EditMessageParams
) -> Any:
    """``chatHistory/editMessage``: replace a row's content, attachments or metadata in place."""
    row, edit = protocol.edit_args(p)
    return protocol.wire_message(m.edit_message(ls.key(p), row, edit, protocol.expected_last(p)))


def fork(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.ForkParams) -> Any:
    """``chatHistory/fork``: into ``newWorkspace`` when given, else the source's workspace."""
    key = ls.key(p)
    workspace, target, through = protocol.fork_args(p, key.workspace, ls.session_workspace)
    return protocol.wire(m.fork(key, Key(workspace, target), through))


def delete_summary(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.KeyParams) -> Any:
    """``chatHistory/deleteSummary``: delete the summary; whether there was one."""
    return protocol.wire_deleted(m.delete_summary(ls.key(p)))


def search(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.SearchParams) -> Any:
    """``chatHistory/search``: full-text search of one conversation, a workspace or all of them."""
    return protocol.wire_search(m.search(*protocol.search_args(p, ls.session_workspace)))


def report_usage(
    m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.ReportUsageParams
) -> Any:
    """``chatHistory/reportUsage``: a provider's reported usage calibrates later estimates."""
    return protocol.wire(m.report_usage(*protocol.usage_args(p)))


def move_workspace(
    m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.MoveWorkspaceParams
) -> Any:
    return {"conversations": m.move_workspace(*protocol.move_args(p))}


def list_workspaces(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.NoParams) -> Any:
    return {"workspaces": protocol.wire(m.workspace_infos(ls.machine))}


#: Every custom method: its params type and its handler.
REQUESTS: dict[str, tuple[type, Handler]] = {
    "chatHistory/append": (protocol.AppendParams, append),
    "chatHistory/get": (protocol.GetParams, get),
    "chatHistory/format": (protocol.FormatParams, format_),
    "chatHistory/prepare": (protocol.PrepareParams, prepare),
    "chatHistory/saveSummary": (protocol.SaveSummaryParams, save_summary),
    "chatHistory/getSummary": (protocol.KeyParams, get_summary),
    "chatHistory/search": (protocol.SearchParams, search),
    "chatHistory/clear": (protocol.KeyParams, clear),
    "chatHistory/listConversations": (protocol.ListParams, list_page),
    "chatHistory/updateConversation": (protocol.UpdateConversationParams, update_conversation),
    "chatHistory/truncate": (protocol.TruncateParams, truncate),
    "chatHistory/deleteTurns": (protocol.DeleteTurnsParams, delete_turns),
    "chatHistory/editMessage": (protocol.EditMessageParams, edit_message),
    "chatHistory/fork": (protocol.ForkParams, fork),
    "chatHistory/deleteSummary": (protocol.KeyParams, delete_summary),
    "chatHistory/reportUsage": (protocol.ReportUsageParams, report_usage),
    "chatHistory/moveWorkspace": (protocol.MoveWorkspaceParams, move_workspace),
    "chatHistory/listWorkspaces": (protocol.NoParams, list_workspaces),
}


def register(ls: ChatHistoryServer) -> ChatHistoryServer:
    """The one place that registers every handler: the LSP lifecycle, then the custom methods."""
    ls.feature(types.INITIALIZE)(initialize)
    ls.feature(types.INITIALIZED)(initialized)
    ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    ls.feature(types.SHUTDOWN)(shutdown)
    for method, (params_cls, body) in REQUESTS.items():
        request(ls, method, params_cls, body)
    for entry in METHODS:
        request(ls, entry.name, entry.params, entry.run)
    return ls


server = register(ChatHistoryServer())

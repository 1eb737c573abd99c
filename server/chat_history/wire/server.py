"""The pygls language server: lifecycle, settings pull, and the one ``request`` helper that runs
every method of ``wire/methods`` (its table, ``METHODS``) on the request thread. Domain errors
become JSON-RPC errors here, in one place."""

from __future__ import annotations

import asyncio
import contextlib
import functools
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
    ReplyInProgress,
    StorageError,
    quoted,
)
from chat_history.model import Key, Trimmed
from chat_history.paths import default_storage_folder
from chat_history.policy.identity import checked_session_workspace, normalize_uri
from chat_history.service import replies, watch, workspaces
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import (
    PROVIDER_KINDS,
    SECTION,
    Settings,
    default_settings,
    load_settings,
)
from chat_history.store import database_option, purge_option
from chat_history.wire import checks, frames, framing, lsp_adapter, memory, protocol
from chat_history.wire.barrier import BOUND_SECONDS, SettingsBarrier
from chat_history.wire.methods import METHODS

log = logging.getLogger("chat_history")
PROTOCOL_VERSION = 4
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


class ReplyInProgressError(JsonRpcException):
    CODE = 1004
    MESSAGE = "Reply in progress"


#: The domain errors a request answers with an error code (to_jsonrpc).
DOMAIN_ERRORS = (InvalidParams, ContextOverflow, StorageError, ConversationChanged, ReplyInProgress)


def to_jsonrpc(exc: Exception) -> JsonRpcException:
    """The one mapping of domain errors to JSON-RPC error codes (protocol.md, Errors)."""
    if not isinstance(exc, DOMAIN_ERRORS):
        raise exc
    message, data = protocol.wire_error(exc)
    if isinstance(exc, InvalidParams):
        return JsonRpcInvalidParams(message=message, data=data)
    if isinstance(exc, ContextOverflow):
        return ContextOverflowError(message=message, data=data)
    if isinstance(exc, ConversationChanged):
        return ConversationChangedError(message=message, data=data)
    if isinstance(exc, ReplyInProgress):
        return ReplyInProgressError(message=message, data=data)
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
        signalled = False
        try:
            asyncio.run(framing.serve(reader, self.protocol, stop))
        except BrokenPipeError:
            log.error("the client closed the connection; shutting down")
        except KeyboardInterrupt:  # SIGTERM, SIGHUP (__main__) or Ctrl-C
            signalled = True
        except SystemExit as exc:  # `exit`: 0 after `shutdown`, else 1 (LSP)
            self.exit_code = exc.code if isinstance(exc.code, int) else 1
        finally:
            self.barrier.abandon()  # requests waiting for settings must not hold up the exit
            self.release_replies()
            if signalled:
                self._exit_at_once()
            self.shutdown()  # type: ignore[no-untyped-call]

    def _exit_at_once(self) -> None:
        """After a signal: the store closed, then the process ends without joining the stdin
        reader, which may be blocked in a read that only the client's closing pipe ends (joining
        it kept a signalled server alive for as long as its client kept the pipe open)."""
        if self.manager is not None:
            with contextlib.suppress(Exception):
                self.manager.store.close()
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(self.exit_code)

    def release_replies(self) -> None:
        """At exit: this process's streaming replies are interrupted at once (service.replies),
        keeping the text last acknowledged; a store that cannot be written leaves them to expire."""
        if self.manager is None:
            return
        try:
            replies.release(self.manager)
        except StorageError as exc:
            log.warning("streaming replies left to expire: %s", exc)

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
        elif self._stdout is not None:
            # Another thread (the request thread, which writes its answer itself): written now,
            # so that what a request told goes before its answer, as the loop's sends did.
            shown_too = [types.WINDOW_SHOW_MESSAGE] if show else []
            for method in [types.WINDOW_LOG_MESSAGE, *shown_too]:
                wired = {"type": int(kind), "message": text}
                lsp_adapter.notify_all(self.protocol, self._stdout, method, [wired])
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
        tended = loop.time()
        while not self.closing.is_set():
            await asyncio.sleep(watch.IDLE_SECONDS)
            tend = loop.time() - tended >= replies.RENEW_MS / 1000
            if tend:
                tended = loop.time()
            try:
                await loop.run_in_executor(self.requests, functools.partial(self.look, tend=tend))
            except RuntimeError:  # the request thread is gone: exiting
                return

    def look(self, *, tend: bool) -> None:
        """The idle look: with ``tend``, renew this process's reply leases and interrupt expired
        ones first (service.replies), then what others changed."""
        if tend and self.manager is not None:
            try:
                replies.tend(self.manager)
            except StorageError as exc:
                log.debug("reply leases: %s", exc)
        self.send_changes(poll=True)

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
        this request (a session without a folder: only when the request needs storage itself)
        and is tried again by the next."""
        mode = self.identity_option or settings.workspace_identity
        if mode == self._identity_mode:
            return
        with self._identity_lock:
            if mode == self._identity_mode:
                return
            identity = workspaces.resolve(self.raw_workspace, mode)
            self.workspace_identity = identity.workspace
            self.folder_identity = identity.link or identity.folder_identity  # client's spelling
            machine = self.machine if identity.git is not None else ""
            try:
                # old spellings: every session
                moved = workspaces.open_identity(manager, identity, machine)
            except StorageError:
                if identity.workspace.startswith(("file:", "repo:")):
                    raise
                return  # nothing of its own to bring along: the request meets the storage itself
            for line in moved:
                self.tell(types.MessageType.Info, line)
            self._identity_mode = mode

    def key(self, params: protocol.KeyParams) -> Key:
        """The request's conversation key, checked; the session's workspace when it names none."""
        workspace, conversation = checks.check_key(params, self.session_workspace)
        return Key(workspace, conversation)

    @property
    def session_workspace(self) -> checks.SessionWorkspace:
        """What a request's ``workspace`` is read against (checks.SessionWorkspace)."""
        return checks.SessionWorkspace(self.workspace_identity, self.folder_identity)


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


Handler = Callable[[ChatHistoryManager, ChatHistoryServer, Any], Any]


def request(ls: ChatHistoryServer, method: str, params_cls: type, body: Handler) -> None:
    """Register a handler run on the request thread: settings barrier, initialize gate, params
    structuring, error mapping."""

    @ls.feature(method)
    async def handler(ls: ChatHistoryServer, raw: Any) -> Any:
        # Ticket and submission before the first await: in the order the requests arrived.
        job = Job(ls.barrier.ticket(), ls.closing)
        done = asyncio.wrap_future(ls.requests.submit(run, ls, job, raw, ls.protocol.msg_id))
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

    def run(ls: ChatHistoryServer, job: Job, raw: Any, msg_id: Any) -> Any:
        settings = ls.barrier.settings_for(job.ticket, job.stopped)
        if not job.start():
            return _NOT_RUN
        manager = ls.manager
        if manager is None:
            raise JsonRpcServerNotInitialized(
                message=f"{method}: the server is not initialized (send initialize first)"
            )
        manager = manager.under(settings)  # the request runs under its own settings
        ls.send_changes(poll=True)  # what others changed goes before this answer
        try:
            params: Any = protocol.structure(raw, params_cls)
            ls.open_identity(manager, settings)
            result = body(manager, ls, params)
        except DOMAIN_ERRORS as exc:
            raise to_jsonrpc(exc) from None
        finally:
            ls.send_changes(poll=False)  # what this request's writes found others did
        # Written here, not by the event loop once it wakes for the result: the client has its
        # answer one thread hop sooner (issue 36); pygls is then told it was sent.
        return lsp_adapter.answer(ls.protocol, msg_id, result)


def register(ls: ChatHistoryServer) -> ChatHistoryServer:
    """The one place that registers every handler: the LSP lifecycle, then the custom methods."""
    ls.feature(types.INITIALIZE)(initialize)
    ls.feature(types.INITIALIZED)(initialized)
    ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    ls.feature(types.SHUTDOWN)(shutdown)
    for method in METHODS:
        request(ls, method.name, method.params, method.run)
    return ls


server = register(ChatHistoryServer())

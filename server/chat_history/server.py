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
from typing import Any, BinaryIO, TypeVar

import cattrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    default_converter,
    lsp_method,
)

from chat_history import __version__, framing, protocol
from chat_history.barrier import BOUND_SECONDS, SettingsBarrier
from chat_history.errors import ContextOverflow, InvalidParams, StorageError
from chat_history.manager import ChatHistoryManager, PrepareOptions
from chat_history.model import Trimmed
from chat_history.paths import default_storage_folder
from chat_history.settings import (
    PROVIDER_KINDS,
    SECTION,
    Settings,
    default_settings,
    load_settings,
)
from chat_history.store import Key, Store

log = logging.getLogger("chat_history")
PROTOCOL_VERSION = 1
TRIMMED = "chatHistory/trimmed"
#: Error codes that answer bad input or a known condition, not a server defect.
EXPECTED_CODES = frozenset({-32600, -32602, -32002, 1001, 1002})
P = TypeVar("P")


class ContextOverflowError(JsonRpcException):
    CODE = 1001
    MESSAGE = "Context overflow"


class StorageFailure(JsonRpcException):
    CODE = 1002
    MESSAGE = "Storage error"


def to_jsonrpc(exc: Exception) -> JsonRpcException:
    """The one mapping of domain errors to JSON-RPC error codes (protocol.md, Errors)."""
    if isinstance(exc, InvalidParams):
        return JsonRpcInvalidParams(message=str(exc), data={"field": exc.field})
    if isinstance(exc, ContextOverflow):
        return ContextOverflowError(
            message=str(exc),
            data={"estimatedTokens": exc.estimated_tokens, "contextWindow": exc.context_window},
        )
    if isinstance(exc, StorageError):
        return StorageFailure(message=str(exc), data={"reason": exc.reason})
    raise exc


def _converter() -> cattrs.Converter:
    """lsprotocol's converter, but custom params and results stay plain JSON (no namedtuples)."""
    converter: cattrs.Converter = default_converter()  # type: ignore[no-untyped-call]
    for cls in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        converter.register_structure_hook(cls, lambda obj, cls: cls(**obj))
    # Outgoing: one level only. Our results are JSON already (a ~20 KB prepare body took a
    # cattrs walk as long as json.dumps itself); an lsprotocol object inside still reaches
    # this converter through json.dumps's ``default`` hook.
    converter.register_unstructure_hook(
        JsonRPCResponseMessage,
        lambda m: {"id": m.id, "jsonrpc": m.jsonrpc, "result": m.result},
    )
    converter.register_unstructure_hook(
        JsonRPCNotification,
        lambda m: {"method": m.method, "jsonrpc": m.jsonrpc, "params": m.params},
    )
    return converter


class ChatHistoryProtocol(LanguageServerProtocol):
    def _send_data(self, data: Any) -> None:
        """pygls's writer, but UTF-8 (pygls escapes every non-ASCII character, tripling emoji),
        a Content-Length in bytes, and an error answer for an answer that cannot be encoded or
        is too large (pygls logged those and never answered): see framing.answer_body."""
        if not data:
            return
        writer = self.writer
        if writer is None:
            log.error("Unable to send data, no available transport!")
            return
        body = framing.answer_body(data, self._serialize_message)
        if body is None:
            return
        if isinstance(writer, framing.FrameWriter):
            writer.write_frame(body)
        else:  # an embedding test's writer
            writer.write(framing.frame_header(len(body)) + body)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        if getattr(self._server, "manager", None) is not None:
            # LSP allows one initialize; a second must not swap the storage folder mid-session.
            raise JsonRpcInvalidRequest(message="initialize may only be sent once per session")
        result = yield from super().lsp_initialize(params)
        # Only what this server has: pygls would advertise text document sync, commands and
        # workspace folder notifications from its defaults, and editors would send that traffic.
        self.server_capabilities = result.capabilities = types.ServerCapabilities(
            experimental={
                "chatHistory": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "providers": list(PROVIDER_KINDS),
                }
            }
        )
        return result

    # Document traffic is not advertised; a client that sends it anyway is not kept in memory.
    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: Any) -> None:
        return None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: Any) -> None:
        return None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: Any) -> None:
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def lsp_notebook_document__did_open(self, params: Any) -> None:
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def lsp_notebook_document__did_change(self, params: Any) -> None:
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def lsp_notebook_document__did_close(self, params: Any) -> None:
        return None

    def _known(self, method: str) -> bool:
        return method in self.fm.builtin_features or method in self.fm.features

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        # LSP: a `$/` request the server does not implement gets MethodNotFound, and that is
        # routine (clients probe with them), not an error for the log.
        if method_name.startswith("$/") and not self._known(method_name):
            log.debug("unknown request %s answered MethodNotFound", method_name[:100])
            error = JsonRpcMethodNotFound.of(method_name[:100]).to_response_error()
            self._send_response(msg_id, None, error)
            return
        super()._handle_request(msg_id, method_name, params)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        # LSP: `$/` notifications may be ignored.
        if (
            method_name.startswith("$/")
            and method_name != types.CANCEL_REQUEST
            and not self._known(method_name)
        ):
            log.debug("ignored notification %s", method_name[:100])
            return
        super()._handle_notification(method_name, params)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        # Cancelling a request that was already answered is an ordinary race, not news.
        if msg_id not in self._request_futures:
            log.debug("cancel for request %r, already answered", msg_id)
            return
        super()._handle_cancel_notification(msg_id)


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
        return self._state == "cancelled" or self._closing.is_set()


class ChatHistoryServer(LanguageServer):
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
        self.exit_code = 0
        self._reported: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pulls: set[asyncio.Task[None]] = set()
        #: the stdout writer ``start_io`` gave pygls (None until then)
        self._stdout: framing.FrameWriter | None = None

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Error responses already reach the client; expected ones need no log line at all.
        if isinstance(error, JsonRpcException) and error.code in EXPECTED_CODES:
            return
        log.error("server error: %s", error)

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """pygls's stdio server with ``framing.serve`` as its loop: every request that can be
        answered is answered, whatever arrives on stdin (see framing.py)."""
        self._stop_event = threading.Event()
        self._stdout = framing.FrameWriter(stdout or sys.stdout.buffer)
        self.protocol.set_writer(self._stdout)
        reader = framing.StdinReader(stdin or sys.stdin.buffer, self.thread_pool)
        try:
            asyncio.run(framing.serve(reader, self.protocol, self._stop_event))
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
        except Exception as exc:  # an error answer: the client has nothing to tell
            self.tell(
                types.MessageType.Warning,
                f"workspace/configuration failed ({exc}); keeping the current settings",
            )
            answer = None
        value = answer[0] if isinstance(answer, list | tuple) and answer else None
        self.barrier.answer(pull, self.checked_settings(value) if value is not None else None)
        if late and not self.barrier.held:
            self.tell(types.MessageType.Info, "settings arrived; stored-history retention resumes")

    def send_trimmed(self, key: Key, events: Sequence[Trimmed]) -> None:
        """One request's ``chatHistory/trimmed`` notifications, written to stdout in one write
        (a prepare of a long conversation sends two, and every write wakes the client)."""
        params = [protocol.wire_trimmed(key.workspace, key.conversation, e) for e in events]
        writer = self._stdout
        if writer is None:  # not serving stdio (an embedding test): pygls's own path
            for one in params:
                self.protocol.notify(TRIMMED, one)
            return
        frames = []
        for one in params:
            body = framing.encode({"jsonrpc": "2.0", "method": TRIMMED, "params": one}, repr)
            frames += [framing.frame_header(len(body)), body]
        writer.write_parts(*frames)

    def key(self, params: protocol.KeyParams) -> Key:
        workspace, conversation = protocol.check_key(params, self.workspace_identity)
        return Key(workspace, conversation)


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


server = ChatHistoryServer()


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


@server.feature(types.INITIALIZE)
def initialize(ls: ChatHistoryServer, params: types.InitializeParams) -> None:
    ls._loop = asyncio.get_running_loop()
    options = params.initialization_options
    if not isinstance(options, dict):
        options = {}
    ls.workspace_identity = _workspace_identity(params, options)
    folder = _storage_folder(ls, options)
    ls.manager = ChatHistoryManager(Store(folder), notify=ls.send_trimmed)
    raw = options.get("settings")
    ls.barrier = ls._new_barrier(ls.checked_settings(raw))
    if raw is None and ls.pulls_configuration:
        # Nothing known yet: requests wait for the pull that follows `initialized`.
        ls.barrier.raise_()
        asyncio.get_running_loop().call_later(ls.barrier.bound, ls._check_late)
    ls.tell(types.MessageType.Info, f"storage folder {folder}, workspace {ls.workspace_identity}")


@server.feature(types.INITIALIZED)
def initialized(ls: ChatHistoryServer, params: types.InitializedParams) -> None:
    if ls.pulls_configuration:
        ls.start_pull()


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(
    ls: ChatHistoryServer, params: types.DidChangeConfigurationParams
) -> None:
    # Handled inline (not a task), so a request that arrives after it is sure to wait for it.
    settings = params.settings
    if isinstance(settings, dict) and SECTION in settings:
        if settings[SECTION] is not None:
            ls.barrier.push(ls.checked_settings(settings[SECTION]))
    elif ls.pulls_configuration:
        ls.start_pull()


@server.feature(types.SHUTDOWN)
async def shutdown(ls: ChatHistoryServer, *args: Any) -> None:
    # A request that started is finished and answered before `shutdown` is; the others never run.
    ls.closing.set()
    ls.barrier.wake()
    # Each request's answer is written by a callback pygls added before this one's: awaiting
    # the request tasks means their answers are out before the answer to `shutdown`.
    await asyncio.gather(*ls.in_flight, return_exceptions=True)


def request(
    method: str, params_cls: type[P]
) -> Callable[[Callable[[ChatHistoryManager, ChatHistoryServer, P], Any]], None]:
    """Register a handler run on the request thread: settings barrier, initialize gate, params
    structuring, error mapping."""

    def register(body: Callable[[ChatHistoryManager, ChatHistoryServer, P], Any]) -> None:
        @server.feature(method)
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
            try:
                return body(manager, ls, protocol.structure(raw, params_cls))
            except (InvalidParams, ContextOverflow, StorageError) as exc:
                raise to_jsonrpc(exc) from None

    return register


@request("chatHistory/append", protocol.AppendParams)
def append(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.AppendParams) -> Any:
    result = m.append(ls.key(p), protocol.to_messages(p))
    return {
        "messages": protocol.wire(result.messages),
        "pruned": protocol.wire_prune(result.pruned),
    }


@request("chatHistory/get", protocol.GetParams)
def get(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.GetParams) -> Any:
    key = ls.key(p)
    result = m.get(
        key,
        protocol.check_int(p.limit, "limit", 1, protocol.MAX_PAGE),
        protocol.check_int(p.before_id, "beforeId", 0),
    )
    return {
        "messages": protocol.wire(result.messages),
        "summary": protocol.wire_summary(result.summary),
        "pruned": protocol.wire_prune(result.pruned),
        "hasMore": result.has_more,
    }


@request("chatHistory/format", protocol.FormatParams)
def format_(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.FormatParams) -> Any:
    key = ls.key(p)
    return protocol.wire(m.format(key, p.provider, p.model, protocol.to_tools(p.tools)))


@request("chatHistory/prepare", protocol.PrepareParams)
def prepare(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.PrepareParams) -> Any:
    key = ls.key(p)
    options = PrepareOptions(
        provider=p.provider,
        model=p.model,
        tools=protocol.to_tools(p.tools),
        extra_tokens=protocol.check_int(p.extra_tokens, "extraTokens", 0) or 0,
        overflow_recovery=bool(p.overflow_recovery),
        keep_tool_context_turns=protocol.check_int(
            p.keep_tool_context_turns, "keepToolContextTurns", 0
        ),
    )
    return protocol.wire(m.prepare(key, options))


@request("chatHistory/saveSummary", protocol.SaveSummaryParams)
def save_summary(
    m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.SaveSummaryParams
) -> Any:
    key = ls.key(p)
    text = protocol.check_text(p.summary, "summary", protocol.MAX_SUMMARY_CHARS)
    through = protocol.check_int(p.covers_through_id, "coversThroughId", 0)
    return protocol.wire(m.save_summary(key, text, through))


@request("chatHistory/getSummary", protocol.KeyParams)
def get_summary(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.KeyParams) -> Any:
    return protocol.wire_summary(m.get_summary(ls.key(p)))


@request("chatHistory/clear", protocol.KeyParams)
def clear(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.KeyParams) -> Any:
    return {"deletedMessages": m.clear(ls.key(p))}


@request("chatHistory/listConversations", protocol.ListParams)
def list_conversations(m: ChatHistoryManager, ls: ChatHistoryServer, p: protocol.ListParams) -> Any:
    workspace = (
        protocol.check_workspace(p.workspace) if p.workspace is not None else ls.workspace_identity
    )
    return {
        "conversations": [
            {
                "conversationId": c.conversation,
                "messageCount": c.message_count,
                "tokens": c.tokens,
                "lastActivity": c.last_activity,
                "hasSummary": c.has_summary,
            }
            for c in m.list_conversations(workspace)
        ]
    }

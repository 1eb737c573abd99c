"""The pygls language server: lifecycle, settings pull, and one-line handlers that translate the
wire to ChatHistoryManager calls. Domain errors become JSON-RPC errors here, in one place."""

from __future__ import annotations

import asyncio
import logging
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
from chat_history.errors import ContextOverflow, InvalidParams, StorageError
from chat_history.manager import ChatHistoryManager, PrepareOptions
from chat_history.model import Trimmed
from chat_history.paths import default_storage_folder
from chat_history.settings import PROVIDER_KINDS, SECTION, load_settings
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
        result.capabilities.experimental = {
            "chatHistory": {"protocolVersion": PROTOCOL_VERSION, "providers": list(PROVIDER_KINDS)}
        }
        return result


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
        self.workspace_identity = "default"
        self._reported: set[str] = set()
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
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()  # type: ignore[no-untyped-call]

    # -- settings ----------------------------------------------------------------------------

    def apply_settings(self, raw: Any) -> None:
        loaded = load_settings(raw)
        for problem in loaded.problems:
            message = problem.message()
            if message not in self._reported:
                self._reported.add(message)
                self.window_show_message(
                    types.ShowMessageParams(
                        type=types.MessageType.Warning, message=f"chat-history-server: {message}"
                    )
                )
        if loaded.unknown_keys:
            log.warning("ignoring unknown settings: %s", ", ".join(loaded.unknown_keys))
        if self.manager is not None:
            self.manager.settings = loaded.settings

    async def pull_settings(self) -> None:
        caps = self.client_capabilities.workspace
        if caps is None or not caps.configuration:
            return
        answer = await self.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        )
        if answer and answer[0] is not None:
            self.apply_settings(answer[0])

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


server = ChatHistoryServer()


def _storage_folder(options: dict[str, Any]) -> Path:
    path = options.get("storagePath")
    if isinstance(path, str) and path:
        return Path(path).expanduser()
    if path is not None:
        log.warning("initializationOptions.storagePath must be a non-empty string; ignored")
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
    options = params.initialization_options
    if not isinstance(options, dict):
        options = {}
    ls.workspace_identity = _workspace_identity(params, options)
    ls.manager = ChatHistoryManager(Store(_storage_folder(options)), notify=ls.send_trimmed)
    ls.apply_settings(options.get("settings"))


@server.feature(types.INITIALIZED)
async def initialized(ls: ChatHistoryServer, params: types.InitializedParams) -> None:
    await ls.pull_settings()


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(
    ls: ChatHistoryServer, params: types.DidChangeConfigurationParams
) -> None:
    settings = params.settings
    if isinstance(settings, dict) and SECTION in settings:
        if settings[SECTION] is not None:
            ls.apply_settings(settings[SECTION])
    else:
        await ls.pull_settings()


def request(
    method: str, params_cls: type[P]
) -> Callable[[Callable[[ChatHistoryManager, ChatHistoryServer, P], Any]], None]:
    """Register a handler run on the request thread: initialize gate, params structuring, error
    mapping."""

    def register(body: Callable[[ChatHistoryManager, ChatHistoryServer, P], Any]) -> None:
        @server.feature(method)
        async def handler(ls: ChatHistoryServer, raw: Any) -> Any:
            # Submitted before the first await, so in the order the requests arrived.
            return await asyncio.wrap_future(ls.requests.submit(run, ls, raw))

        def run(ls: ChatHistoryServer, raw: Any) -> Any:
            manager = ls.manager
            if manager is None:
                raise JsonRpcServerNotInitialized(
                    message=f"{method}: the server is not initialized (send initialize first)"
                )
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
        protocol.check_id(p.workspace, "workspace", protocol.MAX_WORKSPACE_CHARS)
        if p.workspace is not None
        else ls.workspace_identity
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

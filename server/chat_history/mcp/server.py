"""``chat-history mcp``: the recall server on the official MCP Python SDK's low-level ``Server``
(the tools' schemas are ours, and so is every refusal: an argument error names the argument and
never echoes what the agent sent), on stdio or (http.py) Streamable HTTP.

It serves the three tools, the conversations as resources (resources.py: a paged listing, each
conversation as Markdown or JSON, two URI templates; a search's hits link them), and tells of
changes other processes make (changes.py). One process answers clients of both protocol eras:
the 2025 ``initialize`` handshake and the stateless 2026-07-28 revision (``server/discover``,
``_meta`` on every request, cache hints on the lists and reads), the SDK telling them apart by
the client's first request.

Its scope is fixed once, at the first call: ``--workspace``, else the client's first root
(when the client offers roots and can be asked: a 2025-era stdio client), else the working
folder — normalized and matched to a moved folder's history as the editor's server does,
without moving anything; every workspace only with ``--all-workspaces`` on the command line.
The store is opened read-only in spirit: the settings turn storage retention off (looking
never deletes), and no tool writes."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from chat_history import __version__
from chat_history.errors import ChatHistoryError, InvalidParams, StorageError
from chat_history.mcp import changes, resources, tools, uris
from chat_history.mcp.lines import Reread
from chat_history.model import Key
from chat_history.service import workspaces
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.watch import ChangeWatch

log = logging.getLogger("chat_history.mcp")

Tool = Callable[[ChatHistoryManager, tools.Scope, dict[str, Any]], tools.Answer]

_READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_INTEGER = {"type": "integer"}
#: ``resources/read`` of no such resource: -32002 through 2025-11-25 (that revision's "Error
#: handling"), -32602 from 2026-07-28 (SEP-2164); the error's data holds the URI asked for.
RESOURCE_NOT_FOUND_2025 = -32002
#: Freshness hints of the 2026-07-28 cacheable results: the tools and templates never change
#: while the process runs; the history may change at any moment (another window writes), so
#: its listing and reads are stale at once. All private: it is one user's history.
HOUR_MS = 3_600_000
CACHE_HINTS: dict[Any, CacheHint] = {
    "tools/list": CacheHint(ttl_ms=HOUR_MS),
    "resources/templates/list": CacheHint(ttl_ms=HOUR_MS),
    "resources/list": CacheHint(ttl_ms=0),
    "resources/read": CacheHint(ttl_ms=0),
}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _output(cls: type) -> dict[str, Any]:
    schema: dict[str, Any] = TypeAdapter(cls).json_schema()
    return schema


#: name → (description, input schema, output TypedDict, implementation)
TOOLS: dict[str, tuple[str, dict[str, Any], type, Tool]] = {
    "search_history": (
        "Search this workspace's past chat conversations (what the user and the assistant "
        "said). Words must all occur (any order, accents and case ignored); put a phrase in "
        "double quotes. Best matches first, each with its conversation id, title, message id, "
        "time, a snippet and whether it is on the conversation's active path (false: another "
        "branch, such as a reply that was regenerated or a prompt that was edited); read "
        "around a hit with read_conversation.",
        _schema(
            {
                "query": {"type": "string", "minLength": 1, "description": 'words and "phrases"'},
                "conversationId": {"type": "string", "description": "only this conversation"},
                "limit": {**_INTEGER, "minimum": 1, "maximum": 50, "default": 10},
            },
            ["query"],
        ),
        tools.SearchOutput,
        tools.search_history,
    ),
    "list_conversations": (
        "List this workspace's past chat conversations, newest activity first: id, title, "
        "last activity and message count. Page with the returned cursor.",
        _schema(
            {
                "limit": {**_INTEGER, "minimum": 1, "maximum": 200, "default": 20},
                "cursor": {"type": "string", "description": "nextCursor of the previous page"},
                "titleContains": {"type": "string", "description": "case-insensitive"},
            },
            [],
        ),
        tools.ListOutput,
        tools.list_conversations,
    ),
    "read_conversation": (
        "Read a past conversation as text: role, time and content of each message, tool calls "
        "as name(arguments), long contents cut. The newest messages, or those around a message "
        "id (from search_history; one on another branch reads that branch's path).",
        _schema(
            {
                "conversationId": {"type": "string", "minLength": 1},
                "aroundId": {**_INTEGER, "minimum": 1, "description": "a message id to centre on"},
                "limit": {**_INTEGER, "minimum": 1, "maximum": 200, "default": 20},
            },
            ["conversationId"],
        ),
        tools.ReadOutput,
        tools.read_conversation,
    ),
}


def tool_list() -> list[types.Tool]:
    """The tools as ``tools/list`` answers them."""
    return [
        types.Tool(
            name=name,
            description=description,
            input_schema=schema,
            output_schema=_output(output),
            annotations=_READ_ONLY,
        )
        for name, (description, schema, output, _) in TOOLS.items()
    ]


class RecallServer:
    """One MCP session over one manager: the scope, fixed at the first call, and the calls."""

    def __init__(
        self,
        manager: ChatHistoryManager,
        *,
        workspace: str | None,
        all_workspaces: bool,
        max_tokens: int,
        machine: str,
        ask_roots: bool = True,
    ) -> None:
        self.manager = manager
        self.workspace = workspace
        self.all_workspaces = all_workspaces
        self.max_tokens = max_tokens
        self.machine = machine
        #: whether the client's first root may set the scope (not over HTTP: the clients of one
        #: server would then depend on which of them called first)
        self.ask_roots = ask_roots
        self._scope: tools.Scope | None = None
        # The manager serializes its own work; one lock keeps the scope's first resolution single.
        self._lock = threading.Lock()
        # The calls and the change watch's looks, one at a time (the watch reads the store
        # beside the manager, as the editor's server runs it on its one request thread).
        self._work = threading.RLock()
        self._watch: ChangeWatch | None = None
        self._token: object = None

    def scope_of(self, root: str | None) -> tools.Scope:
        """The session's scope, resolved once (``root``: the client's first root, if any)."""
        with self._lock:
            if self._scope is None:
                if self.all_workspaces:
                    self._scope = tools.Scope(None, self.max_tokens)
                else:
                    raw = self.workspace or root or Path(os.getcwd()).resolve().as_uri()
                    found = self._recalled(raw)
                    log.info("chat-history mcp: scope %s", found)
                    self._scope = tools.Scope(found, self.max_tokens)
                self._begin_watch(self._scope)
            return self._scope

    def _recalled(self, raw: str) -> str:
        """The workspace of ``raw``'s history: its folder identity's, else (a panel whose
        ``workspaceIdentity`` is "repository") its repository identity's, else its moved
        folder's; the folder identity when none has history."""
        folder = workspaces.resolve(raw, "folder")
        found = workspaces.recall(self.manager, folder, self.machine)
        if found == folder.workspace and not workspaces.has_history(self.manager, found):
            repository = workspaces.resolve(raw, "repository")
            if repository.workspace != folder.workspace and workspaces.has_history(
                self.manager, repository.workspace
            ):
                return repository.workspace
        return found

    def needs_root(self) -> bool:
        """Whether the scope still waits on the client's first root (no ``--workspace``, no
        ``--all-workspaces``, not fixed by an earlier call)."""
        return (
            self.ask_roots
            and self._scope is None
            and not self.all_workspaces
            and self.workspace is None
        )

    def serial(self, work: Callable[..., Any], *args: Any) -> Any:
        """``work(*args)`` while no other call nor look runs (on a worker thread)."""
        with self._work:
            return work(*args)

    def call(self, name: str, arguments: dict[str, Any], root: str | None) -> types.CallToolResult:
        """One tool call: its answer, or a tool error naming the argument at fault."""
        entry = TOOLS.get(name)
        if entry is None:
            return _error(f"unknown tool; the tools are {', '.join(TOOLS)}")
        run = entry[3]
        try:
            answer = run(self.manager, self.scope_of(root), arguments)
        except InvalidParams as exc:
            return _error(f"{exc.field}: {exc.why}")
        except ChatHistoryError as exc:
            log.warning("chat-history mcp: %s failed: %s", name, exc)
            return _error(f"the history could not be read: {exc}")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=answer.text), *map(_link, answer.links)],
            structured_content=answer.structured,
        )

    # -- resources --------------------------------------------------------------------------

    def list_resources(self, cursor: str | None, root: str | None) -> types.ListResourcesResult:
        """``resources/list``: a page of the conversations in scope. Raises MCPError."""
        try:
            listed, following = resources.listing(self.manager, self.scope_of(root), cursor)
        except InvalidParams as exc:
            raise MCPError(types.INVALID_PARAMS, f"{exc.field}: {exc.why}") from None
        except ChatHistoryError as exc:
            raise _unreadable("resources/list", exc) from None
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=item.uri,
                    name=item.name,
                    title=item.title,
                    description=item.description,
                    mime_type=uris.MARKDOWN,
                    annotations=types.Annotations(last_modified=item.last_modified),
                )
                for item in listed
            ],
            next_cursor=following,
        )

    def list_templates(self) -> types.ListResourceTemplatesResult:
        """``resources/templates/list``: the two URI templates (uris.py)."""
        every = self.all_workspaces
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=template,
                    name=name,
                    title=title,
                    description=(
                        "The conversation's newest messages that fit the answer bound, "
                        "with what was left out; a conversationId from search_history, "
                        "list_conversations or resources/list"
                        + ("; workspace as resources/list gives it" if every else "")
                    ),
                    mime_type=mime,
                )
                for template, name, title, mime in uris.templates(every_workspace=every)
            ]
        )

    def read_resource(self, uri: str, root: str | None, modern: bool) -> types.ReadResourceResult:
        """``resources/read``: one conversation, as its URI asks. Raises MCPError: -32602
        naming ``uri`` for a malformed one (never echoed), and resource-not-found (the era's
        code, with the URI as data) for one that names no conversation in scope."""
        try:
            read = resources.read(self.manager, self.scope_of(root), uri)
        except InvalidParams as exc:
            raise MCPError(types.INVALID_PARAMS, f"{exc.field}: {exc.why}") from None
        except resources.NotFound:
            code = types.INVALID_PARAMS if modern else RESOURCE_NOT_FOUND_2025
            raise MCPError(
                code, "uri: no conversation with this URI in this workspace", {"uri": uri}
            ) from None
        except ChatHistoryError as exc:
            raise _unreadable("resources/read", exc) from None
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=read.uri, mime_type=read.mime_type, text=read.text)
            ]
        )

    def complete(
        self, params: types.CompleteRequestParams, root: str | None
    ) -> types.CompleteResult:
        """``completion/complete`` of a template's argument (no prompts here: a prompt's ref
        is an invalid one, -32602). Raises MCPError."""
        if not isinstance(params.ref, types.ResourceTemplateReference):
            raise MCPError(types.INVALID_PARAMS, "ref: this server has no prompts")
        try:
            values, more = resources.complete(
                self.manager,
                self.scope_of(root),
                params.ref.uri,
                params.argument.name,
                params.argument.value,
            )
        except InvalidParams as exc:
            raise MCPError(types.INVALID_PARAMS, f"{exc.field}: {exc.why}") from None
        except ChatHistoryError as exc:
            raise _unreadable("completion/complete", exc) from None
        return types.CompleteResult(completion=types.Completion(values=values, has_more=more))

    # -- changes ----------------------------------------------------------------------------

    def workspace_in_scope(self) -> str | None:
        """The scope's workspace (None: every workspace, or no scope yet)."""
        scope = self._scope
        return None if scope is None else scope.workspace

    def _begin_watch(self, scope: tools.Scope) -> None:
        """The first look, at the moment the scope is fixed: changes from then on are told."""
        if self._watch is not None or self._token is not None:
            return
        try:
            if scope.workspace is None:
                self._token = self._change_token()
            else:
                workspace = scope.workspace
                self._watch = ChangeWatch(self.manager.store, lambda: workspace)
                self._watch.poll()
        except StorageError as exc:  # the next look takes the baseline
            log.debug("chat-history mcp: change watch: %s", exc)

    def _change_token(self) -> object:
        with self.manager.store.read() as reading:
            return reading.change_token()

    def look_for_changes(self) -> changes.Changed | None:
        """What other processes changed in scope since the last look (None: nothing, or no
        scope yet): the change watch's conversations, or with every workspace only that
        another process committed."""
        with self._work:
            try:
                scope = self._scope
                if scope is None and not self.needs_root():
                    scope = self.scope_of(None)  # nothing to wait for: told from now on
                if scope is None:
                    return None
                if scope.workspace is None:
                    token = self._change_token()
                    moved = self._token is not None and token != self._token
                    self._token = token
                    return changes.Changed(None) if moved else None
                if self._watch is None:
                    self._begin_watch(scope)
                    return None
                found = self._watch.poll()
            except ChatHistoryError as exc:  # looked at again later: nothing is lost
                log.debug("chat-history mcp: change watch: %s", exc)
                return None
            if not found:
                return None
            return changes.Changed(frozenset(Key(scope.workspace, c.conversation) for c in found))


def _link(link: tools.Link) -> types.ResourceLink:
    return types.ResourceLink(
        uri=link.uri, name=link.name, title=link.title, mime_type=link.mime_type
    )


def _unreadable(method: str, exc: ChatHistoryError) -> MCPError:
    log.warning("chat-history mcp: %s failed: %s", method, exc)
    return MCPError(types.INTERNAL_ERROR, f"the history could not be read: {exc}")


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


async def _first_root(ctx: Any) -> str | None:
    """The client's first root, when it offers roots and can be asked (not on the 2026-07-28
    wire, which has no server-to-client request); None otherwise (or when asking fails)."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.roots is None or not ctx.session.can_send_request:
        return None
    try:
        with anyio.fail_after(5):
            result = await ctx.session.list_roots()
    except Exception as exc:  # a client that fails roots/list still gets its answers
        log.info("chat-history mcp: roots/list failed (%s); using the working folder", exc)
        return None
    return str(result.roots[0].uri) if result.roots else None


class _Server(Server[Any]):
    """The SDK's server, whose ``initialize`` says ``resources.listChanged`` on every transport
    (the announcer sends it; the HTTP sessions ask this method with no options)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(resources_changed=True),
            experimental_capabilities,
            extensions,
        )


class _Handlers:
    """The requests and notifications the server answers, each on ``recall`` (store work on a
    worker thread, one at a time) and ``announcer`` (who hears of changes)."""

    def __init__(self, recall: RecallServer, announcer: changes.Announcer) -> None:
        self.recall = recall
        self.announcer = announcer

    async def _root(self, ctx: Any) -> str | None:
        return await _first_root(ctx) if self.recall.needs_root() else None

    async def _serial(self, work: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(self.recall.serial, work, *args)

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        arguments = params.arguments or {}
        root = await self._root(ctx)
        return await self._serial(self.recall.call, params.name, dict(arguments), root)

    async def list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        cursor = None if params is None else params.cursor
        return await self._serial(self.recall.list_resources, cursor, await self._root(ctx))

    async def list_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return self.recall.list_templates()

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        root = await self._root(ctx)
        return await self._serial(self.recall.read_resource, params.uri, root, modern)

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> Any:
        return await self._serial(self.recall.complete, params, await self._root(ctx))

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        await self._serial(self.recall.scope_of, await self._root(ctx))  # told from now on
        try:
            self.announcer.subscribe(ctx, params.uri)
        except InvalidParams as exc:
            raise MCPError(types.INVALID_PARAMS, f"{exc.field}: {exc.why}") from None
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Any, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self.announcer.unsubscribe(ctx, params.uri)
        return types.EmptyResult()

    async def initialized(self, ctx: Any, params: Any) -> None:
        self.announcer.join(ctx)

    async def listen(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        """``subscriptions/listen`` (2026-07-28, where no roots are asked): the scope is fixed
        first, so that what changes from the acknowledgment on is told."""
        await self._serial(self.recall.scope_of, None)
        return await self.announcer.listen(ctx, params)


def build_server(recall: RecallServer, announcer: changes.Announcer) -> Server[Any]:
    """The low-level MCP server of ``recall``'s tools and resources; ``announcer`` tells its
    clients of changes."""
    handlers = _Handlers(recall, announcer)
    server = _Server(
        "chat-history",
        version=__version__,
        instructions="Read-only access to this workspace's past chat conversations.",
        cache_hints=CACHE_HINTS,
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        on_list_resources=handlers.list_resources,
        on_list_resource_templates=handlers.list_templates,
        on_read_resource=handlers.read_resource,
        on_subscribe_resource=handlers.subscribe,
        on_unsubscribe_resource=handlers.unsubscribe,
        on_subscriptions_listen=handlers.listen,
        on_completion=handlers.complete,
    )

    async def discover(ctx: Any, params: Any) -> types.DiscoverResult:
        """``server/discover`` as the SDK answers it, but saying that the tools never change
        (a listen stream then carries the history's changes only)."""
        capabilities = server.get_capabilities(protocol_version=ctx.protocol_version)
        if capabilities.tools is not None:
            capabilities.tools.list_changed = None
        return types.DiscoverResult(
            supported_versions=list(MODERN_PROTOCOL_VERSIONS),
            capabilities=capabilities,
            instructions=server.instructions,
        )

    server.add_request_handler("server/discover", types.RequestParams, discover)
    server.add_notification_handler(
        "notifications/initialized", types.NotificationParams, handlers.initialized
    )
    return server


def announcer_of(recall: RecallServer) -> changes.Announcer:
    return changes.Announcer(recall.look_for_changes, recall.workspace_in_scope)


def serve(recall: RecallServer) -> None:
    """Serve MCP on stdio until the client closes it."""
    announcer = announcer_of(recall)
    server = build_server(recall, announcer)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tg:
            tg.start_soon(announcer.run)
            await server.run(
                Reread(read_stream), write_stream, server.create_initialization_options()
            )
            tg.cancel_scope.cancel()

    anyio.run(run)

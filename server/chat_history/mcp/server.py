"""``chat-history mcp``: the recall server on stdio, on the official MCP Python SDK's low-level
``Server`` (the tools' schemas are ours, and so is every refusal: an argument error names the
argument and never echoes what the agent sent).

Its scope is fixed once, at the first tool call: ``--workspace``, else the client's first root
(when the client offers roots), else the working folder — normalized and matched to a moved
folder's history as the editor's server does, without moving anything; every workspace only
with ``--all-workspaces`` on the command line. The store is opened read-only in spirit: the
settings turn storage retention off (looking never deletes), and no tool writes."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import TypeAdapter

from chat_history import __version__
from chat_history.errors import ChatHistoryError, InvalidParams
from chat_history.mcp import tools
from chat_history.mcp.lines import Reread
from chat_history.service import workspaces
from chat_history.service.manager import ChatHistoryManager

log = logging.getLogger("chat_history.mcp")

Tool = Callable[[ChatHistoryManager, tools.Scope, dict[str, Any]], tools.Answer]

_READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_INTEGER = {"type": "integer"}


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
        "time and a snippet; read around a hit with read_conversation.",
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
        "id (from search_history).",
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
    ) -> None:
        self.manager = manager
        self.workspace = workspace
        self.all_workspaces = all_workspaces
        self.max_tokens = max_tokens
        self.machine = machine
        self._scope: tools.Scope | None = None
        # The manager serializes its own work; one lock keeps the scope's first resolution single.
        self._lock = threading.Lock()

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
        return self._scope is None and not self.all_workspaces and self.workspace is None

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
            content=[types.TextContent(type="text", text=answer.text)],
            structured_content=answer.structured,
        )


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


async def _first_root(ctx: Any) -> str | None:
    """The client's first root, when it offers roots; None otherwise (or when asking fails)."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.roots is None:
        return None
    try:
        with anyio.fail_after(5):
            result = await ctx.session.list_roots()
    except Exception as exc:  # a client that fails roots/list still gets its answers
        log.info("chat-history mcp: roots/list failed (%s); using the working folder", exc)
        return None
    return str(result.roots[0].uri) if result.roots else None


def build_server(recall: RecallServer) -> Server[Any]:
    """The low-level MCP server of ``recall``'s tools."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        root = await _first_root(ctx) if recall.needs_root() else None
        return await anyio.to_thread.run_sync(recall.call, params.name, dict(arguments), root)

    return Server(
        "chat-history",
        version=__version__,
        instructions="Read-only access to this workspace's past chat conversations.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(recall: RecallServer) -> None:
    """Serve MCP on stdio until the client closes it."""
    server = build_server(recall)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(
                Reread(read_stream), write_stream, server.create_initialization_options()
            )

    anyio.run(run)

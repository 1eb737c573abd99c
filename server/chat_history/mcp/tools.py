"""The MCP server's three tools (protocol.md "Version 4" → Agents recall their history), over
``ChatHistoryManager`` and free of the MCP SDK: each checks its arguments (an ``InvalidParams``
names the argument as the tool's schema spells it), reads one workspace's history (or every
workspace's, when the command line says so), and answers structured content and its text
rendering, both within the token bound, saying what was left out. A search's answer also links
each conversation it found as a resource (uris.py), so a client can attach it whole.

This module is the MCP tools' own wire: it alone spells their camelCase names."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NotRequired, TypeVar

import attrs
from typing_extensions import TypedDict

from chat_history.errors import InvalidParams
from chat_history.mcp import uris
from chat_history.mcp.uris import ID_CHARS
from chat_history.model import Key, StoredMessage
from chat_history.policy.recording import truncate_tool_result
from chat_history.policy.search.query import check_query
from chat_history.policy.search.rank import SearchHit, SearchScope
from chat_history.policy.tokens import text_tokens
from chat_history.service import branches, conversations, history, search
from chat_history.service.conversations import ConversationInfo
from chat_history.service.manager import ChatHistoryManager

#: ``--max-tokens``'s default and bounds (estimated tokens of one answer).
DEFAULT_MAX_TOKENS = 4_000
MIN_MAX_TOKENS = 200
MAX_MAX_TOKENS = 200_000
SEARCH_LIMIT = (1, 50, 10)
LIST_LIMIT = (1, 200, 20)
READ_LIMIT = (1, 200, 20)
#: What a search looks at: what people and models said (tool results are files, logs, output).
SEARCH_ROLES = ("user", "assistant")
#: A row's content, a call's arguments and a tool result are cut to this many characters each in
#: ``read_conversation`` (as tool results are cut on append), so one huge row cannot fill it.
ROW_CHARS = 4_000
#: The largest row id a client can name (what a JSON number holds exactly).
MAX_ROW_ID = 2**53 - 1

T = TypeVar("T")


@attrs.frozen
class Scope:
    """What the server may read: one workspace identity, or every workspace (None) when the
    command line says ``--all-workspaces``."""

    workspace: str | None
    max_tokens: int = DEFAULT_MAX_TOKENS

    @property
    def every_workspace(self) -> bool:
        return self.workspace is None

    def key(self, conversation: str) -> Key | None:
        """The conversation's key in this scope (None: every workspace; the caller looks)."""
        return None if self.workspace is None else Key(self.workspace, conversation)


class Hit(TypedDict):
    conversationId: str
    title: str | None
    workspace: str
    messageId: int
    role: str
    time: str
    snippet: str
    #: on its conversation's active path (false: on another branch; ``read_conversation`` with
    #: ``aroundId`` reads that branch's path)
    onActivePath: bool


class SearchOutput(TypedDict):
    results: list[Hit]
    #: hits that matched beyond the answer (by ``limit`` or the token bound); ``hasMore``: more
    #: matched than the limit asked
    omitted: int
    hasMore: bool


class ConversationItem(TypedDict):
    conversationId: str
    title: str | None
    workspace: str
    lastActivity: str | None
    messageCount: int


class ListOutput(TypedDict):
    conversations: list[ConversationItem]
    nextCursor: str | None
    omitted: int


class ToolCallItem(TypedDict):
    id: str
    name: str
    arguments: str


class RowItem(TypedDict):
    id: int
    role: str
    time: str | None
    content: str
    toolCalls: NotRequired[list[ToolCallItem]]
    toolCallId: NotRequired[str]
    status: NotRequired[str]


class ReadOutput(TypedDict):
    conversationId: str
    title: str | None
    workspace: str
    rows: list[RowItem]
    #: rows of the conversation before and after those shown, left out by ``limit`` or the bound
    omittedBefore: int
    omittedAfter: int
    #: ``read_conversation``: whether the rows are the active path (false: another branch's
    #: path, read around a row of it)
    onActivePath: NotRequired[bool]


@attrs.frozen
class Link:
    """A ``resource_link`` content item: a conversation the answer names, as a resource."""

    uri: str
    name: str
    title: str | None
    mime_type: str

    def wire(self) -> dict[str, Any]:
        """The item as the MCP wire spells it (what it costs the agent)."""
        item = {"type": "resource_link", "uri": self.uri, "name": self.name}
        if self.title is not None:
            item["title"] = self.title
        return item | {"mimeType": self.mime_type}


@attrs.frozen
class Answer:
    """A tool's answer: its structured content, the text rendering of the same, and the
    conversations it links."""

    structured: dict[str, Any]
    text: str
    links: tuple[Link, ...] = ()


# -- arguments -----------------------------------------------------------------------------------


def limit_arg(value: Any, bounds: tuple[int, int, int]) -> int:
    """``limit``: a whole number within ``bounds`` (low, high, default when absent)."""
    low, high, default = bounds
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParams("limit", f"must be a whole number from {low} to {high}")
    if not low <= value <= high:
        raise InvalidParams("limit", f"must be from {low} to {high}")
    return value


def text_arg(value: Any, field: str, max_chars: int, *, required: bool) -> str | None:
    """A string argument of at most ``max_chars`` characters, whole characters only (None when
    absent and optional)."""
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise InvalidParams(field, "must be a non-empty string")
    if len(value) > max_chars:
        raise InvalidParams(field, f"must be at most {max_chars} characters")
    if not value.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        # half of a character (a string cut inside an emoji): no stored text holds one
        raise InvalidParams(field, "contains a lone surrogate (half of a character, not text)")
    return value


def id_arg(value: Any, field: str) -> int | None:
    """A message id argument: a positive whole number (None when absent)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ROW_ID:
        raise InvalidParams(field, "must be a message id (a positive whole number)")
    return value


# -- rendering -----------------------------------------------------------------------------------


def when(ms: int | None) -> str | None:
    """A row's time as ISO 8601 UTC (None: not recorded)."""
    if ms is None:
        return None
    return (
        datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


def cut(text: str, limit: int = ROW_CHARS) -> str:
    """``text`` cut as tool results are (first ⅔ and last ⅓ with a marker between)."""
    return truncate_tool_result(text, limit)


def tokens_of(answer: Answer) -> int:
    """What an answer costs the agent: the larger of its two renderings (the text counted with
    the links that come with it as content)."""
    links = sum(text_tokens(json.dumps(link.wire(), ensure_ascii=False)) for link in answer.links)
    return max(
        text_tokens(answer.text) + links,
        text_tokens(json.dumps(answer.structured, ensure_ascii=False)),
    )


def bounded(
    items: Sequence[T],
    build: Callable[[Sequence[T]], Answer],
    max_tokens: int,
    cost: Callable[[Answer], int] = tokens_of,
) -> tuple[Answer, int]:
    """The answer of the longest prefix of ``items`` within ``max_tokens`` by ``cost`` (at least
    the answer of none), and how many items were left out. Binary search: the cost grows with
    the prefix."""
    low, high = 0, len(items)
    best = build(items[:0])
    if cost(best) > max_tokens:
        return best, len(items)
    while low < high:
        mid = (low + high + 1) // 2
        answer = build(items[:mid])
        if cost(answer) <= max_tokens:
            low, best = mid, answer
        else:
            high = mid - 1
    if low == 0:
        best = build(items[:0])
    return best, len(items) - low


def left_out(count: int, what: str) -> str:
    """The line that says what a bounded answer left out (empty: nothing)."""
    return (
        ""
        if count == 0
        else f"\n({count} {what} left out: ask with a smaller limit or a narrower query.)"
    )


# -- the tools -----------------------------------------------------------------------------------


def search_history(manager: ChatHistoryManager, scope: Scope, arguments: dict[str, Any]) -> Answer:
    """``search_history {query, conversationId?, limit?}``: the version-2 search grammar over
    what users and assistants said, best first, each hit with its conversation and title."""
    query = text_arg(arguments.get("query"), "query", 100_000, required=True)
    assert query is not None
    try:
        check_query(query)
    except InvalidParams as exc:
        raise InvalidParams("query", exc.why) from None
    conversation = text_arg(
        arguments.get("conversationId"), "conversationId", ID_CHARS, required=False
    )
    limit = limit_arg(arguments.get("limit"), SEARCH_LIMIT)
    result = search.search(
        manager, SearchScope(scope.workspace, conversation, SEARCH_ROLES), query, limit
    )
    titles: dict[Key, str | None] = {}
    for hit in result.hits:
        key = Key(hit.workspace, hit.conversation)
        if key not in titles:
            titles[key] = conversations.info(manager, key).title

    def build(hits: Sequence[SearchHit]) -> Answer:
        items: list[Hit] = [
            {
                "conversationId": hit.conversation,
                "title": titles[Key(hit.workspace, hit.conversation)],
                "workspace": hit.workspace,
                "messageId": hit.id,
                "role": hit.role,
                "time": when(hit.timestamp) or "",
                "snippet": hit.snippet,
                "onActivePath": hit.on_active_path,
            }
            for hit in hits
        ]
        omitted = len(result.hits) - len(hits)
        output: SearchOutput = {"results": items, "omitted": omitted, "hasMore": result.has_more}
        lines = [
            f'{n}. [{item["conversationId"]}] "{item["title"] or "untitled"}" · message '
            f"{item['messageId']} · {item['role']} · {item['time']}"
            + ("" if item["onActivePath"] else " · on another branch")
            + f"\n   {item['snippet']}"
            for n, item in enumerate(items, 1)
        ]
        text = "\n".join(lines) if lines else "No messages match."
        if result.has_more:
            text += "\n(More messages match: raise the limit or narrow the query.)"
        links = tuple(
            Link(
                uris.conversation_uri(key, every_workspace=scope.every_workspace),
                key.conversation,
                titles[key],
                uris.MARKDOWN,
            )
            for key in dict.fromkeys(Key(hit.workspace, hit.conversation) for hit in hits)
        )
        return Answer(dict(output), text + left_out(omitted, "results"), links)

    answer, _ = bounded(result.hits, build, scope.max_tokens)
    return answer


def _item(info: ConversationInfo) -> ConversationItem:
    return {
        "conversationId": info.conversation_id,
        "title": info.title,
        "workspace": info.workspace,
        "lastActivity": when(info.last_activity),
        "messageCount": info.message_count,
    }


def _listing(
    manager: ChatHistoryManager,
    scope: Scope,
    limit: int,
    cursor: str | None,
    title_contains: str | None,
) -> tuple[list[ConversationInfo], str | None]:
    """The page of ``limit`` conversations after ``cursor`` whose title holds ``title_contains``
    (case-folded), and the cursor after the last one taken."""
    if title_contains is None:
        page = conversations.list_page(manager, scope.workspace, limit, cursor)
        return list(page.conversations), page.next_cursor
    wanted = title_contains.casefold()
    found: list[ConversationInfo] = []
    position = cursor
    while True:
        page = conversations.list_page(manager, scope.workspace, 200, position)
        for n, info in enumerate(page.conversations):
            if info.title is not None and wanted in info.title.casefold():
                found.append(info)
                if len(found) == limit:
                    # the cursor right after this one: the page's first n + 1 from its start
                    rest = conversations.list_page(manager, scope.workspace, n + 1, position)
                    more = n + 1 < len(page.conversations) or page.next_cursor is not None
                    return found, rest.next_cursor if more else None
        if page.next_cursor is None:
            return found, None
        position = page.next_cursor


def list_conversations(
    manager: ChatHistoryManager, scope: Scope, arguments: dict[str, Any]
) -> Answer:
    """``list_conversations {limit?, cursor?, titleContains?}``: newest activity first."""
    limit = limit_arg(arguments.get("limit"), LIST_LIMIT)
    cursor = text_arg(arguments.get("cursor"), "cursor", 4_096, required=False)
    title = text_arg(arguments.get("titleContains"), "titleContains", 1_000, required=False)
    infos, next_cursor = _listing(manager, scope, limit, cursor, title)

    def build(shown: Sequence[ConversationInfo]) -> Answer:
        items = [_item(info) for info in shown]
        omitted = len(infos) - len(shown)
        # A cut answer continues after the last one shown, so nothing is skipped.
        following = next_cursor
        if omitted and shown:
            following = conversations.list_page(
                manager, scope.workspace, len(shown), cursor
            ).next_cursor
        elif omitted:
            following = cursor
        output: ListOutput = {"conversations": items, "nextCursor": following, "omitted": omitted}
        lines = [
            f'- [{item["conversationId"]}] "{item["title"] or "untitled"}" · '
            f"{item['messageCount']} messages · last {item['lastActivity'] or 'never'}"
            + (f" · {item['workspace']}" if scope.workspace is None else "")
            for item in items
        ]
        text = "\n".join(lines) if lines else "No conversations."
        if following is not None:
            text += f"\n(More: call again with cursor {following}.)"
        return Answer(dict(output), text + left_out(omitted, "conversations"))

    answer, _ = bounded(infos, build, scope.max_tokens)
    return answer


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def row_item(row: StoredMessage) -> RowItem:
    """A row as ``read_conversation`` and the conversation resources show it (contents cut)."""
    item: RowItem = {
        "id": row.id,
        "role": row.role,
        "time": when(row.timestamp),
        "content": cut(row.content),
    }
    if row.tool_calls:
        item["toolCalls"] = [
            {"id": call.id, "name": call.name, "arguments": cut(_arguments_text(call.arguments))}
            for call in row.tool_calls
        ]
    if row.tool_call_id is not None:
        item["toolCallId"] = row.tool_call_id
    status = getattr(row, "status", "complete")
    if status != "complete":
        item["status"] = status
    return item


def _row_text(item: RowItem) -> str:
    head = f"[{item['id']}] {item['role']} · {item['time'] or 'no time'}"
    if "status" in item:
        head += f" · {item['status']}"
    parts = [head]
    if item["content"]:
        parts.append(item["content"])
    for call in item.get("toolCalls", []):
        parts.append(f"→ {call['name']}({call['arguments']})")
    return "\n".join(parts)


def find_conversation(manager: ChatHistoryManager, scope: Scope, conversation: str) -> Key:
    """The key of ``conversation`` in scope; one of another workspace looks unknown."""
    key = scope.key(conversation)
    if key is None:
        matches = [
            info.key
            for info in conversations.list_page(manager, None, None, None).conversations
            if info.conversation_id == conversation
        ]
        key = matches[0] if len(matches) == 1 else None
    if key is None or conversations.info(manager, key).message_count == 0:
        raise InvalidParams("conversationId", "no conversation with this id in this workspace")
    return key


def read_conversation(
    manager: ChatHistoryManager, scope: Scope, arguments: dict[str, Any]
) -> Answer:
    """``read_conversation {conversationId, aroundId?, limit?}``: the conversation's rows as text
    — the newest ``limit``, or those around ``aroundId`` — widened from the centre while they fit
    the bound. The rows are the active path's, or, when ``aroundId`` names a row of another
    branch, that row's path (``branches.path_through``: nothing is switched)."""
    conversation = text_arg(
        arguments.get("conversationId"), "conversationId", ID_CHARS, required=True
    )
    assert conversation is not None
    around = id_arg(arguments.get("aroundId"), "aroundId")
    limit = limit_arg(arguments.get("limit"), READ_LIMIT)
    key = find_conversation(manager, scope, conversation)
    rows = list(history.get(manager, key).messages)
    title = conversations.info(manager, key).title
    active = True
    if around is None:
        centre = len(rows) - 1
    else:
        centre = next((n for n, row in enumerate(rows) if row.id >= around), -1)
        if centre < 0 or rows[centre].id != around:
            rows, active = _other_path(manager, key, around)
            centre = next(n for n, row in enumerate(rows) if row.id == around)
    order = _widening(centre, len(rows), limit)

    def build(taken: Sequence[int]) -> Answer:
        chosen = sorted(taken)
        items = [row_item(rows[n]) for n in chosen]
        before = chosen[0] if chosen else len(rows)
        after = len(rows) - 1 - chosen[-1] if chosen else 0
        output: ReadOutput = {
            "conversationId": key.conversation,
            "title": title,
            "workspace": key.workspace,
            "rows": items,
            "omittedBefore": before if chosen else len(rows),
            "omittedAfter": after,
            "onActivePath": active,
        }
        text = f'Conversation {key.conversation} "{title or "untitled"}"'
        if not active:
            text += "\n(Another branch's path, not the conversation's active path.)"
        if chosen and before:
            text += f"\n({before} earlier messages not shown.)"
        text += "\n\n" + "\n\n".join(_row_text(item) for item in items)
        if after:
            text += f"\n\n({after} later messages not shown.)"
        return Answer(dict(output), text)

    answer, _ = bounded(order, build, scope.max_tokens)
    return answer


def _other_path(
    manager: ChatHistoryManager, key: Key, around: int
) -> tuple[list[StoredMessage], bool]:
    """The path through ``around``, a row off the rows read (another branch's, or one that came
    onto the active path since). Raises InvalidParams ``aroundId`` (no row of the conversation)."""
    try:
        path = branches.path_through(manager, key, around)
    except InvalidParams:
        raise InvalidParams("aroundId", "no message with this id in the conversation") from None
    return list(path.messages), path.on_active_path


def _widening(centre: int, count: int, limit: int) -> list[int]:
    """Row positions from ``centre`` outwards (the newer side first), at most ``limit``."""
    order: list[int] = []
    step = 0
    while len(order) < min(limit, count):
        for n in (centre + step, centre - step) if step else (centre,):
            if 0 <= n < count and n not in order and len(order) < limit:
                order.append(n)
        step += 1
    return order

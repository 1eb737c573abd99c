"""Conversations as MCP resources (docs/mcp.md "Conversations as resources"), over
``ChatHistoryManager`` and free of the MCP SDK, as the tools are: the listing a client pages
through, and one conversation read as Markdown or JSON — its newest rows that fit the token
bound, saying how many earlier ones were left out — and the completion of a template's
``conversationId``. Same scope as the tools: one workspace (an
id of another reads as unknown) unless the command line says every workspace; deleted text is
never read, since each read is the manager's read of that moment.

This module spells the resources' wire names (the JSON rendering is read_conversation's)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from chat_history.errors import InvalidParams
from chat_history.mcp import tools, uris
from chat_history.model import Key
from chat_history.policy.tokens import text_tokens
from chat_history.service import conversations, history
from chat_history.service.conversations import ConversationInfo
from chat_history.service.manager import ChatHistoryManager

#: Conversations per ``resources/list`` page (the listing feeds a picker, not the model).
PAGE = 100
#: The longest cursor read (those handed out are far shorter).
CURSOR_CHARS = 4_096
#: Completion: the most values answered (the protocol's limit) and conversations looked at.
COMPLETIONS = 100
COMPLETION_SCAN = 5_000
#: No rendered row costs fewer estimated tokens than this (its heading or JSON keys alone), so
#: a read fetches at most ``max_tokens // ROW_FLOOR_TOKENS + 1`` of the newest rows.
ROW_FLOOR_TOKENS = 5


@attrs.frozen
class Listed:
    """One conversation as ``resources/list`` shows it."""

    uri: str
    name: str
    title: str | None
    description: str
    last_modified: str | None


@attrs.frozen
class Contents:
    """A read resource: its URI as asked, its MIME type and its text."""

    uri: str
    mime_type: str
    text: str


class NotFound(Exception):
    """A well-formed URI that names no conversation in scope (or nothing of this server)."""


def listing(
    manager: ChatHistoryManager, scope: tools.Scope, cursor: str | None
) -> tuple[list[Listed], str | None]:
    """One page of the conversations in scope, newest activity first, and the next cursor.
    Raises InvalidParams ``cursor`` for a cursor this database did not hand out."""
    if cursor is not None and len(cursor) > CURSOR_CHARS:
        raise InvalidParams("cursor", f"must be at most {CURSOR_CHARS} characters")
    page = conversations.list_page(manager, scope.workspace, PAGE, cursor)
    every = scope.every_workspace
    listed = [_listed(info, every) for info in page.conversations if info.message_count > 0]
    return listed, page.next_cursor


def _listed(info: ConversationInfo, every_workspace: bool) -> Listed:
    description = f"{info.message_count} messages, last activity {tools.when(info.last_activity)}"
    if every_workspace:
        description += f", workspace {info.workspace}"
    return Listed(
        uri=uris.conversation_uri(info.key, every_workspace=every_workspace),
        name=info.conversation_id,
        title=info.title,
        description=description,
        last_modified=tools.when(info.last_activity),
    )


def _key(manager: ChatHistoryManager, scope: tools.Scope, target: uris.Target) -> Key:
    """The conversation ``target`` names in scope; NotFound when it names none (another
    workspace's included: it looks unknown)."""
    if target.workspace is not None:
        if scope.workspace is not None and target.workspace != scope.workspace:
            raise NotFound
        key = Key(target.workspace, target.conversation)
        if conversations.info(manager, key).message_count == 0:
            raise NotFound
        return key
    try:
        return tools.find_conversation(manager, scope, target.conversation)
    except InvalidParams:
        raise NotFound from None


def read(manager: ChatHistoryManager, scope: tools.Scope, uri: str) -> Contents:
    """The conversation ``uri`` names, rendered as it asks, within the token bound. Raises
    InvalidParams ``uri`` (malformed) or NotFound."""
    try:
        target = uris.parse(uri)
    except uris.NotOurs:
        raise NotFound from None
    key = _key(manager, scope, target)
    info = conversations.info(manager, key)
    fetched = history.get(manager, key, scope.max_tokens // ROW_FLOOR_TOKENS + 1).messages
    rows = [tools.row_item(row) for row in fetched]
    newest_first = list(range(len(rows) - 1, -1, -1))

    def build(taken: Sequence[int]) -> tools.Answer:
        shown = [rows[n] for n in sorted(taken)]
        before = max(info.message_count - len(shown), 0)
        output: tools.ReadOutput = {
            "conversationId": key.conversation,
            "title": info.title,
            "workspace": key.workspace,
            "rows": shown,
            "omittedBefore": before,
            "omittedAfter": 0,
        }
        if target.rendering == "json":
            return tools.Answer(dict(output), json.dumps(output, ensure_ascii=False))
        return tools.Answer(dict(output), _markdown(info, shown, before, scope.every_workspace))

    answer, _ = tools.bounded(
        newest_first, build, scope.max_tokens, cost=lambda a: text_tokens(a.text)
    )
    return Contents(uri, target.mime_type, answer.text)


def _markdown(
    info: ConversationInfo, rows: Sequence[tools.RowItem], before: int, every_workspace: bool
) -> str:
    """The conversation as Markdown: a heading, what was left out, then each row under its own
    heading (id, role, time), tool calls as ``name(arguments)``."""
    lines = [f"# {info.title or 'Untitled conversation'}", ""]
    about = f"Conversation `{info.conversation_id}` · {info.message_count} messages"
    if every_workspace:
        about += f" · workspace {info.workspace}"
    lines.append(about)
    if before:
        lines += [
            "",
            f"({before} earlier messages not shown: read_conversation with aroundId reads them.)",
        ]
    for item in rows:
        head = f"## [{item['id']}] {item['role']} · {item['time'] or 'no time'}"
        if "toolCallId" in item:
            head += f" · result of {item['toolCallId']}"
        if "status" in item:
            head += f" · {item['status']}"
        lines += ["", head]
        if item["content"]:
            lines += ["", item["content"]]
        for call in item.get("toolCalls", []):
            lines += ["", f"→ {call['name']}({call['arguments']})"]
    return "\n".join(lines) + "\n"


def complete(
    manager: ChatHistoryManager, scope: tools.Scope, template: str, argument: str, value: str
) -> tuple[list[str], bool]:
    """``completion/complete`` of a template's ``conversationId``: the ids in scope, newest
    activity first, that start with ``value`` or whose title holds it (case-folded); at most
    ``COMPLETIONS``, and whether more may match. Looks at ``COMPLETION_SCAN`` conversations at
    most. Raises InvalidParams ``ref`` (not one of the templates) or ``argument``."""
    every = scope.every_workspace
    if template not in {t[0] for t in uris.templates(every_workspace=every)}:
        raise InvalidParams("ref", "must be one of this server's resource templates")
    if argument == "workspace" and every:
        return [], False  # a workspace comes with its conversation in resources/list
    if argument != "conversationId":
        raise InvalidParams("argument", "the templates take conversationId (and workspace)")
    wanted = value[: uris.ID_CHARS].casefold()
    found: list[str] = []
    cursor: str | None = None
    for _ in range(COMPLETION_SCAN // 200):
        page = conversations.list_page(manager, scope.workspace, 200, cursor)
        for info in page.conversations:
            title = (info.title or "").casefold()
            matches = info.conversation_id.casefold().startswith(wanted) or wanted in title
            if matches and info.message_count and info.conversation_id not in found:
                if len(found) == COMPLETIONS:
                    return found, True
                found.append(info.conversation_id)
        cursor = page.next_cursor
        if cursor is None:
            return found, False
    return found, True

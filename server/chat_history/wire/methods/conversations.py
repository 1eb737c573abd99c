"""The conversations family: ``chatHistory/listConversations``, ``updateConversation`` and
``fork`` — their params, argument checks, result translators and handlers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Key
from chat_history.service import conversations
from chat_history.service.conversations import ConversationUpdate
from chat_history.service.manager import ChatHistoryManager
from chat_history.wire.checks import (
    MAX_CONTENT_CHARS,
    SessionWorkspace,
    check_id,
    check_int,
    check_json,
    check_text,
    row_id,
)
from chat_history.wire.methods.base import Method, Session
from chat_history.wire.protocol import (
    ABSENT,
    KeyParams,
    json_type,
    wire,
)
from chat_history.wire.reports import wire_listing

if TYPE_CHECKING:
    from chat_history.service.conversations import ConversationPage


@attrs.define
class ListParams:
    """``listConversations``: whose conversations (a workspace, or all), and the page (``limit``,
    ``cursor``)."""

    workspace: str | None = None
    all_workspaces: bool | None = None
    limit: int | None = None
    cursor: str | None = None


@attrs.define
class UpdateConversationParams(KeyParams):
    """``updateConversation``: a title (null: back to the automatic one; ``ABSENT``: left as it is)
    and metadata replacing the old."""

    title: Any = ABSENT
    metadata: dict[str, Any] | None = None


@attrs.define
class ForkParams(KeyParams):
    """``fork``: the new conversation's id (and workspace), and the newest row copied."""

    new_conversation_id: str = attrs.field(kw_only=True)
    through_id: int | None = None
    new_workspace: str | None = None


# -- version 2: conversations and edits ------------------------------------------------------------

#: ``listConversations`` pages hold 1 to 1,000 conversations.
MAX_LIST_PAGE = 1_000


def list_args(
    params: ListParams, session: SessionWorkspace
) -> tuple[str | None, int | None, str | None]:
    """``listConversations``'s (workspace — None for every workspace —, limit, cursor); the
    cursor is checked against the database's key when the listing reads it."""
    workspace = None if params.all_workspaces else session.named(params.workspace)
    limit = check_int(params.limit, "limit", 1, MAX_LIST_PAGE)
    return workspace, limit, params.cursor


def update_args(params: UpdateConversationParams) -> ConversationUpdate:
    """``updateConversation``'s change: a title of 1-200 code points or null, an object of
    metadata."""
    title = params.title
    set_title = title is not ABSENT
    if set_title and title is not None:
        if not isinstance(title, str):
            raise InvalidParams("title", f"expected a string or null, got {json_type(title)}")
        check_text(title, "title", MAX_CONTENT_CHARS)  # the title's own bounds: the service
    metadata = params.metadata
    if metadata is not None:
        check_json(metadata, "metadata")
    return ConversationUpdate(
        set_title=set_title, title=title if set_title else None, metadata=metadata
    )


def fork_args(
    params: ForkParams, source_workspace: str, session: SessionWorkspace
) -> tuple[str, str, int | None]:
    """``fork``'s (target workspace — the source's by default —, target id, throughId)."""
    target = check_id(params.new_conversation_id, "newConversationId")
    workspace = (
        session.named(params.new_workspace, "newWorkspace")
        if params.new_workspace is not None
        else source_workspace
    )
    through = None if params.through_id is None else row_id(params.through_id, "throughId")
    return workspace, target, through


def wire_page(page: ConversationPage) -> dict[str, Any]:
    """A ``listConversations`` page: its conversations and the next page's cursor."""
    return {**wire_listing(page.conversations), "nextCursor": page.next_cursor}


# -- handlers


def list_page(m: ChatHistoryManager, ls: Session, p: ListParams) -> Any:
    """``chatHistory/listConversations``: a page of the listing (version 1's call, without paging,
    is the whole listing in one page)."""
    return wire_page(conversations.list_page(m, *list_args(p, ls.session_workspace)))


def update_conversation(m: ChatHistoryManager, ls: Session, p: UpdateConversationParams) -> Any:
    """``chatHistory/updateConversation``: set the title and/or replace the metadata."""
    return wire(conversations.update(m, ls.key(p), update_args(p)))


def fork(m: ChatHistoryManager, ls: Session, p: ForkParams) -> Any:
    """``chatHistory/fork``: into ``newWorkspace`` when given, else the source's workspace."""
    key = ls.key(p)
    workspace, target, through = fork_args(p, key.workspace, ls.session_workspace)
    return wire(conversations.fork(m, key, Key(workspace, target), through))


METHODS = (
    Method("chatHistory/listConversations", ListParams, list_page),
    Method("chatHistory/updateConversation", UpdateConversationParams, update_conversation),
    Method("chatHistory/fork", ForkParams, fork),
)

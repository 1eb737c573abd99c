"""The search family: ``chatHistory/search`` — its params, scope checks, answer and handler."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import ROLES
from chat_history.policy.search.query import check_query
from chat_history.policy.search.rank import SearchScope
from chat_history.service import search as search_service
from chat_history.service.manager import ChatHistoryManager
from chat_history.wire.checks import (
    SessionWorkspace,
    check_id,
    check_int,
)
from chat_history.wire.methods.base import Method, Session

if TYPE_CHECKING:
    from chat_history.service.search import SearchResult


@attrs.define
class SearchParams:
    """``search``: the query and its scope (one conversation, a workspace or all of them), roles and
    page size."""

    query: str
    conversation_id: str | None = None
    workspace: str | None = None
    all_workspaces: bool | None = None
    roles: list[str] | None = None
    limit: int | None = None


#: ``chatHistory/search``: the roles searched by default, and the page size (default, largest).
SEARCH_ROLES: tuple[str, ...] = ("user", "assistant")
SEARCH_LIMIT = 50
MAX_SEARCH_LIMIT = 200


def search_args(params: SearchParams, session: SessionWorkspace) -> tuple[SearchScope, str, int]:
    """``chatHistory/search``'s (scope, query, limit), checked. ``allWorkspaces`` searches every
    workspace (a ``workspace`` given with it is still checked, then not used); ``roles`` may be
    empty (nothing is found). The query's text is data: any character is accepted."""
    query = check_query(params.query)
    roles = SEARCH_ROLES if params.roles is None else tuple(params.roles)
    for i, role in enumerate(roles):
        if role not in ROLES:
            raise InvalidParams(f"roles[{i}]", f"unknown role; expected one of {', '.join(ROLES)}")
    workspace = session.named(params.workspace)
    conversation = (
        check_id(params.conversation_id, "conversationId")
        if params.conversation_id is not None
        else None
    )
    limit = check_int(params.limit, "limit", 1, MAX_SEARCH_LIMIT) or SEARCH_LIMIT
    scope = SearchScope(
        workspace=None if params.all_workspaces else workspace,
        conversation=conversation,
        roles=tuple(dict.fromkeys(roles)),
    )
    return scope, query, limit


def wire_search(result: SearchResult) -> dict[str, Any]:
    """``search``'s answer: each hit with its conversation, row and snippet, and whether more
    remain."""
    return {
        "results": [
            {
                "workspace": hit.workspace,
                "conversationId": hit.conversation,
                "id": hit.id,
                "turn": hit.turn,
                "role": hit.role,
                "timestamp": hit.timestamp,
                "snippet": hit.snippet,
                "highlights": [list(span) for span in hit.highlights],
            }
            for hit in result.hits
        ],
        "hasMore": result.has_more,
    }


def search(m: ChatHistoryManager, ls: Session, p: SearchParams) -> Any:
    """``chatHistory/search``: full-text search of one conversation, a workspace or all of them."""
    return wire_search(search_service.search(m, *search_args(p, ls.session_workspace)))


METHODS = (Method("chatHistory/search", SearchParams, search),)

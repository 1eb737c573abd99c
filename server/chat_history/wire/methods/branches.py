"""The branches family (protocol.md "Version 5" → Conversation trees): ``chatHistory/switchBranch``
and ``getTree`` — their params, argument checks, handlers (one ``service.branches`` call each)
and result translators."""

from __future__ import annotations

from typing import Any

import attrs

from chat_history.service import branches
from chat_history.service.branches import SwitchResult, TreePage
from chat_history.service.manager import ChatHistoryManager
from chat_history.wire.checks import MAX_PAGE, check_int, expected_last, row_id
from chat_history.wire.methods.base import Method, Session
from chat_history.wire.protocol import ABSENT, KeyParams, wire, wire_message
from chat_history.wire.transport import frames


@attrs.define
class SwitchBranchParams(KeyParams):
    """``switchBranch``: the row whose path becomes the active path, and the page of it to answer
    with (``limit``: the newest rows, as ``get``'s)."""

    id: int = attrs.field(kw_only=True)
    expected_last_id: Any = ABSENT
    limit: int | None = None


@attrs.define
class GetTreeParams(KeyParams):
    """``getTree``: the rows after ``afterId`` (from the first when absent), ``limit`` of them."""

    after_id: int | None = None
    limit: int | None = None


def wire_switch(result: SwitchResult) -> dict[str, Any]:
    """``switchBranch``'s answer: the active leaf and the active path's rows (each made as the
    answer is written, as ``get``'s)."""
    return {
        "activeLeafId": result.active_leaf_id,
        "messages": frames.JsonArray(result.messages, wire_message),
        "hasMore": result.has_more,
    }


def wire_tree(page: TreePage) -> dict[str, Any]:
    """``getTree``'s answer."""
    return {
        "nodes": wire(page.nodes),
        "activeLeafId": page.active_leaf_id,
        "hasMore": page.has_more,
    }


def switch_branch(m: ChatHistoryManager, ls: Session, p: SwitchBranchParams) -> Any:
    """``chatHistory/switchBranch``: the path through row ``id`` becomes the active path."""
    return wire_switch(
        branches.switch(
            m,
            ls.key(p),
            row_id(p.id, "id"),
            expected=expected_last(p),
            limit=check_int(p.limit, "limit", 1, MAX_PAGE),
        )
    )


def get_tree(m: ChatHistoryManager, ls: Session, p: GetTreeParams) -> Any:
    """``chatHistory/getTree``: a page of the conversation's rows on every branch."""
    return wire_tree(
        branches.tree(
            m,
            ls.key(p),
            check_int(p.after_id, "afterId", 0),
            check_int(p.limit, "limit", 1, branches.MAX_TREE_PAGE),
        )
    )


METHODS = (
    Method("chatHistory/switchBranch", SwitchBranchParams, switch_branch),
    Method("chatHistory/getTree", GetTreeParams, get_tree),
)

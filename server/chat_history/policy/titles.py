"""Conversation titles (protocol.md "Version 2" → Conversations, Edit/rewind/branch): the automatic
title, the client's title bounds, and the title a fork gets."""

from __future__ import annotations

from collections.abc import Iterable

from chat_history.errors import InvalidParams
from chat_history.model import Message
from chat_history.policy.turns import is_real_user

#: An automatic title is at most this many code points (79 and ``…`` when cut).
AUTO_TITLE_LENGTH = 80
#: A client's title (and a fork's) is 1–200 code points.
TITLE_LENGTH = 200
ELLIPSIS = "…"
FORK_SUFFIX = " (fork)"


def title_text(text: str) -> str | None:
    """One message's text as an automatic title: trimmed, every whitespace run collapsed to one
    space, at most 80 code points (the first 79 and ``…`` when longer); ``None`` when blank."""
    collapsed = " ".join(text.split())
    if not collapsed:
        return None
    if len(collapsed) > AUTO_TITLE_LENGTH:
        return collapsed[: AUTO_TITLE_LENGTH - 1] + ELLIPSIS
    return collapsed


def auto_title(rows: Iterable[Message]) -> str | None:
    """The automatic title of a conversation with ``rows`` (oldest first): from the first real
    user message (policy.turns.is_real_user) whose text is not blank; ``None`` when none is."""
    for row in rows:
        if is_real_user(row):
            title = title_text(row.content)
            if title is not None:
                return title
    return None


def check_title(title: str, field: str = "title") -> str:
    """A client's title as given, or InvalidParams naming ``field``: it must hold 1–200 code
    points, not all of them whitespace (a blank title would show as no title at all)."""
    if not title.strip():
        raise InvalidParams(field, "must not be empty or blank (null restores the automatic title)")
    if len(title) > TITLE_LENGTH:
        raise InvalidParams(field, f"must be at most {TITLE_LENGTH} characters, got {len(title)}")
    return title


def fork_title(title: str) -> str:
    """The user title of a fork: ``"<title> (fork)"``, the title cut so the whole fits 200 code
    points. (An automatic title is not copied: the fork's own rows give it one.)"""
    return title[: TITLE_LENGTH - len(FORK_SUFFIX)] + FORK_SUFFIX

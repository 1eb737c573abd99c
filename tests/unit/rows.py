"""Row builders shared by the policy and manager tests: S system, U user, A assistant (with the
ids of the calls it makes), T tool result answering a call id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_history.model import Message, StoredMessage, ToolCall
from chat_history.policy.tokens import stored_tokens
from chat_history.policy.turns import is_real_user


def S(text: str = "You are helpful.") -> Message:
    return Message(role="system", content=text)


def U(text: str = "question", **kw: Any) -> Message:
    return Message(role="user", content=text, **kw)


def A(text: str = "answer", *calls: str) -> Message:
    return Message(
        role="assistant",
        content=text,
        tool_calls=tuple(
            ToolCall(id=c, name="read_file", arguments={"path": "a.py"}) for c in calls
        ),
    )


def T(call_id: str, text: str = "file text", **kw: Any) -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, name="read_file", **kw)


def as_stored(rows: Sequence[Message], first_id: int = 1) -> list[StoredMessage]:
    """``rows`` as a conversation stores them: ids from ``first_id`` in order, turn numbers as
    ``append`` gives them, each row's stored estimate."""
    out: list[StoredMessage] = []
    turn = 0
    for offset, row in enumerate(rows):
        if is_real_user(row):
            turn += 1
        out.append(
            StoredMessage.of(row, id=first_id + offset, turn=turn, tokens=stored_tokens(row))
        )
    return out

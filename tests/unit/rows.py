"""Row builders shared by the policy and manager tests: S system, U user, A assistant (with the
ids of the calls it makes), T tool result answering a call id."""

from __future__ import annotations

from typing import Any

from chat_history.model import Message, ToolCall


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

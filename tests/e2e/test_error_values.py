"""A -32602 answer names the field and the rule, never the value the client sent (issue 35
item 16): a bad role, timestamp, tool call id, provider name, out-of-range integer or row id is
not quoted back, however long or private it is. Over the real server process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.wire import Wire

#: a value no rule could mention by accident
SECRET = "s3cr3t-" + "x" * 300


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[Wire]:
    server = Wire(tmp_path)
    try:
        server.initialize(settings={"enableAutoPruning": False}, configuration=False)
        yield server
    finally:
        server.close()


def append(conversation: str, *messages: dict[str, Any]) -> dict[str, Any]:
    return {"conversationId": conversation, "messages": list(messages)}


CASES: list[tuple[str, str, dict[str, Any], str, str]] = [
    (
        "role",
        "chatHistory/append",
        append("c", {"role": SECRET, "content": "hi"}),
        "messages[0].role",
        "unknown role; expected one of",
    ),
    (
        "timestamp",
        "chatHistory/append",
        append("c", {"role": "user", "content": "hi", "timestamp": SECRET}),
        "messages[0].timestamp",
        "is not an ISO-8601 date-time",
    ),
    (
        "tool call id",
        "chatHistory/append",
        append(
            "c",
            {"role": "user", "content": "hi"},
            {"role": "tool", "toolCallId": "s3cr3t-call", "content": "r"},
        ),
        "messages[1].toolCallId",
        "answers no pending tool call of its turn",
    ),
    (
        "search role",
        "chatHistory/search",
        {"query": "hi", "roles": ["user", SECRET]},
        "roles[1]",
        "unknown role; expected one of",
    ),
    (
        "provider",
        "chatHistory/prepare",
        {"conversationId": "c", "provider": SECRET},
        "provider",
        "unknown provider; known kinds:",
    ),
    (
        "usage provider",
        "chatHistory/reportUsage",
        {"provider": SECRET, "estimatedTokens": 1, "promptTokens": 1},
        "provider",
        "unknown provider; known kinds:",
    ),
]


@pytest.mark.parametrize(
    ("what", "method", "params", "field", "rule"), CASES, ids=[c[0] for c in CASES]
)
def test_a_bad_string_is_named_by_its_field_and_rule_not_quoted(
    wire: Wire, what: str, method: str, params: dict[str, Any], field: str, rule: str
) -> None:
    error = wire.error(method, params)
    assert error["code"] == -32602
    assert error["data"] == {"field": field}
    assert rule in error["message"]
    assert "s3cr3t" not in error["message"]
    assert "s3cr3t" not in str(error)


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("chatHistory/get", {"conversationId": "c", "limit": 987_654_321}, "limit"),
        (
            "chatHistory/append",
            append("c", {"role": "user", "content": "x", "timestamp": -987_654_321}),
            "messages[0].timestamp",
        ),
        ("chatHistory/truncate", {"conversationId": "c", "fromId": 987_654_321}, "fromId"),
        (
            "chatHistory/editMessage",
            {"conversationId": "c", "id": 987_654_321, "content": "y"},
            "id",
        ),
        (
            "chatHistory/saveSummary",
            {"conversationId": "c", "summary": "s", "coversThroughId": 987_654_321},
            "coversThroughId",
        ),
    ],
)
def test_a_bad_number_is_named_by_its_field_and_rule_not_quoted(
    wire: Wire, method: str, params: dict[str, Any], field: str
) -> None:
    wire.call("chatHistory/append", append("c", {"role": "user", "content": "hi"}))
    error = wire.error(method, params)
    assert error["code"] == -32602
    assert error["data"] == {"field": field}
    assert "987" not in error["message"].replace(",", "")

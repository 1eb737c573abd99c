"""What an LSP client other than VS Code sends (Neovim's built-in client, a Lua plugin) over the
real process: required fields never defaulted, ``[]`` for empty objects, only real capabilities,
logs through window/logMessage, and the lifecycle corners (cancel, shutdown, exit, ``$/``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.wire import Wire

USER = {"role": "user", "content": "hello"}

pytestmark = [pytest.mark.engines, pytest.mark.usefixtures("server_databases")]


@pytest.fixture
def wire(tmp_path: Path) -> Any:
    client = Wire(tmp_path / "store")
    client.initialize(settings={"enableAutoPruning": False}, configuration=False)
    yield client
    client.close()


def state(wire: Wire) -> Any:
    """Everything a client can read back about the stored conversations."""
    return (
        wire.call("chatHistory/get", {"conversationId": "c"}),
        wire.call("chatHistory/listConversations", {}),
    )


def without(params: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != key}


def message_case(message: dict[str, Any], field: str) -> tuple[str, dict[str, Any], str]:
    return ("chatHistory/append", {"conversationId": "x", "messages": [message]}, field)


APPEND = {"conversationId": "x", "messages": [USER]}
TOOL = {"name": "read_file", "description": "reads"}
REQUIRED = [
    ("chatHistory/append", without(APPEND, "conversationId"), "conversationId"),
    ("chatHistory/append", without(APPEND, "messages"), "messages"),
    message_case({"content": "no role"}, "messages[0].role"),
    message_case({"role": "user"}, "messages[0].content"),
    message_case({"role": "tool", "content": "result"}, "messages[0].toolCallId"),
    message_case(
        {"role": "assistant", "toolCalls": [{"name": "f", "arguments": {}}]},
        "messages[0].toolCalls[0].id",
    ),
    message_case(
        {"role": "assistant", "toolCalls": [{"id": "1", "arguments": {}}]},
        "messages[0].toolCalls[0].name",
    ),
    message_case(
        {**USER, "attachments": [{"mimeType": "image/png", "data": "aGk="}]},
        "messages[0].attachments[0].kind",
    ),
    message_case(
        {**USER, "attachments": [{"kind": "image", "mimeType": "image/png"}]},
        "messages[0].attachments[0]",
    ),
    message_case(
        {**USER, "attachments": [{"kind": "image", "data": "aGk="}]},
        "messages[0].attachments[0].mimeType",
    ),
    ("chatHistory/get", {}, "conversationId"),
    ("chatHistory/format", {"provider": "openai"}, "conversationId"),
    (
        "chatHistory/format",
        {"conversationId": "c", "tools": [without(TOOL, "name")]},
        "tools[0].name",
    ),
    ("chatHistory/prepare", {"provider": "openai"}, "conversationId"),
    (
        "chatHistory/prepare",
        {"conversationId": "c", "tools": [without(TOOL, "name")]},
        "tools[0].name",
    ),
    ("chatHistory/saveSummary", {"summary": "s"}, "conversationId"),
    ("chatHistory/saveSummary", {"conversationId": "c"}, "summary"),
    ("chatHistory/saveSummary", {"conversationId": "c", "coversThroughId": 1}, "summary"),
    ("chatHistory/getSummary", {}, "conversationId"),
    ("chatHistory/clear", {}, "conversationId"),
]


def test_every_missing_required_field_is_refused_by_name_and_changes_nothing(wire: Wire) -> None:
    wire.call("chatHistory/append", {"conversationId": "c", "messages": [USER]})
    wire.call("chatHistory/saveSummary", {"conversationId": "c", "summary": "keep me"})
    before = state(wire)
    for method, params, field in REQUIRED:
        error = wire.error(method, params)
        assert error["code"] == -32602, (method, params, error)
        assert error["data"] == {"field": field}, (method, params, error)
    assert state(wire) == before
    assert wire.call("chatHistory/getSummary", {"conversationId": "c"})["summary"] == "keep me"


def test_an_empty_array_is_taken_as_an_empty_object(wire: Wire) -> None:
    stored = wire.call(
        "chatHistory/append",
        {
            "conversationId": "lua",
            "messages": [
                {**USER, "metadata": [], "providerData": []},
                {"role": "assistant", "toolCalls": [{"id": "1", "name": "f", "arguments": []}]},
            ],
        },
    )["messages"]
    assert stored[0]["metadata"] == {} and stored[0]["providerData"] == {}
    assert stored[1]["toolCalls"][0]["arguments"] == {}
    assert wire.call("chatHistory/listConversations", [])["conversations"]
    prepared = wire.call(
        "chatHistory/prepare",
        {"conversationId": "lua", "tools": [{"name": "f", "parameters": []}], "provider": "openai"},
    )
    assert prepared["body"]["messages"][0]["content"] == "hello"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"conversationId": "x", "messages": [{**USER, "metadata": [1]}]}, "messages[0].metadata"),
        (
            {"conversationId": "x", "messages": [{**USER, "providerData": ["a"]}]},
            "messages[0].providerData",
        ),
        (
            {
                "conversationId": "x",
                "messages": [
                    {"role": "assistant", "toolCalls": [{"id": "1", "name": "f", "arguments": [1]}]}
                ],
            },
            "messages[0].toolCalls[0].arguments",
        ),
        (["x"], "params"),
    ],
)
def test_a_non_empty_array_is_still_refused(wire: Wire, params: Any, field: str) -> None:
    error = wire.error("chatHistory/append", params)
    assert error["code"] == -32602 and error["data"] == {"field": field}


def shown(wire: Wire) -> list[str]:
    return [m["message"] for m in wire.messages_of("window/showMessage")]


def logged(wire: Wire) -> list[str]:
    return [m["message"] for m in wire.messages_of("window/logMessage")]


@pytest.mark.parametrize(
    "section",
    [
        [],
        {"context": []},
        {"context": {"historyPruning": []}},
        {"providers": []},
        {"maxMessages": 4, "context": []},
    ],
)
def test_empty_arrays_in_settings_are_empty_sections(tmp_path: Path, section: Any) -> None:
    wire = Wire(tmp_path / "store")
    try:
        wire.initialize(settings=section)
        wire.reply(wire.configuration_request(), [section])
        wire.notify("workspace/didChangeConfiguration", {"settings": {"chatHistory": section}})
        wire.call("chatHistory/get", {"conversationId": "c"})
        assert not shown(wire)
        assert not [m for m in logged(wire) if "Warning" in m or "unknown" in m]
    finally:
        _, stderr = wire.close()
    assert "unknown settings" not in stderr


def test_a_section_of_the_wrong_type_is_reported_like_a_bad_value(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "store")
    try:
        wire.initialize(settings={"context": 5, "maxMessages": 2}, configuration=False)
        for _ in range(2):
            wire.call("chatHistory/append", {"conversationId": "c", "messages": [USER]})
        third = wire.call("chatHistory/append", {"conversationId": "c", "messages": [USER]})
        assert third["pruned"] is not None  # maxMessages 2 still applies
        warnings = [m for m in wire.messages_of("window/showMessage") if m["type"] == 2]
        assert len(warnings) == 1 and "chatHistory.context = 5" in warnings[0]["message"]
        assert [m for m in logged(wire) if "chatHistory.context = 5" in m]
    finally:
        wire.close()


@pytest.mark.sqlite_only  # where the SQLite file goes (CHAT_HISTORY_STORAGE)
def test_initialization_options_as_an_empty_array(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "unused", env={"CHAT_HISTORY_STORAGE": str(tmp_path / "env")})
    try:
        wire.call(
            "initialize", {"processId": None, "capabilities": {}, "initializationOptions": []}
        )
        wire.notify("initialized", [])
        wire.call("chatHistory/append", {"conversationId": "c", "messages": [USER]})
    finally:
        wire.close()
    assert (tmp_path / "env").is_dir() and not (tmp_path / "unused").exists()


def test_warnings_reach_window_log_message_too(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "store")
    try:
        wire.initialize(settings={"maxMessages": "lots", "colour": 1}, configuration=False)
        wire.call("chatHistory/get", {"conversationId": "c"})
        assert any("chatHistory.maxMessages" in m for m in shown(wire))
        log = wire.messages_of("window/logMessage")
        assert any(m["type"] == 2 and "chatHistory.maxMessages" in m["message"] for m in log)
        assert any(m["type"] == 2 and "chatHistory.colour" in m["message"] for m in log)
    finally:
        _, stderr = wire.close()
    assert "chatHistory.maxMessages" in stderr  # stderr keeps the log


def test_only_the_capabilities_the_server_has_are_advertised(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "store")
    try:
        # What Neovim's client declares (abridged): document sync, workspace folders, commands.
        result = wire.initialize(
            configuration=True,
            capabilities={
                "workspace": {"configuration": True, "workspaceFolders": True, "applyEdit": True},
                "textDocument": {
                    "synchronization": {"didSave": True, "dynamicRegistration": False}
                },
                "window": {"workDoneProgress": True, "showMessage": {}},
            },
            workspaceFolders=[{"uri": "file:///proj", "name": "proj"}],
        )
        assert set(result["capabilities"]) == {"experimental"}
        assert result["capabilities"]["experimental"]["chatHistory"]["protocolVersion"] == 5
        wire.reply(wire.configuration_request(), [None])
        # A client that attaches a buffer anyway is ignored quietly, and the server still serves.
        doc = {"uri": "file:///proj/a.py", "languageId": "python", "version": 1, "text": "x"}
        wire.notify("textDocument/didOpen", {"textDocument": doc})
        wire.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": doc["uri"], "version": 2}, "contentChanges": [{"text": "y"}]},
        )
        wire.notify("textDocument/didClose", {"textDocument": {"uri": doc["uri"]}})
        wire.notify("$/setTrace", {"value": "off"})
        stored = wire.call("chatHistory/append", {"conversationId": "c", "messages": [USER]})
        assert len(stored["messages"]) == 1
        assert (
            wire.call("chatHistory/listConversations", {})["conversations"][0]["conversationId"]
            == "c"
        )
    finally:
        code, stderr = wire.close()
    assert code == 0
    assert "ERROR" not in stderr and "WARNING" not in stderr


def test_unknown_dollar_methods_are_quiet(wire: Wire) -> None:
    error = wire.error("$/chatHistory.probe", {})
    assert error["code"] == -32601
    wire.notify("$/someExtension", {"x": 1})
    wire.notify("$/cancelRequest", {"id": 12345})  # a request answered long ago
    assert wire.call("chatHistory/get", {"conversationId": "c"})["messages"] == []
    code, stderr = wire.close()
    assert code == 0
    assert "ERROR" not in stderr and "WARNING" not in stderr, stderr


def test_exit_without_shutdown_exits_1(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "store")
    wire.initialize(configuration=False)
    wire.notify("exit")
    assert wire.finish()[0] == 1


def test_exit_after_shutdown_exits_0(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "store")
    wire.initialize(configuration=False)
    assert wire.close()[0] == 0


BIG = [{"role": ("user", "assistant")[i % 2], "content": "x" * 4_000} for i in range(1_000)]


def rows(wire: Wire, conversation: str) -> int:
    return len(wire.call("chatHistory/get", {"conversationId": conversation})["messages"])


def test_a_cancelled_request_is_either_done_or_not_done_at_all(wire: Wire) -> None:
    outcomes = []
    for attempt, delay in enumerate([0.0, 0.02, 0.05, 0.1, 0.2]):
        running = f"big{attempt}"
        first = wire.request("chatHistory/append", {"conversationId": running, "messages": BIG})
        queued = wire.request(
            "chatHistory/append", {"conversationId": f"small{attempt}", "messages": [USER]}
        )
        wire.notify("$/cancelRequest", {"id": queued})
        time.sleep(delay)
        wire.notify("$/cancelRequest", {"id": first})
        for request_id, conversation, count in (
            (first, running, len(BIG)),
            (queued, f"small{attempt}", 1),
        ):
            answer = wire.answer_to(request_id)
            if "error" in answer:
                assert answer["error"]["code"] == -32800
                assert rows(wire, conversation) == 0, "answered cancelled, but stored"
            else:
                assert len(answer["result"]["messages"]) == count
                assert rows(wire, conversation) == count
            outcomes.append("error" in answer)
    assert any(not cancelled for cancelled in outcomes)


def test_shutdown_during_a_running_append_answers_it_first(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "store")
    wire.initialize(settings={"enableAutoPruning": False}, configuration=False)
    append = wire.request("chatHistory/append", {"conversationId": "big", "messages": BIG})
    shutdown = wire.request("shutdown")
    answer = wire.answer_to(append)
    assert wire.answer_to(shutdown)["result"] is None
    wire.notify("exit")
    assert wire.finish()[0] == 0
    order = [m.get("id") for m in wire.received if "method" not in m]
    assert order.index(append) < order.index(shutdown)
    again = Wire(tmp_path / "store")
    try:
        again.initialize(settings={"enableAutoPruning": False}, configuration=False)
        stored = rows(again, "big")
    finally:
        again.close()
    if "error" in answer:
        assert answer["error"]["code"] == -32800 and stored == 0
    else:
        assert len(answer["result"]["messages"]) == len(BIG) == stored


def test_exit_while_a_request_waits_for_settings(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "store")
    wire.initialize()  # declares workspace.configuration; the pull is never answered
    wire.request("chatHistory/get", {"conversationId": "c"})
    wire.configuration_request()
    wire.notify("exit")
    code, stderr = wire.finish()
    assert code == 1
    assert "never retrieved" not in stderr, stderr

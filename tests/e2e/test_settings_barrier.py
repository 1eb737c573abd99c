"""The settings barrier over the real process (protocol.md, "Settings are in force before any
request runs"): requests wait for the editor's answer to ``workspace/configuration`` after
``initialized`` and after a ``didChangeConfiguration`` that pulls; past the bound they run, but
stored-history retention deletes nothing until an answer arrives."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.wire import Wire

from chat_history.wire.transport.barrier import BOUND_SECONDS

pytestmark = [pytest.mark.engines, pytest.mark.usefixtures("server_databases")]

#: 30 turns: 60 rows, 10 more than the default maxMessages (50) keeps.
TURNS = 30
SHORT_BOUND = {"CHAT_HISTORY_SETTINGS_WAIT": "1"}


def turn(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]


def seed(storage: Path, conversation: str = "c", turns: int = TURNS) -> None:
    """A conversation longer than the default retention keeps, written with pruning off."""
    wire = Wire(storage)
    try:
        wire.initialize(settings={"enableAutoPruning": False}, configuration=False)
        for i in range(turns):
            wire.call("chatHistory/append", {"conversationId": conversation, "messages": turn(i)})
    finally:
        assert wire.close()[0] == 0


def stored_ids(storage: Path, conversation: str = "c") -> list[int]:
    """The rows on disk, read by a server that prunes nothing."""
    wire = Wire(storage)
    try:
        wire.initialize(settings={"enableAutoPruning": False}, configuration=False)
        got = wire.call("chatHistory/get", {"conversationId": conversation})
        return [row["id"] for row in got["messages"]]
    finally:
        wire.close()


def warnings_about_configuration(wire: Wire, method: str) -> list[str]:
    return [
        m["message"]
        for m in wire.messages_of(method)
        if m["type"] == 2 and "workspace/configuration" in m["message"]
    ]


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    folder = tmp_path / "store"
    seed(folder)
    return folder


@pytest.mark.parametrize(
    ("pulled", "expected_rows", "pruned"),
    [
        ({"enableAutoPruning": False}, 2 * TURNS, None),
        ({"maxMessages": 4}, 4, {"droppedMessages": 56, "droppedTurns": 28, "retainedTurns": 2}),
    ],
)
def test_the_first_request_waits_for_a_late_configuration_answer(
    storage: Path, pulled: dict[str, Any], expected_rows: int, pruned: dict[str, int] | None
) -> None:
    wire = Wire(storage)
    try:
        wire.initialize()
        get = wire.request("chatHistory/get", {"conversationId": "c"})  # a panel restoring
        pull = wire.configuration_request()
        time.sleep(0.5)  # the editor answers late
        assert not wire.answered(get), "the get ran before the editor's settings were known"
        wire.reply(pull, [pulled])
        answer = wire.answer_to(get)["result"]
        assert len(answer["messages"]) == expected_rows
        if pruned is None:
            assert answer["pruned"] is None  # the defaults (maxMessages 50) would delete 10 rows
        else:
            assert answer["pruned"] == {**pruned, "reasons": ["count"]}
    finally:
        wire.close()
    assert len(stored_ids(storage)) == expected_rows


def test_past_the_bound_requests_run_but_nothing_is_deleted_until_the_answer(
    storage: Path,
) -> None:
    wire = Wire(storage, env=SHORT_BOUND)
    try:
        wire.initialize()
        get = wire.request("chatHistory/get", {"conversationId": "c"})
        pull = wire.configuration_request()  # never answered (for now)
        answer = wire.answer_to(get)["result"]
        assert len(answer["messages"]) == 2 * TURNS and answer["pruned"] is None
        appended = wire.call("chatHistory/append", {"conversationId": "c", "messages": turn(99)})
        assert appended["pruned"] is None  # the defaults would delete 12 rows now
        assert len(warnings_about_configuration(wire, "window/showMessage")) == 1
        assert len(warnings_about_configuration(wire, "window/logMessage")) == 1
        assert len(stored_ids_while_serving(wire)) == 2 * TURNS + 2
        # The answer ends the hold: its settings apply to the next request.
        wire.reply(pull, [{"maxMessages": 4}])
        later = wire.call("chatHistory/get", {"conversationId": "c"})
        assert len(later["messages"]) == 4 and later["pruned"]["reasons"] == ["count"]
        assert len(warnings_about_configuration(wire, "window/showMessage")) == 1
    finally:
        wire.close()


def stored_ids_while_serving(wire: Wire) -> list[int]:
    """Rows of conversation c as a second, non-pruning server sees them right now."""
    return stored_ids(wire.storage)


def test_the_real_ten_second_bound(storage: Path) -> None:
    """Once with the protocol's own bound (no test override): answered, nothing deleted."""
    wire = Wire(storage)
    try:
        wire.initialize()
        get = wire.request("chatHistory/get", {"conversationId": "c"})
        wire.configuration_request()  # never answered
        answer = wire.answer_to(get, timeout=120)["result"]
        assert len(answer["messages"]) == 2 * TURNS and answer["pruned"] is None
        assert len(warnings_about_configuration(wire, "window/showMessage")) == 1
    finally:
        wire.close()
    assert len(stored_ids(storage)) == 2 * TURNS


def test_a_request_after_did_change_configuration_waits_for_its_pull(storage: Path) -> None:
    wire = Wire(storage)
    try:
        wire.initialize()
        wire.reply(wire.configuration_request(), [{"enableAutoPruning": False}])
        assert wire.call("chatHistory/get", {"conversationId": "c"})["pruned"] is None
        wire.notify("workspace/didChangeConfiguration", {"settings": None})
        get = wire.request("chatHistory/get", {"conversationId": "c"})
        pull = wire.configuration_request()
        time.sleep(0.5)
        assert not wire.answered(get), "the get ran before the changed settings were known"
        wire.reply(pull, [{"maxMessages": 4}])
        answer = wire.answer_to(get)["result"]
        assert len(answer["messages"]) == 4 and answer["pruned"]["reasons"] == ["count"]
    finally:
        wire.close()


def test_an_unanswered_pull_after_did_change_configuration_holds_retention(
    storage: Path,
) -> None:
    wire = Wire(storage, env=SHORT_BOUND)
    try:
        wire.initialize()
        wire.reply(wire.configuration_request(), [{"enableAutoPruning": False}])
        # A pushed change that would prune, then one that makes the server pull (never answered).
        wire.notify(
            "workspace/didChangeConfiguration", {"settings": {"chatHistory": {"maxMessages": 4}}}
        )
        wire.notify("workspace/didChangeConfiguration", {"settings": None})
        answer = wire.call("chatHistory/get", {"conversationId": "c"})
        wire.configuration_request()
        assert len(answer["messages"]) == 2 * TURNS and answer["pruned"] is None
        assert len(warnings_about_configuration(wire, "window/showMessage")) == 1
    finally:
        wire.close()
    assert len(stored_ids(storage)) == 2 * TURNS


def test_a_null_answer_keeps_the_initialization_settings(storage: Path) -> None:
    wire = Wire(storage)
    try:
        wire.initialize(settings={"maxMessages": 4})
        get = wire.request("chatHistory/get", {"conversationId": "c"})
        wire.reply(wire.configuration_request(), [None])
        answer = wire.answer_to(get)["result"]
        assert len(answer["messages"]) == 4 and answer["pruned"]["reasons"] == ["count"]
        assert not warnings_about_configuration(wire, "window/showMessage")
    finally:
        wire.close()


def test_a_null_answer_without_initialization_settings_means_the_defaults(
    storage: Path,
) -> None:
    wire = Wire(storage)
    try:
        wire.initialize()
        get = wire.request("chatHistory/get", {"conversationId": "c"})
        wire.reply(wire.configuration_request(), [None])
        answer = wire.answer_to(get)["result"]
        # The editor answered: it holds no chatHistory settings, so the defaults are its own.
        assert len(answer["messages"]) == 50 and answer["pruned"]["reasons"] == ["count"]
    finally:
        wire.close()


def test_an_error_answer_counts_as_an_answer(storage: Path) -> None:
    wire = Wire(storage)
    try:
        wire.initialize(settings={"maxMessages": 4})
        get = wire.request("chatHistory/get", {"conversationId": "c"})
        pull = wire.configuration_request()
        wire.send({"jsonrpc": "2.0", "id": pull["id"], "error": {"code": -32601, "message": "no"}})
        answer = wire.answer_to(get)["result"]
        assert len(answer["messages"]) == 4
        assert not warnings_about_configuration(wire, "window/showMessage")
    finally:
        wire.close()


@pytest.mark.parametrize(
    "garbage",
    [
        {"result": 42},
        {"result": "chatHistory"},
        {"error": {"code": -32601}},
        {"error": {"message": "no code"}},
        {"error": "broken"},
    ],
)
def test_a_malformed_answer_counts_as_an_error_answer(
    storage: Path, garbage: dict[str, object]
) -> None:
    # Dropped as unreadable, the pull never completed: every request waited the whole bound,
    # and retention stayed off for the session.
    wire = Wire(storage)
    try:
        wire.initialize(settings={"maxMessages": 4})
        get = wire.request("chatHistory/get", {"conversationId": "c"})
        pull = wire.configuration_request()
        wire.send({"jsonrpc": "2.0", "id": pull["id"], **garbage})
        answer = wire.answer_to(get, timeout=BOUND_SECONDS - 2)["result"]
        assert len(answer["messages"]) == 4  # the current settings are kept, retention runs
        assert not warnings_about_configuration(wire, "window/showMessage")
        logged = warnings_about_configuration(wire, "window/logMessage")
        assert any("could not be read" in m for m in logged), logged
    finally:
        wire.close()


def test_a_client_without_workspace_configuration_is_never_asked(storage: Path) -> None:
    wire = Wire(storage)
    try:
        wire.initialize(settings={"maxMessages": 4}, configuration=False)
        answer = wire.call("chatHistory/get", {"conversationId": "c"})
        assert len(answer["messages"]) == 4 and answer["pruned"]["reasons"] == ["count"]
        wire.notify("workspace/didChangeConfiguration", {"settings": None})
        wire.call("chatHistory/get", {"conversationId": "c"})
        assert not wire.messages_of("workspace/configuration")
    finally:
        wire.close()


def test_requests_between_initialize_and_initialized_wait_too(storage: Path) -> None:
    wire = Wire(storage)
    try:
        wire.call(
            "initialize",
            {
                "processId": None,
                "capabilities": {"workspace": {"configuration": True}},
                "initializationOptions": {"storagePath": str(storage)},
            },
        )
        get = wire.request("chatHistory/get", {"conversationId": "c"})
        time.sleep(0.3)
        assert not wire.answered(get)
        wire.notify("initialized", {})
        wire.reply(wire.configuration_request(), [{"enableAutoPruning": False}])
        assert wire.answer_to(get)["result"]["pruned"] is None
    finally:
        wire.close()
    assert len(stored_ids(storage)) == 2 * TURNS


def test_requests_keep_their_order_across_the_barrier(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "store")
    try:
        wire.initialize()
        ids = [
            wire.request("chatHistory/append", {"conversationId": "o", "messages": turn(i)})
            for i in range(5)
        ]
        wire.reply(wire.configuration_request(), [{}])
        firsts = [wire.answer_to(i)["result"]["messages"][0]["content"] for i in ids]
        assert firsts == [f"q{i}" for i in range(5)]
    finally:
        wire.close()

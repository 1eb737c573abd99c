"""Replies in flight and what other windows do to their conversation (issue 43 items 1-2), over
real server processes on both engines: a workspace moved, re-keyed or switched to its
repository identity while a reply streams carries the reply (its writer keeps updating and ends
it by its row id, a second reply is 1004 only where it truly streams, the writer's death or exit
interrupts it, its text reaches prepare and search once it ended); another window's edit of a
streaming row is refused (1004), and its rewind deletes the row for good."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.replies_helpers import (
    ask,
    begin,
    end,
    open_window,
    row_of,
    rows,
    search,
    status_of,
    update,
    wait_until,
)
from tests.e2e.test_workspaces import git_folder
from tests.e2e.wire import Wire

__all__ = ["open_window"]  # the fixture, imported for pytest
pytestmark = pytest.mark.engines

HOME = "file:///ws"
MOVED = "file:///ws-moved"


def prepared_texts(wire: Wire, conversation: str) -> list[str]:
    body = wire.call("chatHistory/prepare", {"conversationId": conversation})["body"]
    return [m["content"] for m in body["messages"]]


def refused_as_streaming(wire: Wire, method: str, params: dict[str, Any], row_id: int) -> str:
    """``method`` answered 1004 naming ``row_id``; its message."""
    error = wire.error(method, params)
    assert (error["code"], error["data"]) == (1004, {"id": row_id}), error
    message: str = error["message"]
    return message


# -- item 1: a workspace moved while a reply streams ---------------------------------------------


def test_a_reply_streaming_while_its_workspace_moves_goes_with_it(
    open_window: Callable[..., Wire],
) -> None:
    # The real lease: nothing here expires, and a renewal held up behind the move on a loaded
    # machine must not let another window end the reply as interrupted.
    windows = {"short_lease": False}
    writer, mover = open_window(workspace=HOME, **windows), open_window(workspace=HOME, **windows)
    there = open_window(workspace=MOVED, **windows)
    ask(writer, "why is the sky blue?", "mv")
    row = begin(writer, "mv", message={"content": "Rayleigh"})
    update(writer, row["id"], "mv", contentDelta=" scattering")

    moved = mover.call("chatHistory/moveWorkspace", {"from": HOME, "to": MOVED})

    assert moved == {"conversations": 1}
    assert row_of(there, row["id"], "mv") == ("streaming", "Rayleigh scattering")
    # One streaming row, carried: a second reply in the new workspace is 1004.
    begin_mv = {"conversationId": "mv"}
    refused_as_streaming(there, "chatHistory/beginReply", begin_mv, row["id"])
    # The old workspace holds nothing of it: a reply there starts a new conversation.
    fresh = begin(mover, "mv")
    assert fresh["id"] != row["id"] and [r["id"] for r in rows(mover, "mv")] == [fresh["id"]]
    end(mover, fresh["id"], "discard", "mv")
    # The writer still names its key (its workspace's): its row id finds the moved row.
    assert update(writer, row["id"], "mv", contentDelta=" of sunlight") == {
        "id": row["id"],
        "length": len("Rayleigh scattering of sunlight"),
    }
    # Or the key it has now; never another conversation's.
    update(writer, row["id"], "mv", workspace=MOVED, contentDelta=".")
    error = writer.error(
        "chatHistory/updateReply", {"conversationId": "other", "id": row["id"], "content": "x"}
    )
    assert (error["code"], error["data"]["field"]) == (-32602, "id")
    assert row_of(there, row["id"], "mv") == ("streaming", "Rayleigh scattering of sunlight.")
    assert search(there, "sunlight") == [] and "Rayleigh" not in " ".join(
        prepared_texts(there, "mv")
    )

    ended = end(writer, row["id"], "complete", "mv")["message"]

    assert (ended["id"], ended["status"], ended["content"]) == (
        row["id"],
        "complete",
        "Rayleigh scattering of sunlight.",
    )
    assert [(r["status"], r["content"]) for r in rows(there, "mv")] == [
        ("complete", "why is the sky blue?"),
        ("complete", "Rayleigh scattering of sunlight."),
    ]
    assert search(there, "sunlight") == [row["id"]]
    assert prepared_texts(there, "mv")[-1] == "Rayleigh scattering of sunlight."
    assert rows(writer, "mv") == [] and search(writer, "sunlight") == []
    # It no longer streams: a new reply may begin where it is now.
    assert begin(there, "mv")["status"] == "streaming"


@pytest.mark.parametrize("how", ["killed", "exit"])
def test_a_moved_reply_is_interrupted_when_its_writer_goes(
    open_window: Callable[..., Wire], how: str
) -> None:
    """Its lease (a SIGKILLed writer) or its writer's exit still find it after the move."""
    lease = {"CHAT_HISTORY_REPLY_LEASE_MS": "600000"} if how == "exit" else None
    writer, mover = open_window(env=lease, workspace=HOME), open_window(workspace=HOME)
    there = open_window(workspace=MOVED)
    ask(writer, "q", "mv")
    row = begin(writer, "mv", message={"content": "what the user saw"})
    mover.call("chatHistory/moveWorkspace", {"from": HOME, "to": MOVED})
    update(writer, row["id"], "mv", contentDelta=" after the move")

    if how == "killed":
        writer.process.send_signal(signal.SIGKILL)
        writer.finish()
        waited = wait_until(lambda: status_of(there, row["id"], "mv") == "interrupted", 15)
        assert waited < 10  # the lease here is 1.2 s
    else:
        writer.close()  # at once: the lease (10 minutes here) never had to expire

    assert row_of(there, row["id"], "mv") == ("interrupted", "what the user saw after the move")
    assert search(there, "move") == [row["id"]]
    assert prepared_texts(there, "mv")[-1] == "what the user saw after the move"
    assert begin(there, "mv", continueId=row["id"])["status"] == "streaming"


def test_a_reply_streaming_while_its_folder_takes_its_repository_identity_goes_with_it(
    open_window: Callable[..., Wire], tmp_path: Path
) -> None:
    """The identity change (``workspaceIdentity: "repository"``) re-keys the folder's history
    to the repository's when that has none: the streaming reply goes with it."""
    folder = git_folder(tmp_path / "proj").as_uri()
    writer = open_window(workspace=folder, short_lease=False)  # nothing here expires
    ask(writer, "q", "c")
    row = begin(writer, "c", message={"content": "half"})
    clone = open_window(
        workspace=folder, options={"workspaceIdentity": "repository"}, short_lease=False
    )
    # Its first request opens its identity: the folder's history moves to the repository's.
    assert row_of(clone, row["id"], "c") == ("streaming", "half") and rows(writer, "c") == []
    refused_as_streaming(clone, "chatHistory/beginReply", {"conversationId": "c"}, row["id"])

    update(writer, row["id"], "c", contentDelta=" and whole")
    ended = end(writer, row["id"], "complete", "c")["message"]

    assert (ended["status"], ended["content"]) == ("complete", "half and whole")
    assert row_of(clone, row["id"], "c") == ("complete", "half and whole")
    assert search(clone, "whole") == [row["id"]]


# -- item 2: another window's edit or rewind of a streaming row -----------------------------------


def test_another_windows_edit_of_a_streaming_row_is_refused(
    open_window: Callable[..., Wire],
) -> None:
    writer, other = open_window(short_lease=False), open_window(short_lease=False)
    ask(writer)
    row = begin(writer, message={"content": "the streamed"})
    update(writer, row["id"], contentDelta=" answer")
    edit = {"conversationId": "c", "id": row["id"], "content": "[redacted]"}

    message = refused_as_streaming(other, "chatHistory/editMessage", edit, row["id"])

    assert "streaming" in message
    assert row_of(other, row["id"], "c") == ("streaming", "the streamed answer")
    ended = end(writer, row["id"], "complete")["message"]
    assert ended["content"] == "the streamed answer"
    # Once it ended, the edit is an edit as any other, and stays.
    assert other.call("chatHistory/editMessage", edit)["content"] == "[redacted]"
    assert row_of(writer, row["id"], "c") == ("complete", "[redacted]")
    assert search(writer, "streamed") == []


@pytest.mark.parametrize("how", ["truncate", "deleteTurns"])
def test_another_windows_rewind_of_a_streaming_row_deletes_it_for_good(
    open_window: Callable[..., Wire], how: str
) -> None:
    """What the rewinds already did, and keep doing: the row goes with its reply (nothing of it
    remains or is found); the writer's next update and its end are -32602 ``id`` and bring
    nothing back."""
    writer, other = open_window(short_lease=False), open_window(short_lease=False)
    ask(writer)
    row = begin(writer, message={"content": "photons"})
    update(writer, row["id"], contentDelta=" wobble")
    if how == "truncate":
        answer = other.call("chatHistory/truncate", {"conversationId": "c", "fromId": row["id"]})
    else:
        turn = rows(other)[-1]["turn"]
        answer = other.call("chatHistory/deleteTurns", {"conversationId": "c", "turns": [turn]})
    assert answer["deletedMessages"] >= 1

    for method, params in (
        ("chatHistory/updateReply", {"contentDelta": " late"}),
        ("chatHistory/endReply", {"status": "complete", "content": "photons wobble late"}),
    ):
        error = writer.error(method, {"conversationId": "c", "id": row["id"], **params})
        assert (error["code"], error["data"]["field"]) == (-32602, "id")
    assert row_of(other, row["id"], "c") is None
    assert search(other, "wobble") == []
    assert begin(writer)["status"] == "streaming"  # nothing streams there now

"""The history view's reads (service/session_list.py) and its index (acp/listing.Listings) over
real stores on one database, both engines: a folder's sessions read once, then only what another
process's commits changed (a cleared session included), the automatic titles a page shows, the
workspaces that hold a session, and a listing kept current without reading the folder again."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from tests.unit.conftest import FixedClock, MakeStore

from chat_history.acp.listing import Listings
from chat_history.acp.recorder import Recorder
from chat_history.model import Key, Message
from chat_history.service import conversations, history, replies, session_list, workspaces
from chat_history.service.conversations import ConversationUpdate
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import default_settings

W, V = "file:///w", "file:///v"

pytestmark = pytest.mark.engines


def two(
    make_store: MakeStore, clock: FixedClock | None = None
) -> tuple[ChatHistoryManager, ChatHistoryManager]:
    """Two processes' managers on one database (with ``clock``, both on it)."""
    settings = attrs.evolve(default_settings(), enable_auto_pruning=False)
    timed = {"clock": clock} if clock is not None else {}
    return (
        ChatHistoryManager(make_store(), settings, **timed),
        ChatHistoryManager(make_store(), settings, **timed),
    )


def say(manager: ChatHistoryManager, key: Key, text: str) -> None:
    history.append(manager, key, [Message(role="user", content=text)])


def test_a_folder_read_once_then_what_changed(make_store: MakeStore) -> None:
    mine, other = two(make_store)
    for name in ("acp:a", "acp:b", "acp:c", "panel"):
        say(other, Key(W, name), f"about {name}")
    say(other, Key(V, "acp:a"), "elsewhere")
    scan = session_list.scan(mine, W, "acp:")
    assert sorted(scan.found) == ["acp:a", "acp:b", "acp:c"]
    assert all(f.count == 1 and f.reply is None for f in scan.found.values())

    same = session_list.changes(mine, {W: scan.found.keys()}, "acp:", scan.position)
    assert same.changed == {} and same.position == scan.position  # nothing committed

    say(other, Key(W, "acp:a"), "more")
    history.clear(other, Key(W, "acp:b"))  # its change marks go: the floor moves
    say(other, Key(W, "acp:new"), "new")
    say(other, Key(W, "panel"), "not a session")
    say(other, Key(V, "acp:x"), "another folder")
    replies.begin(other, Key(W, "acp:c"), replies.ReplyBegin())
    found = session_list.changes(mine, {W: scan.found.keys()}, "acp:", scan.position)
    changed = found.changed[W]
    assert set(changed) == {"acp:a", "acp:b", "acp:new", "acp:c"} and V not in found.changed
    assert changed["acp:b"] is None
    assert changed["acp:a"] is not None and changed["acp:a"].count == 2
    assert changed["acp:c"] is not None and changed["acp:c"].reply is not None  # streaming

    say(mine, Key(W, "acp:mine"), "my own write")
    known = {W: {*scan.found, "acp:new"}}
    own = session_list.changes(mine, known, "acp:", found.position).changed[W]
    assert set(own) == {"acp:mine"}  # this process's own commits count too


def test_titles_holders_and_the_cursor_key(make_store: MakeStore) -> None:
    manager, _ = two(make_store)
    say(manager, Key(W, "acp:a"), "  the   first question ")
    history.append(manager, Key(W, "acp:b"), [Message(role="assistant", content="no prompt")])
    say(manager, Key(V, "acp:a"), "same id elsewhere")
    titles = session_list.auto_titles(manager, W, ["acp:a", "acp:b", "acp:none"])
    assert titles == {"acp:a": "the first question"}
    assert session_list.holders(manager, "acp:a") == sorted([W, V])
    assert session_list.holders(manager, "acp:none") == []
    assert len(session_list.cursor_key(manager)) >= 16


def test_a_listing_kept_current_by_another_process(make_store: MakeStore, tmp_path: Path) -> None:
    clock = FixedClock(1_000_000)
    mine, other = two(make_store, clock)
    folder = tmp_path / "project"
    folder.mkdir()
    workspace = workspaces.resolve(folder.as_uri(), "folder").workspace
    for i in range(5):
        clock.now += 1
        say(other, Key(workspace, f"acp:s{i}"), f"ask {i}")
    listings = Listings(Recorder(mine, "machine"))
    first = listings.page({"cwd": str(folder), "limit": 2})
    assert [r["sessionId"] for r in first["sessions"]] == ["s4", "s3"] and first["nextCursor"]
    assert listings.tick() == []  # watched, nothing changed
    (made,) = listings.folders.values()
    assert [e.row is not None for e in made.entries.values()].count(True) == 2
    assert listings.warm() and not listings.warm()  # the rest made ahead, once
    assert all(e.row is not None and e.row["title"] for e in made.entries.values())

    clock.now = 2_000_000
    say(other, Key(workspace, "acp:s0"), "again")
    archive = ConversationUpdate(metadata={"archived": True})
    conversations.update(other, Key(workspace, "acp:s3"), archive)
    rest = listings.page({"cwd": str(folder), "limit": 2, "cursor": first["nextCursor"]})
    assert [r["sessionId"] for r in rest["sessions"]] == ["s2", "s1"]  # s0 moved, s3 hidden
    assert "nextCursor" not in rest
    assert listings.tick() == [str(folder)]  # the watched list changed
    fresh = listings.page({"cwd": str(folder)})
    assert [r["sessionId"] for r in fresh["sessions"]] == ["s0", "s4", "s2", "s1"]
    assert listings.tick() == []

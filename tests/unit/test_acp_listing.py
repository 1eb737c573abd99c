"""The history view's pure parts (acp/listing.py, acp/rows.py, service/gitfolder.worktrees):
the checks of a ``session/list`` request, what a session's metadata says of it, one order and one
position across folders, a folder kept in order as its sessions change, and a repository's
worktrees read without trusting its files."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from chat_history.acp import listing, rows
from chat_history.errors import InvalidParams
from chat_history.policy.changes import Fingerprint
from chat_history.service.gitfolder import worktrees


def fingerprint(
    at: int, count: int = 1, metadata: Any = None, title: str | None = None
) -> Fingerprint:
    text = json.dumps(metadata, separators=(",", ":")) if metadata is not None else None
    return Fingerprint(1, 1, count, 10, at, title, text, None)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cwd": 1}, "cwd"),
        ({"cwd": "here"}, "cwd"),
        ({"cwd": "/" + "x" * listing.MAX_CWD_CHARS}, "cwd"),
        ({"cwd": "/a\0b"}, "cwd"),
        ({"cursor": {}}, "cursor"),
        ({"limit": 0}, "limit"),
        ({"limit": False}, "limit"),
        ({"limit": 1.0}, "limit"),
        ({"archived": 1}, "archived"),
        ({"includeWorktrees": "no"}, "includeWorktrees"),
    ],
)
def test_a_bad_field_is_named(params: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidParams) as refused:
        listing.query(params, "/home")
    assert refused.value.field == field


def test_defaults_and_the_clamped_limit() -> None:
    asked = listing.query({}, "/home/me")
    assert (asked.cwd, asked.named, asked.limit, asked.archived) == ("/home/me", False, 50, False)
    assert listing.query({"limit": 10**40, "cwd": "/x"}, "/home").limit == listing.MAX_LIMIT
    assert listing.query({"cwd": "/x", "limit": None}, "/home").named


def test_what_the_metadata_says() -> None:
    note = {"lastTurnEndedAt": 5, "cost": {"amount": 1.5, "currency": "EUR"}, "used": 3}
    facts = rows.facts(json.dumps({"archived": True, "acp": note, "panel": 1}))
    assert facts == rows.Facts(True, 5, {"amount": 1.5, "currency": "EUR"}, 3, None)
    assert rows.facts(None) == rows.Facts() == rows.facts('{"other":"archived"}')
    hostile = {"archived": "yes", "acp": {"lastTurnEndedAt": -1, "cost": {"amount": True}}}
    assert rows.facts(json.dumps(hostile)) == rows.Facts()
    assert (
        rows.facts(json.dumps({"acp": {"cost": {"amount": 1, "currency": "X" * 17}}}))
        == rows.Facts()
    )


def test_a_turn_note_keeps_the_newest_usage() -> None:
    reply = rows.Reply()
    reply.add({"sessionUpdate": "usage_update", "used": 1, "size": 9})
    reply.add(
        {
            "sessionUpdate": "usage_update",
            "used": 2,
            "size": 9,
            "cost": {"amount": 0.5, "currency": "USD"},
        }
    )
    metadata: dict[str, Any] = {"archived": True}
    assert rows.noted(metadata, rows.turn_note(reply, 100))
    assert metadata == {
        "archived": True,
        "acp": {
            "lastTurnEndedAt": 100,
            "cost": {"amount": 0.5, "currency": "USD"},
            "used": 2,
            "size": 9,
        },
    }
    assert rows.noted(metadata, rows.turn_note(rows.Reply(), 200))  # no usage: the old stands
    assert metadata["acp"]["lastTurnEndedAt"] == 200 and metadata["acp"]["used"] == 2
    assert not rows.noted(metadata, rows.turn_note(rows.Reply(), 200))


def test_one_order_and_one_position_across_folders() -> None:
    """Walked a page at a time from each page's last position, the folders' sessions come in
    the store's order (newest activity, then id, then workspace), each once, ties across
    folders included; archived ones only when asked; a page is short only at the end."""
    rng = random.Random(7)
    folders = []
    expected = []
    for name in ("ws-a", "ws-b", "ws-c"):
        found = {}
        for i in range(rng.randrange(20, 60)):
            conversation = f"acp:{rng.randrange(30)}-{i}"
            archived = rng.random() < 0.2
            at = rng.randrange(10)  # many ties
            found[conversation] = fingerprint(at, metadata={"archived": True} if archived else None)
            if not archived:
                expected.append((-at, conversation, name))
        folders.append(("/" + name, listing.Folder(name, found)))
    expected.sort()
    seen: list[tuple[int, str, str]] = []
    after = None
    while True:
        found, more = listing.page(folders, after, 7, archived=False)
        assert found and (len(found) == 7 or not more)
        for cwd, folder, entry in found:
            assert cwd == "/" + folder.workspace
            seen.append((-entry.fingerprint.last_activity, entry.conversation, folder.workspace))
        if not more:
            break
        after = seen[-1]
    assert seen == expected


def test_a_folder_stays_in_order_as_its_sessions_change() -> None:
    folder = listing.Folder("ws", {f"acp:{i}": fingerprint(i) for i in range(10)})
    assert folder.apply("acp:3", fingerprint(100)) == (True, True)  # moved to the front
    assert folder.apply("acp:4", None) == (True, True)  # gone
    assert folder.apply("acp:5", fingerprint(5, metadata={"archived": True})) == (True, True)
    assert folder.apply("acp:5", fingerprint(6, metadata={"archived": True})) == (False, True)
    assert folder.apply("acp:6", fingerprint(6, count=0)) == (True, True)  # no rows: not listed
    assert folder.apply("acp:7", fingerprint(7)) == (False, False)  # as it was
    found, more = listing.page([("/ws", folder)], None, 100, archived=False)
    assert [e.conversation for _, _, e in found] == [f"acp:{i}" for i in (3, 9, 8, 7, 2, 1, 0)]
    assert not more and folder.order == sorted(folder.order)


def git(*args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
    )


def test_worktrees(tmp_path: Path) -> None:
    main, one, two = tmp_path / "main", tmp_path / "one", tmp_path / "two"
    git("init", "-q", str(main))
    git("-C", str(main), "commit", "-q", "--allow-empty", "-m", "x")
    (main / "pkg").mkdir()
    for tree in (one, two):
        git("-C", str(main), "worktree", "add", "-q", str(tree), "-b", tree.name)
    (one / "pkg").mkdir()
    assert sorted(worktrees(main)) == [one, two]
    assert sorted(worktrees(one)) == [main, two]
    assert worktrees(main / "pkg") == [one / "pkg"]  # the same folder where it exists
    assert worktrees(tmp_path) == []
    subprocess.run(["rm", "-rf", str(two)], check=True)
    assert worktrees(main) == [one]  # a tree whose folder is gone is left out
    pointer = main / ".git" / "worktrees" / "one" / "gitdir"
    pointer.write_bytes(b"\0" * 10)
    assert worktrees(main) == []  # hostile git files: no worktrees, no exception

"""The service's import (service/imports.py) over hostile and unusual data folders (issue 43,
Imports): only regular files are read, through one bounded reader (a FIFO never blocks, a link to
a device is refused, the bound is counted through the open descriptor, not a separate stat); a
file that yields no message is a warning naming it; a session that records no folder goes into
the current folder's workspace and the report says so; a conversation the import did not create
is never merged into (the session goes beside it, under a new id); a NUL in a path is
InvalidParams ``path``."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from import_fixtures import manager

from chat_history.errors import InvalidParams
from chat_history.importers.files import NotRegular, TooLarge, read_regular
from chat_history.model import Key, Message
from chat_history.service import conversations, history, imports
from chat_history.service.manager import ChatHistoryManager

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
SHOP = FIXTURES / "claude-code" / "-home-me-shop"
NEW = "7f3c2a10-5b1e-4c2d-9e8f-0a1b2c3d4e5f"
OLDER = FIXTURES / "copilot-cli" / "history-session-state"
SINGLE = "4d3c2b1a-0f9e-4d8c-b7a6-5e4d3c2b1a09"
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev are POSIX")

T = TypeVar("T")


__all__ = ["manager"]  # the fixture, imported for pytest


def within_seconds(work: Callable[[], T], seconds: float, fifo: Path | None = None) -> T:
    """``work()``'s value, or a failure when it has not returned after ``seconds`` (a read
    blocked on ``fifo`` is then released by opening its other end, so the run goes on)."""
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as exc:  # handed to the test below
            failed.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"still running after {seconds} s (blocked)")
    if failed:
        raise failed[0]
    return done[0]


@posix_only
def test_the_bounded_reader_reads_regular_files_only_and_counts_through_the_descriptor(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain.json"
    plain.write_bytes(b"{}" * 10)
    assert read_regular(plain, 20) == b"{}" * 10
    with pytest.raises(TooLarge):
        read_regular(plain, 19)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(NotRegular) as caught:
        within_seconds(lambda: read_regular(fifo, 100), 5, fifo)
    assert caught.value.strerror == "a FIFO, not a regular file: not read"
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    with pytest.raises(NotRegular) as device:
        within_seconds(lambda: read_regular(zero, 100), 5)
    assert device.value.strerror == "a character device, not a regular file: not read"
    status = Path("/proc/self/status")  # a regular file whose stat says 0 bytes
    if status.exists():
        assert status.stat().st_size == 0
        with pytest.raises(TooLarge):
            read_regular(status, 16)


def claude_folder(tmp_path: Path) -> Path:
    folder = tmp_path / ".claude" / "projects" / "-home-me-shop"
    folder.mkdir(parents=True)
    shutil.copy(SHOP / f"{NEW}.jsonl", folder / f"{NEW}.jsonl")
    return folder


@posix_only
def test_a_fifo_in_the_data_folder_is_a_warning_and_never_blocks(tmp_path: Path) -> None:
    folder = claude_folder(tmp_path)
    fifo = folder / "00000000-fifo.jsonl"  # read first, in name order
    os.mkfifo(fifo)
    unread: list[imports.Unread] = []

    def read_all() -> list[str]:
        found = imports.sessions_of("claude-code", folder, None, unread=unread)
        return [session.session_id for _, session in found]

    assert within_seconds(read_all, 10, fifo) == [NEW]
    assert unread == [imports.Unread(str(fifo), "a FIFO, not a regular file: not read")]
    unread.clear()  # a FIFO named as the path: the same warning, nothing read
    assert (
        within_seconds(
            lambda: list(imports.sessions_of("claude-code", fifo, None, unread=unread)), 10, fifo
        )
        == []
    )
    assert unread == [imports.Unread(str(fifo), "a FIFO, not a regular file: not read")]


@posix_only
def test_a_session_named_link_to_a_device_is_a_warning_and_is_never_read(tmp_path: Path) -> None:
    folder = claude_folder(tmp_path)
    for name, device in (("0000-zero.jsonl", "/dev/zero"), ("0001-random.jsonl", "/dev/urandom")):
        (folder / name).symlink_to(device)
    unread: list[imports.Unread] = []
    found = within_seconds(
        lambda: list(imports.sessions_of("claude-code", folder, None, unread=unread)), 10
    )
    assert [session.session_id for _, session in found] == [NEW]
    assert [(Path(u.path).name, u.why) for u in unread] == [
        ("0000-zero.jsonl", "a character device, not a regular file: not read"),
        ("0001-random.jsonl", "a character device, not a regular file: not read"),
    ]


def test_a_file_that_yields_no_message_is_a_warning_naming_it_and_why(tmp_path: Path) -> None:
    folder = claude_folder(tmp_path)
    empty = folder / "11111111-empty.jsonl"
    empty.write_bytes(b"")
    summary = folder / "22222222-summary.jsonl"
    summary.write_text('{"type": "summary", "summary": "A title", "leafUuid": "x"}\n')
    unread: list[imports.Unread] = []
    found = [
        s.session_id for _, s in imports.sessions_of("claude-code", folder, None, unread=unread)
    ]
    assert found == [NEW]
    why = "no message in it that claude-code's reader carries over (empty, or not its session)"
    assert unread == [imports.Unread(str(empty), why), imports.Unread(str(summary), why)]


def test_a_session_that_records_no_folder_goes_into_the_current_folders_workspace(
    manager: ChatHistoryManager,
) -> None:
    found = imports.sessions_of("copilot-cli", OLDER, None)
    [entry] = imports.import_sessions(
        manager, found, None, dry_run=False, default="file:///home/me/here"
    )
    assert (entry.workspace, entry.workspace_from) == ("file:///home/me/here", "current")
    assert (
        conversations.info(
            manager, Key("file:///home/me/here", f"copilot-cli:{SINGLE}")
        ).message_count
        == 9
    )
    [named] = imports.import_sessions(
        manager, imports.sessions_of("copilot-cli", OLDER, None), "file:///w", dry_run=True
    )
    assert (named.workspace, named.workspace_from) == ("file:///w", "given")
    recorded = imports.import_sessions(
        manager,
        imports.sessions_of("claude-code", SHOP / f"{NEW}.jsonl", None),
        None,
        dry_run=True,
        default="file:///home/me/here",
    )
    assert {(e.workspace, e.workspace_from) for e in recorded} == {
        ("file:///home/me/shop", "recorded")
    }
    with pytest.raises(InvalidParams) as caught:  # no current folder either: name it
        imports.import_sessions(
            manager, imports.sessions_of("copilot-cli", OLDER, None), None, dry_run=True
        )
    assert caught.value.field == "workspace"


def test_an_import_never_merges_into_a_conversation_it_did_not_create(
    manager: ChatHistoryManager,
) -> None:
    workspace = "file:///home/me/shop"
    native = Key(workspace, f"claude-code:{NEW}")
    history.append(
        manager, native, [Message(role="user", content="my own notes, not Claude Code's")]
    )

    def run(dry_run: bool) -> imports.PlannedImport:
        found = imports.sessions_of("claude-code", SHOP / f"{NEW}.jsonl", None)
        planned = imports.import_sessions(manager, found, None, dry_run=dry_run)
        return next(e for e in planned if e.source_id == NEW)

    preview = run(True)
    assert (preview.conversation_id, preview.status, preview.beside) == (
        f"claude-code:{NEW}~2",
        "new",
        f"claude-code:{NEW}",
    )
    done = run(False)
    assert (done.conversation_id, done.status, done.new_messages) == (
        f"claude-code:{NEW}~2",
        "new",
        6,
    )
    assert conversations.info(manager, native).message_count == 1  # the user's own, untouched
    beside = conversations.info(manager, Key(workspace, f"claude-code:{NEW}~2"))
    assert beside.message_count == 6
    assert beside.metadata.value() == {"import": {"source": "claude-code", "session": NEW}}
    again = run(False)  # the conversation it created is its own: nothing new, no ~3
    assert (again.conversation_id, again.status, again.beside) == (
        f"claude-code:{NEW}~2",
        "unchanged",
        f"claude-code:{NEW}",
    )
    assert conversations.info(manager, native).message_count == 1


def test_an_empty_conversation_with_the_user_s_title_is_not_the_import_s_either(
    manager: ChatHistoryManager,
) -> None:
    from chat_history.service.conversations import ConversationUpdate

    key = Key("file:///home/me/shop", f"claude-code:{NEW}")
    conversations.update(manager, key, ConversationUpdate(set_title=True, title="Mine"))
    found = imports.sessions_of("claude-code", SHOP / f"{NEW}.jsonl", None)
    planned = imports.import_sessions(manager, found, None, dry_run=False)
    entry = next(e for e in planned if e.source_id == NEW)
    assert entry.conversation_id == f"claude-code:{NEW}~2"
    assert conversations.info(manager, key).title == "Mine"


def test_a_nul_in_a_path_is_invalid_params_naming_path(tmp_path: Path) -> None:
    with pytest.raises(InvalidParams) as caught:
        imports.within(Path(f"{tmp_path}/a\0b.jsonl"), tmp_path)
    assert caught.value.field == "path" and "NUL" in caught.value.why


@posix_only
def test_every_source_warns_of_what_it_leaves_out_of_its_data_folder(tmp_path: Path) -> None:
    """A FIFO where a source looks for its files is named, whichever source; a session that
    records no folder is named when the import is of one project's sessions (it is not known
    to be that project's), and imported when its file is named (into the current folder's)."""
    home = tmp_path / ".copilot"
    shutil.copytree(FIXTURES / "copilot-cli", home)
    fifo = home / "history-session-state" / "session_ffff_1.json"
    os.mkfifo(fifo)
    unread: list[imports.Unread] = []
    found = within_seconds(
        lambda: list(imports.sessions_of("copilot-cli", home, "/home/me/shop", unread=unread)),
        10,
        fifo,
    )
    assert SINGLE not in {session.session_id for _, session in found}
    older = home / "history-session-state" / f"session_{SINGLE}_1760000100000.json"
    assert [(Path(u.path), u.why) for u in unread] == [
        (fifo, "a FIFO, not a regular file: not read"),
        (older, imports._NO_FOLDER),
    ]
    assert "name it as PATH" in imports._NO_FOLDER


def test_a_conversation_the_import_wrote_is_its_own_even_when_its_metadata_was_replaced(
    manager: ChatHistoryManager,
) -> None:
    """Every row the import's: its own (an import stopped before it wrote the metadata, or a
    client replaced the metadata), imported into again, never beside."""
    from chat_history.service.conversations import ConversationUpdate

    def run() -> imports.PlannedImport:
        found = imports.sessions_of("claude-code", SHOP / f"{NEW}.jsonl", None)
        planned = imports.import_sessions(manager, found, None, dry_run=False)
        return next(e for e in planned if e.source_id == NEW)

    first = run()
    key = Key(first.workspace, first.conversation_id)
    conversations.update(manager, key, ConversationUpdate(metadata={"pinned": True}))
    again = run()
    assert (again.conversation_id, again.status, again.beside) == (
        f"claude-code:{NEW}",
        "unchanged",
        None,
    )
    history.append(manager, key, [Message(role="user", content="a row of the user's, later")])
    mixed = run()  # neither marked nor all the session's: not known as the import's
    assert (mixed.conversation_id, mixed.beside) == (f"claude-code:{NEW}~2", f"claude-code:{NEW}")

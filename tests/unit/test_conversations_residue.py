"""Deleted means deleted for the version 2 edits (protocol.md "Version 2": "deleted means deleted
(no residue in the database files)"): a unique secret is proven on disk first, then each of
truncate, deleteTurns, editMessage (the old text), deleteSummary, a replaced title and metadata,
and clear (which now also deletes the title and metadata) leaves no byte of it in the database,
its -wal or its -shm; nor does a native compaction (version 5) once a row it covers is deleted
or it is replaced. Real SQLite files; small rows and rows that spill into overflow pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat_history.model import Key, Message, ToolCall
from chat_history.policy.origins import origin
from chat_history.service import conversations, edits, history, provider_state
from chat_history.service.conversations import ConversationUpdate
from chat_history.service.edits import MessageEdit
from chat_history.service.manager import ChatHistoryManager
from chat_history.store.schema import DATABASE_FILE

KEY = Key("ws", "conv")
SECRET = "SECRET-4b1d7e0a-93c2-4f55-a6de-5f0e1c2b3a49"


def occurrences(folder: Path) -> dict[str, int]:
    needle = SECRET.encode("utf-8")
    found = {}
    for suffix in ("", "-wal", "-shm"):
        path = Path(str(folder / DATABASE_FILE) + suffix)
        if path.exists():
            found[suffix] = path.read_bytes().count(needle)
    return found


def on_disk(folder: Path) -> None:
    assert sum(occurrences(folder).values()) > 0, "the test could not fail"


def gone(folder: Path) -> None:
    assert set(occurrences(folder).values()) <= {0}, occurrences(folder)


def secret_text(large: bool) -> str:
    return f"my token is {SECRET}" + ("p" * 12_000 if large else "") + SECRET


def U(text: str) -> Message:
    return Message(role="user", content=text)


def A(text: str) -> Message:
    return Message(role="assistant", content=text)


SIZES = pytest.mark.parametrize("large", [False, True], ids=["small", "overflow"])


@SIZES
def test_truncate_leaves_no_residue(make_manager, db_folder: Path, large: bool) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("kept"), A("kept too")])
    stored = history.append(manager, KEY, [U(secret_text(large)), A(f"noted {SECRET}")]).messages
    history.save_summary(manager, KEY, f"summary with {SECRET}", stored[1].id)
    on_disk(db_folder)

    result = edits.truncate(manager, KEY, stored[0].id)

    assert (result.deleted_messages, result.summary_deleted) == (2, True)
    assert [r.content for r in history.get(manager, KEY).messages] == ["kept", "kept too"]
    gone(db_folder)


@SIZES
def test_delete_turns_leaves_no_residue(make_manager, db_folder: Path, large: bool) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("first"), A("ok")])
    history.append(
        manager,
        KEY,
        [
            U(secret_text(large)),
            Message(role="assistant", tool_calls=(ToolCall(id="c", name="t", arguments={}),)),
            Message(role="tool", content=f"result {SECRET}", tool_call_id="c"),
            A(f"done {SECRET}"),
        ],
    )
    history.append(manager, KEY, [U("third"), A("ok")])
    on_disk(db_folder)

    result = edits.delete_turns(manager, KEY, [2])

    assert (result.deleted_messages, result.deleted_turns) == (4, 1)
    assert [r.turn for r in history.get(manager, KEY).messages] == [1, 1, 3, 3]
    gone(db_folder)


@SIZES
def test_edit_leaves_no_residue_of_the_old_text(make_manager, db_folder: Path, large: bool) -> None:
    manager = make_manager()
    stored = history.append(manager, KEY, [U(secret_text(large)), A("ok")]).messages
    history.append(manager, KEY, [U("next"), A("ok")])
    on_disk(db_folder)

    edited = edits.edit_message(
        manager, KEY, stored[0].id, MessageEdit(content="my token is [redacted]")
    )

    assert edited.content == "my token is [redacted]"
    assert history.get(manager, KEY).messages[0].content == "my token is [redacted]"
    gone(db_folder)


def test_edited_metadata_and_attachments_leave_no_residue(make_manager, db_folder: Path) -> None:
    manager = make_manager()
    stored = history.append(
        manager, KEY, [Message(role="user", content="q", metadata={"note": SECRET}), A("ok")]
    ).messages
    on_disk(db_folder)
    edits.edit_message(manager, KEY, stored[0].id, MessageEdit(metadata={}))
    gone(db_folder)


def test_delete_summary_and_a_replaced_title_leave_no_residue(
    make_manager, db_folder: Path
) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("q"), A("ok")])
    history.save_summary(manager, KEY, f"summary {SECRET}")
    conversations.update(
        manager,
        KEY,
        ConversationUpdate(set_title=True, title=f"title {SECRET}", metadata={"s": SECRET}),
    )
    on_disk(db_folder)

    assert history.delete_summary(manager, KEY) is True
    conversations.update(
        manager, KEY, ConversationUpdate(set_title=True, title="plain", metadata={"s": "plain"})
    )

    assert conversations.info(manager, KEY).title == "plain"
    gone(db_folder)


@SIZES
def test_clear_leaves_no_residue_of_title_or_metadata(
    make_manager, db_folder: Path, large: bool
) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U(secret_text(large)), A("ok")])
    conversations.update(
        manager,
        KEY,
        ConversationUpdate(set_title=True, title=f"t {SECRET}", metadata={"k": SECRET}),
    )
    history.append(manager, Key("ws", "other"), [U("another conversation")])
    on_disk(db_folder)

    assert history.clear(manager, KEY) == 2

    assert conversations.info(manager, KEY).created_at is None
    gone(db_folder)


def test_a_fork_then_truncating_both_leaves_no_residue(make_manager, db_folder: Path) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("keep"), A("ok")])
    stored = history.append(manager, KEY, [U(f"forked {SECRET}"), A("ok")]).messages
    conversations.fork(manager, KEY, Key("ws", "copy"))
    on_disk(db_folder)
    edits.truncate(manager, KEY, stored[0].id)
    copy = history.get(manager, Key("ws", "copy")).messages
    assert SECRET in copy[2].content  # the fork holds its own copy until it goes too
    edits.truncate(manager, Key("ws", "copy"), copy[2].id)
    gone(db_folder)


def compaction_of_secret(manager: ChatHistoryManager, *, large: bool) -> list[int]:
    """A conversation whose first turn a native compaction carrying the secret covers; the ids
    of that turn's rows."""
    covered = history.append(manager, KEY, [U("old question"), A("old answer")]).messages
    history.append(manager, KEY, [U("new question"), A("ok")])
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": secret_text(large)}
    made = origin("openai-responses", "gpt-5.2")
    provider_state.save_compaction(manager, KEY, covered[-1].id, [item], made)
    return [row.id for row in covered]


@SIZES
@pytest.mark.parametrize("how", ["truncate", "delete_turns", "clear"])
def test_deleting_a_covered_row_leaves_no_residue_of_the_compaction(
    make_manager, db_folder: Path, large: bool, how: str
) -> None:
    """Version 5: a native compaction goes with the rows it covers, for good."""
    manager = make_manager()
    covered = compaction_of_secret(manager, large=large)
    on_disk(db_folder)
    if how == "truncate":
        edits.truncate(manager, KEY, covered[0])
    elif how == "delete_turns":
        edits.delete_turns(manager, KEY, [1])
    else:
        history.clear(manager, KEY)
    with manager.store.read() as tx:
        assert tx.compaction(KEY) is None
    gone(db_folder)


def test_a_replaced_compaction_leaves_no_residue(make_manager, db_folder: Path) -> None:
    manager = make_manager()
    covered = compaction_of_secret(manager, large=False)
    on_disk(db_folder)
    plain = [{"type": "compaction", "id": "cmp_2", "encrypted_content": "gAAAA-plain"}]
    provider_state.save_compaction(
        manager, KEY, covered[-1], plain, origin("openai-responses", "gpt-5.2")
    )
    gone(db_folder)

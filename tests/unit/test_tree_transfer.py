"""Conversation trees in and out (protocol.md "Version 5" → Conversation trees, issue 41), on both
engines: ``export --tree`` writes every branch's rows, each numbered with the number of the row
it follows, and the active leaf; an import of it into a fresh database restores the same tree
(``getTree`` and ``get`` equal but for the ids), adds nothing a second time, and a newer export
adds only its new rows; a file without the tree reads as a line, as before; a bad reference in
the file names its line. Claude Code's ``parentUuid`` chain keeps its rewinds as branches, the
newest line's branch active, idempotently; a session without a rewind stays a line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from jsonschema import Draft202012Validator

from chat_history.cli import export_schema, transfer
from chat_history.importers import claude_code
from chat_history.model import Follow, Key, Message, StoredMessage, ToolCall
from chat_history.service import branches, history, import_writes, imports
from chat_history.service.manager import ChatHistoryManager
from chat_history.wire.protocol import wire_message

pytestmark = pytest.mark.engines
KEY = Key("file:///home/ada/shop", "tree")
T = 1_764_480_000_000  # the clock of the unit tests' fixtures (tests/unit/conftest.py)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
REWINDS = FIXTURES / "claude-code-rewinds" / "-home-me-shop"
SESSION = "5e2b7c90-1f3a-4d6e-8b9c-2a4f6e8d0c1b"
LINEAR = FIXTURES / "claude-code" / "-home-me-shop"
OFF = {"enableAutoPruning": False}


def at(n: int) -> int:
    return T - 10_000 + n


def U(text: str, n: int) -> Message:
    return Message(role="user", content=text, timestamp=at(n))


def A(text: str, n: int, calls: tuple[ToolCall, ...] = ()) -> Message:
    return Message(role="assistant", content=text, tool_calls=calls, timestamp=at(n))


def build_tree(manager: ChatHistoryManager) -> dict[str, int]:
    """A conversation with every kind of branch: a regenerated reply, an edited prompt with a
    tool exchange below it, a new first prompt, and a summary; the active path ends on the
    regenerated reply's branch, not on the newest row."""
    system, q1, a1 = history.append(
        manager,
        KEY,
        [Message(role="system", content="Be brief.", timestamp=at(0)), U("q1", 1), A("a1", 2)],
    ).messages
    _, a2 = history.append(manager, KEY, [U("q2", 3), A("a2", 4)]).messages
    [a1b] = history.append(manager, KEY, [A("a1 again", 5)], follow=Follow(q1.id)).messages
    call = ToolCall(id="call_1", name="read_file", arguments={"path": "main.py"})
    *_, a3b = history.append(
        manager,
        KEY,
        [
            U("q2 edited", 6),
            A("", 7, (call,)),
            Message(role="tool", tool_call_id="call_1", content="print(1)", timestamp=at(8)),
            A("it prints 1", 9),
        ],
        follow=Follow(a1.id),
    ).messages
    [root] = history.append(manager, KEY, [U("another start", 10)], follow=Follow(None)).messages
    branches.switch(manager, KEY, a1b.id)
    [q3] = history.append(manager, KEY, [U("q3", 11)]).messages
    history.save_summary(manager, KEY, "They talked.", covers_through_id=q1.id)
    return {"system": system.id, "a2": a2.id, "a3b": a3b.id, "root": root.id, "q3": q3.id}


def tree_lines(manager: ChatHistoryManager, key: Key = KEY) -> list[dict[str, Any]]:
    whole = branches.whole_tree(manager, key)
    lines = transfer.conversation_lines(
        key, whole.rows, whole.summary, tree=True, active_leaf_id=whole.active_leaf_id
    )
    return [transfer.header_line(), *lines]


def text_of(lines: list[dict[str, Any]]) -> list[bytes]:
    return [transfer.dumps(line).encode() for line in lines]


def restore(manager: ChatHistoryManager, lines: list[dict[str, Any]]) -> import_writes.ImportResult:
    [entry] = transfer.read_import(text_of(lines))
    if entry.tree is None or entry.tree.is_line:
        return import_writes.import_conversation(manager, entry.key, entry.messages, entry.summary)
    return import_writes.import_tree(manager, entry.key, entry.tree, entry.summary)


def shape(manager: ChatHistoryManager, key: Key = KEY) -> dict[str, Any]:
    """``getTree`` and ``get`` with every id as its row's position in the tree (ids differ from
    one database to another; the shape, text and siblings must not)."""
    page = branches.tree(manager, key)
    number = {node.id: index for index, node in enumerate(page.nodes, 1)}

    def renumbered(value: Any) -> Any:
        return None if value is None else number[value]

    got = history.get(manager, key)
    messages = []
    for row in got.messages:
        wire = wire_message(row)
        wire["id"] = renumbered(row.id)
        wire["parentId"] = renumbered(row.parent_id)
        wire["siblings"] = {**wire["siblings"], "ids": [number[i] for i in wire["siblings"]["ids"]]}
        messages.append(wire)
    return {
        "nodes": [
            (number[n.id], renumbered(n.parent_id), n.role, n.preview, n.timestamp, n.children)
            for n in page.nodes
        ]
        + [("active", [number[n.id] for n in page.nodes if n.active])],
        "leaf": renumbered(page.active_leaf_id),
        "messages": messages,
        "summary": None
        if got.summary is None
        else (got.summary.summary, renumbered(got.summary.covers_through_id)),
    }


# -- export --tree → import ------------------------------------------------------------------------


def test_export_tree_then_import_into_a_fresh_database_restores_the_same_tree(
    make_manager, tmp_path
):
    source = make_manager(OFF)
    build_tree(source)
    lines = tree_lines(source)
    messages = [line for line in lines if line["type"] == "message"]
    assert [m["message"]["id"] for m in messages] == list(range(1, 13))
    assert [line["type"] for line in lines[-2:]] == ["conversation", "summary"]
    validator = Draft202012Validator(export_schema.schema())
    for line in lines:
        validator.validate(line)
        export_schema.check_line(line)

    target = make_manager(OFF, folder=tmp_path / "target")
    result = restore(target, lines)
    assert len(result.imported) == 12 and result.skipped == 0
    assert shape(target) == shape(source)
    assert tree_lines(target) == lines  # and it exports byte for byte as the source did

    again = restore(target, lines)
    assert (len(again.imported), again.skipped) == (0, 12)
    assert shape(target) == shape(source)


def test_the_file_names_each_parent_by_its_number_in_the_file(make_manager):
    source = make_manager(OFF)
    ids = build_tree(source)
    lines = tree_lines(source)
    whole = branches.whole_tree(source, KEY)
    number = {row.id: index for index, row in enumerate(whole.rows, 1)}
    messages = [line["message"] for line in lines if line["type"] == "message"]
    assert [m["parentId"] for m in messages] == [
        None if row.parent_id is None else number[row.parent_id] for row in whole.rows
    ]
    assert [m["content"] for m in messages if m["parentId"] is None] == [
        "Be brief.",
        "another start",
    ]
    [conversation] = [line for line in lines if line["type"] == "conversation"]
    assert conversation["activeLeafId"] == number[ids["q3"]]
    [summary] = [line for line in lines if line["type"] == "summary"]
    assert summary["summary"]["coversMessages"] == 2  # through q1, the file's second message


def test_without_tree_the_export_is_the_active_path_as_a_line(make_manager, tmp_path):
    source = make_manager(OFF)
    build_tree(source)
    got = history.get(source, KEY)
    lines = list(transfer.conversation_lines(KEY, got.messages, got.summary))
    assert [line["type"] for line in lines] == ["message"] * 4 + ["summary"]
    assert [line["message"]["content"] for line in lines[:4]] == [
        "Be brief.",
        "q1",
        "a1 again",
        "q3",
    ]
    assert not any("id" in line["message"] or "parentId" in line["message"] for line in lines[:4])
    target = make_manager(OFF, folder=tmp_path / "target")
    restore(target, [transfer.header_line(), *lines])
    assert [row.content for row in history.get(target, KEY).messages] == [
        "Be brief.",
        "q1",
        "a1 again",
        "q3",
    ]
    assert all(
        wire_message(row)["siblings"]["count"] == 1 for row in history.get(target, KEY).messages
    )


def test_a_tree_without_branches_imports_as_the_line_it_is(make_manager, tmp_path):
    source = make_manager(OFF)
    history.append(source, KEY, [U("q", 1), A("a", 2), U("q2", 3)])
    tree = tree_lines(source)
    line = [transfer.header_line(), *transfer.conversation_lines(KEY, *history.whole(source, KEY))]
    [entry] = transfer.read_import(text_of(tree))
    assert entry.tree is not None and entry.tree.is_line
    one = make_manager(OFF, folder=tmp_path / "one")
    two = make_manager(OFF, folder=tmp_path / "two")
    restore(one, tree)
    restore(two, line)
    assert shape(one) == shape(two) == shape(source)


def test_a_newer_tree_export_adds_only_its_new_rows_and_its_active_leaf(make_manager, tmp_path):
    source = make_manager(OFF)
    ids = build_tree(source)
    older = tree_lines(source)
    target = make_manager(OFF, folder=tmp_path / "target")
    restore(target, older)
    # Later in the source: a reply on the active path, and a new branch under a2 made active.
    history.append(source, KEY, [A("a3", 12)])
    history.append(source, KEY, [U("q3 other", 13)], follow=Follow(ids["a2"]))
    newer = tree_lines(source)
    result = restore(target, newer)
    assert [row.content for row in result.imported] == ["a3", "q3 other"]
    assert result.skipped == 12
    assert shape(target) == shape(source)
    # An older file again brings back nothing and leaves the active path as it is.
    assert len(restore(target, older).imported) == 0
    assert shape(target) == shape(source)


def test_a_branch_under_a_turn_retention_deleted_is_not_brought_back(make_manager, tmp_path):
    source = make_manager(OFF)
    q1, _ = history.append(source, KEY, [U("q1", 1), A("a1", 2)]).messages
    history.append(source, KEY, [U("q2", 3), A("a2", 4)])
    history.append(source, KEY, [A("a1 other", 5)], follow=Follow(q1.id))
    history.append(source, KEY, [U("q2 other", 6)])
    lines = tree_lines(source)
    target = make_manager({"maxMessages": 2}, folder=tmp_path / "target")
    restore(target, lines)
    # The next read applies retention: the first turn (whole) goes, and the branch below it.
    assert [row.content for row in history.get(target, KEY).messages] == ["q2 other"]
    kept = [node.preview for node in branches.tree(target, KEY).nodes]
    assert kept == ["q2 other"]
    again = restore(target, lines)
    assert not again.imported
    assert [node.preview for node in branches.tree(target, KEY).nodes] == kept


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda ms: ms[2].update(parentId=9), "line 4: message.parentId: 9 is no earlier message"),
        (lambda ms: ms[2].update(parentId=3), "line 4: message.parentId: 3 is no earlier message"),
        (lambda ms: ms[2].update(id=1), "line 4: message.id: 1 is another message's already"),
        (lambda ms: ms[2].pop("id"), "line 4: message.parentId: needs the message's id"),
        (
            lambda ms: (ms[2].pop("id"), ms[2].pop("parentId")),
            "line 4: message.id: the conversation's other messages have one",
        ),
        (lambda ms: ms[1].update(id=0), "line 3: message.id: must be at least 1"),
    ],
)
def test_a_bad_reference_in_a_tree_file_names_its_line(change, why):
    rows = [
        {"id": 1, "parentId": None, "role": "user", "content": "q", "timestamp": 1},
        {"id": 2, "parentId": 1, "role": "assistant", "content": "a", "timestamp": 2},
        {"id": 3, "parentId": 1, "role": "assistant", "content": "b", "timestamp": 3},
    ]
    change(rows)
    keys = {"workspace": "w", "conversationId": "c"}
    lines = [transfer.header_line()] + [{"type": "message", **keys, "message": m} for m in rows]
    with pytest.raises(transfer.ImportFileError) as caught:
        transfer.read_import(text_of(lines))
    assert str(caught.value).startswith(why)


def test_the_active_leaf_must_name_a_message_of_its_conversation():
    keys = {"workspace": "w", "conversationId": "c"}
    message = {"type": "message", **keys}
    lines = [
        {**message, "message": {"id": 1, "role": "user", "content": "q", "timestamp": 1}},
        {**message, "message": {"id": 2, "role": "assistant", "content": "a", "timestamp": 2}},
        {"type": "conversation", **keys, "activeLeafId": 7},
    ]
    with pytest.raises(transfer.ImportFileError, match="line 3: activeLeafId: 7 is no message"):
        transfer.read_import(text_of(lines))
    lines[-1]["activeLeafId"] = 1
    [entry] = transfer.read_import(text_of(lines))
    # parentId left out: the message before it; the active leaf as the file says
    assert entry.tree is not None
    assert (entry.tree.parents, entry.tree.active) == ((None, 0), 0)
    plain = [{**message, "message": {"role": "user", "content": "q", "timestamp": 1}}, lines[-1]]
    with pytest.raises(transfer.ImportFileError, match="line 2: activeLeafId: the conversation's"):
        transfer.read_import(text_of(plain))


# -- Claude Code's rewinds -------------------------------------------------------------------------


def read_rewinds() -> Any:
    path = REWINDS / f"{SESSION}.jsonl"
    [session] = claude_code.read(path.read_bytes(), SESSION)
    return session


def test_a_claude_code_session_keeps_every_rewind_as_a_branch():
    session = read_rewinds()
    contents = [m.content[:24] for m in session.messages]
    by_text = {text: index for index, text in enumerate(contents)}
    assert session.parents is not None
    parent = {
        contents[i]: None if p is None else contents[p] for i, p in enumerate(session.parents)
    }
    # The rewound prompt follows the reply before the prompt it replaced ...
    assert parent["Instead, make the field o"[:24]] == parent["Also validate the code o"[:24]]
    # ... a rewind to the first prompt is another first row ...
    assert parent["Add a gift card field to "[:24]] is None
    assert parent["Add a discount code field"[:24]] is None
    # ... the compaction's summary goes on from the line before it, across the boundary.
    assert parent["This session is being co"] == "The field is optional no"
    assert parent["Thanks, ship it."] == "This session is being co"
    # The tool rows answer the calls of their own branch; the newest line's branch is active.
    tools = [m for m in session.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tools] == ["toolu_01Read", "toolu_01Grep"]
    assert session.active == by_text["Committed and pushed to "]
    assert session.title == "Optional discount code at checkout"


def test_a_claude_code_session_without_a_rewind_stays_a_line():
    for path in sorted(LINEAR.rglob("*.jsonl")):
        for session in claude_code.read(path.read_bytes(), path.stem):
            assert (session.parents, session.active) == (None, None), path.name


def test_importing_claude_code_rewinds_keeps_the_tree_and_a_second_import_adds_nothing(
    make_manager, tmp_path
):
    manager = make_manager(OFF)
    [planned] = imports.import_sessions(
        manager, imports.sessions_of("claude-code", REWINDS, None), None, dry_run=False
    )
    assert (planned.status, planned.messages, planned.new_messages) == ("new", 15, 15)
    key = Key(planned.workspace, planned.conversation_id)
    shown = [row.content[:24] for row in history.get(manager, key).messages]
    assert shown == [
        "Add a discount code fiel",
        "",
        "export function Checkout",
        "I added a `discountCode`",
        "Instead, make the field ",
        "The field is optional no",
        "This session is being co",
        "Thanks, ship it.",
        "Committed and pushed to ",
    ]
    rows = history.get(manager, key).messages
    assert [wire_message(row)["siblings"]["count"] for row in rows] == [2, 1, 1, 1, 2, 1, 1, 1, 1]
    page = branches.tree(manager, key)
    assert len(page.nodes) == 15 and page.active_leaf_id == rows[-1].id
    # The other branches are one switch away, whole.
    other = branches.switch(manager, key, wire_message(rows[4])["siblings"]["ids"][0])
    assert [r.content[:24] for r in other.messages][-2:] == [
        "Also validate the code o",
        "Validation now runs in `",
    ]
    branches.switch(manager, key, rows[-1].id)
    before = shape(manager, key)

    [again] = imports.import_sessions(
        manager, imports.sessions_of("claude-code", REWINDS, None), None, dry_run=False
    )
    assert (again.status, again.new_messages) == ("unchanged", 0)
    assert shape(manager, key) == before

    # The export of the imported tree restores it elsewhere, as it is.
    target = make_manager(OFF, folder=tmp_path / "target")
    lines = tree_lines(manager, key)
    [entry] = transfer.read_import(text_of(lines))
    assert entry.tree is not None
    import_writes.import_tree(target, key, entry.tree, entry.summary)
    assert shape(target, key) == before


def test_a_claude_code_session_that_grew_adds_only_its_new_rows(make_manager, tmp_path):
    whole = (REWINDS / f"{SESSION}.jsonl").read_bytes().splitlines(keepends=True)
    folder = tmp_path / "-home-me-shop"
    folder.mkdir()
    path = folder / f"{SESSION}.jsonl"
    path.write_bytes(b"".join(whole[:12]))  # through the rewind to the first prompt
    manager = make_manager(OFF)
    [first] = imports.import_sessions(
        manager, imports.sessions_of("claude-code", folder, None), None, dry_run=False
    )
    assert (first.status, first.new_messages) == ("new", 9)
    key = Key(first.workspace, first.conversation_id)
    assert history.get(manager, key).messages[-1].content.startswith("Add a gift card")
    path.write_bytes(b"".join(whole))
    [dry] = imports.import_sessions(
        manager, imports.sessions_of("claude-code", folder, None), None, dry_run=True
    )
    assert (dry.status, dry.new_messages) == ("updated", 6)
    [grown] = imports.import_sessions(
        manager, imports.sessions_of("claude-code", folder, None), None, dry_run=False
    )
    assert (grown.status, grown.new_messages) == ("updated", 6)
    fresh = make_manager(OFF, folder=tmp_path / "fresh")
    imports.import_sessions(
        fresh, imports.sessions_of("claude-code", REWINDS, None), None, dry_run=False
    )
    assert shape(manager, key) == shape(fresh, key)


def _contents(rows: tuple[StoredMessage, ...]) -> list[str]:
    return [row.content for row in rows]


def test_a_linear_claude_code_session_imports_as_before(make_manager):
    manager = make_manager(OFF)
    planned = imports.import_sessions(
        manager, imports.sessions_of("claude-code", LINEAR, None), None, dry_run=False
    )
    for entry in planned:
        key = Key(entry.workspace, entry.conversation_id)
        rows = history.get(manager, key).messages
        assert [row.parent_id for row in rows] == [None, *(row.id for row in rows[:-1])]
        assert all(wire_message(row)["siblings"]["count"] == 1 for row in rows)
        assert not branches.whole_tree(manager, key).rows[len(rows) :]
        assert json.dumps(_contents(rows))


def test_a_session_stored_as_a_line_before_version_5_gains_nothing_from_its_tree(make_manager):
    manager = make_manager(OFF)
    found = list(imports.sessions_of("claude-code", REWINDS, None))
    as_line = [(path, attrs.evolve(s, parents=None, active=None)) for path, s in found]
    [first] = imports.import_sessions(manager, as_line, None, dry_run=False)
    key = Key(first.workspace, first.conversation_id)
    rows = history.get(manager, key).messages
    assert len(rows) == first.messages == 15  # every branch's rows, one after the other
    before = shape(manager, key)
    [again] = imports.import_sessions(manager, found, None, dry_run=False)
    assert (again.status, again.new_messages) == ("unchanged", 0)
    assert shape(manager, key) == before

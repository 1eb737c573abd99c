"""The export format's JSON Schema (server/chat_history/cli/export.schema.json, docs/cli.md
"Export format"): every line an export writes is valid against it, checked with the real
``jsonschema`` library; the import's own checker agrees with that library on every line, valid
or not (a hypothesis property); the import refuses a line the schema refuses even when
``append``'s rules would take it, naming the line and the field; the schema is the format's
version."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from chat_history.cli import export_schema, transfer
from chat_history.cli.export_schema import check_line
from chat_history.errors import InvalidParams
from chat_history.model import Attachment, Fence, Key, Message, ToolCall
from chat_history.service import conversations, history, imports
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import default_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
VALIDATOR = Draft202012Validator(export_schema.schema())
PNG = "iVBORw0KGgo="


def exported_lines(tmp_path: Path) -> list[dict[str, Any]]:
    """An export of a real SQLite file holding every fixture of another tool (tool pairs,
    images, signed thinking) and a hand-made conversation with a linked image, a string of
    arguments, metadata and a summary."""
    settings_off = attrs.evolve(default_settings(), enable_auto_pruning=False)
    manager = ChatHistoryManager.open(tmp_path / "h.sqlite3", settings_off)
    try:
        for source, folder in (("claude-code", "claude-code/-home-me-shop"), ("codex", "codex")):
            sessions = imports.sessions_of(source, FIXTURES / folder, None)
            imports.import_sessions(manager, sessions, "file:///x", dry_run=False)
        key = Key("file:///y", "hand")
        history.append(
            manager,
            key,
            [
                Message(role="system", content="Be brief.", metadata={"pinned": True}),
                Message(
                    role="user", content="Look", attachments=(Attachment(uri="file:///a.png"),)
                ),
                Message(
                    role="user",
                    content="and",
                    attachments=(Attachment(mime_type="image/png", data=PNG),),
                ),
                Message(
                    role="assistant",
                    content="",
                    tool_calls=(ToolCall(id="c1", name="read", arguments='{"p": 1}'),),
                ),
                Message(role="tool", content="ok", tool_call_id="c1", name="read"),
            ],
        )
        rows, _ = history.whole(manager, key)
        history.save_summary(manager, key, "It read a file.", rows[-1].id)
        lines = [transfer.header_line()]
        for info in conversations.list_page(manager, None, None, None).conversations:
            rows, summary = history.whole(manager, info.key)
            lines.extend(transfer.conversation_lines(info.key, rows, summary))
        return json.loads(json.dumps(lines))
    finally:
        manager.close()


def test_every_line_of_an_export_is_valid_against_the_schema(tmp_path: Path) -> None:
    lines = exported_lines(tmp_path)
    kinds = {line["type"] for line in lines}
    assert kinds == {"header", "message", "summary"} and len(lines) > 30
    assert any(m["message"]["attachments"] for m in lines if m["type"] == "message")
    assert any(m["message"]["providerData"] for m in lines if m["type"] == "message")
    for line in lines:
        VALIDATOR.validate(line)
        check_line(line)
    text = "\n".join(transfer.dumps(line) for line in lines).encode()
    assert len(transfer.read_import(text.split(b"\n"))) > 4  # and the import reads it back


def test_the_schema_is_the_formats_version() -> None:
    document = export_schema.schema()
    Draft202012Validator.check_schema(document)
    assert document["x-format-version"] == transfer.VERSION
    assert document["$defs"]["header"]["properties"]["version"] == {"const": transfer.VERSION}
    assert document["$id"].endswith(f":{transfer.VERSION}")


VALID = {
    "type": "message",
    "workspace": "file:///w",
    "conversationId": "c",
    "message": {
        "role": "assistant",
        "content": "",
        "toolCalls": [{"id": "a", "name": "t", "arguments": {"x": 1}}],
        "attachments": [{"kind": "image", "mimeType": "image/png", "data": PNG}],
        "timestamp": 1764480002000,
        "providerData": {},
        "metadata": {},
    },
}
SUMMARY = {
    "type": "summary",
    "workspace": "w",
    "conversationId": "c",
    "summary": {"summary": "s", "updatedAt": 5, "coversMessages": None},
}
HEADER = {"type": "header", "format": "chat-history", "version": 1}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 2**40)
    | st.sampled_from(["", "x", "image/png", "header", "message", "summary", "user", "tool"]),
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.dictionaries(st.sampled_from(["a", "id", "uri", "kind"]), inner, max_size=2)
    ),
    max_leaves=4,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found.extend(paths(inner, (*prefix, key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found.extend(paths(inner, (*prefix, index)))
    return found


@st.composite
def mutated_lines(draw: st.DrawFn) -> dict[str, Any]:
    """A valid line of each kind with a few of its values replaced, removed or added."""
    line = copy.deepcopy(draw(st.sampled_from([VALID, SUMMARY, HEADER])))
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(paths(line)))
        if not path:
            continue
        parent = line
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "remove":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "uri", "data", "name"]))] = draw(json_values)
    return line


@settings(max_examples=400, deadline=None)
@given(mutated_lines())
def test_the_imports_checker_agrees_with_jsonschema_on_every_line(line: dict[str, Any]) -> None:
    try:
        check_line(line)
        accepted = True
    except InvalidParams:
        accepted = False
    assert accepted == VALIDATOR.is_valid(line)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ({**HEADER, "note": "by hand"}, "has a field the export format does not define"),
        (
            {**SUMMARY, "summary": {**SUMMARY["summary"], "coverMessages": 2}},
            "summary: has a field",
        ),
        ({**VALID, "extra": 1}, "has a field the export format does not define"),
    ],
)
def test_the_import_refuses_what_the_schema_refuses_with_the_line_and_field(
    line: dict[str, Any], said: str
) -> None:
    good = transfer.dumps(VALID).encode()
    with pytest.raises(transfer.ImportFileError) as caught:
        transfer.read_import([good, transfer.dumps(line).encode()])
    assert caught.value.line == 2 and said in caught.value.why


def test_an_attachment_needs_exactly_one_of_data_or_uri_and_the_error_names_it() -> None:
    both = copy.deepcopy(VALID)
    both["message"]["attachments"][0]["uri"] = "file:///a.png"
    with pytest.raises(InvalidParams) as caught:
        check_line(both)
    assert caught.value.field == "message.attachments[0]"
    assert "exactly one of data" in caught.value.why
    assert not VALIDATOR.is_valid(both)


def test_a_schema_keyword_the_checker_lacks_is_refused_when_it_loads() -> None:
    with pytest.raises(ValueError, match="keywords the checker lacks"):
        export_schema._known({"type": "object", "properties": {"x": {"maxLength": 3}}})


def test_origins_and_fences_travel_through_an_export(tmp_path: Path) -> None:
    """Version 5: every message's origin, and the fences a reported refusal set, are written
    and read back, so an imported conversation sends its state only where it did before."""
    from chat_history.policy.origins import origin
    from chat_history.service import provider_state
    from chat_history.settings import PROVIDER_KINDS

    assert export_schema.schema()["$defs"]["providerKind"]["enum"] == list(PROVIDER_KINDS)
    settings_off = attrs.evolve(default_settings(), enable_auto_pruning=False)
    manager = ChatHistoryManager.open(tmp_path / "h.sqlite3", settings_off)
    made = origin("anthropic", "claude-sonnet-4-5", "https://gw.example", "team-a")
    thinking = {
        "anthropic": {"thinking": [{"type": "thinking", "thinking": "t", "signature": "s"}]}
    }
    key = Key("file:///w", "c")
    try:
        history.append(
            manager,
            key,
            [
                Message(role="user", content="q"),
                Message(role="assistant", content="a", provider_data=thinking, origin=made),
                Message(role="assistant", content="b", provider_data=thinking, origin=made),
            ],
        )
        refused = {"error": {"message": "Invalid `signature` in `thinking` block"}}
        bare = provider_state.report_error(
            manager, key, "anthropic", "claude-sonnet-4-5", 400, refused
        )
        assert bare.fenced == 0  # the public API is not where they were minted
        rows, summary = history.whole(manager, key)
        # The fence a report at the gateway sets.
        fence = Fence(
            provider="anthropic",
            endpoint="https://gw.example",
            scope="team-a",
            model="claude-sonnet-4-5",
            state="anthropic.thinking",
        )
        fenced = attrs.evolve(rows[1], fences=(fence,))
        manager.write((key,), lambda tx: tx.set_fences(key, [fenced]))
        rows, summary = history.whole(manager, key)
        lines = [transfer.header_line(), *transfer.conversation_lines(key, rows, summary)]
    finally:
        manager.close()
    wire_lines = json.loads(json.dumps(lines))
    for line in wire_lines:
        VALIDATOR.validate(line)
    assert [line["message"]["origin"] for line in wire_lines[1:]] == [
        None,
        made.as_json(),
        made.as_json(),
    ]
    assert "fences" not in wire_lines[3]["message"]
    [read] = transfer.read_import(transfer.dumps(line).encode() for line in wire_lines)
    assert [m.origin for m in read.messages] == [None, made, made]
    assert [m.fences for m in read.messages] == [(), (fence,), ()]

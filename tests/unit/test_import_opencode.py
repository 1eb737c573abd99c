"""The OpenCode reader (importers/opencode/export.py) over a storage tree written in OpenCode's
shapes (tests/fixtures/imports/SOURCES.md), gathered by importers/opencode/tree.py into the shape
of ``opencode export``: a reply split where its text follows its tool calls, each call paired
with its result (an error as ``Error: …``), signed reasoning kept for Anthropic only, OpenCode's
synthetic text and bookkeeping parts counted, a sub-agent's session its own conversation;
reading the gathered export gives the same rows, and a tree without its session files is read
from its message folders; every session formats to a body each provider
kind's SDK accepts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_import_readers import assert_every_provider_accepts, skipped

from chat_history.errors import InvalidParams
from chat_history.importers import opencode
from chat_history.importers.common import Session
from chat_history.importers.opencode.tree import bundle
from chat_history.providers import KINDS
from chat_history.service import imports

STORAGE = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "opencode" / "storage"
MAIN = "ses_6a1b2c3d4e5fAbCdEf012345"
CHILD = "ses_6a1b2c3d4e60ChildSess0001"


def sessions() -> dict[str, Session]:
    return {s.session_id: s for _, s in imports.sessions_of("opencode", STORAGE, None)}


def part(message: str, name: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(
        (STORAGE / "part" / message / f"{name}.json").read_text()
    )
    return loaded


def test_a_reply_is_split_where_its_text_follows_its_calls_and_each_call_has_its_result() -> None:
    session = sessions()[MAIN]
    assert (session.title, session.folder) == ("Speed up the cart test suite", "/home/me/shop")
    rows = session.messages
    assert [(m.role, m.tool_call_id) for m in rows] == [
        ("user", None),
        ("assistant", None),
        ("tool", "toolu_oc1"),
        ("assistant", None),
        ("tool", "toolu_oc2"),
        ("user", None),
        ("assistant", None),
    ]
    prompt, checking, read, seeded, failed, ask, done = rows
    assert prompt.content == part("msg_a01", "prt_a01a")["text"]
    assert [a.mime_type for a in prompt.attachments] == ["image/png"]
    assert prompt.timestamp == 1795800001000
    assert checking.content == "I'll check how the fixtures are built."
    [call] = checking.tool_calls
    assert (call.name, call.arguments) == ("read", {"filePath": "/home/me/shop/tests/setup.ts"})
    assert checking.provider_data == {
        "anthropic": {
            "thinking": [
                {
                    "type": "thinking",
                    "thinking": "Probably the fixtures are rebuilt per test.",
                    "signature": "EqgBCkgIBxABopencodeSig",
                }
            ]
        }
    }
    assert read.content == "beforeEach(() => seedDatabase())" and read.timestamp == 1795800004500
    assert seeded.content == "The database is seeded before every test."
    assert seeded.tool_calls[0].name == "bash"
    assert failed.content == "Error: script not found: bench"
    assert ask.content == "Seed once per file instead."  # the synthetic text is not the user's
    assert done.content.startswith("Moved seedDatabase() into beforeAll")
    counts = skipped(session)
    assert counts[("synthetic text", "written by OpenCode, not typed by the user")] == 1
    assert counts[("reasoning part", "not signed where its reply starts: not sendable")] == 1
    assert counts[("step-start part", "OpenCode's bookkeeping, not the conversation")] == 1
    assert counts[("file part", "not an inline image")] == 1
    assert counts[("unknown part", "not carried over")] == 1  # the truncated part file


def test_a_sub_agents_session_is_its_own_conversation_without_its_unfinished_call() -> None:
    child = sessions()[CHILD]
    assert child.title == "Find every beforeEach that seeds the database."  # not "Child session"
    assert [(m.role, m.content) for m in child.messages] == [
        ("user", "Find every beforeEach that seeds the database."),
        ("assistant", "Only tests/setup.ts seeds it."),
    ]
    assert skipped(child) == {("tool part", "never finished, or no call id"): 1}


def test_an_export_file_reads_as_the_tree_does(tmp_path: Path) -> None:
    path = next((STORAGE / "session").glob(f"*/{MAIN}.json"))
    export = tmp_path / "export.json"
    export.write_bytes(bundle(path, 2**20))
    [(_, exported)] = imports.sessions_of("opencode", export, None)
    assert exported.messages == sessions()[MAIN].messages


def test_a_project_chooses_its_sessions_by_directory_and_other_files_yield_nothing() -> None:
    assert len(list(imports.sessions_of("opencode", STORAGE, "/home/me/shop"))) == 2
    assert list(imports.sessions_of("opencode", STORAGE, "/home/me/other")) == []
    claude = STORAGE.parents[1] / "claude-code" / "-home-me-shop"
    for path in claude.glob("*.jsonl"):
        assert opencode.read(path.read_bytes(), "x") == []


SESSIONS = sessions()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_every_opencode_session_formats_to_a_body_each_provider_accepts(
    kind: str, name: str
) -> None:
    session = SESSIONS[name]
    assert_every_provider_accepts(kind, session)


def test_a_tree_without_its_session_files_is_read_from_its_message_folders(
    tmp_path: Path,
) -> None:
    """Sessions whose ``session/`` file is gone (or never written) are found by their
    ``message/<session id>/`` folders: the same rows, no title of the tool's (the first prompt's
    line), the folder a reply recorded (``path.cwd``)."""
    storage = tmp_path / "opencode" / "storage"
    shutil.copytree(STORAGE, storage)
    shutil.rmtree(storage / "session")
    found = {s.session_id: s for _, s in imports.sessions_of("opencode", storage, None)}
    assert sorted(found) == sorted(SESSIONS)
    main = found[MAIN]
    assert main.messages == SESSIONS[MAIN].messages
    assert main.title == "Why is the cart suite slow? Screenshot attached."
    assert main.folder == "/home/me/shop"
    project = [s.session_id for _, s in imports.sessions_of("opencode", storage, "/home/me/shop")]
    assert MAIN in project
    assert list(imports.sessions_of("opencode", storage, "/home/me/other")) == []


def test_a_session_whose_files_add_up_past_the_bound_is_an_error_naming_it() -> None:
    path = next((STORAGE / "session").glob(f"*/{MAIN}.json"))
    with pytest.raises(InvalidParams) as caught:
        bundle(path, 2_000)
    assert caught.value.field == "path" and str(path) in caught.value.why

"""The Cline and Roo Code readers (importers/cline.py, roo_code.py over task_history.py) on task
folders written in their shapes (tests/fixtures/imports/SOURCES.md): a Cline task of the XML
tool era (tools as text, times from the task id) and a Roo Code task with native tool blocks,
an image, signed thinking and a time per message; the folder read from the extension's
environment details, which are not carried over; every task formats to a body each provider
kind's SDK accepts, signed thinking reaching Anthropic only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_import_readers import assert_every_provider_accepts, skipped

from chat_history.importers import cline, roo_code
from chat_history.importers.common import Session
from chat_history.providers import KINDS
from chat_history.service import imports

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
CLINE = FIXTURES / "cline" / "tasks"
ROO = FIXTURES / "roo-code" / "tasks"
CLINE_TASK = "1795770000000"
ROO_TASK = "5b6c7d8e-9f01-4a2b-8c3d-4e5f60718293"


def only(source: str, root: Path) -> Session:
    [(_, session)] = imports.sessions_of(source, root, None)
    return session


def test_a_cline_task_of_the_xml_tool_era_keeps_its_tools_as_text() -> None:
    session = only("cline", CLINE)
    raw = json.loads((CLINE / CLINE_TASK / "api_conversation_history.json").read_text())
    assert session.conversation_id == f"cline:{CLINE_TASK}"
    assert (session.folder, session.title) == ("/home/me/shop", "Make total() round to cents.")
    assert [m.role for m in session.messages] == ["user", "assistant", "user", "assistant"]
    prompt, reading, result, done = session.messages
    assert prompt.content == "Make total() round to cents."  # <task> unwrapped, details out
    assert reading.content == raw[1]["content"][0]["text"] and not reading.tool_calls
    assert result.content.startswith("[read_file for 'src/cart.ts'] Result:")
    assert "<environment_details>" not in result.content
    assert done.content.startswith("<attempt_completion>")
    assert {m.timestamp for m in session.messages} == {int(CLINE_TASK)}  # the task id's time
    assert skipped(session) == {
        ("environment details", "added by the extension, not typed by the user"): 2
    }


def test_a_roo_code_task_pairs_native_tool_blocks_and_keeps_signed_thinking() -> None:
    session = only("roo-code", ROO)
    raw = json.loads((ROO / ROO_TASK / "api_conversation_history.json").read_text())
    assert session.conversation_id == f"roo-code:{ROO_TASK}" and session.folder == "/home/me/shop"
    prompt, reading, result, answer = session.messages
    assert prompt.content == "Why is this test red? See the screenshot."
    assert [a.mime_type for a in prompt.attachments] == ["image/png"]
    [call] = reading.tool_calls
    assert (call.id, call.name, call.arguments) == (
        "toolu_roo1",
        "read_file",
        {"path": "tests/cart.spec.ts"},
    )
    assert (
        reading.provider_data["anthropic"]["thinking"][0]["signature"] == "EqsBCkgIBRgCroocodeSig"
    )
    assert result.tool_call_id == "toolu_roo1" and result.content.startswith("expect(total(")
    assert answer.content == raw[4]["content"][0]["text"]
    assert [m.timestamp for m in session.messages] == [raw[i]["ts"] for i in (0, 1, 2, 4)]
    assert skipped(session)[("tool result", "no tool call before it")] == 1


def test_a_project_chooses_its_tasks_by_the_folder_their_details_name() -> None:
    assert len(list(imports.sessions_of("roo-code", ROO, "/home/me/shop"))) == 1
    assert list(imports.sessions_of("roo-code", ROO, "/home/me/other")) == []
    folder = imports.data_folder("cline", {"HOME": "/h", "XDG_CONFIG_HOME": ""})
    assert folder.parts[-3:] == ("globalStorage", "saoudrizwan.claude-dev", "tasks")


def test_a_task_with_no_time_at_all_and_files_of_other_sources_yield_nothing() -> None:
    untimed = json.dumps([{"role": "user", "content": "hi"}]).encode()
    assert roo_code.read(untimed, "not-a-time") == []
    for path in (FIXTURES / "opencode").rglob("*.json"):
        assert cline.read(path.read_bytes(), "1") == []


SESSIONS = {"cline": only("cline", CLINE), "roo-code": only("roo-code", ROO)}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_every_task_formats_to_a_body_each_provider_accepts(kind: str, name: str) -> None:
    session = SESSIONS[name]
    assert_every_provider_accepts(kind, session)

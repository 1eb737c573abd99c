"""The Cline and Roo Code readers (importers/cline.py, roo_code.py over task_history.py) on task
folders written in their shapes (tests/fixtures/imports/SOURCES.md): a Cline task of the XML
tool era (tools as text, times from the task id) and a Roo Code task with native tool blocks,
an image, signed thinking and a time per message, and the same task in newer Roo Code's
versioned AI SDK shape, which reads into the same rows; the folder read from the extension's
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
ROO_VERSIONED = FIXTURES / "roo-code" / "versioned" / "tasks"
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


def test_a_roo_code_task_in_the_versioned_shape_reads_into_the_rows_of_the_older_one() -> None:
    versioned, older = only("roo-code", ROO_VERSIONED), only("roo-code", ROO)
    assert versioned.session_id == "6c7d8e9f-0a1b-4c2d-9e3f-5a6b7c8d9e0f"
    assert versioned.messages == older.messages  # image, signed thinking, the call and its result
    assert (versioned.folder, versioned.title) == (older.folder, older.title)
    assert skipped(versioned) == {
        **skipped(older),
        ("reasoning item", "OpenAI's encrypted reasoning in Roo Code's own format"): 1,
    }


@pytest.mark.parametrize(
    "line",
    [
        "# Current Workspace Directory (/home/me/a (copy)) Files",
        "# Current Workspace Directory (/home/me/a (copy))",  # builds that list no files
        "## Current Workspace Directory (/home/me/a (copy))",
    ],
)
def test_the_folder_is_read_from_each_wording_of_the_details(line: str) -> None:
    details = f"<environment_details>\n# Current Mode\ncode\n\n{line}\n(Only folders)\n"
    task = [
        {
            "role": "user",
            "ts": 1795780000000,
            "content": [
                {"type": "text", "text": "<task>\nHi\n</task>"},
                {"type": "text", "text": details + "</environment_details>"},
            ],
        }
    ]
    [session] = roo_code.read(json.dumps(task).encode(), "t")
    assert session.folder == "/home/me/a (copy)"


def test_versioned_tool_outputs_errors_and_redacted_thinking() -> None:
    call = {"type": "tool-call", "toolName": "run", "input": {"cmd": "x"}}
    history = {
        "version": 2,
        "messages": [
            {"role": "user", "ts": 1795780000000, "content": "Go."},
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": "", "providerOptions": {"anthropic": {}}},
                    {"type": "text", "text": "Running both."},
                    *({**call, "toolCallId": f"c{i}"} for i in range(1, 5)),
                ],
            },
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "c1",
                        "output": {"type": "json", "value": {"n": 1}},
                    },
                    {
                        "type": "tool-result",
                        "toolCallId": "c2",
                        "output": {"type": "error-text", "value": "no"},
                    },
                    {"type": "tool-result", "toolCallId": "c3", "output": "[ERROR] timed out"},
                    {
                        "type": "tool-result",
                        "toolCallId": "c4",
                        "output": {"type": "content", "value": [{"type": "text", "text": "a"}]},
                    },
                ],
            },
        ],
    }
    [session] = roo_code.read(json.dumps(history).encode(), "t")
    _, reply, *results = session.messages
    assert [c.id for c in reply.tool_calls] == ["c1", "c2", "c3", "c4"]
    assert [r.content for r in results] == [
        '{"n": 1}',
        "Error: no",
        "Error: [ERROR] timed out",
        "a",
    ]
    assert {r.timestamp for r in session.messages} == {1795780000000}  # the one time given
    assert skipped(session)[("thinking block", "no signature: Anthropic would refuse it")] == 1
    redacted = {
        "type": "reasoning",
        "text": "",
        "providerOptions": {"anthropic": {"redactedData": "Zm9v"}},
    }
    history["messages"][1]["content"][0] = redacted  # type: ignore[index]
    [session] = roo_code.read(json.dumps(history).encode(), "t")
    assert session.messages[1].provider_data["anthropic"]["thinking"] == [
        {"type": "redacted_thinking", "data": "Zm9v"}
    ]


SESSIONS = {
    "cline": only("cline", CLINE),
    "roo-code": only("roo-code", ROO),
    "roo-code versioned": only("roo-code", ROO_VERSIONED),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_every_task_formats_to_a_body_each_provider_accepts(kind: str, name: str) -> None:
    session = SESSIONS[name]
    assert_every_provider_accepts(kind, session)

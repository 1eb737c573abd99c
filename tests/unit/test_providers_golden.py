"""Provider formatting: the canonical conversation against bodies written by hand from each
provider's documentation (tests/unit/golden/<kind>.json), and one test per formatting rule."""

from __future__ import annotations

import base64
import hashlib
import json
import string
from pathlib import Path
from typing import Any

import pytest
from provider_rules import violations

from chat_history.errors import InvalidParams
from chat_history.model import Attachment, Message, StoredMessage, ToolCall
from chat_history.providers import KINDS, format_body
from chat_history.settings import PROVIDER_KINDS

GOLDEN = Path(__file__).parent / "golden"
PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
INTERNAL = "INTERNAL-METADATA-VALUE"


def stored(index: int, role: str, content: str = "", **fields: Any) -> StoredMessage:
    return StoredMessage(
        role=role,  # type: ignore[arg-type]
        content=content,
        id=1000 + index,
        turn=index // 3,
        tokens=77,
        timestamp=1_764_480_000_000 + index,
        metadata={"note": INTERNAL},
        **fields,
    )


def canonical() -> list[StoredMessage]:
    """system, user with an image, assistant with two parallel calls, two results, assistant
    reply, second user turn; the carrier holds providerData for four providers."""
    return [
        stored(0, "system", "You are a careful coding assistant."),
        stored(
            1,
            "user",
            "What does this screenshot show? Then read a.py and b.py.",
            attachments=(Attachment(mime_type="image/png", data=PNG),),
        ),
        stored(
            2,
            "assistant",
            "I'll read both files.",
            tool_calls=(
                ToolCall(id="toolu_01A", name="read_file", arguments={"path": "a.py"}),
                ToolCall(id="call|b.2", name="read_file", arguments='{"path": "b.py"}'),
            ),
            provider_data={
                "anthropic": {
                    "thinking": [
                        {"type": "thinking", "thinking": "Two reads.", "signature": "EqQBCkYIARgC"}
                    ]
                },
                "gemini": {"thoughtSignatures": {"toolu_01A": "c2lnLWE="}},
                "openai": {"reasoning_content": "Need both files."},
                "openai-responses": {
                    "reasoning": [
                        {
                            "type": "reasoning",
                            "id": "rs_01",
                            "summary": [],
                            "encrypted_content": "gAAAAB",
                        }
                    ]
                },
            },
        ),
        stored(3, "tool", "print('a')", tool_call_id="toolu_01A", name="read_file"),
        stored(4, "tool", "print('b')", tool_call_id="call|b.2", name="read_file"),
        stored(5, "assistant", "Both files print their own name."),
        stored(6, "user", "Thanks! Now summarise the screenshot."),
    ]


def golden(kind: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((GOLDEN / f"{kind}.json").read_text(encoding="utf-8"))
    return loaded


def msg(role: str, content: str = "", **fields: Any) -> Message:
    return Message(role=role, content=content, **fields)  # type: ignore[arg-type]


def carrier(*ids: str, content: str = "", name: str = "run", **fields: Any) -> Message:
    calls = tuple(ToolCall(id=i, name=name, arguments={"n": n}) for n, i in enumerate(ids))
    return msg("assistant", content, tool_calls=calls, **fields)


def result(call_id: str, content: str = "ok", name: str = "run", **fields: Any) -> Message:
    return msg("tool", content, tool_call_id=call_id, name=name, **fields)


def dump(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


def checked(kind: str, rows: list[Message], model: str | None = None) -> dict[str, Any]:
    body = format_body(kind, rows, model)
    assert violations(kind, body) == []
    return body


# ---------------------------------------------------------------------------------------------
# Golden bodies


@pytest.mark.parametrize("kind", KINDS)
def test_canonical_conversation_matches_the_documented_body(kind: str) -> None:
    assert format_body(kind, canonical()) == golden(kind)


@pytest.mark.parametrize("kind", KINDS)
def test_golden_bodies_pass_the_rule_checker(kind: str) -> None:
    assert violations(kind, golden(kind)) == []


def test_every_kind_has_a_golden_body() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(KINDS)


def test_mistral_golden_ids_follow_the_documented_derivation() -> None:
    # Written from the mistral module docstring: first 9 base-62 digits (0-9, a-z, A-Z order,
    # least significant first) of the SHA-256 of the stored id.
    alphabet = string.digits + string.ascii_letters

    def derive(call_id: str) -> str:
        number = int.from_bytes(hashlib.sha256(call_id.encode()).digest(), "big")
        out = ""
        for _ in range(9):
            number, digit = divmod(number, 62)
            out += alphabet[digit]
        return out

    ids = [c["id"] for c in golden("mistral")["messages"][3]["tool_calls"]]
    assert ids == [derive("toolu_01A"), derive("call|b.2")]


# ---------------------------------------------------------------------------------------------
# Registry


def test_kinds_are_the_settings_kinds_in_order() -> None:
    assert KINDS == PROVIDER_KINDS


def test_format_body_refuses_an_unknown_kind() -> None:
    with pytest.raises(InvalidParams):
        format_body("palm", [msg("user", "hi")])


@pytest.mark.parametrize("kind", KINDS)
def test_empty_history_gives_an_empty_conversation(kind: str) -> None:
    body = checked(kind, [])
    assert not any(body.values())


# ---------------------------------------------------------------------------------------------
# Internal fields and providerData


@pytest.mark.parametrize("kind", KINDS)
def test_internal_fields_never_reach_a_body(kind: str) -> None:
    text = dump(format_body(kind, canonical()))
    assert INTERNAL not in text
    for key in ('"turn"', '"tokens"', '"timestamp"', '"metadata"', '"providerData"'):
        assert key not in text


SECRETS = {
    "openai": {"reasoning_content": "SECRET-openai"},
    "openai-responses": {
        "reasoning": [
            {
                "type": "reasoning",
                "id": "rs_x",
                "summary": [],
                "encrypted_content": "SECRET-responses",
            }
        ]
    },
    "anthropic": {"thinking": [{"type": "redacted_thinking", "data": "SECRET-anthropic"}]},
    "gemini": {"thoughtSignature": "U0VDUkVULWdlbWluaQ=="},  # base64 of SECRET-gemini
    "ollama": {"thinking": "SECRET-ollama"},
    "mistral": {"x": "SECRET-mistral"},
    "bedrock": {"x": "SECRET-bedrock"},
    "cohere": {"x": "SECRET-cohere"},
}
SECRET_TEXT = {
    **{k: f"SECRET-{k}" for k in KINDS},
    "openai-responses": "SECRET-responses",
    "gemini": "U0VDUkVULWdlbWluaQ==",
}
ECHOED = {"openai", "openai-responses", "anthropic", "gemini"}


@pytest.mark.parametrize("kind", KINDS)
def test_provider_data_is_echoed_only_to_its_own_provider(kind: str) -> None:
    rows = [msg("user", "go"), carrier("c1", content="ok", provider_data=SECRETS), result("c1")]
    text = dump(checked(kind, rows))
    for other, secret in SECRET_TEXT.items():
        if other == kind and kind in ECHOED:
            assert secret in text
        else:
            assert secret not in text


def test_anthropic_thinking_comes_first_even_after_a_merge() -> None:
    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    rows = [
        msg("user", "go"),
        msg("assistant", "Let me look."),
        carrier("c1", provider_data={"anthropic": {"thinking": [thinking]}}),
        result("c1"),
    ]
    body = checked("anthropic", rows)
    assert [b["type"] for b in body["messages"][1]["content"]] == ["thinking", "text", "tool_use"]


def test_responses_reasoning_precedes_its_function_call() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    rows = [
        msg("user", "go"),
        carrier("c1", provider_data={"openai-responses": {"reasoning": [reasoning]}}),
        result("c1"),
    ]
    types = [item["type"] for item in checked("openai-responses", rows)["input"]]
    assert types == ["message", "reasoning", "function_call", "function_call_output"]


def test_gemini_single_signature_goes_on_the_first_call_or_the_last_part() -> None:
    sig = {"gemini": {"thoughtSignature": "c2ln"}}
    rows = [
        msg("user", "go"),
        carrier("c1", "c2", content="both", provider_data=sig),
        result("c1"),
        result("c2"),
        msg("assistant", "done", provider_data=sig),
    ]
    contents = checked("gemini", rows)["contents"]
    assert [("thoughtSignature" in p) for p in contents[1]["parts"]] == [False, True, False]
    assert contents[3]["parts"][-1]["thoughtSignature"] == "c2ln"


def test_deepseek_reasoning_content_rides_on_its_assistant_message() -> None:
    rows = [
        msg("user", "go"),
        msg("assistant", "4", provider_data={"openai": {"reasoning_content": "2+2"}}),
    ]
    assert checked("openai", rows)["messages"][1] == {
        "role": "assistant",
        "content": "4",
        "reasoning_content": "2+2",
    }


# ---------------------------------------------------------------------------------------------
# System rows


def test_mid_conversation_system_rows_stay_in_place_as_the_applications_instruction() -> None:
    rows = [
        msg("system", "A"),
        msg("user", "hi"),
        msg("assistant", "yo"),
        msg("system", "B"),
        msg("user", "more"),
    ]
    instruction = "[Application instruction]\nB"
    anthropic = checked("anthropic", rows)
    assert anthropic["system"] == "A"
    assert anthropic["messages"][-1]["content"] == [
        {"type": "text", "text": instruction},
        {"type": "text", "text": "more"},
    ]
    bedrock = checked("bedrock", rows)
    assert bedrock["system"] == [{"text": "A"}]
    assert bedrock["messages"][-1]["content"] == [{"text": instruction}, {"text": "more"}]
    gemini = checked("gemini", rows)
    assert gemini["systemInstruction"] == {"parts": [{"text": "A"}]}
    assert gemini["contents"][-1]["parts"] == [{"text": instruction}, {"text": "more"}]
    # no system role in messages, and alternation kept
    assert [m["role"] for m in anthropic["messages"]] == ["user", "assistant", "user"]


def test_responses_keeps_a_later_system_row_in_place() -> None:
    rows = [msg("system", "A"), msg("user", "hi"), msg("system", "B"), msg("user", "more")]
    body = checked("openai-responses", rows)
    assert body["instructions"] == "A"
    assert body["input"][1] == {"type": "message", "role": "system", "content": "B"}


def test_responses_without_system_rows_has_no_instructions() -> None:
    assert "instructions" not in checked("openai-responses", [msg("user", "hi")])


def test_mistral_keeps_a_later_system_row_in_place() -> None:
    # after the assistant (where Mistral refuses a system message): the labelled instruction
    rows = [msg("user", "hi"), msg("assistant", "yo"), msg("system", "B"), msg("user", "more")]
    sent = checked("mistral", rows)["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "user"]
    assert sent[2]["content"] == "[Application instruction]\nB"
    # after a user message: a system message, in place
    rows = [msg("user", "hi"), msg("system", "B"), msg("assistant", "yo"), msg("user", "more")]
    roles = [m["role"] for m in checked("mistral", rows)["messages"]]
    assert roles == ["user", "system", "assistant", "user"]


@pytest.mark.parametrize("kind", ["openai", "ollama", "cohere"])
def test_message_providers_keep_system_rows_in_place(kind: str) -> None:
    rows = [msg("user", "hi"), msg("system", "B"), msg("user", "more")]
    assert [m["role"] for m in checked(kind, rows)["messages"]] == ["user", "system", "user"]


@pytest.mark.parametrize("kind", ["anthropic", "bedrock", "gemini", "openai-responses"])
def test_blank_system_rows_are_not_sent(kind: str) -> None:
    body = checked(kind, [msg("system", "  "), msg("user", "hi")])
    assert "system" not in body and "systemInstruction" not in body and "instructions" not in body


# ---------------------------------------------------------------------------------------------
# Alternation and first user


@pytest.mark.parametrize(
    ("kind", "key"), [("anthropic", "messages"), ("bedrock", "messages"), ("gemini", "contents")]
)
def test_history_opening_with_the_assistant_gets_a_continued_user_first(
    kind: str, key: str
) -> None:
    body = checked(kind, [msg("assistant", "Hello again."), msg("user", "hi")])
    first = body[key][0]
    assert first["role"] == "user"
    assert "(continued)" in dump(first)


def test_openai_keeps_an_assistant_first_history_as_it_is() -> None:
    body = checked("openai", [msg("assistant", "Hello again."), msg("user", "hi")])
    assert [m["role"] for m in body["messages"]] == ["assistant", "user"]


@pytest.mark.parametrize(
    ("kind", "key"), [("anthropic", "messages"), ("bedrock", "messages"), ("gemini", "contents")]
)
def test_adjacent_same_role_rows_are_merged_not_dropped(kind: str, key: str) -> None:
    rows = [msg("user", "one"), msg("user", "two"), msg("assistant", "a"), msg("assistant", "b")]
    body = checked(kind, rows)
    assert len(body[key]) == 2
    text = dump(body)
    assert all(word in text for word in ('"one"', '"two"', '"a"', '"b"'))


@pytest.mark.parametrize("kind", ["anthropic", "bedrock", "gemini"])
def test_an_interrupted_turn_puts_results_first_in_the_next_user_message(kind: str) -> None:
    rows = [
        msg("user", "go"),
        carrier("c1", "c2"),
        result("c1"),
        result("c2"),
        msg("user", "never mind"),
    ]
    body = checked(kind, rows)
    last = body["contents" if kind == "gemini" else "messages"][-1]
    blocks = last.get("parts") or last.get("content")
    assert len(blocks) == 3
    assert "never mind" in dump(blocks[2])


def test_mistral_puts_an_assistant_between_tool_results_and_the_next_user() -> None:
    rows = [msg("user", "go"), carrier("c1"), result("c1"), msg("user", "never mind")]
    roles = [(m["role"], m.get("content")) for m in checked("mistral", rows)["messages"]]
    assert roles[-2:] == [("assistant", "(continued)"), ("user", "never mind")]


def test_mistral_splits_text_and_calls_into_two_assistant_messages() -> None:
    rows = [msg("user", "go"), carrier("c1", content="Looking."), result("c1")]
    messages = checked("mistral", rows)["messages"]
    assert messages[1] == {"role": "assistant", "content": "Looking."}
    assert messages[2]["content"] == "" and len(messages[2]["tool_calls"]) == 1


@pytest.mark.parametrize("kind", ["anthropic", "bedrock"])
def test_final_assistant_text_loses_trailing_whitespace(kind: str) -> None:
    body = checked(kind, [msg("user", "hi"), msg("assistant", "Sure.\n\n")])
    assert dump(body["messages"][-1]).count("Sure.\\n") == 0


def test_openai_keeps_assistant_text_verbatim() -> None:
    body = checked("openai", [msg("user", "hi"), msg("assistant", "Sure.\n\n")])
    assert body["messages"][-1]["content"] == "Sure.\n\n"


# ---------------------------------------------------------------------------------------------
# Tool exchanges


@pytest.mark.parametrize("kind", KINDS)
def test_orphans_are_swept_before_formatting(kind: str) -> None:
    rows = [
        msg("user", "go"),
        result("ghost", "orphan-result"),
        carrier("c1", "c2", content="Trying."),
        result("c1", "answered"),
        msg("user", "stop"),
        result("c2", "too-late"),
    ]
    text = dump(checked(kind, rows))
    assert "orphan-result" not in text and "too-late" not in text
    assert "answered" in text
    assert '"n": 1' not in text and '\\"n\\":1' not in text  # c2's arguments are gone


@pytest.mark.parametrize("kind", KINDS)
def test_rows_between_a_call_and_its_result_move_after_the_results(kind: str) -> None:
    rows = [msg("user", "go"), carrier("c1"), msg("assistant", "waiting"), result("c1", "done")]
    text = dump(checked(kind, rows))
    assert text.index("done") < text.index("waiting")


@pytest.mark.parametrize("kind", KINDS)
def test_results_follow_call_order_not_arrival_order(kind: str) -> None:
    rows = [msg("user", "go"), carrier("c1", "c2"), result("c2", "second"), result("c1", "first")]
    text = dump(checked(kind, rows))
    assert text.index("first") < text.index("second")


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_id_reused_in_a_later_carrier_stays_unique(kind: str) -> None:
    rows = [msg("user", "go"), carrier("c1"), result("c1"), carrier("c1"), result("c1")]
    checked(kind, rows)  # the rule checker refuses duplicate ids


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_id_repeated_in_one_carrier_is_sent_once(kind: str) -> None:
    rows = [msg("user", "go"), carrier("c1", "c1"), result("c1"), result("c1", "dup")]
    text = dump(checked(kind, rows))
    assert "dup" not in text


def test_long_openai_ids_are_shortened_consistently() -> None:
    long_id = "x" * 60
    body = checked("openai", [msg("user", "go"), carrier(long_id), result(long_id)])
    call_id = body["messages"][1]["tool_calls"][0]["id"]
    assert len(call_id) <= 40 and body["messages"][2]["tool_call_id"] == call_id


def test_mistral_ids_are_nine_alphanumerics_stable_and_shared() -> None:
    rows = [msg("user", "go"), carrier("call_abc-123"), result("call_abc-123")]
    first = checked("mistral", rows)["messages"]
    again = format_body("mistral", rows)["messages"]
    call_id = first[1]["tool_calls"][0]["id"]
    assert len(call_id) == 9 and call_id.isalnum()
    assert first[2]["tool_call_id"] == call_id == again[1]["tool_calls"][0]["id"]


def test_mistral_keeps_an_id_that_is_already_valid() -> None:
    rows = [msg("user", "go"), carrier("Ab3dE6gH9"), result("Ab3dE6gH9")]
    assert checked("mistral", rows)["messages"][1]["tool_calls"][0]["id"] == "Ab3dE6gH9"


@pytest.mark.parametrize("kind", ["openai", "openai-responses", "mistral", "cohere"])
def test_string_argument_kinds_send_the_clients_json_string(kind: str) -> None:
    call = ToolCall(id="c1", name="f", arguments='{"path":  "x"}')
    rows = [msg("user", "go"), msg("assistant", tool_calls=(call,)), result("c1")]
    assert json.dumps('{"path":  "x"}') in dump(checked(kind, rows))


@pytest.mark.parametrize("kind", ["anthropic", "gemini", "bedrock", "ollama"])
def test_object_argument_kinds_send_an_object(kind: str) -> None:
    rows = [
        msg("user", "go"),
        msg("assistant", tool_calls=(ToolCall(id="c1", name="f", arguments='{"path": "x"}'),)),
        result("c1"),
    ]
    text = dump(checked(kind, rows))
    assert '{"path": "x"}' in text


@pytest.mark.parametrize("kind", KINDS)
def test_arguments_that_are_not_json_are_wrapped_not_fatal(kind: str) -> None:
    rows = [
        msg("user", "go"),
        msg("assistant", tool_calls=(ToolCall(id="c1", name="f", arguments="{oops"),)),
        result("c1"),
    ]
    assert "{oops" in dump(checked(kind, rows))


@pytest.mark.parametrize("kind", KINDS)
def test_arguments_nested_beyond_the_json_parser_are_wrapped_not_fatal(kind: str) -> None:
    deep = "[" * 50_000 + "]" * 50_000
    rows = [
        msg("user", "go"),
        msg("assistant", tool_calls=(ToolCall(id="c1", name="f", arguments=deep),)),
        result("c1"),
    ]
    checked(kind, rows)


def test_empty_results_are_omitted_for_anthropic_and_placeheld_for_bedrock() -> None:
    rows = [msg("user", "go"), carrier("c1"), result("c1", "")]
    assert checked("anthropic", rows)["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1"}
    ]
    block = checked("bedrock", rows)["messages"][2]["content"][0]
    assert block == {"toolResult": {"toolUseId": "c1", "content": [{"text": "(no output)"}]}}


@pytest.mark.parametrize("kind", KINDS)
def test_prompt_mode_rows_are_plain_user_text(kind: str) -> None:
    rows = [
        msg("user", "go"),
        msg("assistant", '{"tool_calls": [{"name": "run", "arguments": {}}]}'),
        msg("user", "[Tool results]\nrun: ok"),
        msg("assistant", "done"),
    ]
    text = dump(checked(kind, rows))
    assert "[Tool results]\\nrun: ok" in text


# ---------------------------------------------------------------------------------------------
# Images


def test_data_markers_become_images_and_path_markers_stay_text() -> None:
    content = f"see [IMAGE:data:image/png;base64,{PNG}] and [IMAGE:/tmp/shot.png] and [IMAGE:...]"
    rows = [msg("user", content)]
    parts = checked("openai", rows)["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "see "}
    assert parts[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert parts[2] == {"type": "text", "text": " and [IMAGE:/tmp/shot.png] and [IMAGE:...]"}
    ollama = checked("ollama", rows)["messages"][0]
    assert ollama["images"] == [PNG] and "[IMAGE:/tmp/shot.png]" in ollama["content"]
    assert "data:image" not in ollama["content"]


@pytest.mark.parametrize("kind", KINDS)
def test_markers_in_tool_results_stay_text(kind: str) -> None:
    marker = f"[IMAGE:data:image/png;base64,{PNG}]"
    rows = [msg("user", "go"), carrier("c1"), result("c1", marker)]
    assert PNG in dump(checked(kind, rows))


URL = "https://example.com/cat.png"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("openai", {"type": "image_url", "image_url": {"url": URL}}),
        ("openai-responses", {"type": "input_image", "image_url": URL, "detail": "auto"}),
        ("anthropic", {"type": "image", "source": {"type": "url", "url": URL}}),
        ("mistral", {"type": "image_url", "image_url": URL}),
        ("cohere", {"type": "image_url", "image_url": {"url": URL}}),
        ("gemini", {"text": f"[image: {URL}]"}),
        ("bedrock", {"text": f"[image: {URL}]"}),
    ],
)
def test_uri_attachments_are_urls_where_supported_and_notes_elsewhere(
    kind: str, expected: dict[str, Any]
) -> None:
    rows = [msg("user", "look", attachments=(Attachment(uri=URL),))]
    body = checked(kind, rows)
    first = (body.get("messages") or body.get("input") or body["contents"])[0]
    parts = first.get("content") or first.get("parts")
    assert parts[-1] == expected


def test_ollama_notes_a_uri_in_the_content() -> None:
    body = checked("ollama", [msg("user", "look", attachments=(Attachment(uri=URL),))])
    assert body["messages"][0] == {"role": "user", "content": f"look\n[image: {URL}]"}


def test_file_uris_are_never_sent_as_urls() -> None:
    rows = [msg("user", "look", attachments=(Attachment(uri="file:///etc/passwd"),))]
    parts = checked("openai", rows)["messages"][0]["content"]
    assert parts[-1] == {"type": "text", "text": "[image: file:///etc/passwd]"}


def test_unsupported_and_broken_images_become_notes_for_anthropic() -> None:
    bmp = base64.b64encode(b"BM" + bytes(30)).decode()
    rows = [
        msg(
            "user",
            "look",
            attachments=(
                Attachment(mime_type="image/bmp", data=bmp),
                Attachment(mime_type="image/png", data="not base64!"),
            ),
        )
    ]
    content = checked("anthropic", rows)["messages"][0]["content"]
    assert [b["type"] for b in content] == ["text", "text", "text"]
    assert "image/bmp" in content[1]["text"] and "base64" in content[2]["text"]


def test_a_missing_media_type_is_sniffed() -> None:
    rows = [msg("user", "look", attachments=(Attachment(data=PNG),))]
    content = checked("bedrock", rows)["messages"][0]["content"]
    assert content[1] == {"image": {"format": "png", "source": {"bytes": PNG}}}


def tool_image_rows() -> list[Message]:
    return [
        msg("user", "shoot"),
        carrier("c1", name="screenshot"),
        result(
            "c1",
            "captured",
            name="screenshot",
            attachments=(Attachment(mime_type="image/png", data=PNG),),
        ),
        msg("assistant", "I see it."),
    ]


def test_openai_moves_tool_result_images_to_a_following_user_message() -> None:
    messages = checked("openai", tool_image_rows())["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert messages[2]["content"] == "captured"
    assert messages[3]["content"][1]["image_url"]["url"].endswith(PNG)


def test_anthropic_and_bedrock_keep_result_images_inside_the_result() -> None:
    block = checked("anthropic", tool_image_rows())["messages"][2]["content"][0]
    assert [b["type"] for b in block["content"]] == ["text", "image"]
    result_block = checked("bedrock", tool_image_rows())["messages"][2]["content"][0]["toolResult"]
    assert [next(iter(b)) for b in result_block["content"]] == ["text", "image"]


def test_responses_sends_result_images_in_the_output() -> None:
    output = checked("openai-responses", tool_image_rows())["input"][2]["output"]
    assert [p["type"] for p in output] == ["input_text", "input_image"]


def test_gemini_puts_result_images_after_the_function_responses() -> None:
    parts = checked("gemini", tool_image_rows())["contents"][2]["parts"]
    assert [next(iter(p)) for p in parts] == ["functionResponse", "inlineData"]


def test_ollama_puts_result_images_on_the_tool_message() -> None:
    tool = checked("ollama", tool_image_rows())["messages"][2]
    assert tool == {
        "role": "tool",
        "content": "captured",
        "images": [PNG],
        "tool_name": "screenshot",
    }


@pytest.mark.parametrize("kind", ["mistral", "cohere"])
def test_text_only_tool_messages_note_result_images(kind: str) -> None:
    tool = next(m for m in checked(kind, tool_image_rows())["messages"] if m["role"] == "tool")
    assert tool["content"] == "captured\n[image omitted: image/png is not supported here]"


# ---------------------------------------------------------------------------------------------
# Blank rows


@pytest.mark.parametrize("kind", KINDS)
def test_blank_rows_are_skipped(kind: str) -> None:
    rows = [
        msg("user", "   "),
        msg("user", "hi"),
        msg("assistant", ""),
        msg("assistant", "\n"),
        msg("user", "bye"),
    ]
    text = dump(checked(kind, rows))
    assert '"   "' not in text and '"\\n"' not in text


BMP = base64.b64encode(b"BM" + bytes(30)).decode()


@pytest.mark.parametrize("kind", KINDS)
def test_image_types_a_provider_does_not_document_become_notes(kind: str) -> None:
    rows = [msg("user", "look", attachments=(Attachment(mime_type="image/bmp", data=BMP),))]
    text = dump(checked(kind, rows))
    if kind == "ollama":  # Ollama hands any image to the model's own decoder
        assert BMP in text
    else:
        assert BMP not in text and "[image omitted: image/bmp is not supported here]" in text


@pytest.mark.parametrize("kind", KINDS)
def test_a_data_marker_of_another_type_is_never_sent_as_an_image(kind: str) -> None:
    pdf = base64.b64encode(b"%PDF-1.4").decode()
    text = dump(checked(kind, [msg("user", f"read [IMAGE:data:application/pdf;base64,{pdf}]")]))
    assert pdf not in text and "application/pdf" in text


def test_gemini_takes_no_gif_inline() -> None:
    gif = base64.b64encode(b"GIF89a" + bytes(10)).decode()
    parts = checked("gemini", [msg("user", "x", attachments=(Attachment(data=gif),))])["contents"][
        0
    ]["parts"]
    assert parts[1] == {"text": "[image omitted: image/gif is not supported here]"}

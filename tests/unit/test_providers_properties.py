"""Property tests: random histories — parallel, interrupted and unanswered calls, orphan tool rows
as a hand-edited database leaves them, images of every sort, system rows anywhere, prompt-mode
rows, providerData for every provider — formatted for every kind, then checked by the
independent rule checker (provider_rules.py) and, on fewer examples, by the SDKs' own types."""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_rules import violations
from test_providers_golden import PNG

from chat_history.model import Attachment, Message, StoredMessage, ToolCall
from chat_history.providers import KINDS, format_body

INTERNAL = "INTERNAL-METADATA-VALUE"
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + bytes(20)).decode()

CALL_IDS = st.sampled_from(
    ["c1", "c2", "c3", "toolu_01", "call|x.y", "ÄÖ ü/1", "x" * 70, "Ab3dE6gH9", "a:b.c-d"]
)
NAMES = st.sampled_from(["read_file", "run", "shell.exec", "web search"])
TEXTS = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "\n\t",
            "hello",
            "trailing space  ",
            "多字节テキスト",
            "see [IMAGE:/tmp/a.png]",
            f"look [IMAGE:data:image/png;base64,{PNG}] here",
            f"[IMAGE:data:image/jpeg;base64,{JPEG}]",
            "[IMAGE:...] and [IMAGE:<path>]",
            "[IMAGE:data:image/png;base64,!!!]",
            "[IMAGE:data:application/pdf;base64,JVBERi0xLjQ=]",
            '{"tool_calls": [{"name": "run", "arguments": {}}]}',
        ]
    ),
    st.text(max_size=12),
)
ATTACHMENTS = st.lists(
    st.sampled_from(
        [
            Attachment(mime_type="image/png", data=PNG),
            Attachment(mime_type="image/jpeg", data=JPEG),
            Attachment(data=PNG),
            Attachment(mime_type="image/bmp", data=base64.b64encode(b"BM" + bytes(8)).decode()),
            Attachment(mime_type="image/png", data="not base64!"),
            Attachment(mime_type="application/pdf", data="JVBERi0xLjQ="),
            Attachment(data=base64.b64encode(b"GIF89a" + bytes(6)).decode()),
            Attachment(uri="https://example.com/cat.png"),
            Attachment(uri="file:///home/me/secret.png"),
            Attachment(uri=f"data:image/png;base64,{PNG}"),
            Attachment(),
        ]
    ),
    max_size=2,
)
ARGUMENTS = st.sampled_from(
    [{}, {"path": "a.py"}, '{"path": "b.py"}', "", "{oops", "[1, 2]", '"s"']
)

#: providerData a row may hold: the documented shape for each echoing kind, garbage shapes, and
#: a marker per kind that must never reach another kind's body.
PD_MARK = {kind: f"PD-{kind}" for kind in KINDS}
PD_MARK["gemini"] = base64.b64encode(b"PD-gemini").decode()
PD_MARK["openai-responses"] = "PD-responses"
PROVIDER_DATA = st.fixed_dictionaries(
    {},
    optional={
        "anthropic": st.sampled_from(
            [
                {
                    "thinking": [
                        {"type": "thinking", "thinking": "t", "signature": PD_MARK["anthropic"]}
                    ]
                },
                {"thinking": [{"type": "redacted_thinking", "data": PD_MARK["anthropic"]}]},
                {"thinking": "not a list"},
            ]
        ),
        "gemini": st.sampled_from(
            [
                {"thoughtSignature": PD_MARK["gemini"]},
                {"thoughtSignatures": {"c1": PD_MARK["gemini"], "c2": PD_MARK["gemini"]}},
                {"thoughtSignatures": ["wrong"]},
            ]
        ),
        "openai": st.sampled_from(
            [{"reasoning_content": PD_MARK["openai"]}, {"reasoning_content": 3}]
        ),
        "openai-responses": st.sampled_from(
            [
                {
                    "reasoning": [
                        {
                            "type": "reasoning",
                            "id": "rs_1",
                            "summary": [],
                            "encrypted_content": PD_MARK["openai-responses"],
                        }
                    ]
                },
                {"phase": "commentary", "reasoning": "nope"},
            ]
        ),
        "ollama": st.just({"thinking": PD_MARK["ollama"]}),
        "mistral": st.just({"x": PD_MARK["mistral"]}),
        "bedrock": st.just({"x": PD_MARK["bedrock"]}),
        "cohere": st.just({"x": PD_MARK["cohere"]}),
    },
)


class Rows:
    def __init__(self) -> None:
        self.rows: list[Message] = []

    def add(self, role: str, content: str, **fields: Any) -> None:
        index = len(self.rows)
        self.rows.append(
            StoredMessage(
                role=role,  # type: ignore[arg-type]
                content=content,
                id=index + 1,
                turn=index,
                tokens=9,
                timestamp=1_764_480_000_000 + index,
                metadata={"secret": INTERNAL},
                **fields,
            )
        )


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    out = Rows()
    for _ in range(draw(st.integers(0, 9))):
        block = draw(
            st.sampled_from(
                ["system", "user", "prompt", "assistant", "exchange", "exchange", "orphan"]
            )
        )
        if block == "system":
            out.add("system", draw(TEXTS))
        elif block == "user":
            out.add("user", draw(TEXTS), attachments=tuple(draw(ATTACHMENTS)))
        elif block == "prompt":
            prefix = draw(st.sampled_from(["[Tool results]", "[Tool call parse error]", "[SOP:"]))
            out.add("user", prefix + draw(TEXTS), attachments=tuple(draw(ATTACHMENTS)))
        elif block == "assistant":
            out.add("assistant", draw(TEXTS), provider_data=draw(PROVIDER_DATA))
        elif block == "orphan":
            out.add("tool", draw(TEXTS), tool_call_id=draw(CALL_IDS), name=draw(NAMES))
        else:
            calls = draw(
                st.lists(
                    st.builds(ToolCall, id=CALL_IDS, name=NAMES, arguments=ARGUMENTS),
                    min_size=1,
                    max_size=3,
                )
            )
            out.add(
                "assistant", draw(TEXTS), tool_calls=tuple(calls), provider_data=draw(PROVIDER_DATA)
            )
            # answers: any subset, any order, repeats, strangers; other rows may sit between
            answers = draw(st.lists(st.sampled_from([c.id for c in calls]) | CALL_IDS, max_size=4))
            for call_id in answers:
                if draw(st.integers(0, 5)) == 0:
                    role = draw(st.sampled_from(["assistant", "system", "user"]))
                    content = draw(TEXTS) if role != "user" else "[Tool results]" + draw(TEXTS)
                    out.add(role, content)
                name = next((c.name for c in calls if c.id == call_id), "stranger")
                out.add(
                    "tool",
                    draw(TEXTS),
                    tool_call_id=call_id,
                    name=name,
                    attachments=tuple(draw(ATTACHMENTS)),
                )
    return out.rows


def dump(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


RULE_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("kind", KINDS)
@RULE_SETTINGS
@given(rows=histories())
def test_every_history_formats_to_a_body_the_provider_accepts(
    kind: str, rows: list[Message]
) -> None:
    body = format_body(kind, rows)
    assert violations(kind, body) == []


@pytest.mark.parametrize("kind", KINDS)
@RULE_SETTINGS
@given(rows=histories())
def test_no_internal_field_and_no_other_providers_data_reaches_a_body(
    kind: str, rows: list[Message]
) -> None:
    text = dump(format_body(kind, rows))
    assert INTERNAL not in text
    for other, mark in PD_MARK.items():
        if other != kind:
            assert mark not in text


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=60, deadline=None)
@given(rows=histories())
def test_user_text_is_never_lost_and_formatting_is_deterministic(
    kind: str, rows: list[Message]
) -> None:
    body = format_body(kind, rows)
    assert format_body(kind, rows) == body
    text = dump(body)
    for row in rows:
        if row.role == "user" and row.content.strip() and "[IMAGE:data:" not in row.content:
            assert json.dumps(row.content, ensure_ascii=False)[1:-1] in text


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=histories())
def test_every_history_passes_the_sdk_types(kind: str, rows: list[Message]) -> None:
    from test_providers_sdk import sdk_problems

    assert sdk_problems(kind, format_body(kind, rows)) == []


# ---------------------------------------------------------------------------------------------
# The rule checker must be able to fail: each mutation of a valid (golden) body breaks one rule.


def _golden(kind: str) -> dict[str, Any]:
    from test_providers_golden import golden

    return golden(kind)


def _drop(items: list[Any], index: int) -> None:
    del items[index]


MUTATIONS: list[tuple[str, str, Any]] = [
    ("openai", "unanswered call", lambda b: _drop(b["messages"], 4)),
    ("openai", "tool before its call", lambda b: b["messages"].insert(1, b["messages"][3])),
    (
        "openai",
        "image outside a user message",
        lambda b: b["messages"][0].update(content=b["messages"][1]["content"]),
    ),
    (
        "openai",
        "id longer than 40",
        lambda b: [
            b["messages"][2]["tool_calls"][0].update(id="x" * 41),
            b["messages"][3].update(tool_call_id="x" * 41),
        ],
    ),
    (
        "openai",
        "arguments as an object",
        lambda b: b["messages"][2]["tool_calls"][0]["function"].update(arguments={"a": 1}),
    ),
    ("openai", "internal field", lambda b: b["messages"][1].update(timestamp=1)),
    ("openai", "null content without calls", lambda b: b["messages"][5].update(content=None)),
    ("openai-responses", "missing output", lambda b: _drop(b["input"], 5)),
    ("openai-responses", "output without call", lambda b: _drop(b["input"], 3)),
    ("openai-responses", "reasoning without its item", lambda b: b["input"].append(b["input"][1])),
    ("openai-responses", "blank instructions", lambda b: b.update(instructions=" ")),
    ("anthropic", "assistant first", lambda b: _drop(b["messages"], 0)),
    ("anthropic", "two users in a row", lambda b: b["messages"].append(dict(b["messages"][-1]))),
    (
        "anthropic",
        "results not first",
        lambda b: b["messages"][2]["content"].insert(0, {"type": "text", "text": "x"}),
    ),
    ("anthropic", "missing result", lambda b: _drop(b["messages"][2]["content"], 1)),
    ("anthropic", "empty text block", lambda b: b["messages"][3]["content"][0].update(text=" ")),
    (
        "anthropic",
        "bad tool_use id",
        lambda b: [
            b["messages"][1]["content"][2].update(id="a|b"),
            b["messages"][2]["content"][0].update(tool_use_id="a|b"),
        ],
    ),
    ("anthropic", "thinking after text", lambda b: b["messages"][1]["content"].reverse()),
    (
        "anthropic",
        "final trailing whitespace",
        lambda b: b["messages"].append(
            {"role": "assistant", "content": [{"type": "text", "text": "x "}]}
        ),
    ),
    ("anthropic", "empty system", lambda b: b.update(system="")),
    ("gemini", "assistant role", lambda b: b["contents"][1].update(role="assistant")),
    ("gemini", "fewer responses than calls", lambda b: _drop(b["contents"][2]["parts"], 1)),
    ("gemini", "model first", lambda b: _drop(b["contents"], 0)),
    (
        "gemini",
        "two data fields in a part",
        lambda b: b["contents"][0]["parts"][0].update(
            inlineData={"mimeType": "image/png", "data": "AA=="}
        ),
    ),
    ("gemini", "empty text part", lambda b: b["contents"][4]["parts"][0].update(text="")),
    ("ollama", "tool without tool_name", lambda b: b["messages"][3].pop("tool_name")),
    (
        "ollama",
        "string arguments",
        lambda b: b["messages"][2]["tool_calls"][0]["function"].update(arguments="{}"),
    ),
    ("ollama", "missing result", lambda b: _drop(b["messages"], 4)),
    (
        "mistral",
        "id of 8 characters",
        lambda b: [
            b["messages"][3]["tool_calls"][0].update(id="abcdefgh"),
            b["messages"][4].update(tool_call_id="abcdefgh"),
        ],
    ),
    ("mistral", "user after tool", lambda b: _drop(b["messages"], 6)),
    ("mistral", "content and calls together", lambda b: b["messages"][3].update(content="x")),
    (
        "mistral",
        "system after assistant",
        lambda b: b["messages"].insert(3, {"role": "system", "content": "s"}),
    ),
    (
        "bedrock",
        "two members in a block",
        lambda b: b["messages"][0]["content"][0].update(image={}),
    ),
    (
        "bedrock",
        "empty toolResult content",
        lambda b: b["messages"][2]["content"][0]["toolResult"].update(content=[]),
    ),
    ("bedrock", "assistant first", lambda b: _drop(b["messages"], 0)),
    (
        "bedrock",
        "bad toolUseId",
        lambda b: [
            b["messages"][1]["content"][1]["toolUse"].update(toolUseId="a|b"),
            b["messages"][2]["content"][0]["toolResult"].update(toolUseId="a|b"),
        ],
    ),
    ("cohere", "tool without call", lambda b: _drop(b["messages"], 2)),
    ("cohere", "content beside tool_calls", lambda b: b["messages"][2].update(content="x")),
]


@pytest.mark.parametrize(
    ("kind", "rule", "mutate"), MUTATIONS, ids=[f"{k}: {r}" for k, r, _ in MUTATIONS]
)
def test_the_rule_checker_catches_a_broken_body(kind: str, rule: str, mutate: Any) -> None:
    body = _golden(kind)
    assert violations(kind, body) == []
    mutate(body)
    assert violations(kind, body) != [], rule


# ---------------------------------------------------------------------------------------------
# Histories that open and end anywhere, as truncate, fork and import leave them: the first row
# may be the assistant (with or without calls), a tool row, or system rows then the assistant;
# the last may be anything, trailing system rows and unanswered calls included.

GEMINI_MODELS = st.sampled_from(
    [None, "gemini-2.5-flash", "gemini-3-pro-preview", "gemini-3-flash"]
)
SKIP_SIGNATURE = "skip_thought_signature_validator"


def _extend(out: Rows, rows: list[Message]) -> None:
    for row in rows:
        fields = {
            "tool_calls": row.tool_calls,
            "tool_call_id": row.tool_call_id,
            "name": row.name,
            "attachments": row.attachments,
            "provider_data": row.provider_data,
        }
        out.add(row.role, row.content, **fields)


@st.composite
def open_histories(draw: st.DrawFn) -> list[Message]:
    out = Rows()
    opening = draw(
        st.sampled_from(
            ["none", "assistant", "carrier", "tool", "system-assistant", "system-carrier"]
        )
    )
    if opening.startswith("system"):
        for _ in range(draw(st.integers(1, 2))):
            out.add("system", draw(TEXTS))
    if opening.endswith("assistant"):
        out.add("assistant", draw(TEXTS), provider_data=draw(PROVIDER_DATA))
    elif opening.endswith("carrier"):
        calls = draw(
            st.lists(
                st.builds(ToolCall, id=CALL_IDS, name=NAMES, arguments=ARGUMENTS),
                min_size=1,
                max_size=3,
                unique_by=lambda c: c.id,
            )
        )
        out.add(
            "assistant", draw(TEXTS), tool_calls=tuple(calls), provider_data=draw(PROVIDER_DATA)
        )
        for call in draw(st.permutations(calls)):
            out.add("tool", draw(TEXTS), tool_call_id=call.id, name=call.name)
    elif opening == "tool":
        out.add("tool", draw(TEXTS), tool_call_id=draw(CALL_IDS), name=draw(NAMES))
    # the rest: a slice of a random history (its own opening and ending cut anywhere)
    rest = draw(histories())
    start = draw(st.integers(0, len(rest)))
    end = draw(st.integers(start, len(rest)))
    _extend(out, rest[start:end])
    ending = draw(st.sampled_from(["none", "system", "reply-system", "unanswered"]))
    if ending == "reply-system":
        out.add("assistant", draw(TEXTS))
    if ending in ("system", "reply-system"):
        for _ in range(draw(st.integers(1, 2))):
            out.add("system", draw(TEXTS))
    elif ending == "unanswered":
        out.add("assistant", draw(TEXTS), tool_calls=(ToolCall(id="late", name="run"),))
    return out.rows


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=open_histories(), model=GEMINI_MODELS)
def test_histories_opening_and_ending_anywhere_pass_the_rule_checker(
    kind: str, rows: list[Message], model: str | None
) -> None:
    assert violations(kind, format_body(kind, rows, model)) == []


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=open_histories(), model=GEMINI_MODELS)
def test_histories_opening_and_ending_anywhere_pass_the_sdk_types(
    kind: str, rows: list[Message], model: str | None
) -> None:
    from test_providers_sdk import sdk_problems

    assert sdk_problems(kind, format_body(kind, rows, model)) == []


def _turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = body.get("messages") or body.get("input") or body["contents"]
    return turns


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=open_histories(), instruction=st.text(min_size=1, max_size=8).filter(str.strip))
def test_no_body_ends_on_the_reply_when_an_instruction_follows_it(
    kind: str, rows: list[Message], instruction: str
) -> None:
    out = Rows()
    _extend(out, [*rows, Message(role="assistant", content="REPLY")])
    out.add("system", "NOTE " + instruction)
    body = format_body(kind, out.rows)
    last = _turns(body)[-1]
    assert last["role"] == "user"
    text = dump(last)
    assert "[Application instruction]" in text
    assert json.dumps("NOTE " + instruction, ensure_ascii=False)[1:-1] in text
    assert "REPLY" in dump(_turns(body)[-2])


def _without_placeholders(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``contents`` without the placeholders and the call ids that only Gemini 3 gets."""

    def value(key: str, item: Any) -> Any:
        if key in ("functionCall", "functionResponse"):
            return {k: v for k, v in item.items() if k != "id"}
        return item

    return [
        {
            **content,
            "parts": [
                {
                    k: value(k, v)
                    for k, v in p.items()
                    if not (k == "thoughtSignature" and v == SKIP_SIGNATURE)
                }
                for p in content["parts"]
            ],
        }
        for content in contents
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=open_histories())
def test_gemini_3_adds_only_placeholders_and_signs_every_current_step(rows: list[Message]) -> None:
    older = format_body("gemini", rows, "gemini-2.5-pro")
    newer = format_body("gemini", rows, "gemini-3-pro-preview")
    assert SKIP_SIGNATURE not in dump(older)
    # the same body, but for placeholders where no signature was stored, and the call ids
    assert _without_placeholders(newer["contents"]) == older["contents"]
    contents = newer["contents"]
    start = max(
        (
            i + 1
            for i, c in enumerate(contents)
            if c["role"] == "user" and not any("functionResponse" in p for p in c["parts"])
        ),
        default=0,
    )
    for index, content in enumerate(contents):
        calls = [p for p in content["parts"] if "functionCall" in p]
        if calls:
            assert ("thoughtSignature" in calls[0]) or index < start
            assert all(p.get("thoughtSignature") != SKIP_SIGNATURE for p in calls[1:])
            if index < start:
                assert all(p.get("thoughtSignature") != SKIP_SIGNATURE for p in calls)


# ---------------------------------------------------------------------------------------------
# Bodies with prompt-cache breakpoints (protocol.md "Version 3"): any history, with or without
# the context note a prepared request opens with, for every kind and the models that decide
# whether Bedrock takes cache points.

CLAUDE_CACHES = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
NOVA_CACHES = "amazon.nova-pro-v1:0"
CACHE_MODELS = st.sampled_from(
    [None, CLAUDE_CACHES, NOVA_CACHES, "anthropic.claude-3-haiku-20240307-v1:0", "meta.llama3"]
)
NOTES = st.sampled_from(
    [
        None,
        "[earlier turns omitted to fit the context window]",
        "[Summary of earlier turns]\nthe user builds a parser",
        f"[Summary of earlier turns]\nsee [IMAGE:data:image/png;base64,{PNG}] there",
    ]
)


def noted(rows: list[Message], note_text: str | None) -> tuple[list[Message], Message | None]:
    if note_text is None:
        return rows, None
    note = Message(role="user", content=note_text)
    system = [row for row in rows if row.role == "system"]
    return [*system, note, *(row for row in rows if row.role != "system")], note


def _marks(body: dict[str, Any]) -> int:
    text = dump(body)
    return text.count('"cache_control"') + text.count('"cachePoint"')


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=open_histories(), model=CACHE_MODELS, note_text=NOTES)
def test_bodies_with_breakpoints_pass_the_rule_checker(
    kind: str, rows: list[Message], model: str | None, note_text: str | None
) -> None:
    rows, note = noted(rows, note_text)
    body = format_body(kind, rows, model, breakpoints=True, note=note)
    assert violations(kind, body) == []
    assert _marks(body) <= 4
    caches = kind == "anthropic" or (kind == "bedrock" and model in (CLAUDE_CACHES, NOVA_CACHES))
    if not caches:
        assert body == format_body(kind, rows, model)
    elif kind == "bedrock" and model == NOVA_CACHES:
        for message in body["messages"]:
            content = message["content"]
            assert not any(
                "toolResult" in a and "cachePoint" in b for a, b in itertools.pairwise(content)
            )
    elif body.get("messages"):
        assert _marks(body) >= 1


@pytest.mark.parametrize("kind", ["anthropic", "bedrock"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=open_histories(), note_text=NOTES)
def test_bodies_with_breakpoints_pass_the_sdk_types(
    kind: str, rows: list[Message], note_text: str | None
) -> None:
    from test_providers_sdk import sdk_problems

    rows, note = noted(rows, note_text)
    model = CLAUDE_CACHES if kind == "bedrock" else None
    assert sdk_problems(kind, format_body(kind, rows, model, breakpoints=True, note=note)) == []


def _marked_golden(kind: str) -> dict[str, Any]:
    from test_providers_golden import canonical

    model = CLAUDE_CACHES if kind == "bedrock" else None
    rows, note = noted(list(canonical()), "[earlier turns omitted to fit the context window]")
    return format_body(kind, rows, model, breakpoints=True, note=note)


def _marked_empty_result(body: dict[str, Any]) -> None:
    block = body["messages"][2]["content"][0]
    block.pop("content", None)
    block["cache_control"] = {"type": "ephemeral"}
    body["messages"][-1]["content"][-1].pop("cache_control")  # still 4 marks


def _fifth_mark(body: dict[str, Any]) -> None:
    body["messages"][1]["content"][1]["cache_control"] = {"type": "ephemeral"}


MARK_MUTATIONS: list[tuple[str, str, Any]] = [
    ("anthropic", "a fifth cache_control", _fifth_mark),
    ("anthropic", "cache_control on an empty tool_result", _marked_empty_result),
    (
        "anthropic",
        "cache_control on thinking",
        lambda b: b["messages"][1]["content"][0].update(cache_control={"type": "ephemeral"}),
    ),
    (
        "anthropic",
        "wrong cache_control",
        lambda b: b["messages"][-1]["content"][-1].update(cache_control={"type": "x"}),
    ),
    (
        "bedrock",
        "cachePoint first",
        lambda b: b["messages"][1]["content"].insert(0, {"cachePoint": {"type": "default"}}),
    ),
    (
        "bedrock",
        "two cachePoints in a row",
        lambda b: b["messages"][-1]["content"].append({"cachePoint": {"type": "default"}}),
    ),
    (
        "bedrock",
        "a fifth cachePoint",
        lambda b: b["messages"][1]["content"].append({"cachePoint": {"type": "default"}}),
    ),
]


@pytest.mark.parametrize(
    ("kind", "rule", "mutate"), MARK_MUTATIONS, ids=[f"{k}: {r}" for k, r, _ in MARK_MUTATIONS]
)
def test_the_rule_checker_catches_a_broken_breakpoint(kind: str, rule: str, mutate: Any) -> None:
    body = _marked_golden(kind)
    assert violations(kind, body) == []
    assert _marks(body) == 4
    mutate(body)
    assert violations(kind, body) != [], rule

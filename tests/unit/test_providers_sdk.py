"""Provider bodies checked with each official SDK, offline (shared/guides/providers.md, section 3):

1. strict validation with the SDK's own request types — lazy iterables materialised inside an
   AfterValidator, input diffed against the validated output to catch keys the type does not
   know (openai, anthropic); ``extra="forbid"`` models (google-genai); ``is_unknown`` chunks and
   dropped keys (mistralai), and Mistral's own request validator (``mistral-common``, serving
   mode) at every tokenizer version it ships; extras of ``extra="allow"`` models (cohere);
   dropped keys (ollama); botocore's ParamValidator (bedrock);
2. the HTTP request each SDK would send, captured with a mock transport (no network), compared
   with the body, so the SDK is shown to accept and send it.

``sdk_problems`` is reused by the property tests on random histories.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Annotated, Any

# The SDKs are the `sdk` extra, installed by `make test`: a missing one fails, never skips.
import anthropic
import boto3
import botocore.session
import cohere
import google.genai as genai
import httpx
import httpx2
import mistralai.client as mistralai_client
import ollama
import openai
import pydantic
import pytest
from anthropic.types import message_create_params
from botocore.validate import ParamValidator
from google.genai import types as gt
from mistral_common.exceptions import MistralCommonException
from mistral_common.protocol.instruct.request import ChatCompletionRequest as MistralCommonRequest
from mistral_common.protocol.instruct.validator import ValidationMode, get_validator
from mistral_common.tokens.tokenizers.base import TokenizerVersion
from mistralai.client import models as mm
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params
from provider_rules import violations
from pydantic import AfterValidator, TypeAdapter
from test_providers_golden import PNG, canonical, carrier, msg, result, tool_image_rows

from chat_history.model import Attachment, Message
from chat_history.providers import KINDS, format_body

# ---------------------------------------------------------------------------------------------
# Strict validation


def materialize(value: Any) -> Any:
    """Consume pydantic's lazy ``ValidatorIterator``s while validating (consuming them later
    can panic pydantic-core) and turn models back into plain data."""
    if type(value).__name__ == "ValidatorIterator":
        return [materialize(item) for item in value]
    if isinstance(value, pydantic.BaseModel):
        return materialize(value.model_dump(exclude_unset=True))
    if isinstance(value, dict):
        return {key: materialize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [materialize(item) for item in value]
    return value


def dropped_keys(original: Any, kept: Any, path: str = "body") -> list[str]:
    """Keys present in ``original`` but not in ``kept``: what the SDK type does not know."""
    missing: list[str] = []
    if isinstance(original, dict) and isinstance(kept, dict):
        for key, value in original.items():
            if key not in kept:
                missing.append(f"{path}.{key}")
            else:
                missing.extend(dropped_keys(value, kept[key], f"{path}.{key}"))
    elif isinstance(original, list) and isinstance(kept, list):
        for index, (a, b) in enumerate(zip(original, kept, strict=False)):
            missing.extend(dropped_keys(a, b, f"{path}[{index}]"))
    return missing


def _typed_dict_check(
    adapter: TypeAdapter[Any], request: dict[str, Any], allowed: set[str]
) -> list[str]:
    try:
        kept = adapter.validate_python(request)
    except pydantic.ValidationError as error:
        return [str(error)]
    return [key for key in dropped_keys(request, kept) if key.rsplit(".", 1)[-1] not in allowed]


OPENAI_CHAT = TypeAdapter(
    Annotated[
        completion_create_params.CompletionCreateParamsNonStreaming, AfterValidator(materialize)
    ]
)
OPENAI_RESPONSES = TypeAdapter(
    Annotated[response_create_params.ResponseCreateParamsNonStreaming, AfterValidator(materialize)]
)
ANTHROPIC = TypeAdapter(
    Annotated[message_create_params.MessageCreateParamsNonStreaming, AfterValidator(materialize)]
)


def check_openai(body: dict[str, Any]) -> list[str]:
    # reasoning_content is DeepSeek's/vLLM's extension of the assistant message (providers.md)
    return _typed_dict_check(OPENAI_CHAT, {"model": "gpt-4o", **body}, {"reasoning_content"})


def check_openai_responses(body: dict[str, Any]) -> list[str]:
    return _typed_dict_check(OPENAI_RESPONSES, {"model": "gpt-5", **body}, set())


def check_anthropic(body: dict[str, Any]) -> list[str]:
    return _typed_dict_check(ANTHROPIC, {"model": "claude-test", "max_tokens": 64, **body}, set())


def check_gemini(body: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    try:
        for content in body["contents"]:
            gt.Content.model_validate(content)  # extra="forbid": unknown keys fail here
        if "systemInstruction" in body:
            gt.GenerateContentConfig.model_validate(
                {"systemInstruction": body["systemInstruction"]}
            )
    except pydantic.ValidationError as error:
        problems.append(str(error))
    # Content.role is a free string in the SDK; the server accepts only these two.
    problems.extend(
        f"role {c['role']!r}" for c in body["contents"] if c["role"] not in ("user", "model")
    )
    return problems


def _unknown_chunks(value: Any, path: str = "body") -> list[str]:
    found: list[str] = []
    if isinstance(value, pydantic.BaseModel):
        if getattr(value, "is_unknown", False):
            found.append(f"{path}: unknown chunk")
        for name in type(value).model_fields:
            found.extend(_unknown_chunks(getattr(value, name), f"{path}.{name}"))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found.extend(_unknown_chunks(item, f"{path}[{index}]"))
    return found


def check_mistral(body: dict[str, Any]) -> list[str]:
    request = {"model": "mistral-large-latest", **body}
    try:
        model = mm.ChatCompletionRequest.model_validate(request)
    except pydantic.ValidationError as error:
        return [str(error)]
    kept = model.model_dump(mode="json", by_alias=True)
    return _unknown_chunks(model) + dropped_keys(request, kept) + mistral_common_problems(body)


#: Every validator version mistral-common ships (v1 … v15 in 1.13).
MISTRAL_VERSIONS = tuple(TokenizerVersion)
#: Versions whose user messages take text only (images came with v3): a body with an image
#: chunk is a request for a vision model, so these are not asked about it.
TEXT_ONLY_VERSIONS = {TokenizerVersion.v1, TokenizerVersion.v2}


def mistral_request(body: dict[str, Any]) -> dict[str, Any]:
    """The request a client sends with ``body``: the body as it is (a final assistant message
    is a continuation, and must say so with ``prefix: true``)."""
    return {"model": "mistral-large-latest", "messages": list(body["messages"])}


def _has_image(body: dict[str, Any]) -> bool:
    return any(
        isinstance(m["content"], list) and any(c.get("type") == "image_url" for c in m["content"])
        for m in body["messages"]
    )


def mistral_common_problems(
    body: dict[str, Any], versions: tuple[TokenizerVersion, ...] = MISTRAL_VERSIONS
) -> list[str]:
    """What mistral-common's serving validator refuses in the request, per version."""
    if not body["messages"]:
        return []  # nothing to send: the client's prompt alone is the request
    problems: list[str] = []
    for version in versions:
        if version in TEXT_ONLY_VERSIONS and _has_image(body):
            continue
        try:
            request = MistralCommonRequest.model_validate(mistral_request(body))
            get_validator(version, ValidationMode.serving).validate_request(request)
        except (MistralCommonException, pydantic.ValidationError) as error:
            problems.append(f"mistral-common {version.value}: {error}")
    return problems


COHERE_MESSAGES = TypeAdapter(list[cohere.ChatMessageV2])


def _extras(value: Any, path: str = "body") -> list[str]:
    found: list[str] = []
    if isinstance(value, pydantic.BaseModel):
        if value.model_extra:
            found.append(f"{path}: unknown keys {sorted(value.model_extra)}")
        for name in type(value).model_fields:
            found.extend(_extras(getattr(value, name), f"{path}.{name}"))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found.extend(_extras(item, f"{path}[{index}]"))
    return found


def check_cohere(body: dict[str, Any]) -> list[str]:
    try:
        messages = COHERE_MESSAGES.validate_python(body["messages"])
    except pydantic.ValidationError as error:
        return [str(error)]
    return _extras(messages, "messages")


def check_ollama(body: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for index, message in enumerate(body["messages"]):
        # images are given as the client does it (_copy_messages wraps each in Image(value=…))
        given = {**message, "images": [{"value": i} for i in message.get("images", [])]}
        try:
            model = ollama.Message.model_validate(given)
            kept = model.model_dump(exclude_none=True)
        except (pydantic.ValidationError, ValueError) as error:
            problems.append(str(error))
            continue
        problems.extend(dropped_keys(message, kept, f"messages[{index}]"))
    return problems


BEDROCK_SHAPE = (
    botocore.session.get_session()
    .get_service_model("bedrock-runtime")
    .operation_model("Converse")
    .input_shape
)


def bedrock_params(body: dict[str, Any]) -> dict[str, Any]:
    """The Converse params a boto3 caller passes: image bytes decoded from the body's base64."""

    def decode(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"bytes"} and isinstance(value["bytes"], str):
                return {"bytes": base64.b64decode(value["bytes"])}
            return {key: decode(item) for key, item in value.items()}
        if isinstance(value, list):
            return [decode(item) for item in value]
        return value

    params: dict[str, Any] = {"modelId": "anthropic.claude-3-5-sonnet", **decode(body)}
    return params


def check_bedrock(body: dict[str, Any]) -> list[str]:
    report = ParamValidator().validate(bedrock_params(body), BEDROCK_SHAPE)
    return [report.generate_report()] if report.has_errors() else []


SDK_CHECKS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "openai": check_openai,
    "openai-responses": check_openai_responses,
    "anthropic": check_anthropic,
    "gemini": check_gemini,
    "ollama": check_ollama,
    "mistral": check_mistral,
    "bedrock": check_bedrock,
    "cohere": check_cohere,
}


def sdk_problems(kind: str, body: dict[str, Any]) -> list[str]:
    """What the SDK of ``kind`` refuses or does not know in ``body`` (empty when accepted)."""
    return SDK_CHECKS[kind](body)


# ---------------------------------------------------------------------------------------------
# Captured requests


class Captured:
    def __init__(self) -> None:
        self.body: dict[str, Any] | None = None

    def httpx2_handler(self, request: Any) -> Any:
        self.body = json.loads(request.content)
        return httpx2.Response(
            400, json={"error": {"type": "invalid_request_error", "message": "stop"}}
        )

    def httpx_handler(self, request: Any) -> Any:
        self.body = json.loads(request.content)
        return httpx.Response(400, json={"error": {"message": "stop"}, "message": "stop"})


def send_openai(body: dict[str, Any]) -> dict[str, Any]:
    seen = Captured()
    client = openai.OpenAI(
        api_key="test",
        base_url="http://provider.invalid/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(seen.httpx2_handler)),
        max_retries=0,
    )
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="gpt-4o", **body)
    assert seen.body is not None
    return seen.body


def send_openai_responses(body: dict[str, Any]) -> dict[str, Any]:
    seen = Captured()
    client = openai.OpenAI(
        api_key="test",
        base_url="http://provider.invalid/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(seen.httpx2_handler)),
        max_retries=0,
    )
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="gpt-5", **body)
    assert seen.body is not None
    return seen.body


def send_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    seen = Captured()
    client = anthropic.Anthropic(
        api_key="test",
        base_url="http://provider.invalid",
        http_client=httpx2.Client(transport=httpx2.MockTransport(seen.httpx2_handler)),
        max_retries=0,
    )
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="claude-test", max_tokens=64, **body)
    assert seen.body is not None
    return seen.body


def send_gemini(body: dict[str, Any]) -> dict[str, Any]:
    seen = Captured()
    client = genai.Client(
        api_key="test",
        http_options=gt.HttpOptions(
            base_url="http://provider.invalid/",
            httpx_client=httpx.Client(transport=httpx.MockTransport(seen.httpx_handler)),
            retry_options=gt.HttpRetryOptions(attempts=1),
        ),
    )
    config = None
    if "systemInstruction" in body:
        config = gt.GenerateContentConfig(system_instruction=body["systemInstruction"])
    with pytest.raises(genai.errors.ClientError):
        client.models.generate_content(
            model="gemini-2.5-flash", contents=body["contents"], config=config
        )
    assert seen.body is not None
    return seen.body


def send_mistral(body: dict[str, Any]) -> dict[str, Any]:
    seen = Captured()
    client = mistralai_client.Mistral(
        api_key="test",
        server_url="http://provider.invalid",
        client=httpx.Client(transport=httpx.MockTransport(seen.httpx_handler)),
    )
    with pytest.raises(mistralai_client.errors.SDKError):
        client.chat.complete(model="mistral-large-latest", messages=body["messages"])
    assert seen.body is not None
    return seen.body


def send_cohere(body: dict[str, Any]) -> dict[str, Any]:
    seen = Captured()
    client = cohere.ClientV2(
        api_key="test",
        base_url="http://provider.invalid",
        httpx_client=httpx.Client(transport=httpx.MockTransport(seen.httpx_handler)),
    )
    with pytest.raises(cohere.BadRequestError):
        client.chat(model="command-a-03-2025", messages=body["messages"])
    assert seen.body is not None
    return seen.body


def send_ollama(body: dict[str, Any]) -> dict[str, Any]:
    seen = Captured()
    client = ollama.Client(
        host="http://provider.invalid", transport=httpx.MockTransport(seen.httpx_handler)
    )
    with pytest.raises(ollama.ResponseError):
        client.chat(model="llama3.2", messages=body["messages"])
    assert seen.body is not None
    return seen.body


class RequestCaptured(Exception):
    """Raised by the before-send hook: the request was built and recorded, nothing is sent."""


def send_bedrock(body: dict[str, Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )

    def short_circuit(request: Any, **_: Any) -> None:
        seen["body"] = json.loads(request.body)
        raise RequestCaptured

    client.meta.events.register("before-send.bedrock-runtime.Converse", short_circuit)
    with pytest.raises(RequestCaptured):
        client.converse(**bedrock_params(body))
    return dict(seen["body"])


def _without(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def _gemini_models(contents: list[dict[str, Any]]) -> list[Any]:
    return [gt.Content.model_validate(c) for c in contents]


def assert_sent_as_formatted(kind: str, body: dict[str, Any]) -> None:
    """The captured request carries the body: byte for byte where the SDK passes dicts through,
    up to the documented re-serialisation where it does not."""
    if kind == "openai":
        assert send_openai(body) == {"model": "gpt-4o", **body}
    elif kind == "openai-responses":
        assert send_openai_responses(body) == {"model": "gpt-5", **body}
    elif kind == "anthropic":
        assert send_anthropic(body) == {"model": "claude-test", "max_tokens": 64, **body}
    elif kind == "cohere":
        assert send_cohere(body) == {
            "model": "command-a-03-2025",
            "messages": body["messages"],
            "stream": False,
        }
    elif kind == "bedrock":
        sent = send_bedrock(body)
        assert {k: v for k, v in sent.items() if k != "modelId"} == body
    elif kind == "gemini":
        # google-genai re-serialises (camelCase keys, some snake_case, url-safe base64 bytes):
        # compare as the SDK's own models.
        sent = send_gemini(body)
        assert _gemini_models(sent["contents"]) == _gemini_models(body["contents"])
        if "systemInstruction" in body:
            assert sent["systemInstruction"]["parts"] == body["systemInstruction"]["parts"]
        else:
            assert "systemInstruction" not in sent
    elif kind == "mistral":
        # mistralai re-serialises through its models, adding `prefix: false` to assistant
        # messages without it and `index: 0` to tool calls.
        sent = send_mistral(body)
        expected = [
            {**m, "prefix": m.get("prefix", False)} if m["role"] == "assistant" else m
            for m in body["messages"]
        ]
        assert _without(sent["messages"], {"index"}) == expected
    elif kind == "ollama":
        # ollama-python drops falsy fields (an empty content) and adds an empty tools list.
        sent = send_ollama(body)
        expected = [
            {k: v for k, v in m.items() if v not in ("", None, [])} for m in body["messages"]
        ]
        assert sent["messages"] == expected
    else:  # pragma: no cover - every kind is listed above
        raise AssertionError(kind)


# ---------------------------------------------------------------------------------------------
# Tests


def scenarios() -> dict[str, list[Message]]:
    marker = f"see [IMAGE:data:image/png;base64,{PNG}] and [IMAGE:/tmp/x.png]"
    return {
        "canonical": list(canonical()),
        "tool_images": tool_image_rows(),
        "assistant_first_and_mid_system": [
            msg("assistant", "Welcome back."),
            msg("system", "Be brief."),
            msg("user", marker),
            msg("user", "and this", attachments=(Attachment(uri="https://example.com/cat.png"),)),
        ],
        "interrupted_exchange": [
            msg("system", "S"),
            msg("user", "go"),
            carrier("c1", "c2", "c3", content="Running three."),
            result("c2", "two"),
            result("c1", ""),
            msg("user", "[Tool results]\nc3 skipped"),
            msg("user", "new prompt"),
            msg("assistant", "Trailing space   "),
        ],
        "awkward_ids": [
            msg("user", "go"),
            carrier("ÄÖ ü/1", "x" * 80),
            result("ÄÖ ü/1"),
            result("x" * 80),
            carrier("ÄÖ ü/1"),
            result("ÄÖ ü/1"),
        ],
    }


SCENARIOS = scenarios()


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("kind", KINDS)
def test_the_sdk_types_accept_the_body_strictly(kind: str, scenario: str) -> None:
    body = format_body(kind, SCENARIOS[scenario])
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("kind", KINDS)
def test_the_sdk_sends_the_body_it_was_given(kind: str, scenario: str) -> None:
    assert_sent_as_formatted(kind, format_body(kind, SCENARIOS[scenario]))


# The validators themselves must be able to fail, or the tests above prove nothing.
BROKEN: dict[str, Callable[[dict[str, Any]], None]] = {
    "openai": lambda b: b["messages"][1]["content"][0].update(type="txt"),
    "openai-responses": lambda b: b["input"][2].update(bogus=1),
    "anthropic": lambda b: b["messages"][1]["content"][2].update(bogus=1),
    "gemini": lambda b: b["contents"][1]["parts"][0].update(bogus=1),
    "ollama": lambda b: b["messages"][2].update(tool_call_id="x"),
    "mistral": lambda b: b["messages"][1]["content"][0].update(type="txt"),
    "bedrock": lambda b: b["messages"][0]["content"][0].update(bogus="x"),
    "cohere": lambda b: b["messages"][2].update(bogus=1),
}


@pytest.mark.parametrize("kind", KINDS)
def test_the_strict_sdk_check_catches_a_broken_body(kind: str) -> None:
    body = json.loads(json.dumps(format_body(kind, canonical())))
    BROKEN[kind](body)
    assert sdk_problems(kind, body) != []


def test_gemini_check_catches_a_role_the_sdk_lets_through() -> None:
    body = format_body("gemini", canonical())
    body["contents"][1]["role"] = "assistant"
    assert sdk_problems("gemini", body) == ["role 'assistant'"]


# Bodies with prompt-cache breakpoints (protocol.md "Version 3"): every scenario, for the kinds
# that carry them, with the context note a prepared request opens with.
BREAKPOINT_MODELS = [
    ("anthropic", None),
    ("bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
    ("bedrock", "amazon.nova-pro-v1:0"),
]


def with_context_note(rows: list[Message]) -> tuple[list[Message], Message]:
    from chat_history.policy.prepare.compaction import BREADCRUMB

    note = Message(role="user", content=BREADCRUMB)
    system = [row for row in rows if row.role == "system"]
    return [*system, note, *(row for row in rows if row.role != "system")], note


@pytest.mark.parametrize("with_note", [False, True])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize(("kind", "model"), BREAKPOINT_MODELS)
def test_bodies_with_breakpoints_pass_the_sdk_types_and_are_sent(
    kind: str, model: str | None, scenario: str, with_note: bool
) -> None:
    rows = list(SCENARIOS[scenario])
    note = None
    if with_note:
        rows, note = with_context_note(rows)
    body = format_body(kind, rows, model, breakpoints=True, note=note)
    text = json.dumps(body)
    least = 0 if model == "amazon.nova-pro-v1:0" else 1  # Nova: none after tool results
    assert least <= text.count("cache_control") + text.count("cachePoint") <= 4
    assert violations(kind, body) == []
    assert sdk_problems(kind, body) == []
    assert_sent_as_formatted(kind, body)


def test_the_sdk_check_catches_a_broken_breakpoint() -> None:
    body = format_body("anthropic", canonical(), breakpoints=True)
    body["system"][0]["cache_control"] = {"type": "forever"}
    assert sdk_problems("anthropic", body) != []
    # in messages the SDK type lets a wrong type through (a union of blocks): keys it catches,
    # the rule checker the rest
    body = format_body("anthropic", canonical(), breakpoints=True)
    body["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral", "bogus": 1}
    assert sdk_problems("anthropic", body) != []
    body["messages"][0]["content"][0]["cache_control"] = {"type": "forever"}
    assert violations("anthropic", body) != []
    body = format_body("bedrock", canonical(), "amazon.nova-pro-v1:0", breakpoints=True)
    body["messages"][0]["content"].append({"cachePoint": {}})
    assert sdk_problems("bedrock", body) != []

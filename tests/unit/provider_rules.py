"""Structural rules each provider enforces on a request, written from shared/guides/providers.md
(section 2's server errors, section 1's shapes) and mistral-common's validator, independently of
the formatter code (nothing here imports ``chat_history.providers``).

``violations(kind, body)`` lists every broken rule as a readable string; an empty list means the
body passes. Rules a provider documents but that depend on the request as a whole (``toolConfig``
when tools are present) are not checked: the client adds its tool list. The body's messages are
sent as they are, so Mistral's serving rule on the last message (a user or tool message, or an
assistant continuation with ``prefix: true``) is checked.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from typing import Any

BODY_KEYS: dict[str, tuple[set[str], set[str]]] = {
    # kind: (required keys, optional keys) of the body (protocol.md body table)
    "openai": ({"messages"}, set()),
    "openai-responses": ({"input"}, {"instructions"}),
    "anthropic": ({"messages"}, {"system"}),
    "gemini": ({"contents"}, {"systemInstruction"}),
    "ollama": ({"messages"}, set()),
    "mistral": ({"messages"}, set()),
    "bedrock": ({"messages"}, {"system"}),
    "cohere": ({"messages"}, set()),
}

#: Column names of the store and wire names of the neutral message that no provider knows.
INTERNAL_KEYS = {
    "turn",
    "tokens",
    "timestamp",
    "metadata",
    "providerData",
    "provider_data",
    "attachments",
    "toolCalls",
    "toolCallId",
}


class Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, where: str, what: str) -> None:
        self.problems.append(f"{where}: {what}")

    def keys(self, where: str, obj: Any, required: set[str], optional: set[str]) -> bool:
        if not isinstance(obj, dict):
            self.fail(where, f"expected an object, got {type(obj).__name__}")
            return False
        missing = required - obj.keys()
        extra = obj.keys() - required - optional
        if missing:
            self.fail(where, f"missing {sorted(missing)}")
        if extra:
            self.fail(where, f"unknown keys {sorted(extra)}")
        return not missing

    def text(self, where: str, value: Any, *, allow_blank: bool = True) -> None:
        if not isinstance(value, str):
            self.fail(where, f"text must be a string, got {type(value).__name__}")
        elif not allow_blank and not value.strip():
            self.fail(where, "empty or whitespace-only text")

    def json_object_string(self, where: str, value: Any) -> None:
        if not isinstance(value, str):
            self.fail(where, "arguments must be a JSON string")
            return
        try:
            parsed = json.loads(value)
        except ValueError:
            self.fail(where, "arguments are not valid JSON")
            return
        if not isinstance(parsed, dict):
            self.fail(where, "arguments must encode a JSON object")

    def base64(self, where: str, value: Any) -> None:
        if not isinstance(value, str) or not value:
            self.fail(where, "image data must be non-empty base64 text")
            return
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            self.fail(where, "image data is not base64")

    def proto_bytes(self, where: str, value: Any) -> None:
        """A protobuf ``bytes`` field in JSON: standard or URL-safe base64, padding optional
        (so Google's literal ``skip_thought_signature_validator`` placeholder is one)."""
        if not isinstance(value, str) or not value:
            self.fail(where, "must be non-empty base64 text")
            return
        padded = value + "=" * (-len(value) % 4) if "=" not in value else value
        try:
            base64.b64decode(padded, altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            self.fail(where, "is not base64 (standard or URL-safe)")


def _internal_keys(c: Checker, where: str, value: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in INTERNAL_KEYS:
                c.fail(where, f"internal field {key!r} in the body")
            _internal_keys(c, f"{where}.{key}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _internal_keys(c, f"{where}[{index}]", item)


def _data_url(c: Checker, where: str, url: Any) -> None:
    if not isinstance(url, str) or not url:
        c.fail(where, "image URL must be a non-empty string")
        return
    if url.startswith("data:"):
        found = re.fullmatch(r"data:image/[\w.+-]+;base64,(.+)", url, re.DOTALL)
        if found is None:
            c.fail(where, "data URL must be data:image/<type>;base64,<data>")
        else:
            c.base64(where, found.group(1))
    elif not url.startswith(("https://", "http://")):
        c.fail(where, f"image URL must be http(s) or data:, got {url[:30]!r}")


# ---------------------------------------------------------------------------------------------
# OpenAI Chat Completions, Cohere v2 and Mistral share the tool-message pairing rule:
# a tool message answers a call of the assistant message before the run of tool messages, and
# every call is answered before the next non-tool message.


def _chat_pairing(
    c: Checker, messages: list[Any], call_ids: Callable[[dict[str, Any]], list[str]]
) -> None:
    pending: set[str] | None = None
    seen_ids: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        where = f"messages[{index}]"
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if pending is None:
                c.fail(
                    where, "tool message is not a response to a preceding message with tool_calls"
                )
            elif call_id not in pending:
                c.fail(where, f"tool_call_id {call_id!r} answers no pending call")
            else:
                pending.discard(call_id)
            continue
        if pending:
            c.fail(where, f"tool_call_ids without response messages: {sorted(pending)}")
        pending = None
        if role == "assistant":
            ids = call_ids(message)
            if ids:
                if len(set(ids)) != len(ids):
                    c.fail(where, "duplicate tool call id in one message")
                for call_id in ids:
                    if call_id in seen_ids:
                        c.fail(where, f"tool call id {call_id!r} reused in the body")
                    seen_ids.add(call_id)
                pending = set(ids)
    if pending:
        c.fail("messages[-1]", f"tool_call_ids without response messages: {sorted(pending)}")


def _function_call_ids(message: dict[str, Any]) -> list[str]:
    calls = message.get("tool_calls") or []
    return [call.get("id") for call in calls if isinstance(call, dict)]


def _check_function_calls(c: Checker, where: str, calls: Any) -> None:
    if not isinstance(calls, list) or not calls:
        c.fail(where, "tool_calls must be a non-empty list")
        return
    for index, call in enumerate(calls):
        here = f"{where}.tool_calls[{index}]"
        if not c.keys(here, call, {"id", "type", "function"}, set()):
            continue
        if call["type"] != "function":
            c.fail(here, "type must be 'function'")
        if c.keys(here + ".function", call["function"], {"name", "arguments"}, set()):
            c.text(here + ".function.name", call["function"]["name"], allow_blank=False)
            c.json_object_string(here + ".function.arguments", call["function"]["arguments"])


def check_openai(c: Checker, body: dict[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        c.fail("messages", "must be a list")
        return
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role in ("system", "developer"):
            if c.keys(where, message, {"role", "content"}, {"name"}):
                _openai_text_content(c, where, message["content"])
        elif role == "user":
            if c.keys(where, message, {"role", "content"}, {"name"}):
                _openai_user_content(c, where, message["content"])
        elif role == "assistant":
            if not c.keys(where, message, {"role", "content"}, {"tool_calls", "reasoning_content"}):
                continue
            content = message["content"]
            if content is None:
                if not message.get("tool_calls"):
                    c.fail(where, "assistant content may be null only with tool_calls")
            else:
                _openai_text_content(c, where, content)
            if "tool_calls" in message:
                _check_function_calls(c, where, message["tool_calls"])
                for call_id in _function_call_ids(message):
                    if not isinstance(call_id, str) or not 0 < len(call_id) <= 40:
                        c.fail(where, f"tool call id {call_id!r} must be 1 to 40 characters")
            if "reasoning_content" in message:
                c.text(where + ".reasoning_content", message["reasoning_content"])
        elif role == "tool":
            if c.keys(where, message, {"role", "tool_call_id", "content"}, set()):
                _openai_text_content(c, where, message["content"])
        else:
            c.fail(where, f"unknown role {role!r}")
    _chat_pairing(c, messages, _function_call_ids)


def _openai_text_content(c: Checker, where: str, content: Any) -> None:
    """system/developer/assistant/tool content: a string or text parts (never an image)."""
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        c.fail(where, "content must be a string or a list of parts")
        return
    for index, part in enumerate(content):
        here = f"{where}.content[{index}]"
        if isinstance(part, dict) and part.get("type") == "image_url":
            c.fail(here, "image URLs are only allowed for messages with role 'user'")
        elif c.keys(here, part, {"type", "text"}, set()):
            c.text(here, part["text"])


def _openai_user_content(c: Checker, where: str, content: Any) -> None:
    """Chat Completions user content; Cohere v2 documents the same parts."""
    if isinstance(content, str):
        return
    if not isinstance(content, list) or not content:
        c.fail(where, "user content must be a string or a non-empty list of parts")
        return
    for index, part in enumerate(content):
        here = f"{where}.content[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if c.keys(here, part, {"type", "text"}, set()):
                c.text(here, part["text"])
        elif kind == "image_url":
            if c.keys(here, part, {"type", "image_url"}, set()) and c.keys(
                here + ".image_url", part["image_url"], {"url"}, {"detail"}
            ):
                _data_url(c, here, part["image_url"]["url"])
        else:
            c.fail(here, f"unknown user content part {kind!r}")


# ---------------------------------------------------------------------------------------------
# OpenAI Responses


def check_openai_responses(c: Checker, body: dict[str, Any]) -> None:
    if "instructions" in body:
        c.text("instructions", body["instructions"], allow_blank=False)
    items = body.get("input")
    if not isinstance(items, list):
        c.fail("input", "must be a list")
        return
    calls: dict[str, int] = {}
    outputs: dict[str, int] = {}
    for index, item in enumerate(items):
        where = f"input[{index}]"
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            _responses_message(c, where, item)
        elif kind == "function_call":
            if c.keys(where, item, {"type", "call_id", "name", "arguments"}, set()):
                call_id = item["call_id"]
                if not isinstance(call_id, str) or not 0 < len(call_id) <= 64:
                    c.fail(where, "call_id must be 1 to 64 characters")
                if call_id in calls:
                    c.fail(where, f"call_id {call_id!r} used by two function calls")
                calls[call_id] = index
                c.text(where + ".name", item["name"], allow_blank=False)
                c.json_object_string(where + ".arguments", item["arguments"])
        elif kind == "function_call_output":
            if c.keys(where, item, {"type", "call_id", "output"}, set()):
                call_id = item["call_id"]
                if call_id not in calls:
                    c.fail(
                        where, f"No tool call found for function call output with call_id {call_id}"
                    )
                if call_id in outputs:
                    c.fail(where, f"second output for call_id {call_id!r}")
                outputs[call_id] = index
                _responses_output(c, where, item["output"])
        elif kind == "reasoning":
            if c.keys(
                where, item, {"type", "id", "summary"}, {"content", "encrypted_content", "status"}
            ):
                following = items[index + 1] if index + 1 < len(items) else None
                ok = isinstance(following, dict) and (
                    following.get("type") in ("reasoning", "function_call")
                    or (following.get("type") == "message" and following.get("role") == "assistant")
                )
                if not ok:
                    c.fail(where, "reasoning item is not followed by its output item")
        else:
            c.fail(where, f"unknown item type {kind!r}")
    for call_id in calls:
        if call_id not in outputs:
            c.fail("input", f"No tool output found for function call {call_id}.")


def _responses_message(c: Checker, where: str, item: dict[str, Any]) -> None:
    if not c.keys(where, item, {"type", "role", "content"}, {"phase"}):
        return
    role = item["role"]
    content = item["content"]
    if role not in ("user", "assistant", "system", "developer"):
        c.fail(where, f"unknown role {role!r}")
    if "phase" in item and (
        role != "assistant" or item["phase"] not in ("commentary", "final_answer")
    ):
        c.fail(where, "phase only on assistant messages, commentary or final_answer")
    if isinstance(content, str):
        return
    if role == "assistant" or not isinstance(content, list) or not content:
        c.fail(where, "content must be a string (assistant) or a non-empty list of input parts")
        return
    for index, part in enumerate(content):
        _responses_part(c, f"{where}.content[{index}]", part, images=role == "user")


def _responses_part(c: Checker, where: str, part: Any, *, images: bool) -> None:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "input_text":
        if c.keys(where, part, {"type", "text"}, set()):
            c.text(where, part["text"])
    elif kind == "input_image":
        if not images:
            c.fail(where, "input_image outside a user message or tool output")
        if c.keys(where, part, {"type", "image_url", "detail"}, set()):
            _data_url(c, where, part["image_url"])
            if part["detail"] not in ("auto", "low", "high", "original"):
                c.fail(where, "unknown detail")
    else:
        c.fail(where, f"unknown input part {kind!r}")


def _responses_output(c: Checker, where: str, output: Any) -> None:
    if isinstance(output, str):
        return
    if not isinstance(output, list) or not output:
        c.fail(where, "output must be a string or a non-empty list")
        return
    for index, part in enumerate(output):
        _responses_part(c, f"{where}.output[{index}]", part, images=True)


# ---------------------------------------------------------------------------------------------
# Anthropic Messages

_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


#: The most cache breakpoints a request may carry (Anthropic: "A maximum of 4 blocks with
#: cache_control may be provided"; Bedrock documents the same limit for cachePoint).
MAX_BREAKPOINTS = 4


def _anthropic_breakpoints(c: Checker, body: dict[str, Any]) -> dict[str, Any]:
    """Check the ``cache_control`` marks (at most 4, ``{"type": "ephemeral"}``, never on a
    thinking block, only on top-level blocks of ``system`` and of messages) and return the
    body without them, for the checks of the shapes."""
    count = 0

    def strip(where: str, block: Any) -> Any:
        nonlocal count
        if not isinstance(block, dict) or "cache_control" not in block:
            return block
        count += 1
        if block["cache_control"] != {"type": "ephemeral"}:
            c.fail(
                where,
                f"cache_control must be {{'type': 'ephemeral'}}, got {block['cache_control']!r}",
            )
        if block.get("type") in ("thinking", "redacted_thinking"):
            c.fail(where, "a thinking block cannot carry cache_control")
        if block.get("type") == "tool_result" and not block.get("content"):
            c.fail(where, "cache_control cannot be set for empty tool_result blocks")
        return {k: v for k, v in block.items() if k != "cache_control"}

    stripped = dict(body)
    if isinstance(body.get("system"), list):
        stripped["system"] = [strip(f"system[{i}]", b) for i, b in enumerate(body["system"])]
    if isinstance(body.get("messages"), list):
        messages = []
        for index, message in enumerate(body["messages"]):
            if isinstance(message, dict) and isinstance(message.get("content"), list):
                content = [
                    strip(f"messages[{index}].content[{i}]", b)
                    for i, b in enumerate(message["content"])
                ]
                message = {**message, "content": content}
            messages.append(message)
        stripped["messages"] = messages
    if count > MAX_BREAKPOINTS:
        c.fail("body", f"A maximum of 4 blocks with cache_control may be provided. Found {count}.")
    return stripped


def _bedrock_breakpoints(c: Checker, body: dict[str, Any]) -> dict[str, Any]:
    """Check the ``cachePoint`` blocks (at most 4, ``{"type": "default"}``, each after a block
    that is neither another cache point nor reasoning) and return the body without them."""
    count = 0

    def strip(where: str, blocks: list[Any]) -> list[Any]:
        nonlocal count
        kept: list[Any] = []
        for index, block in enumerate(blocks):
            if not (isinstance(block, dict) and "cachePoint" in block):
                kept.append(block)
                continue
            count += 1
            if block != {"cachePoint": {"type": "default"}}:
                c.fail(f"{where}[{index}]", f"cachePoint must be {{'type': 'default'}}: {block!r}")
            before = blocks[index - 1] if index > 0 else None
            if not isinstance(before, dict) or "cachePoint" in before:
                c.fail(f"{where}[{index}]", "a cachePoint must follow a content block")
            elif "reasoningContent" in before:
                c.fail(f"{where}[{index}]", "a cachePoint cannot follow reasoning content")
        return kept

    stripped = dict(body)
    if isinstance(body.get("system"), list):
        stripped["system"] = strip("system", body["system"])
    if isinstance(body.get("messages"), list):
        stripped["messages"] = [
            {**m, "content": strip(f"messages[{i}].content", m["content"])}
            if isinstance(m, dict) and isinstance(m.get("content"), list)
            else m
            for i, m in enumerate(body["messages"])
        ]
    if count > MAX_BREAKPOINTS:
        c.fail("body", f"at most 4 cachePoint blocks, found {count}")
    return stripped


def check_anthropic(c: Checker, body: dict[str, Any]) -> None:
    body = _anthropic_breakpoints(c, body)
    if "system" in body:
        _anthropic_system(c, body["system"])
    messages = body.get("messages")
    if not isinstance(messages, list):
        c.fail("messages", "must be a list")
        return
    _alternation(c, messages, "role", ("user", "assistant"), first="user")
    seen_ids: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not c.keys(where, message, {"role", "content"}, set()):
            continue
        content = message["content"]
        if not isinstance(content, list) or not content:
            c.fail(where, "all messages must have non-empty content")
            continue
        role = message["role"]
        previous = messages[index - 1] if index > 0 else None
        following = messages[index + 1] if index + 1 < len(messages) else None
        use_ids = []
        leading_results = True
        result_ids = []
        for position, block in enumerate(content):
            here = f"{where}.content[{position}]"
            kind = block.get("type") if isinstance(block, dict) else None
            if kind != "tool_result":
                leading_results = False
            if kind == "text":
                if c.keys(here, block, {"type", "text"}, set()):
                    c.text(here, block["text"], allow_blank=False)
            elif kind == "image":
                if role != "user":
                    c.fail(here, "images only in user messages")
                _anthropic_image(c, here, block)
            elif kind == "tool_use":
                if role != "assistant":
                    c.fail(here, "tool_use outside an assistant message")
                if c.keys(here, block, {"type", "id", "name", "input"}, set()):
                    block_id = block["id"]
                    if not isinstance(block_id, str) or not _ANTHROPIC_ID.fullmatch(block_id):
                        c.fail(
                            here,
                            f"tool_use id {block_id!r} does not match ^[a-zA-Z0-9_-]+$ (<= 64)",
                        )
                    if block_id in seen_ids:
                        c.fail(here, f"tool_use id {block_id!r} is not unique")
                    seen_ids.add(block_id)
                    use_ids.append(block_id)
                    if not isinstance(block["input"], dict):
                        c.fail(here, "tool_use input must be an object")
            elif kind == "tool_result":
                if role != "user":
                    c.fail(here, "tool_result outside a user message")
                if not leading_results:
                    c.fail(here, "tool_result blocks must come first in the content")
                if c.keys(here, block, {"type", "tool_use_id"}, {"content", "is_error"}):
                    result_ids.append(block["tool_use_id"])
                    _anthropic_result_content(c, here, block.get("content"))
            elif kind in ("thinking", "redacted_thinking"):
                if role != "assistant":
                    c.fail(here, "thinking outside an assistant message")
                if any(
                    b.get("type") not in ("thinking", "redacted_thinking")
                    for b in content[:position]
                ):
                    c.fail(here, "thinking blocks must come first in the assistant content")
            else:
                c.fail(here, f"unknown block type {kind!r}")
        if use_ids:
            next_ids = _leading_anthropic_results(following)
            if next_ids != use_ids:
                c.fail(
                    where,
                    "`tool_use` ids were found without `tool_result` blocks immediately after "
                    f"(in order): {use_ids} vs {next_ids}",
                )
        if result_ids:
            previous_ids = _anthropic_use_ids(previous)
            for result_id in result_ids:
                if result_id not in previous_ids:
                    c.fail(
                        where,
                        f"unexpected `tool_use_id` found in `tool_result` blocks: {result_id}",
                    )
    if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant":
        last = messages[-1].get("content")
        if isinstance(last, list) and last and isinstance(last[-1], dict):
            text = last[-1].get("text")
            if isinstance(text, str) and text != text.rstrip():
                c.fail(
                    "messages[-1]", "final assistant content cannot end with trailing whitespace"
                )


def _anthropic_system(c: Checker, system: Any) -> None:
    """A string, or a non-empty list of text blocks (``TextBlockParam``: optional
    ``cache_control`` and ``citations``)."""
    if isinstance(system, str):
        c.text("system", system, allow_blank=False)
        return
    if not isinstance(system, list) or not system:
        c.fail("system", "must be a string or a non-empty list of text blocks")
        return
    for index, block in enumerate(system):
        where = f"system[{index}]"
        if c.keys(where, block, {"type", "text"}, {"citations"}):
            if block["type"] != "text":
                c.fail(where, "system blocks are text blocks")
            c.text(where, block["text"], allow_blank=False)


def _anthropic_use_ids(message: Any) -> set[str]:
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return set()
    return {
        b.get("id")
        for b in message.get("content", [])
        if isinstance(b, dict) and b.get("type") == "tool_use"
    }


def _leading_anthropic_results(message: Any) -> list[str]:
    if not isinstance(message, dict) or message.get("role") != "user":
        return []
    ids = []
    for block in message.get("content", []):
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            break
        ids.append(block.get("tool_use_id"))
    return ids


def _anthropic_image(c: Checker, where: str, block: dict[str, Any]) -> None:
    if not c.keys(where, block, {"type", "source"}, set()):
        return
    source = block["source"]
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "base64":
        if c.keys(where + ".source", source, {"type", "media_type", "data"}, set()):
            if source["media_type"] not in _IMAGE_TYPES:
                c.fail(where, f"media_type {source['media_type']!r} not accepted")
            c.base64(where, source["data"])
    elif kind == "url":
        if c.keys(where + ".source", source, {"type", "url"}, set()) and not str(
            source["url"]
        ).startswith(("https://", "http://")):
            c.fail(where, "url source must be http(s)")
    else:
        c.fail(where, f"unknown image source {kind!r}")


def _anthropic_result_content(c: Checker, where: str, content: Any) -> None:
    if content is None or isinstance(content, str):
        if isinstance(content, str) and not content.strip():
            c.fail(where, "empty tool_result text (omit content instead)")
        return
    if not isinstance(content, list) or not content:
        c.fail(where, "tool_result content must be a string or a non-empty list")
        return
    for index, block in enumerate(content):
        here = f"{where}.content[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            if c.keys(here, block, {"type", "text"}, set()):
                c.text(here, block["text"], allow_blank=False)
        elif kind == "image":
            _anthropic_image(c, here, block)
        else:
            c.fail(here, f"unknown tool_result block {kind!r}")


def _alternation(
    c: Checker, messages: list[Any], role_key: str, roles: tuple[str, str], *, first: str
) -> None:
    previous = None
    for index, message in enumerate(messages):
        role = message.get(role_key) if isinstance(message, dict) else None
        if role not in roles:
            c.fail(f"messages[{index}]", f"role {role!r} is not one of {roles}")
        if index == 0 and role != first:
            c.fail("messages[0]", f"a conversation must start with a {first} message")
        if role == previous:
            c.fail(f"messages[{index}]", f"roles must alternate, found two {role!r} in a row")
        previous = role


# ---------------------------------------------------------------------------------------------
# AWS Bedrock Converse

_BEDROCK_ID = re.compile(r"[a-zA-Z0-9_.:-]{1,64}")
_BEDROCK_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_BEDROCK_BLOCKS = {"text", "image", "toolUse", "toolResult", "reasoningContent", "document"}


def check_bedrock(c: Checker, body: dict[str, Any]) -> None:
    body = _bedrock_breakpoints(c, body)
    if "system" in body:
        system = body["system"]
        if not isinstance(system, list) or not system:
            c.fail("system", "must be a non-empty list")
        else:
            for index, block in enumerate(system):
                if c.keys(f"system[{index}]", block, {"text"}, set()):
                    c.text(f"system[{index}]", block["text"], allow_blank=False)
    messages = body.get("messages")
    if not isinstance(messages, list):
        c.fail("messages", "must be a list")
        return
    _alternation(c, messages, "role", ("user", "assistant"), first="user")
    seen: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not c.keys(where, message, {"role", "content"}, set()):
            continue
        content = message["content"]
        if not isinstance(content, list) or not content:
            c.fail(where, "content must be a non-empty list")
            continue
        role = message["role"]
        use_ids: list[str] = []
        result_ids: list[str] = []
        leading = True
        for position, block in enumerate(content):
            here = f"{where}.content[{position}]"
            if (
                not isinstance(block, dict)
                or len(block) != 1
                or next(iter(block)) not in _BEDROCK_BLOCKS
            ):
                c.fail(here, "a content block has exactly one known member")
                continue
            ((key, value),) = block.items()
            if key != "toolResult":
                leading = False
            if key == "text":
                c.text(here, value, allow_blank=False)
            elif key == "image":
                if role != "user":
                    c.fail(here, "images only in user messages")
                _bedrock_image(c, here, value)
            elif key == "toolUse":
                if role != "assistant":
                    c.fail(here, "toolUse outside an assistant message")
                if c.keys(here, value, {"toolUseId", "name", "input"}, set()):
                    tool_id = value["toolUseId"]
                    if not isinstance(tool_id, str) or not _BEDROCK_ID.fullmatch(tool_id):
                        c.fail(
                            here, f"toolUseId {tool_id!r} does not match [a-zA-Z0-9_.:-]{{1,64}}"
                        )
                    name = value["name"]
                    if not isinstance(name, str) or not _BEDROCK_NAME.fullmatch(name):
                        # botocore's ToolName: [a-zA-Z0-9_-]+, 1 to 64 (checked server-side)
                        c.fail(here, f"toolUse name {name!r} does not match [a-zA-Z0-9_-]{{1,64}}")
                    if tool_id in seen:
                        c.fail(here, f"toolUseId {tool_id!r} is not unique")
                    seen.add(tool_id)
                    use_ids.append(tool_id)
                    if not isinstance(value["input"], dict):
                        c.fail(here, "toolUse input must be a JSON object")
            elif key == "toolResult":
                if role != "user":
                    c.fail(here, "toolResult outside a user message")
                if not leading:
                    c.fail(here, "toolResult blocks must come first")
                if c.keys(here, value, {"toolUseId", "content"}, {"status"}):
                    result_ids.append(value["toolUseId"])
                    _bedrock_result_content(c, here, value["content"])
        if use_ids:
            following = messages[index + 1] if index + 1 < len(messages) else None
            found = []
            if isinstance(following, dict) and following.get("role") == "user":
                for block in following.get("content", []):
                    if not isinstance(block, dict) or "toolResult" not in block:
                        break
                    found.append(block["toolResult"].get("toolUseId"))
            if found != use_ids:
                c.fail(
                    where,
                    f"Expected toolResult blocks in the next message for the Ids: {use_ids}",
                )
        if result_ids:
            previous = messages[index - 1] if index > 0 else {}
            prior = {
                b["toolUse"].get("toolUseId")
                for b in (previous.get("content", []) if isinstance(previous, dict) else [])
                if isinstance(b, dict) and "toolUse" in b
            }
            extra = [r for r in result_ids if r not in prior]
            if extra:
                c.fail(
                    where,
                    f"toolResult blocks exceed the toolUse blocks of the previous turn: {extra}",
                )
    if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant":
        last = messages[-1].get("content")
        if isinstance(last, list) and last and isinstance(last[-1], dict):
            text = last[-1].get("text")
            if isinstance(text, str) and text != text.rstrip():
                c.fail(
                    "messages[-1]", "final assistant content cannot end with trailing whitespace"
                )


def _bedrock_image(c: Checker, where: str, value: Any) -> None:
    if not c.keys(where, value, {"format", "source"}, set()):
        return
    if value["format"] not in ("png", "jpeg", "gif", "webp"):
        c.fail(where, f"image format {value['format']!r} not accepted")
    if c.keys(where + ".source", value["source"], {"bytes"}, set()):
        c.base64(where, value["source"]["bytes"])


def _bedrock_result_content(c: Checker, where: str, content: Any) -> None:
    if not isinstance(content, list) or not content:
        c.fail(where, "toolResult content must be a non-empty list")
        return
    for index, block in enumerate(content):
        here = f"{where}.content[{index}]"
        if not isinstance(block, dict) or len(block) != 1:
            c.fail(here, "a toolResult content block has exactly one member")
            continue
        ((key, value),) = block.items()
        if key == "text":
            c.text(here, value)  # Converse takes blank text inside a toolResult
        elif key == "image":
            _bedrock_image(c, here, value)
        elif key == "json":
            if not isinstance(value, dict):
                c.fail(here, "json must be an object")
        else:
            c.fail(here, f"unknown toolResult block {key!r}")


# ---------------------------------------------------------------------------------------------
# Gemini generateContent (REST camelCase)

_GEMINI_DATA = {"text", "inlineData", "functionCall", "functionResponse"}


def check_gemini(c: Checker, body: dict[str, Any]) -> None:
    if "systemInstruction" in body:
        instruction = body["systemInstruction"]
        if c.keys("systemInstruction", instruction, {"parts"}, set()):
            parts = instruction["parts"]
            if not isinstance(parts, list) or not parts:
                c.fail("systemInstruction", "parts must be a non-empty list")
            else:
                for index, part in enumerate(parts):
                    if c.keys(f"systemInstruction.parts[{index}]", part, {"text"}, set()):
                        c.text(f"systemInstruction.parts[{index}]", part["text"], allow_blank=False)
    contents = body.get("contents")
    if not isinstance(contents, list):
        c.fail("contents", "must be a list")
        return
    _alternation(c, contents, "role", ("user", "model"), first="user")
    for index, content in enumerate(contents):
        where = f"contents[{index}]"
        if not c.keys(where, content, {"role", "parts"}, set()):
            continue
        parts = content["parts"]
        if not isinstance(parts, list) or not parts:
            c.fail(where, "parts must be a non-empty list")
            continue
        role = content["role"]
        calls = []
        responses = []
        leading = True
        for position, part in enumerate(parts):
            here = f"{where}.parts[{position}]"
            if not isinstance(part, dict):
                c.fail(here, "a part is an object")
                continue
            data_keys = [k for k in part if k in _GEMINI_DATA]
            extra = [k for k in part if k not in _GEMINI_DATA and k != "thoughtSignature"]
            if len(data_keys) != 1 or extra:
                c.fail(here, f"a part holds exactly one data field, got {sorted(part)}")
                continue
            key = data_keys[0]
            if "thoughtSignature" in part:
                if role != "model":
                    c.fail(here, "thoughtSignature outside a model turn")
                c.proto_bytes(here + ".thoughtSignature", part["thoughtSignature"])
            value = part[key]
            if key != "functionResponse":
                leading = False
            if key == "text":
                c.text(here, value, allow_blank=False)
            elif key == "inlineData":
                if c.keys(here, value, {"mimeType", "data"}, set()):
                    if not str(value["mimeType"]).startswith("image/"):
                        c.fail(here, "inlineData mimeType must be an image type")
                    c.base64(here, value["data"])
            elif key == "functionCall":
                if role != "model":
                    c.fail(here, "functionCall outside a model turn")
                if c.keys(here, value, {"name", "args"}, {"id"}):
                    calls.append((value.get("id"), value["name"]))
                    if not isinstance(value["args"], dict):
                        c.fail(here, "args must be an object")
            elif key == "functionResponse":
                if role != "user":
                    c.fail(here, "functionResponse outside a user turn")
                if not leading:
                    c.fail(here, "functionResponse parts must come first in their turn")
                if c.keys(here, value, {"name", "response"}, {"id"}):
                    responses.append((value.get("id"), value["name"]))
                    if not isinstance(value["response"], dict):
                        c.fail(here, "response must be an object")
        if calls:
            previous = contents[index - 1] if index > 0 else None
            if not isinstance(previous, dict) or previous.get("role") != "user":
                c.fail(
                    where,
                    "function call turn must come immediately after a user turn or after a "
                    "function response turn",
                )
            following = contents[index + 1] if index + 1 < len(contents) else None
            answered = _gemini_responses(following)
            if answered != calls:
                c.fail(
                    where,
                    "the number of function response parts must equal the number of function "
                    f"call parts of the function call turn (and match them): {calls} vs {answered}",
                )
        if responses:
            previous = contents[index - 1] if index > 0 else None
            asked = _gemini_calls(previous)
            if asked != responses:
                c.fail(
                    where, "function response turn must come immediately after a function call turn"
                )


def _gemini_calls(content: Any) -> list[tuple[Any, Any]]:
    if not isinstance(content, dict):
        return []
    return [
        (p["functionCall"].get("id"), p["functionCall"].get("name"))
        for p in content.get("parts", [])
        if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)
    ]


def _gemini_responses(content: Any) -> list[tuple[Any, Any]]:
    if not isinstance(content, dict) or content.get("role") != "user":
        return []
    return [
        (p["functionResponse"].get("id"), p["functionResponse"].get("name"))
        for p in content.get("parts", [])
        if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
    ]


# ---------------------------------------------------------------------------------------------
# Ollama /api/chat


def check_ollama(c: Checker, body: dict[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        c.fail("messages", "must be a list")
        return
    expected: list[str] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not c.keys(where, message, {"role", "content"}, {"images", "tool_calls", "tool_name"}):
            continue
        role = message["role"]
        if role not in ("system", "user", "assistant", "tool"):
            c.fail(where, f"unknown role {role!r}")
        c.text(where + ".content", message["content"])
        for position, image in enumerate(message.get("images", [])):
            c.base64(f"{where}.images[{position}]", image)
        if "images" in message and not message["images"]:
            c.fail(where, "empty images list")
        if "tool_name" in message and role != "tool":
            c.fail(where, "tool_name only on tool messages")
        if "tool_calls" in message and role != "assistant":
            c.fail(where, "tool_calls only on assistant messages")
        if role == "tool":
            if "tool_name" not in message:
                c.fail(where, "tool message without tool_name")
            elif not expected:
                c.fail(where, "tool message answers no call")
            elif expected[0] != message["tool_name"]:
                c.fail(where, f"tool_name {message['tool_name']!r}, expected {expected[0]!r}")
            if expected:
                expected.pop(0)
            continue
        if expected:
            c.fail(where, f"calls without results: {expected}")
        expected = []
        if role == "assistant" and "tool_calls" in message:
            calls = message["tool_calls"]
            if not isinstance(calls, list) or not calls:
                c.fail(where, "tool_calls must be a non-empty list")
                continue
            for position, call in enumerate(calls):
                here = f"{where}.tool_calls[{position}]"
                if c.keys(here, call, {"function"}, set()) and c.keys(
                    here + ".function", call["function"], {"name", "arguments"}, set()
                ):
                    if not isinstance(call["function"]["arguments"], dict):
                        c.fail(here, "arguments must be an object")
                    expected.append(call["function"]["name"])
    if expected:
        c.fail("messages[-1]", f"calls without results: {expected}")


# ---------------------------------------------------------------------------------------------
# Mistral (mistral-common's validator: order, counts, ids)

_MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
_MISTRAL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_MISTRAL_NEXT = {
    "system": {"user", "assistant", "system"},
    "user": {"assistant", "system", "user"},
    "assistant": {"assistant", "user", "tool"},
    "tool": {"assistant", "tool"},
}


def check_mistral(c: Checker, body: dict[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        c.fail("messages", "must be a list")
        return
    previous = None
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role not in _MISTRAL_NEXT:
            c.fail(where, f"unknown role {role!r}")
            continue
        if previous is not None and role not in _MISTRAL_NEXT[previous]:
            c.fail(where, f"Unexpected role '{role}' after role '{previous}'")
        previous = role
        if role in ("system", "user"):
            if c.keys(where, message, {"role", "content"}, set()):
                _mistral_content(c, where, message["content"], images=role == "user")
        elif role == "assistant":
            if not c.keys(where, message, {"role", "content"}, {"tool_calls", "prefix"}):
                continue
            if "prefix" in message:
                if message["prefix"] is not True or index != len(messages) - 1:
                    c.fail(where, "Assistant message with prefix True must be last message")
            elif index == len(messages) - 1:
                # the body is sent as it is: serving mode wants a continuation marked
                c.fail(
                    where,
                    "Expected last role User or Tool (or Assistant with prefix True) for "
                    "serving but got assistant",
                )
            if bool(message["content"]) == bool(message.get("tool_calls")):
                c.fail(
                    where, "Assistant message must have either content or tool_calls, but not both."
                )
            if message["content"]:
                _mistral_content(c, where, message["content"], images=False)
            if message.get("tool_calls"):
                if index == 0:
                    # mistral-common's pairing skips the first message: its calls' results are
                    # "Unexpected tool call id … in tool results"
                    c.fail(where, "a conversation cannot open with tool calls")
                _check_function_calls(c, where, message["tool_calls"])
                for call in message["tool_calls"]:
                    name = call.get("function", {}).get("name") if isinstance(call, dict) else None
                    if not isinstance(name, str) or not _MISTRAL_NAME.fullmatch(name):
                        c.fail(
                            where, f"Function name was {name} but must match [a-zA-Z0-9_-]{{1,64}}"
                        )
                for call_id in _function_call_ids(message):
                    if not isinstance(call_id, str) or not _MISTRAL_ID.fullmatch(call_id):
                        c.fail(
                            where,
                            f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, "
                            "with a length of 9.",
                        )
        elif c.keys(where, message, {"role", "tool_call_id", "content"}, {"name"}):
            call_id = message["tool_call_id"]
            if not isinstance(call_id, str) or not _MISTRAL_ID.fullmatch(call_id):
                c.fail(
                    where,
                    f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9.",
                )
            if "name" in message and not _MISTRAL_NAME.fullmatch(str(message["name"])):
                c.fail(where, "tool name must match [a-zA-Z0-9_-]{1,64}")
            _mistral_content(c, where, message["content"], images=False)
    _chat_pairing(c, messages, _function_call_ids)


def _mistral_content(c: Checker, where: str, content: Any, *, images: bool) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list) or not content:
        c.fail(where, "content must be a string or a non-empty list of chunks")
        return
    for index, chunk in enumerate(content):
        here = f"{where}.content[{index}]"
        kind = chunk.get("type") if isinstance(chunk, dict) else None
        if kind == "text":
            if c.keys(here, chunk, {"type", "text"}, set()):
                c.text(here, chunk["text"])
        elif kind == "image_url" and images:
            if c.keys(here, chunk, {"type", "image_url"}, set()):
                url = chunk["image_url"]
                if isinstance(url, dict):
                    if c.keys(here + ".image_url", url, {"url"}, {"detail"}):
                        _data_url(c, here, url["url"])
                else:
                    _data_url(c, here, url)
        else:
            c.fail(here, f"chunk {kind!r} not allowed here")


# ---------------------------------------------------------------------------------------------
# Cohere v2 chat


def check_cohere(c: Checker, body: dict[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        c.fail("messages", "must be a list")
        return
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role == "system":
            if c.keys(where, message, {"role", "content"}, set()):
                c.text(where, message["content"], allow_blank=False)
        elif role == "user":
            if c.keys(where, message, {"role", "content"}, set()):
                _openai_user_content(c, where, message["content"])
        elif role == "assistant":
            if not c.keys(where, message, {"role"}, {"content", "tool_plan", "tool_calls"}):
                continue
            if "tool_calls" in message:
                _check_function_calls(c, where, message["tool_calls"])
                if "content" in message:
                    c.fail(where, "an assistant message with tool_calls puts its text in tool_plan")
            elif "content" not in message:
                c.fail(where, "an assistant message needs content or tool_calls")
            else:
                c.text(where, message["content"], allow_blank=False)
            if "tool_plan" in message:
                c.text(where + ".tool_plan", message["tool_plan"], allow_blank=False)
        elif role == "tool":
            if c.keys(where, message, {"role", "tool_call_id", "content"}, set()):
                c.text(where, message["content"])
        else:
            c.fail(where, f"unknown role {role!r}")
    _chat_pairing(c, messages, _function_call_ids)


CHECKS: dict[str, Callable[[Checker, dict[str, Any]], None]] = {
    "openai": check_openai,
    "openai-responses": check_openai_responses,
    "anthropic": check_anthropic,
    "gemini": check_gemini,
    "ollama": check_ollama,
    "mistral": check_mistral,
    "bedrock": check_bedrock,
    "cohere": check_cohere,
}


def violations(kind: str, body: Any) -> list[str]:
    """Every rule of ``kind`` that ``body`` breaks (empty when it passes)."""
    c = Checker()
    required, optional = BODY_KEYS[kind]
    if c.keys("body", body, required, optional):
        _internal_keys(c, "body", body)
        CHECKS[kind](c, body)
    return c.problems


# ---------------------------------------------------------------------------------------------
# A body sent as it is for the model's next output (``prepare``; a ``format`` of a whole history
# may end anywhere, so ``violations`` does not ask these)

#: Where each kind keeps the turns of a body.
TURNS_KEY = {kind: "messages" for kind in BODY_KEYS} | {
    "openai-responses": "input",
    "gemini": "contents",
}


def request_problems(kind: str, body: dict[str, Any], *, prefill: bool) -> list[str]:
    """What the provider refuses in ``body`` sent as it is to generate, beyond ``violations``:
    an empty turn list (Anthropic "messages: at least one message is required", Converse's
    "A conversation must start with a user message", Gemini's ``contents`` is required);
    Gemini's last turn other than a user turn ("Please ensure that multiturn requests ends with
    a user role or a function response", songquanpeng/one-api#836); a final assistant message
    to an Anthropic or Bedrock model that takes no prefill (``prefill`` False: Claude 4.6 and
    later, a request with extended thinking, or a model not known to take one): Anthropic's
    400 "Prefilling assistant messages is not supported for this model" (Claude 4.6 migration
    guide: "Prefilling assistant messages returns a 400 error on Claude 4.6 models"), Bedrock's
    "This model does not support assistant message prefill. The conversation must end with a
    user message" (strands-agents/sdk-python#1694, ``us.anthropic.claude-opus-4-6-v1``)."""
    turns = body.get(TURNS_KEY[kind])
    if not isinstance(turns, list) or not turns:
        return [f"{TURNS_KEY[kind]}: no turn to send"]
    last = turns[-1]
    role = last.get("role") if isinstance(last, dict) else None
    if kind == "gemini" and role != "user":
        return ["contents[-1]: multiturn requests must end with a user role or a function response"]
    if kind in ("anthropic", "bedrock") and role == "assistant" and not prefill:
        return ["messages[-1]: this model does not support assistant message prefill"]
    return []

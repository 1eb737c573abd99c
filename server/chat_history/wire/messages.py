"""Messages and tools as requests carry them (``append``, ``editMessage``, ``format``,
``prepare``, the CLI's import): the unchecked wire shapes and the checks that turn them into
the domain's Message, Attachment and ToolSpec, naming the first bad field's wire path."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from chat_history.errors import (
    InvalidParams,
)
from chat_history.model import (
    ROLES,
    Attachment,
    Message,
    Origin,
    Status,
    ToolCall,
    ToolSpec,
)
from chat_history.policy import origins
from chat_history.settings import PROVIDER_KINDS, ProviderAlias, empty_object
from chat_history.wire.checks import (
    MAX_ATTACHMENT_CHARS,
    MAX_CONTENT_CHARS,
    MAX_ID_CHARS,
    MAX_JSON_FIELD_CHARS,
    MAX_TOOLS,
    check_depth,
    check_id,
    check_json,
    check_text,
    parse_timestamp,
)


@attrs.define
class ToolCallIn:
    """A tool call as a request carries it, every field unchecked (``to_message`` checks each and
    names the bad one)."""

    id: Any = None
    name: Any = None
    arguments: Any = None


@attrs.define
class AttachmentIn:
    """An attachment as a request carries it, unchecked: inline ``data`` or a ``uri``
    (``to_message`` checks which)."""

    kind: Any = None
    mime_type: Any = None
    data: Any = None
    uri: Any = None


@attrs.define
class MessageIn:
    """A message of ``append``'s ``messages`` as structured from the wire, before ``to_message``
    checks it."""

    role: str
    content: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    attachments: list[AttachmentIn] | None = None
    timestamp: Any = None
    provider_data: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    #: "complete" (absent) or "interrupted": a cut reply the client kept (version 4)
    status: Any = None
    #: version 5: where its providerData was minted, or the alias the client sent to
    origin: Any = None
    origin_alias: Any = None


@attrs.define
class ToolIn:
    """A tool definition ``format``/``prepare`` count and pass to the provider's formatter."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


_MIME = re.compile(r"^image/[a-z0-9.+-]+$")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _tool_call(raw: ToolCallIn, field: str) -> ToolCall:
    if not isinstance(raw.id, str):
        raise InvalidParams(f"{field}.id", "must be a non-empty string")
    if not isinstance(raw.name, str):
        raise InvalidParams(f"{field}.name", "must be a non-empty string")
    arguments = empty_object(raw.arguments) if raw.arguments is not None else {}
    if isinstance(arguments, str):
        check_text(arguments, f"{field}.arguments", MAX_JSON_FIELD_CHARS)
        try:
            parsed = json.loads(arguments, parse_constant=_no_constant) if arguments.strip() else {}
        except (ValueError, RecursionError):
            raise InvalidParams(
                f"{field}.arguments", "is a string but not JSON (send an object or a JSON string)"
            ) from None
        if not isinstance(parsed, dict):
            raise InvalidParams(f"{field}.arguments", "must be a JSON object")
        check_depth(parsed, f"{field}.arguments")
    elif isinstance(arguments, dict):
        check_json(arguments, f"{field}.arguments")
    else:
        raise InvalidParams(f"{field}.arguments", "expected an object or a JSON string")
    return ToolCall(
        id=check_id(raw.id, f"{field}.id"),
        name=check_id(raw.name, f"{field}.name"),
        arguments=arguments,
    )


def to_attachment(raw: AttachmentIn, field: str) -> Attachment:
    if raw.kind != "image":
        raise InvalidParams(f"{field}.kind", 'must be "image"')
    if (raw.data is None) == (raw.uri is None):
        raise InvalidParams(field, "needs exactly one of data (base64) or uri")
    mime = raw.mime_type
    if mime is not None and (not isinstance(mime, str) or not _MIME.match(mime)):
        raise InvalidParams(f"{field}.mimeType", "must be an image media type like image/png")
    if raw.data is not None:
        if not isinstance(raw.data, str) or not raw.data:
            raise InvalidParams(f"{field}.data", "must be a non-empty base64 string")
        check_text(raw.data, f"{field}.data", MAX_ATTACHMENT_CHARS)
        try:
            base64.b64decode(raw.data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidParams(f"{field}.data", "is not valid base64") from None
        if mime is None:
            raise InvalidParams(f"{field}.mimeType", "is required with data")
        return Attachment(mime_type=mime, data=raw.data)
    if not isinstance(raw.uri, str) or not raw.uri:
        raise InvalidParams(f"{field}.uri", "must be a non-empty string")
    return Attachment(mime_type=mime, uri=check_text(raw.uri, f"{field}.uri", MAX_CONTENT_CHARS))


#: The fields of an origin (protocol.md "Version 5").
_ORIGIN_FIELDS = ("provider", "model", "endpoint", "scope")
#: The longest model id, endpoint and scope an origin holds (an ARN, a URL, a label).
MAX_ORIGIN_CHARS = {"model": 2_048, "endpoint": 2_048, "scope": MAX_ID_CHARS}


def to_origin(
    raw: Any, alias: Any, field: str, aliases: Mapping[str, ProviderAlias] | None = None
) -> Origin | None:
    """A message's ``origin`` (an object) or ``originAlias`` (an alias of
    ``chatHistory.providers``, or a bare kind, filled from the settings ``aliases``), checked;
    None when it gives neither. InvalidParams names ``field.origin.<key>`` or
    ``field.originAlias``."""
    if alias is not None:
        if raw is not None:
            raise InvalidParams(f"{field}.originAlias", "is not allowed with origin")
        if not isinstance(alias, str):
            raise InvalidParams(f"{field}.originAlias", "must be a non-empty string")
        check_id(alias, f"{field}.originAlias")
        return origins.alias_origin(alias, aliases or {}, f"{field}.originAlias")
    raw = empty_object(raw)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InvalidParams(f"{field}.origin", "expected an object")
    extra = sorted(set(raw) - set(_ORIGIN_FIELDS))
    if extra:
        raise InvalidParams(f"{field}.origin.{extra[0]}", "is not a field of an origin")
    if raw.get("provider") not in PROVIDER_KINDS:
        raise InvalidParams(
            f"{field}.origin.provider", f"must be a provider kind: {', '.join(PROVIDER_KINDS)}"
        )
    values: dict[str, str | None] = {}
    for name, limit in MAX_ORIGIN_CHARS.items():
        value = raw.get(name)
        if value is not None and (not isinstance(value, str) or not value):
            raise InvalidParams(f"{field}.origin.{name}", "must be a non-empty string or null")
        values[name] = None if value is None else check_text(value, f"{field}.origin.{name}", limit)
    return origins.origin(raw["provider"], values["model"], values["endpoint"], values["scope"])


def to_message(
    raw: MessageIn, field: str, aliases: Mapping[str, ProviderAlias] | None = None
) -> Message:
    """One wire message checked field by field into a Message; InvalidParams names the path of the
    first bad field under ``field`` (``messages[3].toolCalls[0].id``). ``aliases`` (the
    settings' ``chatHistory.providers``) fill an ``originAlias``."""
    if raw.role not in ROLES:
        raise InvalidParams(f"{field}.role", f"unknown role; expected one of {', '.join(ROLES)}")
    role = raw.role
    if raw.tool_calls and role != "assistant":
        raise InvalidParams(f"{field}.toolCalls", "only assistant messages carry tool calls")
    calls = tuple(
        _tool_call(c, f"{field}.toolCalls[{i}]") for i, c in enumerate(raw.tool_calls or [])
    )
    if len({c.id for c in calls}) != len(calls):
        raise InvalidParams(f"{field}.toolCalls", "tool call ids must be unique")
    if role == "tool":
        if raw.tool_call_id is None:
            raise InvalidParams(f"{field}.toolCallId", "is required on tool messages")
        check_id(raw.tool_call_id, f"{field}.toolCallId")
    elif raw.tool_call_id is not None:
        raise InvalidParams(f"{field}.toolCallId", "is only allowed on tool messages")
    content = raw.content
    if content is None:
        if not calls:
            raise InvalidParams(
                f"{field}.content",
                "is required (only an assistant message with toolCalls may omit it)",
            )
        content = ""
    check_text(content, f"{field}.content", MAX_CONTENT_CHARS)
    if raw.name is not None:
        check_id(raw.name, f"{field}.name")
    attachments = tuple(
        to_attachment(a, f"{field}.attachments[{i}]") for i, a in enumerate(raw.attachments or [])
    )
    return Message(
        role=role,
        content=content,
        tool_calls=calls,
        tool_call_id=raw.tool_call_id,
        name=raw.name,
        attachments=attachments,
        timestamp=parse_timestamp(raw.timestamp, f"{field}.timestamp"),
        provider_data=check_json(raw.provider_data or {}, f"{field}.providerData"),
        metadata=check_json(raw.metadata or {}, f"{field}.metadata"),
        status=_status(raw, field),
        origin=to_origin(raw.origin, raw.origin_alias, field, aliases),
    )


def _status(raw: MessageIn, field: str) -> Status:
    """A message's ``status``: complete, or interrupted on an assistant row (only beginReply
    makes a streaming one)."""
    if raw.status is None or raw.status == "complete":
        return "complete"
    if raw.status != "interrupted" or raw.role != "assistant":
        raise InvalidParams(
            f"{field}.status", '"interrupted" on an assistant message is the only status sent'
        )
    return "interrupted"


def to_tools(tools: Sequence[ToolIn] | None) -> tuple[ToolSpec, ...] | None:
    """``tools`` checked into ToolSpecs (at most ``MAX_TOOLS``); None when the request has none."""
    if tools is None:
        return None
    if len(tools) > MAX_TOOLS:
        raise InvalidParams("tools", f"at most {MAX_TOOLS} tools")
    return tuple(
        ToolSpec(
            name=check_id(t.name, f"tools[{i}].name"),
            description=(
                check_text(t.description, f"tools[{i}].description", MAX_CONTENT_CHARS)
                if t.description is not None
                else None
            ),
            parameters=(
                check_json(t.parameters, f"tools[{i}].parameters")
                if t.parameters is not None
                else None
            ),
        )
        for i, t in enumerate(tools)
    )

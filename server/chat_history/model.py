"""Plain frozen data of the domain: messages as clients send them and as the store returns them.

Everything here is snake_case and wire-agnostic; ``protocol.py`` owns the camelCase mapping.
"""

from __future__ import annotations

import json
import sys
import typing
from collections.abc import Mapping
from itertools import compress, repeat
from typing import Any, Literal

import attrs

#: The compact JSON the store keeps and estimates price (one encoder: ``json.dumps`` with options
#: builds a new one per call).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def compact_json(value: Any) -> str:
    """``value`` as compact JSON, non-ASCII kept as it is."""
    return _COMPACT.encode(value)


@attrs.frozen
class JsonText:
    """A JSON value kept as the compact text the store holds, and written into an answer as is
    (frames.py): a listing of conversations with large metadata holds their text, not the
    Python objects it parses to (``[{}]`` × 333,000 is 1 MB of text and ~24 MB of dicts)."""

    text: str

    def value(self) -> Any:
        """The value, parsed (for callers that look inside; answers never need to)."""
        return json.loads(self.text)


#: The deepest JSON accepted anywhere (a message, and the object in an ``arguments`` string):
#: far more than metadata or tool arguments need, and far from Python's recursion limit, so no
#: parser, encoder or converter downstream can overflow.
MAX_JSON_DEPTH = 200
_CONTAINERS = (dict, list)


def nesting_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` holds an object or array more than ``limit`` levels deep (``value``
    itself is level 1). Level by level, with the containers of each level picked out in C
    (``compress``/``map``): ~10 ns per leaf, and it answers for any depth."""
    level: list[Any] = [value] if isinstance(value, _CONTAINERS) else []
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        for node in level:
            children = node.values() if isinstance(node, dict) else node
            below.extend(compress(children, map(isinstance, children, repeat(_CONTAINERS))))
        level = below
        depth += 1
    return False


Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")
#: Where a row stands (protocol.md "Version 4" → Replies in flight): every row is complete but
#: a reply while it streams (``beginReply``) and one cut before its end.
Status = Literal["complete", "streaming", "interrupted"]
STATUSES: tuple[Status, ...] = typing.get_args(Status)


@attrs.frozen(kw_only=True)
class ToolCall:
    """One call an assistant row asks for. ``arguments`` is kept exactly as the client sent it:
    a JSON object (dict) or a string holding a JSON object."""

    id: str
    name: str
    arguments: Any = attrs.field(factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The JSON form of protocol.md, as stored and as sent back."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> ToolCall:
        """A tool call from its stored JSON (the store's ``tool_calls`` column)."""
        return cls(id=value["id"], name=value["name"], arguments=value["arguments"])

    def arguments_json(self) -> str:
        """The arguments as a JSON string (OpenAI, Responses, Mistral, Cohere)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return compact_json(self.arguments)

    def arguments_object(self) -> dict[str, Any]:
        """The arguments as an object (Anthropic, Gemini, Bedrock, Ollama). A string nested deeper
        than ``MAX_JSON_DEPTH`` (stored before appends bounded it) is passed on as the string:
        its object could not be sent."""
        if isinstance(self.arguments, str):
            try:
                parsed = json.loads(self.arguments) if self.arguments.strip() else {}
            except RecursionError:
                return {"value": self.arguments}
            if nesting_exceeds(parsed):
                return {"value": self.arguments}
            return parsed if isinstance(parsed, dict) else {"value": parsed}
        return dict(self.arguments)


#: The last calls ``tool_calls_json`` encoded, with their JSON: an append prices a carrier's calls
#: and then stores the same text (one tuple, rebound whole, so threads never see a torn pair).
_LAST_CALLS: tuple[tuple[ToolCall, ...], str] = ((), "[]")


def tool_calls_json(calls: tuple[ToolCall, ...]) -> str:
    """Structured calls as compact JSON (``ToolCall.as_json`` each): how the store keeps them and
    how the token estimate prices them."""
    global _LAST_CALLS
    last = _LAST_CALLS
    if last[0] is calls:
        return last[1]
    text = compact_json([call.as_json() for call in calls])
    _LAST_CALLS = (calls, text)
    return text


@attrs.frozen(kw_only=True)
class Attachment:
    """An image attached to a row: inline base64 ``data`` or a ``uri`` the server never reads."""

    kind: Literal["image"] = "image"
    mime_type: str | None = None
    data: str | None = None
    uri: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The JSON form of protocol.md (absent fields left out), as stored and as sent back."""
        fields = (
            ("kind", self.kind),
            ("mimeType", self.mime_type),
            ("data", self.data),
            ("uri", self.uri),
        )
        return {name: value for name, value in fields if value is not None}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Attachment:
        """An attachment from its stored JSON (the store's ``attachments`` column)."""
        return cls(mime_type=value.get("mimeType"), data=value.get("data"), uri=value.get("uri"))


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


@attrs.frozen(kw_only=True)
class Origin:
    """Where a row's ``providerData`` was minted (protocol.md "Version 5" → Provider state that
    stays valid): the provider kind, the model, the endpoint (base URL, the kind's public API
    when the client named none) and the state scope (an opaque label of the account or key)."""

    provider: str
    model: str | None = None
    endpoint: str
    scope: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The wire's and the store's JSON form: every field, null where none."""
        return {
            "provider": self.provider,
            "model": self.model,
            "endpoint": self.endpoint,
            "scope": self.scope,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Origin:
        """An origin from its stored JSON."""
        return cls(
            provider=value["provider"],
            model=value.get("model"),
            endpoint=value["endpoint"],
            scope=value.get("scope"),
        )


@attrs.frozen(kw_only=True)
class Fence:
    """A piece of a row's provider state (``state``, a name of providers.state_rules) that one
    target refused (``chatHistory/reportProviderError``): it is no longer sent to that provider
    kind, endpoint and scope, for ``model`` (None: any model there)."""

    provider: str
    endpoint: str
    scope: str | None
    model: str | None
    state: str

    def as_json(self) -> dict[str, Any]:
        """The stored JSON form."""
        return {
            "provider": self.provider,
            "endpoint": self.endpoint,
            "scope": self.scope,
            "model": self.model,
            "state": self.state,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Fence:
        """A fence from its stored JSON."""
        return cls(
            provider=value["provider"],
            endpoint=value["endpoint"],
            scope=value.get("scope"),
            model=value.get("model"),
            state=value["state"],
        )


@attrs.frozen(kw_only=True, eq=True)
class Message:
    """A row as a client sends it (after validation; ``timestamp`` is epoch milliseconds)."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    attachments: tuple[Attachment, ...] = ()
    #: epoch milliseconds; None until the manager stamps it with "now" (stored rows always have it)
    timestamp: int | None = None
    provider_data: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    status: Status = "complete"
    #: where its ``provider_data`` was minted (None: unknown, version 4's rule applies)
    origin: Origin | None = None
    #: the targets that refused a piece of its provider state (reportProviderError)
    fences: tuple[Fence, ...] = ()

    # Mappings are not hashable; identity is enough for sets of rows. object's own identity
    # hash, in C: a prepare hashes a few hundred rows (its memo keys are tuples of them), and a
    # Python ``__hash__`` cost ~0.2 us each (issue 36).
    __hash__ = object.__hash__


@attrs.frozen(kw_only=True, eq=True)
class StoredMessage(Message):
    """A stored row: a Message plus its database id, turn number and token estimate."""

    id: int
    turn: int
    tokens: int

    __hash__ = object.__hash__  # as Message's (attrs would otherwise make one of the fields)

    @classmethod
    def of(
        cls, message: Message, *, id: int, turn: int, tokens: int, timestamp: int | None = None
    ) -> StoredMessage:
        """``message`` as stored: every field it has (``timestamp`` when given instead of its
        own), plus where and what it cost. (Fields spelled out: this runs on every append.)"""
        return cls(
            role=message.role,
            content=message.content,
            tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
            name=message.name,
            attachments=message.attachments,
            timestamp=message.timestamp if timestamp is None else timestamp,
            provider_data=message.provider_data,
            metadata=message.metadata,
            status=message.status,
            origin=message.origin,
            fences=message.fences,
            id=id,
            turn=turn,
            tokens=tokens,
        )


# -- memory ---------------------------------------------------------------------------------------

_sizeof = sys.getsizeof
#: The object of a row and of each of its parts (attrs instances, tuples, the boxes around them).
_ROW_OVERHEAD = 512
_PART_OVERHEAD = 200


def json_bytes(value: Any) -> int:
    """The memory the parsed JSON ``value`` holds: every dict, list, string and number in it,
    as ``sys.getsizeof`` counts them (shared small ints and interned keys counted each time: an
    upper bound). ``[{}]`` × 333,000 is 1 MB of text and ~24 MB here."""
    if not value:
        return _sizeof(value)
    total = 0
    stack = [value]
    while stack:
        node = stack.pop()
        total += _sizeof(node)
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return total


def resident_bytes(message: Message) -> int:
    """What a row holds in memory, all of it: its text, its tool calls, its images (base64 or
    URIs), its ``providerData`` and ``metadata`` as parsed objects. The one measure of every
    cache of rows (the store's cache and remembered tails, the prepare pipeline's turn caches),
    so each is bounded in bytes of what it keeps, not in rows or characters."""
    total = _ROW_OVERHEAD + _sizeof(message.content)
    for value in (message.tool_call_id, message.name):
        if value is not None:
            total += _sizeof(value)
    for call in message.tool_calls:
        total += _PART_OVERHEAD + _sizeof(call.id) + _sizeof(call.name)
        total += json_bytes(call.arguments)
    for attachment in message.attachments:
        total += _PART_OVERHEAD
        for part in (attachment.mime_type, attachment.data, attachment.uri):
            if part is not None:
                total += _sizeof(part)
    if message.origin is not None:
        total += _PART_OVERHEAD
    total += _PART_OVERHEAD * len(message.fences)
    return total + json_bytes(message.provider_data) + json_bytes(message.metadata)


@attrs.frozen(cache_hash=True)
class Key:
    """Which conversation: the workspace it belongs to and its id there."""

    workspace: str
    conversation: str


@attrs.frozen(kw_only=True)
class Summary:
    """A conversation's summary as stored: its text, when it was saved (epoch milliseconds) and
    the id of the newest row it covers."""

    summary: str
    updated_at: int
    covers_through_id: int | None = None


@attrs.frozen(kw_only=True)
class NativeCompaction:
    """What a provider's own compaction returned for a conversation (``saveCompaction``): its
    ``items`` (an OpenAI Responses ``compaction`` item, an Anthropic compaction block), as
    returned, standing in for the rows through ``covers_through_id`` when a request goes to
    where they were minted (``origin``); ``fences`` the targets that refused them since."""

    items: tuple[Any, ...]
    covers_through_id: int
    origin: Origin
    saved_at: int
    fences: tuple[Fence, ...] = ()


@attrs.frozen(kw_only=True)
class PruneReport:
    """What storage retention deleted in one request."""

    dropped_messages: int
    dropped_turns: int
    retained_turns: int
    reasons: tuple[StorageReason, ...]


#: Why storage retention deleted rows, in the order its rules run (semantics.md, retention).
StorageReason = Literal["age", "count", "tokens"]
STORAGE_REASONS: tuple[StorageReason, ...] = typing.get_args(StorageReason)
#: Why a row left a request or the store (``chatHistory/trimmed``'s ``reason``).
TrimReason = Literal[StorageReason, "tokenBudget", "turnLimit", "overflowRecovery"]


@attrs.frozen(kw_only=True)
class Trimmed:
    """One ``chatHistory/trimmed`` notification (before the workspace/conversation keys)."""

    scope: Literal["storage", "request"]
    reason: TrimReason
    dropped_messages: int
    dropped_turns: int
    retained_turns: int
    tokens_before: int
    tokens_after: int
    budget: int | None


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool the caller can execute, as given to ``prepare``/``format``."""

    name: str
    description: str | None = None
    parameters: Mapping[str, Any] | None = None


@attrs.frozen
class ExpectedLast:
    """A rewind's ``expectedLastId``: the newest row id the client saw (None: it saw no rows).
    The rewind runs only while that is still the conversation's newest row."""

    last_id: int | None


#: A rewind's expectation; None: the client named none (no check).
Expected = ExpectedLast | None

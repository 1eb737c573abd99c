"""What every provider formatter shares: the exchange plan (tool results placed right after their
call, in call order), user content split into text and images, image data parsing, tool-call id
remapping, call arguments in both shapes, the walk from plan to messages (in place, or merged
into alternating turns) and the final-assistant-text trim.

Pure functions on rows; no I/O. The kind modules turn a plan into their own body shape.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from chat_history.model import Message, ToolCall, compact_json
from chat_history.policy.tokens import image_markers
from chat_history.policy.turns import is_real_user

#: Text of a user message inserted where a provider needs the conversation to open with the user
#: (or an assistant message where Mistral needs one between tool results and the next prompt).
CONTINUED = "(continued)"

#: First line of the user turn that carries system rows trailing the assistant's last reply
#: (an instruction the application appended): see ``plan``.
APPLICATION_INSTRUCTION = "[Application instruction]"

#: Image types OpenAI, Anthropic, Bedrock, Mistral and Cohere document (Anthropic and Bedrock
#: enforce the list); other types become a text note.
COMMON_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_DATA_URI = re.compile(
    r"\Adata:(?P<mime>[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*)"
    r"(?:;[^;,]*)*;base64,(?P<data>.*)\Z",
    re.DOTALL,
)
_WHITESPACE = re.compile(r"\s+")
_MIME_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/x-png": "image/png"}


# --------------------------------------------------------------------------------------------
# Images


@attrs.frozen
class Image:
    """An image to send: inline base64 ``data`` (with its media type, when known) or a ``uri``.

    ``invalid`` marks inline data that is not base64: it is never sent as an image."""

    mime_type: str | None = None
    data: str | None = None
    uri: str | None = None
    invalid: bool = False

    def data_url(self) -> str:
        """The inline image as a ``data:`` URL (for providers that take images as URLs)."""
        return f"data:{self.mime_type};base64,{self.data}"

    @property
    def is_inline(self) -> bool:
        """Valid base64 data of an ``image/*`` type."""
        return (
            self.data is not None
            and self.mime_type is not None
            and self.mime_type.startswith("image/")
            and not self.invalid
        )

    def inline_of(self, types: frozenset[str]) -> bool:
        """Inline data of one of ``types``."""
        return self.is_inline and self.mime_type in types

    @property
    def is_web_url(self) -> bool:
        """An image given by an http(s) URL only (no inline data), which some providers fetch
        themselves."""
        return self.data is None and self.uri is not None and _is_web_url(self.uri)


def _is_web_url(uri: str) -> bool:
    lowered = uri.lower()
    return lowered.startswith(("https://", "http://")) and len(uri) > len("https://")


def _normalize_mime(mime: str | None) -> str | None:
    if not mime:
        return None
    lowered = mime.strip().lower()
    return _MIME_ALIASES.get(lowered, lowered) or None


def _sniff_mime(raw: bytes) -> str | None:
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if raw.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def inline_image(data: str, mime_type: str | None) -> Image:
    """An inline image from base64 text: whitespace removed, decoded once to check it and to
    sniff the media type when none was given."""
    compact = _WHITESPACE.sub("", data)
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return Image(mime_type=_normalize_mime(mime_type), data=compact, invalid=True)
    if not raw:
        return Image(mime_type=_normalize_mime(mime_type), data=compact, invalid=True)
    mime = _normalize_mime(mime_type) or _sniff_mime(raw[:16])
    return Image(mime_type=mime, data=compact)


def parse_data_uri(uri: str) -> Image | None:
    """The image a ``data:<type>;base64,<data>`` URI holds, or None when it is not one."""
    found = _DATA_URI.match(uri.strip())
    if found is None:
        return None
    image = inline_image(found.group("data"), found.group("mime"))
    return None if image.invalid else image


def attachment_images(row: Message) -> list[Image]:
    """The row's attachments as images; an attachment with neither data nor uri is skipped."""
    images: list[Image] = []
    for attachment in row.attachments:
        if attachment.data:
            images.append(inline_image(attachment.data, attachment.mime_type))
        elif attachment.uri:
            data_image = parse_data_uri(attachment.uri)
            images.append(
                data_image
                if data_image is not None
                else Image(mime_type=_normalize_mime(attachment.mime_type), uri=attachment.uri)
            )
    return images


def image_note(image: Image) -> str:
    """The text sent in place of an image a provider cannot take."""
    if image.uri is not None and image.data is None:
        return f"[image: {image.uri}]"
    if image.invalid:
        return "[image omitted: its data is not valid base64]"
    return f"[image omitted: {image.mime_type or 'unknown type'} is not supported here]"


def image_url(image: Image) -> str | None:
    """The URL an ``image_url``-style part sends: a data URL for inline png, jpeg, gif or webp, the
    URI itself for an http(s) attachment; None when the image must become a text note."""
    if image.inline_of(COMMON_IMAGE_TYPES):
        return image.data_url()
    if image.is_web_url and image.uri is not None:
        return image.uri
    return None


def with_notes(text: str, notes: Sequence[str]) -> str:
    """``text`` with image notes on lines after it (only the notes when the text is blank)."""
    if not notes:
        return text
    return "\n".join([text, *notes]) if text.strip() else "\n".join(notes)


Segment = str | Image


def user_segments(row: Message) -> list[Segment]:
    """A user row's content in order: text, and an image for each ``[IMAGE:data:…]`` marker
    (path markers and placeholders stay text), then the row's attachments.
    Whitespace-only text between markers is dropped; text is otherwise kept verbatim."""
    text = row.content
    if "[IMAGE:" not in text and not row.attachments:  # the common case: plain text
        return [text] if text.strip() else []
    segments: list[Segment] = []
    cursor = 0
    for marker in image_markers(text):
        image = parse_data_uri(marker.target)
        if image is None:
            continue
        segments.append(text[cursor : marker.start])
        segments.append(image)
        cursor = marker.end
    segments.append(text[cursor:])
    segments.extend(attachment_images(row))
    return [s for s in segments if not isinstance(s, str) or s.strip()]


def text_or_parts(
    segments: Sequence[Segment],
    image_part: Callable[[Image], dict[str, Any]],
    text_type: str = "text",
) -> str | list[dict[str, Any]]:
    """User content as one string when every segment is text, else a part per segment in order:
    ``{"type": text_type, "text": …}`` for text, ``image_part`` of each image."""
    texts = [s for s in segments if isinstance(s, str)]
    if len(texts) == len(segments):
        return "".join(texts)
    return [
        {"type": text_type, "text": s} if isinstance(s, str) else image_part(s) for s in segments
    ]


def chat_image_part(image: Image) -> dict[str, Any]:
    """An image as a Chat Completions content part (OpenAI, Cohere v2): ``image_url: {url}``
    when it can be sent, else a text note."""
    url = image_url(image)
    if url is None:
        return {"type": "text", "text": image_note(image)}
    return {"type": "image_url", "image_url": {"url": url}}


def chat_user(turn: UserTurn) -> dict[str, Any]:
    """A user turn as a Chat Completions message: a string, or parts when it has images."""
    return {"role": "user", "content": text_or_parts(turn.segments, chat_image_part)}


# --------------------------------------------------------------------------------------------
# Calls


def arguments_object(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as an object. A string that is not JSON is kept as
    ``{"value": <the string>}`` (as model.py wraps a JSON non-object), so no history can fail."""
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            return call.arguments_object()
        except (ValueError, RecursionError):  # not JSON, or nested beyond the parser's depth
            return {"value": arguments}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    return {"value": arguments}


def arguments_json(call: ToolCall) -> str:
    """The call's arguments as a JSON string holding an object: the client's own string when it
    is one (kept byte for byte), else the object above serialised."""
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return arguments
    return compact_json(arguments_object(call))


_FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_NOT_IN_FUNCTION_NAME = re.compile(r"[^a-zA-Z0-9_-]")
#: Hex digits of the hash that ends a function name that had to change.
NAME_HASH_LENGTH = 12
_NAME_HEAD = 64 - NAME_HASH_LENGTH - 1


def function_name(name: str) -> str:
    """A call's name where only ``[a-zA-Z0-9_-]{1,64}`` is taken (Mistral, Bedrock).

    A stored name that fits is sent as it is. Any other becomes ``<head>_<hash>``: ``head`` is
    the name with each other character replaced by ``_``, cut to 51 characters (``tool`` when
    nothing is left), and ``hash`` the first 12 hex digits of the SHA-256 of the name's UTF-8
    bytes. So two names never merge (``a.b`` and ``a_b``, or two long names sharing their first
    64 characters, stay apart: only a 48-bit hash collision, or a tool deliberately named like
    another's mapping, could join them), and the mapping is a function of the name alone: the
    same in every request and every process, for a call and for its result."""
    if _FUNCTION_NAME.fullmatch(name):
        return name
    head = _NOT_IN_FUNCTION_NAME.sub("_", name)[:_NAME_HEAD] or "tool"
    return f"{head}_{hex_digest(name, length=NAME_HASH_LENGTH)}"


@attrs.frozen
class Call:
    """A call to send: ``id`` is the provider's id for it, ``source`` the stored call."""

    id: str
    source: ToolCall

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.source.name


@attrs.frozen
class Result:
    """A tool row answering ``call``."""

    call: Call
    row: Message

    @property
    def text(self) -> str:
        """The tool's result text."""
        return self.row.content

    def images(self) -> list[Image]:
        """The images the tool row carries."""
        return attachment_images(self.row)

    def text_with_notes(self) -> str:
        """The text with a note for each image, for tool messages that take no images."""
        return with_notes(self.text, [image_note(image) for image in self.images()])


# --------------------------------------------------------------------------------------------
# The exchange plan


@attrs.frozen
class SystemText:
    """A system row with text; ``leading`` when no other row came before it."""

    text: str
    leading: bool


@attrs.frozen
class UserTurn:
    """A user row (a real prompt or a prompt-mode row) with something to send."""

    row: Message
    segments: tuple[Segment, ...]


@attrs.frozen
class AssistantTurn:
    """An assistant row: its text (may be blank when it only calls) and its answered calls."""

    row: Message
    calls: tuple[Call, ...]

    @property
    def text(self) -> str:
        """The assistant's text."""
        return self.row.content

    @property
    def has_text(self) -> bool:
        """Whether the text is more than blank (a row that only calls has none to send)."""
        return bool(self.row.content.strip())


@attrs.frozen
class ToolResults:
    """The results of the assistant turn just before, one per call, in call order."""

    results: tuple[Result, ...]


Item = SystemText | UserTurn | AssistantTurn | ToolResults

#: Turns a stored call id into the provider's id; the second argument counts earlier clashes.
IdMaker = Callable[[str, int], str]
IdCheck = Callable[[str], bool]


def digest(text: str, salt: int = 0) -> bytes:
    """A stable SHA-256 of ``text`` (``salt`` > 0 gives another, for the n-th clash of made ids)."""
    seed = text if salt == 0 else f"{text}\x00{salt}"
    return hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()


def hex_digest(text: str, salt: int = 0, length: int = 12) -> str:
    """The first ``length`` hex digits of ``digest``: the short hash made ids end with."""
    return digest(text, salt).hex()[:length]


def any_nonempty(call_id: str) -> bool:
    """The id check of a provider that takes any non-empty call id."""
    return bool(call_id)


def hashed_suffix(clean: Callable[[str], str], max_length: int, fallback: str = "call") -> IdMaker:
    """An id maker: the cleaned id cut to fit, then ``_`` and a hash of the stored id."""

    def make(call_id: str, salt: int) -> str:
        suffix = hex_digest(call_id, salt)
        head = clean(call_id)[: max_length - len(suffix) - 1] or fallback
        return f"{head}_{suffix}"

    return make


def id_rules(max_length: int, chars: str | None = None) -> tuple[IdCheck, IdMaker]:
    """``valid_id``/``make_id`` for ids of 1 to ``max_length`` characters, each in the regex class
    ``chars`` when given: such an id is kept; any other becomes its head (other characters
    replaced by ``_``) cut to fit, then ``_`` and a hash."""
    allowed = re.compile(f"[{chars}]*") if chars else None
    other = re.compile(f"[^{chars}]") if chars else None

    def valid(call_id: str) -> bool:
        fits = 0 < len(call_id) <= max_length
        return fits and (allowed is None or allowed.fullmatch(call_id) is not None)

    def clean(call_id: str) -> str:
        return call_id if other is None else other.sub("_", call_id)

    return valid, hashed_suffix(clean, max_length)


def plan(
    rows: Sequence[Message],
    *,
    valid_id: IdCheck = any_nonempty,
    make_id: IdMaker | None = None,
    later_system: str = "in_place",
) -> list[Item]:
    """The rows as items a formatter walks in order.

    - A carrier is followed directly by its results, in call order; rows that stood between a
      call and its result come after the results.
    - A tool row answers the nearest carrier before it (a real user prompt closes the exchange),
      as in the orphan sweep; anything still unpaired (a hand-built list, a call id used twice in
      one carrier) is dropped here so no formatter can emit half an exchange.
    - Rows with nothing to send (blank text and no images, an assistant row with neither text nor
      answered calls) are skipped. Attachments of assistant and system rows are not sent: these
      providers take images from the user (and in tool results) only.
    - Call ids are made valid for the provider (``valid_id``/``make_id``) and unique across the
      body; a call and its result always carry the same id.
    - System rows after the assistant's last reply (no user row or tool result after it) become
      one user turn, ``[Application instruction]`` and their texts (``trailing_instruction``), so
      no body ends on an assistant turn that the API would continue as a prefill.
    - ``later_system`` says what becomes of the other system rows after the first non-system
      row (``later_instructions``): ``"in_place"`` keeps them as system items where they are;
      ``"instruction"`` makes each run of them the same user turn as trailing ones, in place,
      for kinds whose only system position is at the top (so the bytes before the row stay
      as they were); ``"after_user"`` does so except for a run right after a user turn, which
      stays a system item (Mistral takes a system message after a user message only).
    """
    answered = answered_calls(rows)
    provider_id = IdAllocator(valid_id, make_id or hashed_suffix(lambda s: s, 64))
    items: list[Item] = []
    seen_other = False
    for index, row in enumerate(rows):
        if row.role == "system":
            if row.content.strip():
                items.append(SystemText(row.content, leading=not seen_other))
            continue
        seen_other = True
        if row.role == "user":
            segments = user_segments(row)
            if segments:
                items.append(UserTurn(row, tuple(segments)))
        elif row.role == "assistant":
            items.extend(assistant_items(rows, row, answered.get(index, {}), provider_id))
    return later_instructions(trailing_instruction(items), later_system)


def answered_calls(rows: Sequence[Message]) -> dict[int, dict[str, int]]:
    """For each carrier's index, the index of the tool row that answers each of its call ids: the
    nearest carrier before a tool row (a real user prompt closes the exchange), first answer
    only."""
    answered: dict[int, dict[str, int]] = {}
    carrier: int | None = None
    for index, row in enumerate(rows):
        if row.role == "assistant" and row.tool_calls:
            carrier = index
            answered[index] = {}
        elif row.role == "tool":
            if carrier is None or row.tool_call_id is None:
                continue
            ids = {call.id for call in rows[carrier].tool_calls}
            if row.tool_call_id in ids and row.tool_call_id not in answered[carrier]:
                answered[carrier][row.tool_call_id] = index
        elif row.role == "user" and is_real_user(row):
            carrier = None
    return answered


class IdAllocator:
    """Call ids made valid for the provider and unique across one body."""

    def __init__(self, valid_id: IdCheck, make_id: IdMaker) -> None:
        self.valid_id = valid_id
        self.make_id = make_id
        self.used: set[str] = set()

    def __call__(self, call_id: str) -> str:
        candidate = call_id if self.valid_id(call_id) else self.make_id(call_id, 0)
        salt = 0
        while candidate in self.used:
            salt += 1
            candidate = self.make_id(call_id, salt)
        self.used.add(candidate)
        return candidate


def assistant_items(
    rows: Sequence[Message],
    row: Message,
    results_at: Mapping[str, int],
    provider_id: Callable[[str], str],
) -> list[Item]:
    """An assistant row as sent: its answered calls (each id once) followed directly by their
    results; nothing when it has neither text nor answered calls."""
    calls: list[Call] = []
    taken: set[str] = set()
    for source in row.tool_calls:
        if source.id in results_at and source.id not in taken:
            taken.add(source.id)
            calls.append(Call(provider_id(source.id), source))
    if not calls and not row.content.strip():
        return []
    items: list[Item] = [AssistantTurn(row, tuple(calls))]
    if calls:
        items.append(ToolResults(tuple(Result(c, rows[results_at[c.source.id]]) for c in calls)))
    return items


def trailing_instruction(items: list[Item]) -> list[Item]:
    """``items`` with the system texts that follow the last assistant reply (the last item other
    than a system text is an assistant turn) replaced by one user turn: the line
    ``[Application instruction]``, then those texts joined by a blank line. Every other system
    text stays a system text."""
    end = len(items)
    while end > 0 and isinstance(items[end - 1], SystemText):
        end -= 1
    if end == len(items) or end == 0 or not isinstance(items[end - 1], AssistantTurn):
        return items
    texts = [item.text for item in items[end:] if isinstance(item, SystemText)]
    return [*items[:end], instruction_turn(texts)]


def instruction_turn(texts: Sequence[str]) -> UserTurn:
    """System texts as one user turn: the line ``[Application instruction]``, then the texts
    joined by a blank line."""
    text = "\n".join([APPLICATION_INSTRUCTION, "\n\n".join(texts)])
    return UserTurn(Message(role="user", content=text), (text,))


def later_instructions(items: list[Item], later_system: str) -> list[Item]:
    """``items`` with each run of non-leading system texts made an ``instruction_turn`` in
    place (``later_system`` ``"instruction"``), except, with ``"after_user"``, a run right
    after a user turn; ``"in_place"`` returns ``items`` as they are."""
    if later_system == "in_place":
        return items
    out: list[Item] = []
    run: list[str] = []
    before: Item | None = None
    for item in [*items, None]:
        if isinstance(item, SystemText) and not item.leading:
            run.append(item.text)
            continue
        if run:
            keep = later_system == "after_user" and isinstance(before, UserTurn)
            out.extend(
                [SystemText(t, leading=False) for t in run] if keep else [instruction_turn(run)]
            )
            run = []
        if item is not None:
            out.append(item)
            before = item
    return out


def system_texts(items: Iterable[Item]) -> list[str]:
    """The texts of the system items, in order."""
    return [item.text for item in items if isinstance(item, SystemText)]


_NO_DATA: Mapping[str, Any] = MappingProxyType({})


def provider_data(row: Message, kind: str) -> Mapping[str, Any]:
    """``providerData[kind]`` when it is an object, else empty."""
    if not row.provider_data:
        return _NO_DATA
    value = row.provider_data.get(kind)
    return value if isinstance(value, Mapping) else _NO_DATA


# --------------------------------------------------------------------------------------------
# Alternation


def merge_adjacent(
    messages: Iterable[dict[str, Any]], role_key: str, content_key: str
) -> list[dict[str, Any]]:
    """Adjacent messages of one role joined into one, content lists concatenated in order."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        if merged and merged[-1][role_key] == message[role_key]:
            merged[-1] = {
                **merged[-1],
                content_key: [*merged[-1][content_key], *message[content_key]],
            }
        else:
            merged.append(message)
    return merged


# --------------------------------------------------------------------------------------------
# From plan to messages


def chat_messages(
    items: Iterable[Item],
    *,
    user: Callable[[UserTurn], dict[str, Any]],
    assistant: Callable[[AssistantTurn], dict[str, Any]],
    results: Callable[[Sequence[Result]], Iterable[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Chat-style messages in plan order: a ``system`` message for each system text, in place;
    one message per user and assistant turn; ``results``' messages right after their calls."""
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, SystemText):
            messages.append({"role": "system", "content": item.text})
        elif isinstance(item, UserTurn):
            messages.append(user(item))
        elif isinstance(item, AssistantTurn):
            messages.append(assistant(item))
        else:
            messages.extend(results(item.results))
    return messages


def alternating_turns(
    items: Iterable[Item],
    *,
    user: Callable[[UserTurn], dict[str, Any]],
    assistant: Callable[[AssistantTurn], dict[str, Any]],
    results: Callable[[Sequence[Result]], dict[str, Any]],
    content_key: str,
    opener: dict[str, Any],
    settle: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """Turns for kinds that take system text at the top level and want user/assistant turns:
    system texts skipped; one message per user turn, assistant turn and group of results;
    adjacent messages of one role merged, then ``settle`` applied (when given); ``opener`` (a
    user message) put first when the turns open with another role."""
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, SystemText):
            continue
        if isinstance(item, UserTurn):
            messages.append(user(item))
        elif isinstance(item, AssistantTurn):
            messages.append(assistant(item))
        else:
            messages.append(results(item.results))
    merged = merge_adjacent(messages, "role", content_key)
    if settle is not None:
        merged = settle(merged)
    return opened_by_user(merged, opener)


def opened_by_user(messages: list[dict[str, Any]], opener: dict[str, Any]) -> list[dict[str, Any]]:
    """``messages`` with ``opener`` (a ``(continued)`` user message) put first when they open with
    another role (a history truncated, forked or imported to start with the assistant)."""
    if messages and messages[0]["role"] != "user":
        return [opener, *messages]
    return messages


def strip_final_assistant(
    messages: list[dict[str, Any]], is_text: Callable[[dict[str, Any]], bool]
) -> None:
    """Trailing whitespace removed from the text block (``is_text``) that ends a final assistant
    message's ``content``; a block left empty is dropped, and a message left empty too."""
    if not messages or messages[-1]["role"] != "assistant":
        return
    content = list(messages[-1]["content"])
    if content and is_text(content[-1]):
        stripped = content[-1]["text"].rstrip()
        if stripped:
            content[-1] = {**content[-1], "text": stripped}
        else:
            content.pop()
    if content:
        messages[-1] = {**messages[-1], "content": content}
    else:
        messages.pop()

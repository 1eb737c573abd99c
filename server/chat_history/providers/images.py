"""Images a body sends, and a user row's content split into text and images: inline data
checked (base64, the media type sniffed when none is given), ``data:`` URIs, attachments, the
text note sent in place of an image a provider cannot take, and the Chat Completions image
part. Pure functions on rows; no I/O."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from chat_history.model import Message
from chat_history.policy.tokens import image_markers

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

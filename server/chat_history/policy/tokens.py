"""Token estimates (semantics.md, "Token estimate"): UTF-8 bytes / 4 rounded up, plus 4 per row,
1,600 per image where it is dispatched. A heuristic every client can compute to the same number."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from chat_history.model import (
    Message,
    StoredMessage,
    ToolSpec,
    compact_json,
    tool_calls_json,
)

IMAGE_TOKENS = 1_600
ROW_FRAMING_TOKENS = 4
#: ``[IMAGE:<path or data: URI>]``; the literal placeholders below are plain text. The grammar,
#: for reference: ``find_image_markers`` scans for it in linear time (``finditer`` of this pattern
#: is quadratic on an unclosed ``[IMAGE:`` repeated: 12 s for 140,000 characters).
IMAGE_MARKER = re.compile(r"\[IMAGE:([^\]\n]+)\]")
IMAGE_PLACEHOLDERS = frozenset({"...", "<path>"})
_OPEN = "[IMAGE:"


class Marker(NamedTuple):
    """One ``[IMAGE:target]`` in a text: ``text[start:end]`` is the whole marker."""

    start: int
    end: int
    target: str


def find_image_markers(text: str) -> list[Marker]:
    """Every ``[IMAGE:…]`` marker, as ``IMAGE_MARKER.finditer`` finds them, in linear time: the
    next ``]`` and the next newline are each looked up again only once the scan has passed them."""
    markers: list[Marker] = []
    size = len(text)
    close = newline = -1
    pos = 0
    while (start := text.find(_OPEN, pos)) >= 0:
        body = start + len(_OPEN)
        if close < body:
            close = text.find("]", body)
            if close < 0:
                break  # no ``]`` left: no marker can close
        if newline < body:
            newline = text.find("\n", body)
            if newline < 0:
                newline = size
        if body < close < newline:
            markers.append(Marker(start, close + 1, text[body:close]))
            pos = close + 1
        else:
            pos = start + 1
    return markers


def text_tokens(text: str) -> int:
    """The estimate of a text: a token per four UTF-8 bytes, rounded up."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // 4)


def image_markers(text: str) -> list[Marker]:
    """The dispatchable ``[IMAGE:…]`` markers in a user row's text."""
    if _OPEN not in text:
        return []
    return [m for m in find_image_markers(text) if m.target not in IMAGE_PLACEHOLDERS]


def row_tokens(row: Message, *, dispatch_tool_images: bool = False) -> int:
    """The estimate of one row. Images count for user rows always, and for tool rows only when
    ``dispatch_tool_images`` (tool results of the running turn in ``prepare``). A stored row
    carries its estimate (``stored_tokens``, computed when it was written): that is the answer
    unless this estimate counts images the stored one left out."""
    if isinstance(row, StoredMessage) and not (
        dispatch_tool_images and row.role == "tool" and row.attachments
    ):
        return row.tokens
    text = row.content
    images = 0
    if row.role == "user":
        markers = image_markers(text)
        if markers:
            images += len(markers)
            bounds = [0, *(i for m in markers for i in (m.start, m.end)), len(text)]
            text = "".join(text[bounds[i] : bounds[i + 1]] for i in range(0, len(bounds), 2))
        images += len(row.attachments)
    elif row.role == "tool" and dispatch_tool_images:
        images += len(row.attachments)
    if row.role == "assistant" and row.tool_calls:
        text += tool_calls_json(row.tool_calls)
    return text_tokens(text) + ROW_FRAMING_TOKENS + images * IMAGE_TOKENS


def stored_tokens(row: Message) -> int:
    """The ``tokens`` a row is stored with (tool-row images not counted)."""
    return row_tokens(row)


def tool_schema_tokens(tool: ToolSpec) -> int:
    """The estimate of a tool definition in a request: its name, description and parameter schema,
    and the framing of one row."""
    parameters: Mapping[str, Any] | None = tool.parameters
    text = tool.name + (tool.description or "")
    if parameters is not None:
        text += compact_json(parameters)
    return text_tokens(text) + ROW_FRAMING_TOKENS

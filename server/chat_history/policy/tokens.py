"""Token estimates (semantics.md, "Token estimate"): UTF-8 bytes / 4 rounded up, plus 4 per row,
1,600 per image where it is dispatched. A heuristic every client can compute to the same number."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from chat_history.model import (
    Message,
    StoredMessage,
    ToolSpec,
    compact_json,
    tool_calls_json,
)

IMAGE_TOKENS = 1_600
ROW_FRAMING_TOKENS = 4
#: ``[IMAGE:<path or data: URI>]``; the literal placeholders below are plain text.
IMAGE_MARKER = re.compile(r"\[IMAGE:([^\]\n]+)\]")
IMAGE_PLACEHOLDERS = frozenset({"...", "<path>"})


def text_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8", "surrogatepass")) // 4)


def image_markers(text: str) -> list[re.Match[str]]:
    """The dispatchable ``[IMAGE:…]`` markers in a user row's text."""
    return [m for m in IMAGE_MARKER.finditer(text) if m.group(1) not in IMAGE_PLACEHOLDERS]


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
        markers = image_markers(text) if "[IMAGE:" in text else []
        if markers:
            images += len(markers)
            text = IMAGE_MARKER.sub(
                lambda m: m.group(0) if m.group(1) in IMAGE_PLACEHOLDERS else "", text
            )
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
    parameters: Mapping[str, Any] | None = tool.parameters
    text = tool.name + (tool.description or "")
    if parameters is not None:
        text += compact_json(parameters)
    return text_tokens(text) + ROW_FRAMING_TOKENS


def rows_tokens(rows: Sequence[Message]) -> int:
    return sum(row_tokens(row) for row in rows)

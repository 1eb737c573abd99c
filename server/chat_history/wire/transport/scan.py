"""Bounded looks into a message the parser cannot or should not read whole: how many objects and
arrays its text holds, where its params nest too deep, and the ``id`` of its outermost object.
Each costs at most one pass over the bytes, whatever they hold."""

from __future__ import annotations

import json
import re
from typing import Any

#: JSON objects and arrays in one message: each costs ~100 bytes of memory and some work in every
#: check, so this bounds the cost of a message of many tiny objects (46 MB of ``{}`` took 53 s
#: and 1.3 GB before). A million is far more than 1,000 messages' metadata and arguments hold.
MAX_CONTAINERS = 1_000_000
#: Structural tokens ``top_level_id`` looks at before it gives up (a bounded search).
_ID_SEARCH_TOKENS = 100_000

_STRUCTURE = re.compile(rb'[][{}"]')
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
#: A JSON string, or an unclosed one up to the end: what ``containers_over`` removes (always a
#: match at a quote, so the scan is linear).
_STRING_OR_UNCLOSED = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_ID_VALUE = re.compile(rb'\s*:\s*(-?\d{1,18}|"[^"\\]*(?:\\.[^"\\]*)*")')


def containers_over(body: bytes, limit: int = MAX_CONTAINERS) -> bool:
    """Whether the JSON text ``body`` holds more than ``limit`` objects and arrays, counted
    before parsing (outside strings) at the speed of ``bytes.count``."""
    if body.count(b"{") + body.count(b"[") <= limit:
        return False
    structure = _STRING_OR_UNCLOSED.sub(b"", body)
    return structure.count(b"{") + structure.count(b"[") > limit


def deepest_path(value: Any, limit: int) -> str | None:
    """The wire path (``messages[0].metadata``) of the first place where ``value`` nests deeper
    than ``limit``, cut to its first three steps; None when it does not."""
    stack: list[tuple[Any, int, tuple[str, ...]]] = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            children: Any = ((f".{k}", v) for k, v in node.items())
        elif isinstance(node, list):
            children = ((f"[{i}]", v) for i, v in enumerate(node))
        else:
            continue
        if depth > limit:
            return "".join(path[:3]).lstrip(".") or "params"
        for step, child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1, (*path, step) if len(path) < 3 else path))
    return None


def top_level_id(body: bytes) -> int | str | None:
    """The ``id`` member of the outermost object, found without parsing the whole body (it is
    too deep, or too large, for the parser). Bounded: each byte is scanned once, an unclosed
    string ends the search (nothing after it can be a member name), and so do
    ``_ID_SEARCH_TOKENS`` brackets and strings without it."""
    depth = 0
    pos = 0
    for _ in range(_ID_SEARCH_TOKENS):
        token = _STRUCTURE.search(body, pos)
        if token is None:
            return None
        text = token.group()
        pos = token.end()
        if text in (b"{", b"["):
            depth += 1
        elif text in (b"}", b"]"):
            depth -= 1
        else:
            string = _STRING_REST.match(body, pos)
            if string is None:
                return None
            pos = string.end()
            if depth == 1 and body[token.start() : pos] == b'"id"':
                value = _ID_VALUE.match(body, pos)
                if value is not None:
                    try:
                        found = json.loads(value.group(1))
                    except ValueError:
                        return None
                    return found if isinstance(found, int | str) else None
    return None

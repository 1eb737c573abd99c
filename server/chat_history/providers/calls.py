"""A tool call as sent: its arguments in both shapes (an object, a JSON string), its function
name made valid where names are restricted, and a call and its result under the provider's id."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

import attrs

from chat_history.model import Message, ToolCall, compact_json
from chat_history.providers.ids import hex_digest
from chat_history.providers.images import Image, attachment_images, image_note, with_notes

T = TypeVar("T")


def _on_fresh_stack(parse: Callable[[], T]) -> T:
    """``parse()`` on a thread of its own. Python's JSON parser counts its depth against the
    recursion limit, so a row stored before appends bounded nesting (~975 levels) parsed or
    not depending on how deep the caller's stack was (the reading thread, the request thread,
    the CLI, a kept body's render): on a fresh stack it parses or fails alike from anywhere."""
    done: Future[T] = Future()

    def run() -> None:
        try:
            done.set_result(parse())
        except BaseException as exc:  # handed back to the caller
            done.set_exception(exc)

    threading.Thread(target=run, name="chat-history-parse").start()
    return done.result()


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
        except RecursionError:  # nested near the parser's depth: again on a fresh stack
            try:
                parsed = _on_fresh_stack(lambda: json.loads(arguments))
            except (ValueError, RecursionError):
                parsed = None
        except ValueError:
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

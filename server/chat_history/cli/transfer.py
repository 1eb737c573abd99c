"""The JSONL file of ``chat-history export`` / ``import`` (docs-cli.md, "Export format"): one JSON
object a line; messages in protocol.md's wire shape without the database's ``id``, ``turn`` and
``tokens``, so that the same validation as ``chatHistory/append`` reads them back, and with
the targets that refused their provider state (``fences``, protocol version 5), which append
never takes. The export format's own translator: the one module besides ``wire/protocol`` that
spells camelCase keys (docs/architecture.md)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs

from chat_history.cli.export_schema import check_line
from chat_history.errors import InvalidParams
from chat_history.model import Fence, Key, Message, StoredMessage, Summary
from chat_history.service.import_writes import ImportedSummary, ImportTree
from chat_history.wire import checks, messages, protocol

FORMAT = "chat-history"
VERSION = 1
#: Fields of a wire StoredMessage that belong to the database that stored it, not to the message
#: (the tree's fields name its ids: an export without ``--tree`` is the active path as a line,
#: as version 4 wrote it).
DATABASE_FIELDS = ("id", "turn", "tokens", "parentId", "siblings")


def dumps(line: dict[str, Any]) -> str:
    """One line of the export format: compact JSON, non-ASCII kept as it is."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def header_line() -> dict[str, Any]:
    """The export file's first line: the format's name and version."""
    return {"type": "header", "format": FORMAT, "version": VERSION}


def conversation_lines(
    key: Key,
    rows: Sequence[StoredMessage],
    summary: Summary | None,
    *,
    tree: bool = False,
    active_leaf_id: int | None = None,
) -> Iterator[dict[str, Any]]:
    """A conversation's message lines in id order, then its summary line. With ``tree`` (the
    rows of every branch, ``export --tree``): each message numbered in the file (``id``: 1, 2,
    … in file order) with the number of the row it follows (``parentId``), and a conversation
    line naming the active leaf ``active_leaf_id`` by its number, before the summary."""
    keys = {"workspace": key.workspace, "conversationId": key.conversation}
    numbers: dict[int, int] = {}
    for row in rows:
        message = protocol.wire_message(row)
        for field in DATABASE_FIELDS:
            del message[field]
        if tree:
            numbers[row.id] = len(numbers) + 1
            parent = None if row.parent_id is None else numbers.get(row.parent_id)
            message = {"id": numbers[row.id], "parentId": parent, **message}
        if message["status"] == "streaming":  # what was stored so far: a cut reply in the file
            message["status"] = "interrupted"
        if row.fences:
            message["fences"] = [fence.as_json() for fence in row.fences]
        yield {"type": "message", **keys, "message": message}
    leaf = None if active_leaf_id is None else numbers.get(active_leaf_id)
    if tree and leaf is not None:
        yield {"type": "conversation", **keys, "activeLeafId": leaf}
    if summary is not None:
        through = summary.covers_through_id
        covers = None if through is None else sum(1 for row in rows if row.id <= through)
        yield {
            "type": "summary",
            **keys,
            "summary": {
                "summary": summary.summary,
                "updatedAt": summary.updated_at,
                "coversMessages": covers,
            },
        }


# -- reading -------------------------------------------------------------------------------------


class ImportFileError(Exception):
    """An import file that cannot be read: the line and why (nothing is imported)."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line = line
        self.why = why


@attrs.define
class ConversationImport:
    """One conversation of an import file, with the line number of each message."""

    key: Key
    messages: list[Message] = attrs.field(factory=list)
    lines: list[int] = attrs.field(factory=list)
    summary: ImportedSummary | None = None
    summary_line: int = 0
    #: each message's ``id`` and ``parentId`` in the file (an export with ``--tree``): None
    #: when absent (the parent: ``_FOLLOWS``, the message before it)
    ids: list[int | None] = attrs.field(factory=list)
    parent_refs: list[int | None] = attrs.field(factory=list)
    #: the conversation line's ``activeLeafId`` and its line (None, 0: none)
    active_ref: int | None = None
    active_line: int = 0
    #: set by ``read_import`` once every line is read: the messages as a tree (None: a line)
    tree: ImportTree | None = None

    def line_of(self, field: str) -> int:
        """The line of ``messages[i]...`` named by an InvalidParams field."""
        if field.startswith("messages["):
            index = field.removeprefix("messages[").partition("]")[0]
            if index.isdigit() and int(index) < len(self.lines):
                return self.lines[int(index)]
        return self.lines[0] if self.lines else self.summary_line


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _key(line: dict[str, Any]) -> Key:
    workspace, conversation = line.get("workspace"), line.get("conversationId")
    if not isinstance(workspace, str):
        raise InvalidParams("workspace", "must be a non-empty string")
    if not isinstance(conversation, str):
        raise InvalidParams("conversationId", "must be a non-empty string")
    return Key(checks.check_workspace(workspace), checks.check_conversation_id(conversation))


#: A tree message's ``parentId`` when the line leaves it out: the message before it.
_FOLLOWS = -1
#: The keys of a message that the export format adds to append's Message.
_FILE_FIELDS = frozenset({"fences", "id", "parentId"})


def _tree_refs(raw: dict[str, Any]) -> tuple[int | None, int | None]:
    """A message's ``id`` and ``parentId`` in the file (``_FOLLOWS``: no ``parentId``)."""
    number, parent = raw.get("id"), raw.get("parentId", _FOLLOWS)
    if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
        raise InvalidParams("message.id", "expected an integer")
    if parent is not None and (isinstance(parent, bool) or not isinstance(parent, int)):
        raise InvalidParams("message.parentId", "expected an integer or null")
    if number is None and "parentId" in raw:
        raise InvalidParams("message.parentId", "needs the message's id")
    return number, parent


def _message(raw: Any) -> Message:
    if not isinstance(raw, dict):
        raise InvalidParams("message", "expected an object")
    fences = raw.get("fences") or []
    try:
        structured = protocol.structure(
            {k: v for k, v in raw.items() if k not in _FILE_FIELDS}, messages.MessageIn
        )
    except InvalidParams as exc:
        raise InvalidParams(f"message.{exc.field}", exc.why) from None
    if structured.timestamp is None:
        # A re-import recognises a message by every field, its timestamp included.
        raise InvalidParams("message.timestamp", "is required in an import file")
    message = messages.to_message(structured, "message")
    if not fences:
        return message
    return attrs.evolve(message, fences=_fences(fences))


def _fences(raw: Any) -> tuple[Fence, ...]:
    """A message's ``fences`` (the schema, checked after, says the rest of their shape)."""
    named = ("provider", "endpoint", "state")
    if not isinstance(raw, list) or not all(
        isinstance(f, dict) and all(isinstance(f.get(k), str) for k in named) for f in raw
    ):
        raise InvalidParams("message.fences", "expected fences {provider, endpoint, state, …}")
    return tuple(Fence.from_json(f) for f in raw)


def _summary(raw: Any) -> ImportedSummary:
    if not isinstance(raw, dict):
        raise InvalidParams("summary", "expected an object")
    text, updated, covers = raw.get("summary"), raw.get("updatedAt"), raw.get("coversMessages")
    if not isinstance(text, str):
        raise InvalidParams("summary.summary", "expected a string")
    checks.check_text(text, "summary.summary", checks.MAX_SUMMARY_CHARS)
    if isinstance(updated, bool) or not isinstance(updated, int) or updated < 0:
        raise InvalidParams("summary.updatedAt", "expected epoch milliseconds")
    if covers is not None and (
        isinstance(covers, bool) or not isinstance(covers, int) or covers < 0
    ):
        raise InvalidParams("summary.coversMessages", "expected a count of messages or null")
    return ImportedSummary(text, updated, covers)


def _read_line(text: str, number: int, conversations: dict[Key, ConversationImport]) -> None:
    try:
        line = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ImportFileError(number, f"not JSON: {exc.msg} (column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise ImportFileError(number, f"not JSON: {exc}") from None
    if not isinstance(line, dict):
        raise ImportFileError(number, "expected a JSON object")
    kind = line.get("type")
    try:
        if kind == "header":
            if line.get("format") != FORMAT or line.get("version") != VERSION:
                raise InvalidParams(
                    "header",
                    f"expected format {FORMAT!r} version {VERSION}, got "
                    f"{line.get('format')!r} version {line.get('version')!r}",
                )
        elif kind == "message":
            key = _key(line)
            message = _message(line.get("message"))
            number_in_file, parent = _tree_refs(line["message"])
            entry = conversations.setdefault(key, ConversationImport(key))
            entry.messages.append(message)
            entry.lines.append(number)
            entry.ids.append(number_in_file)
            entry.parent_refs.append(parent)
        elif kind == "conversation":
            key = _key(line)
            leaf = line.get("activeLeafId")
            if isinstance(leaf, bool) or not isinstance(leaf, int):
                raise InvalidParams("activeLeafId", "expected the id of a message")
            entry = conversations.setdefault(key, ConversationImport(key))
            entry.active_ref, entry.active_line = leaf, number
        elif kind == "summary":
            key = _key(line)
            summary = _summary(line.get("summary"))
            entry = conversations.setdefault(key, ConversationImport(key))
            if entry.summary is None or entry.summary.updated_at < summary.updated_at:
                entry.summary, entry.summary_line = summary, number
        else:
            raise InvalidParams(
                "type",
                f'expected "header", "message", "conversation" or "summary", got {kind!r}',
            )
        check_line(line)  # what the rules of append let through, the published format may not
    except InvalidParams as exc:
        raise ImportFileError(number, str(exc)) from None


def read_import(
    lines: Iterable[bytes], on_line: Callable[[int], None] | None = None
) -> list[ConversationImport]:
    """Every conversation of an import file in first-seen order; ImportFileError names the first
    bad line. Blank lines are skipped. ``on_line(bytes_read)`` reports progress."""
    conversations: dict[Key, ConversationImport] = {}
    for number, raw in enumerate(lines, 1):
        if on_line is not None:
            on_line(len(raw))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportFileError(number, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
        if text.strip():
            _read_line(text, number, conversations)
    for entry in conversations.values():
        entry.tree = _tree_of(entry)
        summary = entry.summary
        if summary is not None and (summary.covers_messages or 0) > len(entry.messages):
            raise ImportFileError(
                entry.summary_line,
                f"summary.coversMessages: {summary.covers_messages} is more than the "
                f"{len(entry.messages)} message(s) of the conversation in the file",
            )
    return list(conversations.values())


def _tree_of(entry: ConversationImport) -> ImportTree | None:
    """The conversation's messages as a tree when the file numbers them (``--tree``), None when
    it is a line; ImportFileError at the first line whose ``id``, ``parentId`` or
    ``activeLeafId`` names nothing, or when some messages are numbered and others not."""
    numbered = [number is not None for number in entry.ids]
    if not any(numbered):
        if entry.active_ref is not None:
            raise ImportFileError(
                entry.active_line, "activeLeafId: the conversation's messages have no id"
            )
        return None
    index_of: dict[int, int] = {}
    parents: list[int | None] = []
    for index, (number, parent) in enumerate(zip(entry.ids, entry.parent_refs, strict=True)):
        line = entry.lines[index]
        if number is None:
            raise ImportFileError(line, "message.id: the conversation's other messages have one")
        if number in index_of:
            raise ImportFileError(line, f"message.id: {number} is another message's already")
        if parent == _FOLLOWS:
            parents.append(index - 1 if index else None)
        elif parent is None:
            parents.append(None)
        elif parent in index_of:
            parents.append(index_of[parent])
        else:
            raise ImportFileError(
                line, f"message.parentId: {parent} is no earlier message of the conversation"
            )
        index_of[number] = index
    active = None
    if entry.active_ref is not None:
        if entry.active_ref not in index_of:
            raise ImportFileError(
                entry.active_line,
                f"activeLeafId: {entry.active_ref} is no message of the conversation",
            )
        active = index_of[entry.active_ref]
    return ImportTree(tuple(entry.messages), tuple(parents), active)

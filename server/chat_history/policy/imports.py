"""Import dedupe: which messages of an imported conversation the database already holds.

Stored rows are immutable and a conversation only grows at its end (and loses whole turns at its
start), so two copies of one conversation differ by a head and a tail. A message is identified by
every field a client sent (role, content, tool calls, ids, attachments, timestamp, providerData,
metadata); the import skips the incoming messages up to the last one already stored and records
the rest. Re-importing a file, or an older export, therefore adds nothing.

A tree (protocol.md "Version 5": an export with ``--tree``, a Claude Code session with rewinds)
is matched row by row (``match_tree``): a message stored on any branch is that row; one that is
not stored but has a stored row below it was deleted (retention) and stays deleted, with the new
rows below it (an alternative to a turn that is gone is gone); the rest are new, each following
its parent's row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from chat_history.model import Message, PruneReport, StoredMessage
from chat_history.policy.retention import RowMeta, plan_retention
from chat_history.policy.tokens import stored_tokens
from chat_history.policy.turns import next_turn_number
from chat_history.settings import Settings

Fingerprint = tuple[Any, ...]


def _canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def fingerprint(message: Message) -> Fingerprint:
    """Everything a client sent about a message; the database's id, turn and tokens excluded."""
    return (
        message.role,
        message.content,
        tuple((c.id, c.name, _canonical(c.arguments)) for c in message.tool_calls),
        message.tool_call_id,
        message.name,
        tuple((a.kind, a.mime_type, a.data, a.uri) for a in message.attachments),
        message.timestamp,
        _canonical(dict(message.provider_data)),
        _canonical(dict(message.metadata)),
    )


@attrs.frozen
class ImportMatch:
    """``incoming[start:]`` are new; ``stored_ids[i]`` is the id of the stored row that
    ``incoming[i]`` (i < start) already is, or None when the conversation no longer holds it."""

    start: int
    stored_ids: tuple[int | None, ...]


def match_stored(stored: Sequence[StoredMessage], incoming: Sequence[Message]) -> ImportMatch:
    """Where an import continues a stored conversation: after the newest incoming message already
    stored (by fingerprint), with the stored id of each one before it."""
    if not stored:
        return ImportMatch(0, ())
    ids = {fingerprint(row): row.id for row in stored}
    start = 0
    for index in range(len(incoming) - 1, -1, -1):
        if fingerprint(incoming[index]) in ids:
            start = index + 1
            break
    return ImportMatch(start, tuple(ids.get(fingerprint(m)) for m in incoming[:start]))


def covered_id(
    covers_messages: int | None, match: ImportMatch, inserted: Sequence[StoredMessage]
) -> int | None:
    """A summary's ``coversThroughId`` in this database, for a summary that covered the first
    ``covers_messages`` incoming messages: the newest stored row among them (0 when none is
    stored any more, None when the summary said nothing)."""
    if covers_messages is None:
        return None
    if covers_messages > match.start:
        return inserted[covers_messages - 1 - match.start].id
    return max((i for i in match.stored_ids[:covers_messages] if i is not None), default=0)


@attrs.frozen
class _Row:
    """A row stored or to be imported, as retention sees it (policy.retention.RowMeta)."""

    id: int
    turn: int
    role: str
    tokens: int
    timestamp: int


def retention_after_import(
    stored: Sequence[StoredMessage], new: Sequence[Message], settings: Settings, now_ms: int
) -> PruneReport | None:
    """What storage retention (policy.retention, the settings in force) would delete at the
    conversation's next read once ``new`` follows ``stored``: the import itself deletes nothing,
    so a preview must say what the next read will (None: nothing). Rows are numbered as the
    store numbers them (turns as recorded, tokens as stored, no time: ``now_ms``)."""
    rows: list[RowMeta] = [
        _Row(r.id, r.turn, r.role, r.tokens, r.timestamp if r.timestamp is not None else now_ms)
        for r in stored
    ]
    last_id = max((row.id for row in stored), default=0)
    turn = stored[-1].turn if stored else 0
    for index, message in enumerate(new, start=1):
        turn = next_turn_number(turn, message)
        at = message.timestamp if message.timestamp is not None else now_ms
        rows.append(_Row(last_id + index, turn, message.role, stored_tokens(message), at))
    return plan_retention(rows, settings, now_ms).report


@attrs.frozen
class TreeMatch:
    """A tree import against the stored rows of every branch: ``stored_ids[i]`` the row that
    ``incoming[i]`` already is (None: not stored); ``new`` the indices of the messages to insert,
    in order (each one's parent before it); ``gone`` those left out, deleted here since."""

    stored_ids: tuple[int | None, ...]
    new: tuple[int, ...]
    gone: frozenset[int]


def match_tree(
    stored: Sequence[StoredMessage],
    incoming: Sequence[Message],
    parents: Sequence[int | None],
) -> TreeMatch:
    """Which of ``incoming`` (a tree: ``parents[i]`` the index of message i's parent, always
    lower, None: a first row) the conversation holds (``stored``: its rows on every branch),
    which are new and which were deleted since (see the module's docstring)."""
    ids = {fingerprint(row): row.id for row in stored}
    found = [ids.get(fingerprint(m)) for m in incoming]
    held_below = [row is not None for row in found]  # itself or a row below it is stored
    for index in range(len(incoming) - 1, -1, -1):
        parent = parents[index]
        if parent is not None and held_below[index]:
            held_below[parent] = True
    gone: set[int] = set()
    new: list[int] = []
    for index, row in enumerate(found):
        if row is not None:
            continue
        parent = parents[index]
        if held_below[index] or (parent is not None and parent in gone):
            gone.add(index)
        else:
            new.append(index)
    return TreeMatch(tuple(found), tuple(new), frozenset(gone))


def tree_covered_id(covers_messages: int | None, ids: Sequence[int | None]) -> int | None:
    """A summary's ``coversThroughId`` for a tree import, for a summary that covered the
    first ``covers_messages`` incoming messages (``ids``: each one's row here, None: not
    stored): the Nth message's row, else the newest row among the first N (0: none stored)."""
    if covers_messages is None:
        return None
    if 0 < covers_messages <= len(ids) and ids[covers_messages - 1] is not None:
        return ids[covers_messages - 1]
    return max((i for i in ids[:covers_messages] if i is not None), default=0)


def path_indices(parents: Sequence[int | None], leaf: int | None) -> list[int]:
    """The indices from a first message down to ``leaf`` (None: none)."""
    path: list[int] = []
    at = leaf
    while at is not None:
        path.append(at)
        at = parents[at]
    return path[::-1]

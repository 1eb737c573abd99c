"""What another process changed in a conversation (protocol.md "Version 3" → Several windows on
one conversation: ``chatHistory/changed``), told from two fingerprints of it: the one this
process saw last and the one stored now.

A fingerprint is what every write moves and a read of one conversation record can give: the
newest and oldest row ids, the row count and token total, when a client last wrote to it
(retention never touches that), its title and metadata, and its summary's stamp. How the rows
grew past the old newest id (``Growth``) tells an append from an edit or a deletion. The engine
that gives the fingerprints does not matter here (store.changes for SQLite)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

#: The reasons of the wire, most telling first: one notification that stands for several
#: changes names the first of them here (a client reloads for all but "append").
REASONS = ("clear", "branch", "delete", "edit", "retention", "summary", "title", "reply", "append")


@attrs.frozen
class Fingerprint:
    """One conversation as stored at one moment."""

    last_id: int | None
    first_id: int | None
    count: int
    tokens: int
    last_activity: int
    title: str | None
    metadata: str | None
    summary_at: int | None
    #: the streaming reply's row and revision (store.replies), None when none streams
    reply: int | None = None
    #: moves whenever the active path changed other than at its end (version 5: a switch of
    #: branch, a new branch, a subtree truncated; store.tree)
    branch: int = 0


@attrs.frozen
class Growth:
    """The rows newer than the old fingerprint's newest id: how many, and their tokens."""

    rows: int
    tokens: int


@attrs.frozen
class Change:
    """One conversation changed: its newest row id now, and why."""

    conversation: str
    last_id: int | None
    reason: str


def reason(before: Fingerprint | None, after: Fingerprint | None, growth: Growth) -> str | None:
    """Why the conversation went from ``before`` to ``after`` (None: absent at that moment);
    None when nothing a client shows changed."""
    if after is None:
        return None if before is None else "clear"
    if before is None:
        if after.last_id is not None:
            return "append"
        return "summary" if after.summary_at is not None else "title"
    if after.branch != before.branch:
        # The rows shown are another path now (ids may have grown past the old newest row
        # without an append): the window reads them again.
        return "branch"
    expected_count = before.count + growth.rows
    if after.count < expected_count:
        # Rows went. Retention never takes the newest row, so its going is a client's rewind;
        # otherwise a rewind marks the conversation active and retention does not (an append
        # that retention trimmed in the same write took the oldest rows).
        newest_gone = (
            growth.rows == 0 and before.last_id is not None and after.last_id != before.last_id
        )
        if newest_gone:
            return "delete"
        touched = after.last_activity != before.last_activity
        if not touched or (growth.rows and after.first_id != before.first_id):
            return "retention"
        return "delete"
    if after.reply != before.reply and not growth.rows:
        # A reply grew, began again (continueId) or ended: its row's text and tokens moved.
        return "reply"
    if after.tokens != before.tokens + growth.tokens or after.count != expected_count:
        return "edit"
    if growth.rows:
        return "append"
    if after.summary_at != before.summary_at:
        return "summary"
    if after.title != before.title or after.metadata != before.metadata:
        return "title"
    if after.last_activity != before.last_activity:
        return "edit"  # a row's metadata or an equal-sized text replaced
    return None


def changes(
    before: Mapping[str, Fingerprint],
    after: Mapping[str, Fingerprint],
    growth: Mapping[str, Growth],
) -> list[Change]:
    """Every conversation whose fingerprint moved, in name order (``growth`` per conversation
    present in both; missing means none)."""
    found: list[Change] = []
    for conversation in sorted(before.keys() | after.keys()):
        old, new = before.get(conversation), after.get(conversation)
        if old == new:
            continue
        why = reason(old, new, growth.get(conversation, Growth(0, 0)))
        if why is not None:
            found.append(Change(conversation, new.last_id if new else None, why))
    return found


def merge(pending: Sequence[Change]) -> list[Change]:
    """One change per conversation, in first-seen order: the newest ``last_id`` and the most
    telling reason (``REASONS``)."""
    merged: dict[str, Change] = {}
    for change in pending:
        old = merged.get(change.conversation)
        if old is None:
            merged[change.conversation] = change
            continue
        why = min(old.reason, change.reason, key=REASONS.index)
        merged[change.conversation] = Change(change.conversation, change.last_id, why)
    return list(merged.values())


#: The shortest time between two ``"reply"`` changes of one conversation told to a window (s).
REPLY_INTERVAL_S = 0.5


def pace(
    found: Sequence[Change], last_told: dict[str, float], now: float
) -> tuple[list[Change], list[Change]]:
    """What to tell now and what to hold back: a ``"reply"`` change of a conversation told one
    less than ``REPLY_INTERVAL_S`` before ``now`` waits (a streaming reply moves a few times a
    second; a window needs at most two a second). ``last_told`` is updated with what is told."""
    told: list[Change] = []
    held: list[Change] = []
    for change in found:
        if change.reason == "reply":
            if now - last_told.get(change.conversation, -REPLY_INTERVAL_S) < REPLY_INTERVAL_S:
                held.append(change)
                continue
            last_told[change.conversation] = now
        told.append(change)
    return told, held

"""Conversations and edits (protocol.md "Version 2" → Conversations; Edit, rewind, branch): each
operation as steps on one store transaction, composing the pure rules (``policy.titles``,
``policy.cursor``, ``policy.rewind``) with the store. The manager runs each in one write (or
snapshot), under its lock, and resets the WAL after the ones that delete text. No SQL and no
pygls here.

None of these runs storage retention or sends ``chatHistory/trimmed``: the client asked for
exactly this change, and it is made on the rows the client saw."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from chat_history.errors import ConversationChanged, InvalidParams
from chat_history.model import (
    Attachment,
    Expected,
    JsonText,
    Key,
    Message,
    StoredMessage,
    Summary,
    compact_json,
)
from chat_history.policy.cursor import CursorPosition, decode_cursor, encode_cursor
from chat_history.policy.rewind import (
    edited_content,
    fork_summary_cover,
    fork_through,
    plan_delete_turns,
    plan_truncate,
)
from chat_history.policy.titles import auto_title, check_title, fork_title
from chat_history.policy.tokens import stored_tokens
from chat_history.store import Reading, Transaction
from chat_history.store.records import RecordRow

TitleSource = Literal["user", "auto"]
EMPTY_METADATA = JsonText("{}")


@attrs.frozen(kw_only=True)
class ConversationInfo:
    """One conversation as ``listConversations``, ``updateConversation`` and ``fork`` answer,
    and as the CLI lists it: the one description of a conversation outside the store (whose
    record is ``store.records.RecordRow``)."""

    conversation_id: str
    workspace: str
    title: str | None
    title_source: TitleSource | None
    created_at: int | None
    last_activity: int | None
    message_count: int
    tokens: int
    has_summary: bool
    #: kept as the stored text and written into the answer as is (never parsed to list it)
    metadata: JsonText

    @property
    def key(self) -> Key:
        """The (workspace, conversation) pair naming it."""
        return Key(self.workspace, self.conversation_id)


@attrs.frozen
class ConversationPage:
    """A page of the listing, and the cursor of the next one (None: no more remain)."""

    conversations: tuple[ConversationInfo, ...]
    next_cursor: str | None


@attrs.frozen
class TruncateResult:
    """What ``truncate`` deleted: its rows, and whether the summary went with them."""

    deleted_messages: int
    summary_deleted: bool


@attrs.frozen
class DeleteTurnsResult:
    """What ``deleteTurns`` deleted: its rows, and how many of the named turns had any."""

    deleted_messages: int
    deleted_turns: int


@attrs.frozen(kw_only=True)
class MessageEdit:
    """What ``editMessage`` replaces; None leaves that part as it is."""

    content: str | None = None
    attachments: tuple[Attachment, ...] | None = None
    metadata: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class ConversationUpdate:
    """What ``updateConversation`` changes: ``set_title`` (then ``title``, None restoring the
    automatic one) and ``metadata`` (None: left as it is)."""

    set_title: bool = False
    title: str | None = None
    metadata: Mapping[str, Any] | None = None

    @property
    def creates(self) -> bool:
        """Whether this update makes an absent conversation exist."""
        return (self.set_title and self.title is not None) or bool(self.metadata)

    def metadata_text(self) -> str | None:
        """The new metadata as the store keeps it: compact JSON, None when empty."""
        return compact_json(dict(self.metadata)) if self.metadata else None

    def changes(self, record: RecordRow) -> bool:
        """Whether applying this update changes what ``record`` holds (an update that changes
        nothing is not activity: it does not move the conversation in the listing)."""
        if self.set_title and self.title != record.title:
            return True
        return self.metadata is not None and self.metadata_text() != record.metadata


# -- describing ------------------------------------------------------------------------------------


def empty_info(key: Key) -> ConversationInfo:
    """The description of a conversation that does not exist."""
    return ConversationInfo(
        conversation_id=key.conversation,
        workspace=key.workspace,
        title=None,
        title_source=None,
        created_at=None,
        last_activity=None,
        message_count=0,
        tokens=0,
        has_summary=False,
        metadata=EMPTY_METADATA,
    )


def describe(tx: Reading, record: RecordRow) -> ConversationInfo:
    """A record as ConversationInfo: the user title, else the automatic one (from the first
    real user message whose text is not blank), else none."""
    title: str | None = record.title
    source: TitleSource | None = "user"
    if title is None:
        with contextlib.closing(tx.user_rows(record.key)) as rows:
            title = auto_title(rows)
        source = "auto" if title is not None else None
    return ConversationInfo(
        conversation_id=record.conversation,
        workspace=record.workspace,
        title=title,
        title_source=source,
        created_at=record.created_at,
        last_activity=record.last_activity,
        message_count=record.message_count,
        tokens=record.tokens,
        has_summary=record.has_summary,
        metadata=JsonText(record.metadata) if record.metadata is not None else EMPTY_METADATA,
    )


def info(tx: Reading, key: Key) -> ConversationInfo:
    """The conversation's ConversationInfo; that of an empty one when it does not exist."""
    record = tx.record(key)
    return empty_info(key) if record is None else describe(tx, record)


def list_page(
    tx: Reading, workspace: str | None, limit: int | None, cursor: str | None
) -> ConversationPage:
    """The conversations of ``workspace`` (None: every workspace) after the position
    ``cursor`` names, newest activity first, at most ``limit`` of them (None: all). A cursor
    this database did not hand out is InvalidParams ``cursor``."""
    key = tx.cursor_key()
    after = decode_cursor(cursor, key) if cursor is not None else None
    position = None
    if after is not None:
        if after.last_activity is None:  # sorts after every conversation that exists
            return ConversationPage((), None)
        position = (after.last_activity, after.conversation_id, after.workspace)
    records = tx.listing(workspace, position, None if limit is None else limit + 1)
    more = limit is not None and len(records) > limit
    if limit is not None:
        records = records[:limit]
    next_cursor = None
    if more:
        last = records[-1]
        next_cursor = encode_cursor(
            CursorPosition(last.last_activity, last.conversation, last.workspace), key
        )
    return ConversationPage(tuple(describe(tx, r) for r in records), next_cursor)


# -- changing --------------------------------------------------------------------------------------


def update(tx: Transaction, key: Key, change: ConversationUpdate, now: int) -> ConversationInfo:
    """Set the title and/or replace the metadata. An absent conversation is created only by a
    title or non-empty metadata; otherwise nothing is stored. A title must hold 1-200 code
    points, not all blank (InvalidParams ``title``)."""
    if change.set_title and change.title is not None:
        check_title(change.title)
    record = tx.record(key)
    if record is None and not change.creates:
        return empty_info(key)
    if record is not None and not change.changes(record):
        return describe(tx, record)
    tx.touch(key, now)
    if change.set_title:
        tx.set_title(key, change.title)
    if change.metadata is not None:
        tx.set_metadata(key, change.metadata_text())
    return info(tx, key)


def check_expected(tx: Transaction, key: Key, expected: Expected) -> None:
    """A rewind from a stale view changes nothing: ConversationChanged when the conversation's
    newest row is not the one the client saw."""
    if expected is None:
        return
    last = tx.last_id(key)
    if last != expected.last_id:
        raise ConversationChanged(last)


def truncate(
    tx: Transaction, key: Key, from_id: int, now: int, expected: Expected = None
) -> TruncateResult:
    """Delete row ``from_id`` and every later row, and a summary covering any of them."""
    check_expected(tx, key, expected)
    if tx.row(key, from_id) is None:
        raise InvalidParams("from_id", "is not a message of this conversation")
    summary = tx.summary(key)
    plan = plan_truncate(
        tx.rows_from(key, from_id), from_id, summary.covers_through_id if summary else None
    )
    tx.delete_messages(key, plan.deleted)
    if plan.summary_deleted:
        tx.delete_summary(key)
    tx.touch(key, now)
    return TruncateResult(len(plan.deleted), plan.summary_deleted)


def delete_turns(
    tx: Transaction, key: Key, turns: Sequence[int], now: int, expected: Expected = None
) -> DeleteTurnsResult:
    """Delete every row of the named turns (numbers naming no turn are ignored)."""
    check_expected(tx, key, expected)
    plan = plan_delete_turns(tx.rows_of_turns(key, turns), turns)
    if plan.deleted:
        tx.delete_messages(key, plan.deleted)
        tx.touch(key, now)
    return DeleteTurnsResult(len(plan.deleted), plan.deleted_turns)


def edit_message(
    tx: Transaction,
    key: Key,
    row_id: int,
    edit: MessageEdit,
    *,
    max_tool_result_chars: int,
    now: int,
    expected: Expected = None,
) -> StoredMessage:
    """Replace a row's content, attachments and/or metadata in place; its tokens, its turn's
    figures and the conversation's totals follow."""
    check_expected(tx, key, expected)
    row = tx.row(key, row_id)
    if row is None:
        raise InvalidParams("id", "is not a message of this conversation")
    changed = row
    if edit.content is not None:
        changed = attrs.evolve(
            changed, content=edited_content(row, edit.content, max_tool_result_chars)
        )
    if edit.attachments is not None:
        changed = attrs.evolve(changed, attachments=edit.attachments)
    if edit.metadata is not None:
        changed = attrs.evolve(changed, metadata=edit.metadata)
    # Estimated as a new row (a stored row answers with the estimate it was stored with).
    fresh = Message(**{f.name: getattr(changed, f.name) for f in attrs.fields(Message)})
    changed = attrs.evolve(changed, tokens=stored_tokens(fresh))
    tx.update_message(key, row, changed)
    refigure_turn(tx, key, changed.turn)
    tx.touch(key, now)
    return changed


def refigure_turn(tx: Transaction, key: Key, turn: int) -> None:
    """Record the edited turn's figures again when it is a completed turn that has them."""
    totals = tx.totals(key)
    if totals is None or turn >= totals.last_turn:
        return  # the running turn has no figures
    from chat_history.policy.prepare.collapse import turn_figures

    tx.replace_turn_figures(key, turn, turn_figures(tx.turn_rows(key, turn)).as_tuple())


def fork(
    tx: Transaction,
    source: Key,
    target: Key,
    through_id: int | None,
    now: int,
) -> ConversationInfo:
    """Copy the source's rows through ``through_id`` (default: all; inside a tool exchange,
    through its last answer: ``fork_end``) into ``target``, with the summary when its coverage
    lies within the copy, the metadata and the user title."""
    if tx.record(target) is not None:
        raise InvalidParams("new_conversation_id", "names a conversation that already exists")
    named = None if through_id is None else tx.row(source, through_id)
    around = () if named is None else tx.turn_rows(source, named.turn)
    through = fork_through(tx.last_id(source), through_id, around)
    base = tx.copy_conversation(source, target, through, now)
    summary = tx.summary(source)
    if summary is not None and summary.covers_through_id is not None:
        covers = summary.covers_through_id
        covered = tx.rows_through(source, covers) if covers <= through else 0
        cover = fork_summary_cover(covers, through, covered, base)
        if cover is not None:
            tx.save_summary(target, attrs.evolve(summary, covers_through_id=cover))
    record = tx.record(source)
    if record is not None:
        if record.title is not None:
            tx.set_title(target, fork_title(record.title))
        if record.metadata is not None:
            tx.set_metadata(target, record.metadata)
    return info(tx, target)


def delete_summary(tx: Transaction, key: Key, now: int) -> bool:
    """Delete the summary as a client's write (the conversation is active since); returns whether
    there was one."""
    deleted = tx.delete_summary(key)
    if deleted:
        tx.touch(key, now)
    return deleted


def save_summary(tx: Transaction, key: Key, saved: Summary) -> bool:
    """Save the summary as a client's write (the conversation is active since); returns whether
    it replaced one."""
    tx.touch(key, saved.updated_at)
    return tx.save_summary(key, saved)

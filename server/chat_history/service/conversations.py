"""The conversations family (``wire/methods/conversations``; protocol.md "Version 2" →
Conversations; branch): a conversation's description, the paged listing, its title and metadata,
and fork, each one transaction on the manager (a snapshot or a write), composing the pure rules
(``policy.titles``, ``policy.cursor``, ``policy.rewind``) with the store. No SQL and no pygls here.

None of these runs storage retention or sends ``chatHistory/trimmed``: the client asked for
exactly this change, and it is made on the rows the client saw."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import JsonText, Key, compact_json
from chat_history.policy.cursor import CursorPosition, decode_cursor, encode_cursor
from chat_history.policy.rewind import fork_summary_cover, fork_through
from chat_history.policy.titles import auto_title, check_title, fork_title
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.tree_steps import activate_in, branch_switch
from chat_history.store import Reading, Transaction
from chat_history.store.records import RecordRow
from chat_history.store.tree_section import TreeReading

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


# -- the operations --------------------------------------------------------------------------------


def info(manager: ChatHistoryManager, key: Key) -> ConversationInfo:
    """The conversation's ConversationInfo (that of an empty one when it does not exist)."""
    with manager.lock, manager.store.snapshot() as tx:
        return _info_in(tx, key)


def list_page(
    manager: ChatHistoryManager, workspace: str | None, limit: int | None, cursor: str | None
) -> ConversationPage:
    """The conversations of ``workspace`` (None: every workspace) after the position ``cursor``
    names, newest activity first, at most ``limit`` (None: all), and the next cursor: every
    listing (the wire's, the CLI's, MCP's, ACP's). Raises InvalidParams ``cursor`` for a cursor
    this database did not hand out, StorageError."""
    with manager.lock, manager.store.snapshot() as tx:
        return _list_page_in(tx, workspace, limit, cursor)


def update(manager: ChatHistoryManager, key: Key, change: ConversationUpdate) -> ConversationInfo:
    """Set the title and/or replace the metadata (protocol.md ``updateConversation``).
    Raises InvalidParams ``title``, StorageError."""
    with manager.lock:
        return manager.write((key,), lambda tx: _update_in(tx, key, change, manager.clock()))


def fork(
    manager: ChatHistoryManager, key: Key, target: Key, through_id: int | None = None
) -> ConversationInfo:
    """Copy the conversation through ``through_id`` (default: all) into ``target``.
    Raises InvalidParams ``new_conversation_id``/``conversation_id``/``through_id``."""
    # It names no conversation: the copy takes a block of consecutive row ids, which only a
    # write of the whole database may (store.postgres.dialect).
    with manager.lock:
        return manager.write((), lambda tx: _fork_in(tx, key, target, through_id, manager.clock()))


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


def _info_in(tx: Reading, key: Key) -> ConversationInfo:
    """The conversation's ConversationInfo; that of an empty one when it does not exist."""
    record = tx.record(key)
    return empty_info(key) if record is None else describe(tx, record)


def _list_page_in(
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


def _update_in(tx: Transaction, key: Key, change: ConversationUpdate, now: int) -> ConversationInfo:
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
    return _info_in(tx, key)


def _fork_in(
    tx: Transaction,
    source: Key,
    target: Key,
    through_id: int | None,
    now: int,
) -> ConversationInfo:
    """Copy the source's path through ``through_id`` (default: the active path; inside a tool
    exchange, through its last answer: ``fork_end``; never its other branches) into
    ``target``, with the summary and the native compaction when their coverage lies within the
    copy, the metadata and the user title. A row of another branch is copied with its path, the
    source left as it was."""
    if tx.record(target) is not None:
        raise InvalidParams("new_conversation_id", "names a conversation that already exists")
    section = TreeReading(tx)
    node = None if through_id is None else section.node(source, through_id)
    elsewhere = node is not None and not node.active
    leaf = tx.last_id(source)
    if elsewhere and through_id is not None:
        # Another branch's path: the active path for the copy, then back as it was.
        path, nodes = branch_switch(section, source, through_id)
        activate_in(tx, source, path, now, quiet=True, branch=nodes)
    named = None if through_id is None else tx.row(source, through_id)
    around = () if named is None else tx.turn_rows(source, named.turn)
    through = fork_through(tx.last_id(source), through_id, around)
    base = tx.copy_conversation(source, target, through, now)
    summary = tx.summary(source)
    cover = None
    if summary is not None and summary.covers_through_id is not None:
        covers = summary.covers_through_id
        covered_row = section.node(source, covers)
        covered = tx.rows_through(source, covers) if covers <= through else 0
        # A summary of another branch's rows is not the copy's.
        if covered_row is None or covered_row.active:
            cover = fork_summary_cover(covers, through, covered, base)
    native = tx.compaction(source)  # a provider's own compaction goes with its rows, as the summary
    native_cover = None
    if native is not None:
        covers = native.covers_through_id
        covered_row = section.node(source, covers)
        covered = tx.rows_through(source, covers) if covers <= through else 0
        if covered_row is None or covered_row.active:
            native_cover = fork_summary_cover(covers, through, covered, base)
    if elsewhere and leaf is not None:
        back, nodes = branch_switch(section, source, leaf)
        activate_in(tx, source, back, now, quiet=True, branch=nodes)
    if summary is not None and cover is not None:
        tx.save_summary(target, attrs.evolve(summary, covers_through_id=cover))
    if native is not None and native_cover is not None:
        tx.save_compaction(target, attrs.evolve(native, covers_through_id=native_cover))
    record = tx.record(source)
    if record is not None:
        if record.title is not None:
            tx.set_title(target, fork_title(record.title))
        if record.metadata is not None:
            tx.set_metadata(target, record.metadata)
    return _info_in(tx, target)

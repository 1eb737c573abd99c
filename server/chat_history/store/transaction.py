"""The store's write face to the manager: a ``Transaction`` per ``Store.write()``, a
``Reading`` (``store.reading``) whose further methods are every change an operation makes. A
write that raises is rolled back whole: a failed operation changes nothing. The cache and the
remembered tail are kept in step here, and ``removed_text`` tells the commit path to purge."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from chat_history.model import Follow, Key, Message, NativeCompaction, StoredMessage, Summary
from chat_history.store import (
    calibration,
    edits,
    provider_state,
    queries,
    records,
    search_index,
    tree,
)
from chat_history.store import workspaces as workspace_sql
from chat_history.store.conversation_cache import ConversationCache
from chat_history.store.engine import sqlite3
from chat_history.store.queries import ConversationTotals
from chat_history.store.reading import Reading, sync_cache
from chat_history.store.tail import Tails

__all__ = ["Reading", "Transaction", "sync_cache"]


class Transaction(Reading):
    """A ``Reading`` that may also change the database: handed out by ``Store.write()`` only,
    inside one write transaction that commits when the block ends and rolls back whole when it
    raises. ``touched`` names every conversation it changed (what the change watch re-reads);
    ``removed_text`` says that it deleted or replaced text, so the engine purges the old bytes
    from its files after the commit (``seam.HistoryStore.write``): each method below that
    deletes or overwrites text sets it, and no caller can forget the purge."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        cache: ConversationCache,
        tails: Tails,
        ratios: calibration.RatioMemo | None = None,
    ) -> None:
        super().__init__(connection, cache, tails, ratios)
        self.touched: set[Key] = set()
        #: text was deleted or replaced: the commit path purges it (``purge_deleted``)
        self.removed_text = False
        #: a workspace's conversations were re-keyed (``move_workspace``)
        self.moved = False
        #: the keys whose change marks the commit deletes (``before_commit``)
        self.gone: list[Key] = []

    def insert(
        self,
        key: Key,
        rows: Sequence[tuple[Message, int, int]],
        totals: ConversationTotals | None,
        now_ms: int,
        follow: Follow | None = None,
    ) -> tuple[list[StoredMessage], ConversationTotals]:
        """Insert (message, turn, tokens) rows in order (a row without a timestamp gets
        ``now_ms``) and update the conversation's ``totals``; returns the rows and the new
        totals. Each row follows the one before it, the first the active leaf, or the row
        ``follow`` names (which the caller made the active leaf: ``activate``)."""
        self.touched.add(key)
        stored: list[StoredMessage] = []
        parent = follow.parent_id if follow is not None else self._active_leaf(key, totals)
        # The conversation starts existing now (again, after retention emptied it).
        # (Not when its active path was parked a moment ago: its branches are its history.)
        created = totals is None or (
            totals.message_count == 0
            and not totals.branches
            and not records.exists(self.connection, key)
        )
        count = totals.message_count if totals else 0
        tokens = totals.tokens if totals else 0
        last_turn = totals.last_turn if totals else 0
        turn_start = totals.turn_start_id if totals else 0
        oldest = totals.oldest_timestamp if totals else None
        for message, turn, row_tokens in rows:
            timestamp = now_ms if message.timestamp is None else message.timestamp
            row_id = queries.insert_row(
                self.connection, key, message, turn, row_tokens, timestamp, parent
            )
            if turn != last_turn or turn_start == 0:
                turn_start = row_id
            last_turn = turn
            count += 1
            tokens += row_tokens
            oldest = timestamp if oldest is None else min(oldest, timestamp)
            stored.append(
                StoredMessage.of(
                    message,
                    id=row_id,
                    turn=turn,
                    tokens=row_tokens,
                    timestamp=timestamp,
                    parent_id=parent,
                )
            )
            parent = row_id
        branches = (totals.branches, totals.branch_expiry) if totals else (0, None)
        after = ConversationTotals(count, tokens, last_turn, turn_start, oldest, now_ms, *branches)
        queries.write_totals(self.connection, key, after, existed=totals is not None)
        if created:
            records.set_created(self.connection, key, now_ms)
        self._cache.extend(key, stored)
        self._tails.track(key, after, stored)
        return stored, after

    def _active_leaf(self, key: Key, totals: ConversationTotals | None) -> int | None:
        """The active path's newest row: remembered when this connection's tail holds it."""
        if totals is None or totals.message_count == 0:
            return None
        tail = self._tails.checked(key)
        if tail is not None and tail.totals is totals and tail.recent:
            return tail.recent[-1].id
        return edits.last_id(self.connection, key)

    def rows_changed(self, key: Key) -> None:
        """Rows of the conversation changed by SQL outside these methods (store.reply_section):
        what this connection remembers of it goes."""
        self.touched.add(key)
        self._cache.drop(key)
        self._tails.drop(key)

    def delete_rows(self, key: Key, ids: Iterable[int]) -> None:
        """Delete rows of the active path by id and recompute the conversation's totals from
        what is left; the branches that start below them go with them (retention)."""
        self.touched.add(key)
        self.removed_text = True
        id_list = sorted(ids)
        branched = self._branched(key)
        queries.delete_rows(self.connection, key, id_list)
        self._cache.remove_ids(key, set(id_list))
        self._tails.drop(key)  # its totals changed
        self._after_delete(key, id_list, adopt=False, branched=branched)

    def _branched(self, key: Key) -> bool:
        """Whether the conversation has inactive branches (its totals say)."""
        totals = self.totals(key)
        return totals is not None and totals.branches > 0

    def _after_delete(self, key: Key, gone: Sequence[int], *, adopt: bool, branched: bool) -> None:
        """After rows of the active path were deleted: the rows that followed them follow the
        nearest row left before (the cache and the tail follow), and the branches below them
        are ``adopt``ed so or deleted with them (``tree.after_delete``)."""
        moved, changed = tree.after_delete(
            self.connection, key, gone, adopt=adopt, branched=branched
        )
        if moved:
            self._cache.set_parents(key, moved)
            self._tails.set_parents(key, moved)
        if changed:
            self._tails.drop(key)  # its branches' totals

    def clear(self, key: Key) -> int:
        """Delete the whole conversation and its summary; returns the rows deleted."""
        self.touched.add(key)
        self.removed_text = True  # rows, summary, title and metadata
        deleted = queries.clear(self.connection, key)
        self._cache.drop(key)
        self._tails.drop(key)
        return deleted

    def add_turn_figures(self, key: Key, figures: Sequence[tuple[int, Sequence[int]]]) -> None:
        """Record completed turns' figures (turn number, values in FIGURES order)."""
        self._tails.add_turn_figures(self.connection, key, figures)

    def save_summary(self, key: Key, summary: Summary) -> bool:
        """Save the conversation's summary; returns whether it replaced one. A conversation
        that did not exist is created (its record made) when the summary is saved."""
        self.touched.add(key)
        if not records.exists(self.connection, key):
            records.ensure(self.connection, key, summary.updated_at)
            records.set_created(self.connection, key, summary.updated_at)
            self._tails.drop(key)
        replaced = records.save_summary(self.connection, key, summary)
        self.removed_text |= replaced  # the old summary's text goes
        return replaced

    def delete_summary(self, key: Key) -> bool:
        """Delete the summary; returns whether there was one."""
        self.touched.add(key)
        deleted = edits.delete_summary(self.connection, key)
        self.removed_text |= deleted
        return deleted

    # -- version 5: provider state (store.provider_state) -----------------------------------

    def set_fences(self, key: Key, rows: Sequence[StoredMessage]) -> None:
        """Store each of ``rows``' fences (rows of the conversation, read in this transaction,
        with their fences changed)."""
        self.touched.add(key)
        for row in rows:
            provider_state.set_origin(self.connection, key, row.id, row.origin, row.fences)
        if rows:
            self._cache.drop(key)
            self._tails.drop(key)

    def save_compaction(self, key: Key, saved: NativeCompaction) -> bool:
        """Save the conversation's native compaction; returns whether it replaced one."""
        self.touched.add(key)
        replaced = provider_state.save_compaction(self.connection, key, saved)
        self.removed_text |= replaced  # the old items go
        return replaced

    def fence_compaction(self, key: Key, saved: NativeCompaction) -> None:
        """Store the compaction's fences (``saved``: it as read, with its fences changed)."""
        self.touched.add(key)
        provider_state.fence_compaction(self.connection, key, saved)

    # -- version 2: records and edits (store.records, store.edits) --------------------------

    def touch(self, key: Key, now: int) -> None:
        """A client wrote to the conversation at ``now`` (its lastActivity); a conversation that
        did not exist is created by it."""
        self.touched.add(key)
        created = not records.exists(self.connection, key)
        records.touch(self.connection, key, now, created=created)
        # Its totals changed (last_activity; a record made when there was none).
        self._tails.amend(key, queries.totals(self.connection, key))

    def set_title(self, key: Key, title: str | None) -> None:
        """The client's title (None: none; the automatic one shows). The record must exist."""
        self.touched.add(key)
        self.removed_text = True  # the old title, if any, goes
        records.set_title(self.connection, key, title)

    def set_metadata(self, key: Key, text: str | None) -> None:
        """The conversation's metadata as compact JSON text (None: empty). The record must
        exist."""
        self.touched.add(key)
        self.removed_text = True  # the old metadata, if any, goes
        records.set_metadata(self.connection, key, text)

    def delete_messages(
        self, key: Key, rows: Sequence[StoredMessage], *, adopt: bool = True
    ) -> ConversationTotals | None:
        """Delete ``rows`` of the active path (read in this transaction) by id; totals, turn
        figures, the cache and the tail follow. The branches that started below them follow the
        nearest row left before (``adopt``), else go with them. Returns the new totals."""
        self.touched.add(key)
        totals = self.totals(key)
        if totals is None or not rows:
            return totals
        self.removed_text = True
        after = edits.delete(self.connection, key, rows, totals)
        removed = frozenset(row.id for row in rows)
        self._cache.remove_ids(key, set(removed))
        self._tails.amend(key, after, removed=removed)
        self._after_delete(key, sorted(removed), adopt=adopt, branched=totals.branches > 0)
        return self.totals(key)

    def update_message(self, key: Key, old: StoredMessage, new: StoredMessage) -> None:
        """Store ``new`` (an edit of ``old``: content, attachments, metadata, tokens) in place;
        the conversation's token total follows."""
        self.touched.add(key)
        self.removed_text = True  # the old content, attachments and metadata go
        edits.update_row(self.connection, key, new)
        totals = self.totals(key)
        if totals is not None and new.tokens != old.tokens:
            totals = attrs.evolve(totals, tokens=totals.tokens + new.tokens - old.tokens)
            queries.write_totals(self.connection, key, totals, existed=True)
        self._cache.replace(key, new)
        self._tails.amend(key, totals, replaced=new)

    def replace_turn_figures(self, key: Key, turn: int, own: Sequence[int]) -> None:
        """An edited completed turn's figures (values in FIGURES order)."""
        edits.replace_turn_figures(self.connection, key, turn, own)
        self._tails.amend(key, self.totals(key))  # the running sums are read again

    def copy_conversation(self, source: Key, target: Key, through_id: int, now: int) -> int:
        """Copy the source's rows through ``through_id`` into ``target`` (which must not exist),
        created and active ``now``. Returns the id before the first copy (the n-th source row's
        copy has id base + n)."""
        self.touched.add(target)
        existed = queries.totals(self.connection, target) is not None
        totals, base = edits.copy(self.connection, source, target, through_id, now)
        queries.write_totals(self.connection, target, totals, existed=existed)
        records.set_created(self.connection, target, now)
        self._cache.drop(target)
        self._tails.drop(target)
        return base

    def index_for_search(self) -> int:
        """Index the next rows written since the last catch-up; returns how many."""
        return search_index.catch_up(self.connection)

    def move_workspace(
        self, source: str, target: str, renames: dict[str, str] | None = None
    ) -> set[str]:
        """Re-key every conversation of ``source`` to ``target``, the ones in ``renames`` under
        their new ids; returns the ids that collide with existing conversations of ``target``
        (then nothing moved)."""
        renames = renames or {}
        leaving = workspace_sql.keyed_ids(self.connection, source)
        moving = {renames.get(c, c) for c in leaving}
        taken = workspace_sql.keyed_ids(self.connection, target) & moving
        clash = workspace_sql.conversation_ids(self.connection, target) & taken
        if clash:
            return clash
        workspace_sql.drop_empty(self.connection, target, taken)
        workspace_sql.rename(self.connection, source, renames)
        workspace_sql.move(self.connection, source, target)
        # Both keys of every moved conversation changed: the change watch re-reads them before
        # the commit, so a window never hears of its own move.
        self.touched.update(Key(source, c) for c in leaving)  # their ids there: before renames
        self.touched.update(Key(target, c) for c in moving)
        self.moved = True
        self._cache.clear()
        self._tails.clear()
        return set()

    def record_rename(self, row: workspace_sql.RenameRow) -> None:
        """Record that re-keying gave a conversation a new id (``move_workspace``'s renames)."""
        workspace_sql.record_rename(self.connection, row)

    def before_commit(self) -> None:
        """Run by the write section (``commit.WritePath.write``) just before its commit: each
        conversation this transaction changed that no longer exists (cleared, deleted, pruned away,
        emptied, moved away) forgets its rename record, and its key, with the key a rename record
        named (an old workspace spelling: a path), goes into ``gone``: the commit deletes their
        change marks (store.changes), so no name of a forgotten history stays in the files. Only a
        transaction that removed something or moved a workspace can have made a conversation stop
        existing: others cost nothing here."""
        if not (self.removed_text or self.moved):
            return
        forgotten = workspace_sql.forget_renames(self.connection, self.touched)
        olds = {Key(row.came_from, row.was) for row in forgotten}
        self.gone = workspace_sql.gone(self.connection, self.touched | olds)

    def record_folder(self, row: workspace_sql.FolderRow) -> None:
        workspace_sql.record_folder(self.connection, row)

    def forget_folder(self, workspace: str, machine: str) -> None:
        workspace_sql.forget_folder(self.connection, workspace, machine)

    def add_calibration_ratio(
        self, kind: str, model: str | None, ratio: float
    ) -> tuple[float, ...]:
        """Record a usage ratio of (kind, model); returns its newest ratios, oldest first."""
        calibration.add_ratio(self.connection, kind, model, ratio)
        self._ratios.forget(kind, model)
        return calibration.ratios(self.connection, kind, model)

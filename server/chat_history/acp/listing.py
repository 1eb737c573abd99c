"""The history view (docs/acp.md "The history view"; ACP's RFD "Session list for history
views"): ``session/list`` answered from the store, ``limit`` rows at a time, newest activity
first, each row with its ``state``, ``lastTurnEndedAt``, ``cost`` (when the agent reported one)
and ``archived``, with ``includeWorktrees`` the same folder's in the repository's other git
worktrees too; a cursor whose page is never empty while more remain; and which listed folders
``session/list_changed`` is due for.

Each folder listed gets an index in memory (``Folder``): its sessions' fingerprints
(service.session_list) in listing order, read whole at its first listing and then kept current
from the store's change marks, read before every page and, while a folder is watched, at every
``tick``. A page is a walk from the cursor's position; a row is made (its automatic title
read) once per change of its session, and those of the folder listed last ahead of the pages
that show them while the editor is idle (``warm``). At most ``MAX_FOLDERS`` folders are indexed
and watched at once (the least recently listed goes), so an editor cannot grow the proxy without
bound.

The order is the store's (policy.cursor): last activity (the store's ``lastActivity``) newest
first, then the conversation id, then the workspace; a cursor names a position in it,
authenticated by the database's key, and belongs to the lists that show its workspace."""

from __future__ import annotations

import bisect
import heapq
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from chat_history.acp import rows
from chat_history.acp.recorder import Recorder
from chat_history.errors import ChatHistoryError, InvalidParams
from chat_history.policy.changes import Fingerprint
from chat_history.policy.cursor import CursorPosition, decode_cursor, encode_cursor
from chat_history.service import gitfolder, session_list

log = logging.getLogger("chat_history.acp")

#: Sessions per page when the request gives no ``limit``.
PAGE = 50
#: The most sessions one page holds: a larger ``limit`` is clamped to it (the RFD's "MAY
#: clamp"), so one request's time and answer stay bounded.
MAX_LIMIT = 1_000
#: The longest ``cwd`` taken (the store's longest workspace).
MAX_CWD_CHARS = 4_096
#: Folders indexed and watched at once.
MAX_FOLDERS = 16
#: How long a listing of a folder keeps it watched (the RFD's 10 minutes).
WATCH_S = 600.0
#: The notification that a watched folder's rows changed.
CHANGED = "session/list_changed"

#: A position in one folder's listing order: (-last activity, conversation id).
SortKey = tuple[int, str]
#: A position in the order of several folders: the workspace breaks the last ties.
Position = tuple[int, str, str]


@attrs.frozen
class Query:
    """A ``session/list`` request, checked: the folder, whether the request named it (then it
    is watched), the page's size, the cursor, whether archived sessions are listed too, and
    whether the same folder in the repository's other git worktrees is."""

    cwd: str
    named: bool
    limit: int
    cursor: str | None
    archived: bool
    worktrees: bool = False


def query(params: Mapping[str, Any], default_cwd: str) -> Query:
    """``params`` checked; InvalidParams names the field that is wrong. Without ``cwd``, the
    folder the editor started the proxy in (ACP lists the sessions "of a cwd")."""
    cwd = params.get("cwd")
    if cwd is not None and (
        not isinstance(cwd, str)
        or not os.path.isabs(cwd)
        or len(cwd) > MAX_CWD_CHARS
        or "\0" in cwd
    ):
        raise InvalidParams("cwd", "must be the absolute path of a folder")
    cursor = params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidParams("cursor", "must be a string handed out by session/list")
    limit = params.get("limit")
    if limit is not None and (type(limit) is not int or limit < 1):
        raise InvalidParams("limit", "must be an integer of at least 1")
    archived = params.get("archived")
    if archived is not None and not isinstance(archived, bool):
        raise InvalidParams("archived", "must be a boolean")
    worktrees = params.get("includeWorktrees")
    if worktrees is not None and not isinstance(worktrees, bool):
        raise InvalidParams("includeWorktrees", "must be a boolean")
    return Query(
        cwd=cwd if cwd is not None else default_cwd,
        named=cwd is not None,
        limit=min(limit or PAGE, MAX_LIMIT),
        cursor=cursor,
        archived=bool(archived),
        worktrees=bool(worktrees),
    )


def iso(ms: int) -> str:
    """Epoch milliseconds as ACP's ISO 8601 timestamp (UTC)."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


@attrs.define(eq=False)
class Entry:
    """One session of a folder: its fingerprint, what its metadata says (``rows.facts``), and
    its row as the last page showed it (None: to be read again)."""

    conversation: str
    fingerprint: Fingerprint
    facts: rows.Facts
    row: dict[str, Any] | None = None

    @property
    def archived(self) -> bool:
        return self.facts.archived

    @property
    def sort_key(self) -> SortKey:
        return (-self.fingerprint.last_activity, self.conversation)

    def listed(self, archived: bool) -> bool:
        """Whether a list shows it: a session with rows, not archived unless asked."""
        return self.fingerprint.count > 0 and (archived or not self.archived)

    def view(self, archived: bool) -> tuple[Any, ...] | None:
        """What a list with or without archived sessions shows of it (None: it is not
        listed); a change of it is what ``session/list_changed`` is for."""
        if not self.listed(archived):
            return None
        fp = self.fingerprint
        return (fp.last_activity, fp.title, fp.reply is not None, self.archived)


def _entry(conversation: str, fingerprint: Fingerprint) -> Entry:
    return Entry(conversation, fingerprint, rows.facts(fingerprint.metadata))


class Folder:
    """One workspace's sessions in listing order."""

    def __init__(self, workspace: str, found: Mapping[str, Fingerprint]) -> None:
        self.workspace = workspace
        self.entries = {c: _entry(c, f) for c, f in found.items()}
        self.order: list[SortKey] = sorted(e.sort_key for e in self.entries.values())
        #: where ``Listings.warm`` goes on making rows (an index into ``order``)
        self.warmed = 0

    def apply(self, conversation: str, fingerprint: Fingerprint | None) -> tuple[bool, bool]:
        """The session as it is now (None: gone); whether that changed what a list without
        archived sessions shows, and what a list with them shows."""
        old = self.entries.pop(conversation, None)
        if old is not None:
            del self.order[bisect.bisect_left(self.order, old.sort_key)]
        new = None
        if fingerprint is not None:
            new = self.entries[conversation] = _entry(conversation, fingerprint)
            if old is not None and old.fingerprint == fingerprint:
                new.row = old.row
            bisect.insort(self.order, new.sort_key)
        return tuple(  # type: ignore[return-value]
            (old.view(archived) if old else None) != (new.view(archived) if new else None)
            for archived in (False, True)
        )

    def walk(self, after: Position | None) -> Iterator[tuple[Position, Entry]]:
        """Its sessions after the position ``after`` (None: from the newest), with theirs."""
        start = 0
        if after is not None:
            # the same activity and id in another workspace: after it when that sorts later
            cut = bisect.bisect_right if self.workspace <= after[2] else bisect.bisect_left
            start = cut(self.order, after[:2])
        for index in range(start, len(self.order)):
            at, conversation = self.order[index]
            yield (at, conversation, self.workspace), self.entries[conversation]


def _walk(
    cwd: str, folder: Folder, after: Position | None
) -> Iterator[tuple[Position, str, Folder, Entry]]:
    for at, entry in folder.walk(after):
        yield at, cwd, folder, entry


def page(
    folders: list[tuple[str, Folder]], after: Position | None, limit: int, archived: bool
) -> tuple[list[tuple[str, Folder, Entry]], bool]:
    """Up to ``limit`` listed sessions of the folders (each with its cwd) after the position
    ``after``, in one order, and whether more are listed after them."""
    walks = [_walk(cwd, folder, after) for cwd, folder in folders]
    merged = heapq.merge(*walks, key=lambda found: found[0])
    out: list[tuple[str, Folder, Entry]] = []
    for _, cwd, folder, entry in merged:
        if entry.listed(archived):
            out.append((cwd, folder, entry))
            if len(out) == limit:
                break
    more = any(entry.listed(archived) for *_, entry in merged)
    return out, more


@attrs.define
class Watch:
    """A list a ``session/list`` named the folder of: its workspaces (with its worktrees'),
    until when it is watched (monotonic s), and which lists were read (without archived
    sessions, with them)."""

    cwd: str
    workspaces: frozenset[str]
    until: float
    plain: bool = False
    all: bool = False


class Listings:
    """The history view of one proxy: the indexed folders, the watched ones, the sessions
    waiting for the editor's answer (``requires_action``)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.manager = recorder.manager
        self.folders: OrderedDict[str, Folder] = OrderedDict()  # by workspace, least recent first
        #: by (cwd, includeWorktrees), least recent first
        self.watches: OrderedDict[tuple[str, bool], Watch] = OrderedDict()
        #: the change counter the folders are current with (None: no folder read yet)
        self.position: int | None = None
        #: per workspace, whether a list without / with archived sessions changed since the
        #: last ``tick``
        self.dirty: dict[str, tuple[bool, bool]] = {}
        #: the editor's sessions the agent asked a question the editor has not answered, by the
        #: agent's request id
        self.asking: dict[Any, str] = {}
        self._key: bytes | None = None

    # -- session/list ------------------------------------------------------------------------

    def page(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The answer to ``session/list``. Raises InvalidParams (naming the field),
        StorageError."""
        asked = query(params, os.getcwd())
        scope = self._scope(asked)
        workspaces = frozenset(w for _, w in scope)
        after = None
        if asked.cursor is not None:
            position = decode_cursor(asked.cursor, self._cursor_key())
            if position.workspace not in workspaces:
                raise InvalidParams("cursor", "belongs to the list of another folder")
            if position.last_activity is None:  # sorts after every session
                return {"sessions": []}
            after = (-position.last_activity, position.conversation_id, position.workspace)
        self.sync()
        folders = [(cwd, self._folder(workspace)) for cwd, workspace in scope]
        found, more = page(folders, after, asked.limit, asked.archived)
        answer: dict[str, Any] = {"sessions": self._rows(found)}
        if more:
            _, folder, last = found[-1]
            at = CursorPosition(last.fingerprint.last_activity, last.conversation, folder.workspace)
            answer["nextCursor"] = encode_cursor(at, self._cursor_key())
        if asked.named:
            self._watch(asked, workspaces)
        return answer

    def _scope(self, asked: Query) -> list[tuple[str, str]]:
        """The folders a list shows, each with its workspace: the one asked for, and with
        ``includeWorktrees`` the same folder in the repository's other worktrees."""
        scope = [(asked.cwd, self.recorder.workspace(asked.cwd))]
        if asked.worktrees:
            for folder in gitfolder.worktrees(Path(asked.cwd)):
                workspace = self.recorder.workspace(str(folder))
                if all(workspace != w for _, w in scope):
                    scope.append((str(folder), workspace))
        return scope

    def _cursor_key(self) -> bytes:
        if self._key is None:
            self._key = session_list.cursor_key(self.manager)
        return self._key

    def _folder(self, workspace: str) -> Folder:
        folder = self.folders.get(workspace)
        if folder is not None:
            self.folders.move_to_end(workspace)
            return folder
        scan = session_list.scan(self.manager, workspace, rows.PREFIX)
        if self.position is None:
            self.position = scan.position
        folder = self.folders[workspace] = Folder(workspace, scan.found)
        while len(self.folders) > MAX_FOLDERS:
            gone, _ = self.folders.popitem(last=False)
            for watched in [k for k, w in self.watches.items() if gone in w.workspaces]:
                del self.watches[watched]
        return folder

    def _rows(self, found: list[tuple[str, Folder, Entry]]) -> list[dict[str, Any]]:
        """The page's rows: those made since their session last changed as they were, the
        others made now (the automatic titles read for those that have no user title)."""
        stale: dict[str, list[Entry]] = {}
        for _, folder, entry in found:
            if entry.row is None:
                stale.setdefault(folder.workspace, []).append(entry)
        for workspace, entries in stale.items():
            self._make_rows(workspace, entries)
        waiting = set(self.asking.values())
        out = []
        for cwd, _, entry in found:
            assert entry.row is not None
            state = "running" if entry.fingerprint.reply is not None else "idle"
            if entry.row["sessionId"] in waiting:
                state = "requires_action"
            out.append({**entry.row, "cwd": cwd, "state": state})
        return out

    def _make_rows(self, workspace: str, entries: list[Entry]) -> None:
        untitled = [e.conversation for e in entries if e.fingerprint.title is None]
        titles = session_list.auto_titles(self.manager, workspace, untitled)
        for entry in entries:
            entry.row = _row(entry, entry.fingerprint.title or titles.get(entry.conversation))

    def warm(self) -> bool:
        """Make the rows of the next ``PAGE`` sessions that no page has shown yet, in list
        order, of the folder listed last (while the editor is idle: a walk then finds them
        made); whether there were any. Never raises: a store error is logged."""
        folder = next(reversed(self.folders.values()), None)
        if folder is None or folder.warmed >= len(folder.order):
            return False
        entries: list[Entry] = []
        while folder.warmed < len(folder.order) and len(entries) < PAGE:
            entry = folder.entries[folder.order[folder.warmed][1]]
            folder.warmed += 1
            if entry.row is None:
                entries.append(entry)
        try:
            self._make_rows(folder.workspace, entries)
        except ChatHistoryError as error:
            log.warning("acp: the list's rows were not made ahead: %s", error)
        return bool(entries)

    # -- keeping current ---------------------------------------------------------------------

    def sync(self) -> None:
        """Bring every indexed folder up to the store's newest commit (one small read when
        nothing was committed since). Raises StorageError."""
        if self.position is None or not self.folders:
            return
        known = {w: f.entries.keys() for w, f in self.folders.items()}
        found = session_list.changes(self.manager, known, rows.PREFIX, self.position)
        self.position = found.position
        for workspace, changed in found.changed.items():
            folder = self.folders[workspace]
            for conversation, fingerprint in changed.items():
                self._dirty(workspace, folder.apply(conversation, fingerprint))

    def _dirty(self, workspace: str, changed: tuple[bool, bool]) -> None:
        plain, every = self.dirty.get(workspace, (False, False))
        self.dirty[workspace] = (plain or changed[0], every or changed[1])

    def _watch(self, asked: Query, workspaces: frozenset[str]) -> None:
        scope = (asked.cwd, asked.worktrees)
        watch = self.watches.pop(scope, None) or Watch(asked.cwd, workspaces, 0.0)
        watch.workspaces, watch.until = workspaces, time.monotonic() + WATCH_S
        if asked.archived:
            watch.all = True
        else:
            watch.plain = True
        self.watches[scope] = watch
        while len(self.watches) > MAX_FOLDERS:
            self.watches.popitem(last=False)

    def tick(self) -> list[str]:
        """The watched folders whose listed rows changed since the last tick (each once), for
        ``session/list_changed``. Never raises: a store error is logged, and the next tick
        catches up."""
        now = time.monotonic()
        for scope in [k for k, w in self.watches.items() if w.until < now]:
            del self.watches[scope]
        if not self.watches:
            self.dirty.clear()
            return []
        try:
            self.sync()
        except ChatHistoryError as error:
            log.warning("acp: the session lists were not brought up to date: %s", error)
            return []
        due: dict[str, None] = {}
        for watch in self.watches.values():
            for workspace in watch.workspaces:
                plain, every = self.dirty.get(workspace, (False, False))
                if (watch.plain and plain) or (watch.all and every):
                    due[watch.cwd] = None
        self.dirty.clear()
        return list(due)

    # -- the agent's questions (requires_action) ---------------------------------------------

    def asked(self, request_id: Any, session: str) -> None:
        """The agent asked the editor something about ``session`` (a permission); a request
        whose id is not a string or a number is not followed."""
        if isinstance(request_id, str | int):
            self.asking[request_id] = session
            self._nudge(session)

    def answered(self, request_id: Any) -> None:
        """The editor answered the agent's request ``request_id`` (if it was a question)."""
        session = self.asking.pop(request_id, None) if isinstance(request_id, str | int) else None
        if session is not None:
            self._nudge(session)

    def forget_questions(self) -> None:
        """The agent is gone: its questions with it."""
        sessions = set(self.asking.values())
        self.asking.clear()
        for session in sessions:
            self._nudge(session)

    def _nudge(self, session: str) -> None:
        conversation = rows.conversation_id(session)
        for workspace, folder in self.folders.items():
            entry = folder.entries.get(conversation)
            if entry is not None and entry.fingerprint.count > 0:
                self._dirty(workspace, (not entry.archived, True))


def _row(entry: Entry, title: str | None) -> dict[str, Any]:
    """A session's row as a page shows it, less its ``cwd`` and ``state`` (a page's own)."""
    fp, facts = entry.fingerprint, entry.facts
    session = rows.session_of(entry.conversation) or entry.conversation
    row: dict[str, Any] = {"sessionId": session, "updatedAt": iso(fp.last_activity)}
    if title is not None:
        row["title"] = title
    if facts.ended_at is not None:
        row["lastTurnEndedAt"] = iso(facts.ended_at)
    if facts.cost is not None:
        row["cost"] = facts.cost
    row["archived"] = facts.archived
    meta: dict[str, Any] = {"tokens": fp.tokens}
    if facts.used is not None:
        meta["used"] = facts.used
    if facts.size is not None:
        meta["size"] = facts.size
    row["_meta"] = {"chatHistory": meta}
    return row

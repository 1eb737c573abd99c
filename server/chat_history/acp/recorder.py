"""A session's prompts and updates written through the manager while they stream (protocol.md
"Version 4" → ACP sessions, Replies in flight): ``prompt`` appends the user row and begins the
streaming assistant row; ``update`` coalesces the agent's updates in memory and flushes them at
most ``FLUSH_S`` apart (an ACP agent sends hundreds a second; ``updateReply`` takes a few);
``end`` completes the row (or leaves it interrupted), appends one tool row per finished call
and notes the turn in the conversation's metadata (``rows.turn_note``: a history view reads it
from the record).

Workspace: the session's ``cwd`` as a folder identity, resolved and opened once per cwd (the
last ``MAX_FOLDERS`` remembered). The recorder never raises into the relay: a store error is
logged and the messages still pass."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from chat_history.acp import rows
from chat_history.errors import ChatHistoryError
from chat_history.model import Key
from chat_history.service import conversations, history, replies, workspaces
from chat_history.service.conversations import ConversationUpdate
from chat_history.service.manager import ChatHistoryManager

log = logging.getLogger("chat_history.acp")

#: The longest a streaming row lags behind what the editor saw (s).
FLUSH_S = 0.25
#: Folders whose workspace is remembered (one opened again later costs a read): an editor that
#: lists many folders cannot grow the proxy without bound.
MAX_FOLDERS = 256


@attrs.define
class Open:
    """A reply being recorded: its row and what streamed so far."""

    key: Key
    row_id: int
    reply: rows.Reply = attrs.field(factory=rows.Reply)
    flushed_at: float = 0.0


class Recorder:
    """Writes sessions into ``manager``; one per proxy."""

    def __init__(self, manager: ChatHistoryManager, machine: str) -> None:
        self.manager = manager
        self.machine = machine
        self.workspaces: dict[str, str] = {}
        self.keys: dict[str, Key] = {}
        self.open: dict[str, Open] = {}

    def workspace(self, cwd: str) -> str:
        """The workspace of a session's ``cwd`` (opened once: re-keyed spellings, a moved
        folder's history, as the editor's server does)."""
        found = self.workspaces.pop(cwd, None)
        if found is None:
            uri = Path(cwd).as_uri() if cwd.startswith("/") else cwd
            identity = workspaces.resolve(uri, "folder")
            try:
                workspaces.open_identity(self.manager, identity, self.machine)
            except ChatHistoryError as error:
                log.warning("acp: could not open the workspace: %s", error)
            found = identity.workspace
            if len(self.workspaces) >= MAX_FOLDERS:
                del self.workspaces[next(iter(self.workspaces))]  # the least recently used
        self.workspaces[cwd] = found
        return found

    def bind(self, session_id: str, cwd: str) -> Key:
        """The key of ``session_id`` under ``cwd``, remembered for its prompts."""
        key = self.keys[session_id] = Key(self.workspace(cwd), rows.conversation_id(session_id))
        return key

    def key(self, session_id: str) -> Key | None:
        """The key ``bind`` gave ``session_id``; None: a session not recorded."""
        return self.keys.get(session_id)

    def prompt(
        self,
        session_id: str,
        blocks: Sequence[Mapping[str, Any]],
        message_id: str | None = None,
    ) -> None:
        """A ``session/prompt`` the editor sent (``message_id``: its ``messageId``): its user row
        and a streaming reply."""
        key = self.keys.get(session_id)
        if key is None:
            return
        self.end(session_id, "interrupted")  # a prompt whose answer never came
        try:
            history.append(self.manager, key, [rows.prompt_row(blocks, message_id)])
            row = replies.begin(self.manager, key, replies.ReplyBegin())
        except ChatHistoryError as error:
            log.warning("acp: the prompt was not recorded: %s", error)
            return
        self.open[session_id] = Open(key, row.id, flushed_at=time.monotonic())

    def update(self, session_id: str, update: Mapping[str, Any]) -> bool:
        """One ``session/update`` of a reply being recorded; True when a flush is due now."""
        current = self.open.get(session_id)
        if current is None:
            return False
        current.reply.add(update)
        return time.monotonic() - current.flushed_at >= FLUSH_S

    def flush(self, session_id: str) -> None:
        """Write what streamed since the last flush."""
        current = self.open.get(session_id)
        if current is None or not current.reply.dirty:
            return
        current.flushed_at = time.monotonic()
        current.reply.dirty = False
        try:
            replies.update(self.manager, current.key, current.row_id, self._change(current.reply))
        except ChatHistoryError as error:
            current.reply.dirty = True
            log.warning("acp: an update was not recorded: %s", error)

    def end(self, session_id: str, status: replies.EndStatus) -> None:
        """The reply's end: ``complete`` (the prompt was answered) or ``interrupted`` (an error,
        a crash, the editor gone); then its tool rows."""
        current = self.open.pop(session_id, None)
        if current is None:
            return
        try:
            replies.end(
                self.manager, current.key, current.row_id, status, self._change(current.reply)
            )
            tools = current.reply.tool_rows()
            if tools:
                history.append(self.manager, current.key, tools)
            if status != "discard":
                note = rows.turn_note(current.reply, self.manager.clock())
                self.annotate(current.key, lambda metadata: rows.noted(metadata, note))
        except ChatHistoryError as error:
            log.warning("acp: the reply's end was not recorded: %s", error)

    def annotate(self, key: Key, change: Callable[[dict[str, Any]], bool]) -> bool:
        """Change the conversation's metadata in place (``change`` says whether it did), the
        rest of it kept; whether it changed. Read and written in one turn of this process's
        lock; another process writing the same conversation's metadata between the two is not
        seen (the panel and the proxies write it rarely: an archive, a reply's end).
        Raises StorageError."""
        with self.manager.lock:
            metadata = conversations.info(self.manager, key).metadata.value()
            if not isinstance(metadata, dict) or not change(metadata):
                return False
            conversations.update(self.manager, key, ConversationUpdate(metadata=metadata))
            return True

    def end_all(self, status: replies.EndStatus) -> None:
        """``end`` every reply being recorded (the agent or the editor gone)."""
        for session_id in list(self.open):
            self.end(session_id, status)

    def due(self) -> list[str]:
        """Sessions whose reply has updates older than ``FLUSH_S`` not yet written."""
        now = time.monotonic()
        return [s for s, o in self.open.items() if o.reply.dirty and now - o.flushed_at >= FLUSH_S]

    @staticmethod
    def _change(reply: rows.Reply) -> replies.ReplyChange:
        return replies.ReplyChange(
            content="".join(reply.text),
            tool_calls=reply.tool_calls(),
            provider_data=reply.provider_data(),
        )

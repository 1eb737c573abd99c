"""The session: this server's state (its manager, the one request thread, the settings barrier
and its pull, the workspace identity, the change watch) and what it tells the editor, written
straight to stdout. No pygls here: the front (``wire/server.py``) serves the first requests with
it before pygls has loaded, and ``wire/lsp.py`` hands pygls the same session once it has."""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chat_history.errors import StorageError, quoted
from chat_history.model import Key, Trimmed
from chat_history.paths import default_storage_folder
from chat_history.service import replies, watch, workspaces
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import Settings, default_settings, load_settings
from chat_history.wire import checks, protocol
from chat_history.wire.transport import frames
from chat_history.wire.transport.barrier import BOUND_SECONDS, SettingsBarrier
from chat_history.wire.transport.serial import SerialRunner

if TYPE_CHECKING:  # asyncio loads with the event loop, after the first answers (issue 45)
    import asyncio

log = logging.getLogger("chat_history")
PROTOCOL_VERSION = 5
TRIMMED = "chatHistory/trimmed"
CHANGED = "chatHistory/changed"
LOG_MESSAGE = "window/logMessage"
SHOW_MESSAGE = "window/showMessage"


class MessageType(enum.IntEnum):
    """LSP's ``MessageType`` of ``window/logMessage`` and ``window/showMessage``."""

    Error = 1
    Warning = 2
    Info = 3
    Log = 4


class ChatHistoryServer:
    """The session: its manager (made by ``initialize``), the one request thread, the settings
    barrier, the workspace identity and what it tells the editor."""

    def __init__(self, writer: frames.FrameWriter | None = None) -> None:
        self.manager: ChatHistoryManager | None = None
        # One thread runs the requests, in the order they arrived: two appends a client sends
        # without waiting must be stored in that order (the manager serialises them anyway, so
        # no parallelism is lost). The reading thread runs a request itself when nothing is
        # queued or running (transport.serial).
        self.requests = SerialRunner("chat-history")
        #: set by ``shutdown``: requests that have not started never will
        self.closing = threading.Event()
        #: requests not yet answered, each done once its answer is written (``shutdown`` and
        #: the end of input wait for them)
        self.in_flight: set[Future[None]] = set()
        self.barrier = self._new_barrier(default_settings())
        self.workspace_identity = "default"
        #: the normalized folder URI the identity came from (the identity in "folder" mode)
        self.folder_identity = "default"
        #: the workspace as the client named it, and the identity mode initializationOptions
        #: fixed (None: the settings' ``workspaceIdentity``); the mode opened so far
        self.raw_workspace = "default"
        self.identity_option: str | None = None
        self._identity_mode: str | None = None
        self._identity_lock = threading.Lock()
        #: the storage folder, where this machine's id is kept (made when first needed)
        self.storage_folder: Path | None = None
        self._machine: str | None = None
        self.exit_code = 0
        self._reported: set[str] = set()
        #: the event loop the front serves on (None until it starts: the first answers need
        #: none), what was meant for it before, and whether something needs it started now
        self.loop: asyncio.AbstractEventLoop | None = None
        self._early: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._loop_lock = threading.Lock()
        self.loop_wanted = threading.Event()
        #: stdout (None when not serving: a test's session)
        self.writer = writer
        #: whether the client answers ``workspace/configuration`` (``initialize`` reads it)
        self.pulls_configuration = False
        #: asks the client ``workspace/configuration`` for the section, from any thread: the
        #: future of its answer, resolved on the thread that reads it (so a request read after
        #: the answer runs under it); set by the front (through pygls once it has loaded)
        self.ask_configuration: Callable[[], Future[Any]] | None = None
        #: what other processes change (None until ``initialize``)
        self.watch: watch.ChangeWatch | None = None
        self._watching: asyncio.Task[None] | None = None

    def soon(self, callback: Callable[..., Any], *args: Any, urgent: bool = False) -> None:
        """Run ``callback(*args)`` on the event loop, from any thread (nothing once it closed);
        before the loop has started, once it does (``urgent``: start it now)."""
        with self._loop_lock:
            loop = self.loop
            if loop is None:
                self._early.append((callback, args))
        if loop is None:
            if urgent:
                self.loop_wanted.set()
            return
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile: exiting
                loop.call_soon_threadsafe(callback, *args)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop has started (on it): what was meant for it runs now, in order."""
        with self._loop_lock:
            self.loop = loop
            early, self._early = self._early, []
        for callback, args in early:
            loop.call_soon(callback, *args)

    def exit_at_once(self) -> None:
        """After a signal: the store closed, then the process ends without joining the stdin
        reader, which may be blocked in a read that only the client's closing pipe ends (joining
        it kept a signalled server alive for as long as its client kept the pipe open)."""
        if self.manager is not None:
            with contextlib.suppress(Exception):
                self.manager.store.close()
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(self.exit_code)

    def release_replies(self) -> None:
        """At exit: this process's streaming replies are interrupted at once (service.replies),
        keeping the text last acknowledged; a store that cannot be written leaves them to expire."""
        if self.manager is None:
            return
        try:
            replies.release(self.manager)
        except StorageError as exc:
            log.warning("streaming replies left to expire: %s", exc)

    # -- telling the editor ----------------------------------------------------------------

    def tell(self, kind: MessageType, message: str, *, show: bool = False) -> None:
        """A notable event: to stderr, to ``window/logMessage``, and with ``show`` to
        ``window/showMessage`` too. Safe from any thread: written at once, so that what a
        request told goes before its answer."""
        log.log(_LOG_LEVELS.get(kind, logging.INFO), "%s", message)
        if self.writer is None:
            return
        wired = {"type": int(kind), "message": f"chat-history-server: {message}"}
        for method in [LOG_MESSAGE, *([SHOW_MESSAGE] if show else [])]:
            frames.notify_all(self.writer, method, [wired])

    # -- settings ----------------------------------------------------------------------------

    def _new_barrier(self, settings: Settings) -> SettingsBarrier:
        # The bound is fixed by the protocol; tests of its consequences may shorten it.
        try:
            bound = float(os.environ.get("CHAT_HISTORY_SETTINGS_WAIT", BOUND_SECONDS))
        except ValueError:
            bound = BOUND_SECONDS
        return SettingsBarrier(settings, bound=bound, on_expired=self._settings_late)

    def _settings_late(self) -> None:
        self.tell(
            MessageType.Warning,
            f"the editor has not answered workspace/configuration within "
            f"{self.barrier.bound:g} s; requests run with the settings known so far, and stored "
            "history is not pruned until the settings arrive.",
            show=True,
        )

    def checked_settings(self, raw: Any) -> Settings:
        """Settings from a ``chatHistory`` section; each bad value is reported once."""
        loaded = load_settings(raw)
        for problem in loaded.problems:
            message = problem.message()
            if message not in self._reported:
                self._reported.add(message)
                self.tell(MessageType.Warning, message, show=True)
        if loaded.unknown_keys:
            self.tell(
                MessageType.Warning,
                "ignoring unknown settings: " + ", ".join(loaded.unknown_keys),
            )
        return loaded.settings

    def start_pull(self) -> None:
        """Requests that arrive from now on wait for the answer (protocol.md, the barrier): the
        pull is raised and sent here, on the thread that reads the messages, before the next one
        is read."""
        pull = self.barrier.raise_()
        late = self.barrier.held
        assert self.ask_configuration is not None, "the front sets it before serving"
        self.ask_configuration().add_done_callback(functools.partial(self._pulled, pull, late))
        self.soon(self.check_late_later)

    def check_late_later(self) -> None:
        """Warn once if a pull is still unanswered when its bound has passed (event loop)."""
        import asyncio

        asyncio.get_running_loop().call_later(self.barrier.bound, self._check_late)

    def _check_late(self) -> None:
        if self.barrier.expire_due():
            self._settings_late()

    def _pulled(self, pull: int, late: bool, answered: Future[Any]) -> None:
        """The client's answer to pull ``pull`` (or its failure), applied to the barrier at once,
        on the thread that read it."""
        try:
            answer = answered.result()
        except Exception as exc:  # an error answer (or one unreadable): nothing to tell
            self.tell(
                MessageType.Warning,
                f"workspace/configuration failed ({exc}); keeping the current settings",
            )
            answer = None
        value = answer[0] if isinstance(answer, list | tuple) and answer else None
        if not (value is None or isinstance(value, dict) or value == []):
            # Not a settings section (a string answer arrives as a list of its characters):
            # an answer all the same, which keeps the current settings.
            self.tell(
                MessageType.Warning,
                "workspace/configuration answered something that could not be read as "
                f"settings ({quoted(value)}); keeping the current settings",
            )
            value = None
        self.barrier.answer(pull, self.checked_settings(value) if value is not None else None)
        if late and not self.barrier.held:
            self.tell(MessageType.Info, "settings arrived; stored-history retention resumes")

    def send_trimmed(self, key: Key, events: Sequence[Trimmed]) -> None:
        """One request's ``chatHistory/trimmed`` notifications, written to stdout in one write
        (a prepare of a long conversation sends two, and every write wakes the client)."""
        params = [protocol.wire_trimmed(key.workspace, key.conversation, e) for e in events]
        if self.writer is not None:
            frames.notify_all(self.writer, TRIMMED, params)

    # -- chatHistory/changed ------------------------------------------------------------------

    def send_changes(self, *, poll: bool) -> None:
        """Tell the client what other processes changed in its workspace (request thread only):
        with ``poll`` after looking at the store, else what the last writes found. A store that
        cannot be read now is looked at again later (nothing is lost)."""
        watcher = self.watch
        if watcher is None:
            return
        try:
            found = watcher.poll() if poll else watcher.take()
        except StorageError as exc:
            log.debug("change watch: %s", exc)
            return
        if found:
            params = [protocol.wire_changed(self.workspace_identity, change) for change in found]
            if self.writer is not None:
                frames.notify_all(self.writer, CHANGED, params)

    async def watch_idle(self) -> None:
        """Look for others' changes every ``watch.IDLE_SECONDS`` on the request thread (queued
        behind requests, so never beside one), until ``shutdown``."""
        import asyncio

        loop = asyncio.get_running_loop()
        tended = loop.time()
        while not self.closing.is_set():
            await asyncio.sleep(watch.IDLE_SECONDS)
            tend = loop.time() - tended >= replies.RENEW_MS / 1000
            if tend:
                tended = loop.time()
            try:
                await loop.run_in_executor(self.requests, functools.partial(self.look, tend=tend))
            except RuntimeError:  # the request thread is gone: exiting
                return

    def look(self, *, tend: bool) -> None:
        """The idle look: with ``tend``, renew this process's reply leases and interrupt expired
        ones first (service.replies), then what others changed."""
        if tend and self.manager is not None:
            try:
                # Its client hears of an expired reply it interrupts, as the other windows do.
                with self.watch.unasked() if self.watch else contextlib.nullcontext():
                    replies.tend(self.manager)
            except StorageError as exc:
                log.debug("reply leases: %s", exc)
        self.send_changes(poll=True)

    @property
    def machine(self) -> str:
        """This machine's id (kept in the storage folder): read or made on first use only, so
        a session that never needs it leaves the folder as it found it."""
        if self._machine is None:
            self._machine = workspaces.machine_id(self.storage_folder or default_storage_folder())
        return self._machine

    def open_identity(self, manager: ChatHistoryManager, settings: Settings) -> None:
        """Before the first request under an identity mode (``workspaceIdentity`` from
        initializationOptions, else the settings in force): the session's identity, and the
        steps that bring its history along (workspaces.open_identity). A failure (1002) fails
        this request (a session without a folder: only when the request needs storage itself)
        and is tried again by the next."""
        mode = self.identity_option or settings.workspace_identity
        if mode == self._identity_mode:
            return
        with self._identity_lock:
            if mode == self._identity_mode:
                return
            identity = workspaces.resolve(self.raw_workspace, mode)
            self.workspace_identity = identity.workspace
            self.folder_identity = identity.link or identity.folder_identity  # client's spelling
            machine = self.machine if identity.git is not None else ""
            try:
                # old spellings: every session
                moved = workspaces.open_identity(manager, identity, machine)
            except StorageError:
                if identity.workspace.startswith(("file:", "repo:")):
                    raise
                return  # nothing of its own to bring along: the request meets the storage itself
            for line in moved:
                self.tell(MessageType.Info, line)
            self._identity_mode = mode

    def key(self, params: protocol.KeyParams) -> Key:
        """The request's conversation key, checked; the session's workspace when it names none."""
        workspace, conversation = checks.check_key(params, self.session_workspace)
        return Key(workspace, conversation)

    @property
    def session_workspace(self) -> checks.SessionWorkspace:
        """What a request's ``workspace`` is read against (checks.SessionWorkspace)."""
        return checks.SessionWorkspace(self.workspace_identity, self.folder_identity)


_LOG_LEVELS = {
    MessageType.Error: logging.ERROR,
    MessageType.Warning: logging.WARNING,
    MessageType.Info: logging.INFO,
    MessageType.Log: logging.DEBUG,
}

"""The session: pygls's language server with this server's state (its manager, the one request
thread, the settings barrier and their pull, the workspace identity, the change watch) and what it
tells the editor; and pygls's protocol with this server's LSP lifecycle (one initialize, the
capabilities it really has, document traffic dropped)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sys
import threading
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import lsp_method

from chat_history import __version__
from chat_history.errors import StorageError, quoted
from chat_history.model import Key, Trimmed
from chat_history.paths import default_storage_folder
from chat_history.service import replies, watch, workspaces
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import PROVIDER_KINDS, SECTION, Settings, default_settings, load_settings
from chat_history.wire import checks, protocol
from chat_history.wire.transport import frames, framing, lsp_adapter
from chat_history.wire.transport.barrier import BOUND_SECONDS, SettingsBarrier

log = logging.getLogger("chat_history")
PROTOCOL_VERSION = 4
TRIMMED = "chatHistory/trimmed"
CHANGED = "chatHistory/changed"

#: the converter pygls uses (tests share it)
_converter = lsp_adapter.converter


class ChatHistoryProtocol(lsp_adapter.AdaptedProtocol):
    """pygls's protocol with this server's lifecycle: one initialize per session, the capabilities
    it really has, document traffic dropped."""

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        """pygls's initialize, refused when repeated, answering with the chatHistory capabilities
        only."""
        if getattr(self.server, "manager", None) is not None:
            # LSP allows one initialize; a second must not swap the storage folder mid-session.
            raise JsonRpcInvalidRequest(message="initialize may only be sent once per session")
        result = yield from super().lsp_initialize(params)
        # Only what this server has: pygls would advertise text document sync, commands and
        # workspace folder notifications from its defaults, and editors would send that traffic.
        self.server_capabilities = result.capabilities = types.ServerCapabilities(
            experimental=protocol.capabilities(PROTOCOL_VERSION, PROVIDER_KINDS)
        )
        return result

    # Document traffic is not advertised; a client that sends it anyway is not kept in memory.
    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: Any) -> None:
        """Dropped: no document is kept."""
        return None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: Any) -> None:
        """Dropped: no document is kept."""
        return None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: Any) -> None:
        """Dropped: no document is kept."""
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def lsp_notebook_document__did_open(self, params: Any) -> None:
        """Dropped: no notebook is kept."""
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def lsp_notebook_document__did_change(self, params: Any) -> None:
        """Dropped: no notebook is kept."""
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def lsp_notebook_document__did_close(self, params: Any) -> None:
        """Dropped: no notebook is kept."""
        return None


class ChatHistoryServer(LanguageServer):
    """The session: its manager (made by ``initialize``), the one request thread, the settings
    barrier, the workspace identity and what it tells the editor."""

    def __init__(self) -> None:
        super().__init__(
            "chat-history-server",
            __version__,
            protocol_cls=ChatHistoryProtocol,
            converter_factory=_converter,
            max_workers=5,
        )
        self.manager: ChatHistoryManager | None = None
        # One thread runs the requests, in the order they arrived: two appends a client sends
        # without waiting must be stored in that order (pygls's pool would race them for the
        # manager's lock; the manager serialises them anyway, so no parallelism is lost).
        self.requests = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chat-history")
        #: set by ``shutdown``: requests that have not started never will
        self.closing = threading.Event()
        #: the tasks of requests not yet answered (``shutdown`` waits for them)
        self.in_flight: set[asyncio.Task[Any]] = set()
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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pulls: set[asyncio.Task[None]] = set()
        #: the stdout writer ``start_io`` gave pygls (None until then)
        self._stdout: frames.FrameWriter | None = None
        #: what other processes change (None until ``initialize``)
        self.watch: watch.ChangeWatch | None = None
        self._watching: asyncio.Task[None] | None = None

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Error responses already reach the client; expected ones need no log line at all.
        """Log an unexpected server error; expected ones (the protocol's own codes) are already in
        their answers."""
        if isinstance(error, JsonRpcException) and error.code in protocol.EXPECTED_CODES:
            return
        log.error("server error: %s", error)

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """pygls's stdio server with ``framing.serve`` as its loop: every request that can be
        answered is answered, whatever arrives on stdin (see transport/framing.py, intake.py)."""
        stop = lsp_adapter.new_stop_event(self)
        self._stdout = frames.FrameWriter(stdout or sys.stdout.buffer)
        self.protocol.set_writer(self._stdout)
        reader = framing.StdinReader(stdin or sys.stdin.buffer, self.thread_pool)
        signalled = False
        try:
            asyncio.run(framing.serve(reader, self.protocol, stop))
        except BrokenPipeError:
            log.error("the client closed the connection; shutting down")
        except KeyboardInterrupt:  # SIGTERM, SIGHUP (__main__) or Ctrl-C
            signalled = True
        except SystemExit as exc:  # `exit`: 0 after `shutdown`, else 1 (LSP)
            self.exit_code = exc.code if isinstance(exc.code, int) else 1
        finally:
            self.barrier.abandon()  # requests waiting for settings must not hold up the exit
            self.release_replies()
            if signalled:
                self._exit_at_once()
            self.shutdown()  # type: ignore[no-untyped-call]

    def _exit_at_once(self) -> None:
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

    def tell(self, kind: types.MessageType, message: str, *, show: bool = False) -> None:
        """A notable event: to stderr, to ``window/logMessage``, and with ``show`` to
        ``window/showMessage`` too. Safe from any thread (sent from the event loop)."""
        log.log(_LOG_LEVELS.get(kind, logging.INFO), "%s", message)
        text = f"chat-history-server: {message}"

        def send() -> None:
            self.window_log_message(types.LogMessageParams(type=kind, message=text))
            if show:
                self.window_show_message(types.ShowMessageParams(type=kind, message=text))

        loop = self._loop
        if loop is None or _running_loop() is loop:
            send()
        elif self._stdout is not None:
            # Another thread (the request thread, which writes its answer itself): written now,
            # so that what a request told goes before its answer, as the loop's sends did.
            shown_too = [types.WINDOW_SHOW_MESSAGE] if show else []
            for method in [types.WINDOW_LOG_MESSAGE, *shown_too]:
                wired = {"type": int(kind), "message": text}
                lsp_adapter.notify_all(self.protocol, self._stdout, method, [wired])
        elif not loop.is_closed():  # after the loop ended there is no client to tell
            loop.call_soon_threadsafe(send)

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
            types.MessageType.Warning,
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
                self.tell(types.MessageType.Warning, message, show=True)
        if loaded.unknown_keys:
            self.tell(
                types.MessageType.Warning,
                "ignoring unknown settings: " + ", ".join(loaded.unknown_keys),
            )
        return loaded.settings

    @property
    def pulls_configuration(self) -> bool:
        """Whether the client answers ``workspace/configuration`` (the settings are pulled, not only
        pushed)."""
        caps = self.client_capabilities.workspace
        return caps is not None and bool(caps.configuration)

    def start_pull(self) -> None:
        """Requests that arrive from now on wait for the answer (protocol.md, the barrier)."""
        pull = self.barrier.raise_()
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._pull(pull))
        self._pulls.add(task)  # a task nobody references may be collected mid-pull
        task.add_done_callback(self._pulls.discard)
        loop.call_later(self.barrier.bound, self._check_late)

    def _check_late(self) -> None:
        if self.barrier.expire_due():
            self._settings_late()

    async def _pull(self, pull: int) -> None:
        late = self.barrier.held
        try:
            answer = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            )
        except Exception as exc:  # an error answer (or one unreadable): nothing to tell
            self.tell(
                types.MessageType.Warning,
                f"workspace/configuration failed ({exc}); keeping the current settings",
            )
            answer = None
        value = answer[0] if isinstance(answer, list | tuple) and answer else None
        if not (value is None or isinstance(value, dict) or value == []):
            # Not a settings section (a string answer arrives as a list of its characters):
            # an answer all the same, which keeps the current settings.
            self.tell(
                types.MessageType.Warning,
                "workspace/configuration answered something that could not be read as "
                f"settings ({quoted(value)}); keeping the current settings",
            )
            value = None
        self.barrier.answer(pull, self.checked_settings(value) if value is not None else None)
        if late and not self.barrier.held:
            self.tell(types.MessageType.Info, "settings arrived; stored-history retention resumes")

    def send_trimmed(self, key: Key, events: Sequence[Trimmed]) -> None:
        """One request's ``chatHistory/trimmed`` notifications, written to stdout in one write
        (a prepare of a long conversation sends two, and every write wakes the client)."""
        params = [protocol.wire_trimmed(key.workspace, key.conversation, e) for e in events]
        lsp_adapter.notify_all(self.protocol, self._stdout, TRIMMED, params)

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
            lsp_adapter.notify_all(self.protocol, self._stdout, CHANGED, params)

    async def watch_idle(self) -> None:
        """Look for others' changes every ``watch.IDLE_SECONDS`` on the request thread (queued
        behind requests, so never beside one), until ``shutdown``."""
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
                self.tell(types.MessageType.Info, line)
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
    types.MessageType.Error: logging.ERROR,
    types.MessageType.Warning: logging.WARNING,
    types.MessageType.Info: logging.INFO,
    types.MessageType.Log: logging.DEBUG,
}


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None

"""The two pipes of ``chat-history acp``: the editor on our stdio, the agent a child process.

- **Transparent**: a message passes as the bytes it came in, unless its session id must be
  rebound (a session the proxy loaded, resumed or forked runs on a new agent session) or it is
  an answer the proxy completes (``initialize``'s capabilities).
- **The history view** (``listing``): ``session/list`` answered from the store, and twice a
  second, while the editor watches folders it listed, ``session/list_changed`` for each whose
  rows changed (to an editor that declared it takes it). A question of the agent the editor has
  not answered yet (a permission) shows its session as ``requires_action``.
- **Ids kept apart**: the editor's ids go to the agent as they are; the proxy's own requests
  to the agent use ids in ``OWN`` (an editor id that falls there is renamed on the way and back).
  The agent's requests to the editor (permissions, files, terminals) keep their ids.
- **Faults**: the agent's exit answers every open request with an error and leaves each reply
  interrupted; the next request starts the agent again (``initialize`` replayed) and a session
  of the dead agent gets a new agent session seeded with its history. Lines that are not JSON
  objects are dropped and logged; over-long lines pass in pieces, unparsed. The editor's exit
  interrupts what streams and stops the agent with everything it started: the agent runs in a
  process group of its own (POSIX), which goes with it (an ``npx`` wrapper's real binary
  included)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import os
import signal
import time
from typing import Any

from chat_history.acp import lines, listing, served, sessions
from chat_history.acp.recorder import Recorder
from chat_history.acp.stdio import Writer, editor_streams
from chat_history.errors import ChatHistoryError
from chat_history.service import replies

log = logging.getLogger("chat_history.acp")
OWN = "chat-history-acp/"
#: JSON-RPC error of a request the agent can no longer answer.
AGENT_GONE = -32603
#: The agent's requests that wait on the user (their session is ``requires_action``).
QUESTIONS = ("session/request_permission",)
#: How long the agent has to exit once its stdin is closed, and what it started to go after a
#: ``SIGTERM``, before each is killed.
STOP_GRACE_S = 3.0
GROUP_GRACE_S = 1.0
#: Whether the agent gets a process group of its own (stopped whole; POSIX only).
GROUPS = os.name == "posix"
#: Ticks (0.05 s) between two looks for changes of the watched folders' lists.
LIST_TICKS = 10
#: How long the editor has sent nothing before the list's rows are made ahead (s).
IDLE_S = 0.2
NOT_STARTED = {"code": AGENT_GONE, "message": "the agent could not be started"}
INTERNAL = {"code": AGENT_GONE, "message": "the proxy could not handle this request"}


class Pipe:
    """One destination: whole lines written at once, an over-long line's pieces under a lock."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self.lock = asyncio.Lock()

    async def send(self, data: bytes) -> None:
        """Write ``data`` and wait until the pipe took it."""
        async with self.lock:
            self.writer.write(data)
            await self.writer.drain()


class Relay(sessions.Link):
    """One editor, one agent command; ``run`` until the editor leaves."""

    def __init__(self, argv: list[str], recorder: Recorder, max_line: int = lines.MAX_LINE):
        self.argv = argv
        self.recorder = recorder
        self.max_line = max_line
        self.editor: Pipe | None = None
        self.agent: Pipe | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.ids = itertools.count(1)
        self.own: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.renamed: dict[str, Any] = {}  # our id → the editor's that fell in OWN
        self.pending: dict[Any, tuple[str, dict[str, Any]]] = {}  # editor id → method, params
        self.state = sessions.State()
        self.listings = listing.Listings(recorder)
        #: when the editor last sent something (time.monotonic)
        self.heard = 0.0
        self.starting: asyncio.Lock = asyncio.Lock()
        self.tasks: set[asyncio.Task[None]] = set()

    # -- the editor's side ---------------------------------------------------------------------

    async def run(self, reader: asyncio.StreamReader, writer: Writer) -> int:
        """Relay the editor's lines until it closes them; then interrupt what streams and stop
        the agent. Returns the exit status (0)."""
        self.editor = Pipe(writer)
        ticker = asyncio.ensure_future(self._tick())
        try:
            async for frame in lines.frames(reader, self.max_line):
                if frame.piece:
                    await self._to_agent_raw(frame.data)
                elif frame.message is None:
                    log.warning("acp: the editor sent a line that is not a JSON object")
                else:
                    await self.from_editor(frame.message, frame.data)
        finally:
            ticker.cancel()
            for task in list(self.tasks):
                task.cancel()
            self.recorder.end_all("interrupted")
            await self._stop_agent()
        return 0

    async def from_editor(self, message: dict[str, Any], data: bytes) -> None:
        """One message of the editor: an answer or a notification passed on, a method the proxy
        serves handled beside the pipes, a prompt recorded, any other request forwarded."""
        self.heard = time.monotonic()
        method = message.get("method")
        if not isinstance(method, str):  # an answer to the agent's request
            self.listings.answered(message.get("id"))
            await self._to_agent_raw(data)
            return
        if "id" not in message:
            with contextlib.suppress(sessions.AgentError):  # a notification: nobody to tell
                await self.forward(message, data)
            return
        handler = served.SERVED.get(method)
        if handler is not None:  # may wait on the agent: never block the editor's pipe
            self._spawn(handler(self, message), message["id"])
            return
        if method == "session/prompt":
            if sessions.needs_attach(self.state, message):  # waits on the agent
                self._spawn(sessions.prompt(self, message, data), message["id"])
            else:  # in order with what follows (a cancel)
                await sessions.prompt(self, message, data)
            return
        self.pending[message["id"]] = (method, dict(message.get("params") or {}))
        try:
            await self.forward(message, data)
        except sessions.AgentError as error:
            self.pending.pop(message["id"], None)
            await self.answer(message["id"], error=error.error)

    def _spawn(self, work: Any, rid: Any = None) -> None:
        """Run ``work`` beside the pipes; if it fails, the editor's request ``rid`` still gets
        an answer (an error), never silence."""

        async def guarded() -> None:
            try:
                await work
            except Exception:
                log.exception("acp: the proxy failed to handle a request")
                if rid is not None:
                    await self.answer(rid, error=INTERNAL)

        def done(task: asyncio.Task[None]) -> None:
            self.tasks.discard(task)
            if task.cancelled() and inspect.iscoroutine(work):
                work.close()  # cancelled before it began (stdin closed at once): no warning

        task: asyncio.Task[None] = asyncio.ensure_future(guarded())
        self.tasks.add(task)
        task.add_done_callback(done)

    async def forward(self, message: dict[str, Any], data: bytes | None = None) -> None:
        """An editor's message to the agent (its session id rebound, its id kept apart)."""
        await self.ensure_agent()
        changed = sessions.rebind(message, self.state.agent_of)
        rid = message.get("id")
        if "method" in message and isinstance(rid, str) and rid.startswith(OWN):
            ours = f"{OWN}{next(self.ids)}"
            self.renamed[ours] = rid
            message = {**message, "id": ours}
            changed = True
        if self.agent is not None:
            await self.agent.send(lines.encode(message) if changed or data is None else data)

    async def to_editor(self, message: dict[str, Any]) -> None:
        """Send ``message`` to the editor (dropped once it is gone)."""
        if self.editor is not None:
            await self.editor.send(lines.encode(message))

    async def answer(self, rid: Any, result: Any = None, error: Any = None) -> None:
        """Answer the editor's request ``rid`` with ``result``, or with ``error`` when given."""
        body = {"error": error} if error is not None else {"result": result}
        await self.to_editor({"jsonrpc": "2.0", "id": rid, **body})

    async def _to_agent_raw(self, data: bytes) -> None:
        with contextlib.suppress(sessions.AgentError):
            await self.ensure_agent()
        if self.agent is not None:
            await self.agent.send(data)

    # -- the agent's side ----------------------------------------------------------------------

    async def ensure_agent(self) -> None:
        """Start the agent if it is not running (after a crash: ``initialize`` replayed)."""
        async with self.starting:
            if self.process is not None and self.process.returncode is None:
                return
            try:
                self.process = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    start_new_session=GROUPS,
                )
            except OSError as error:
                log.warning("acp: the agent could not be started: %s", error.strerror)
                raise sessions.AgentError(NOT_STARTED) from None
            assert self.process.stdin is not None and self.process.stdout is not None
            self.agent = Pipe(self.process.stdin)
            self._spawn(self._read_agent(self.process))
            if self.state.initialize is not None:  # a restart: the editor initialized before
                self.state.detach_all()
                result = await self.request("initialize", self.state.initialize, started=True)
                self.state.learn(result)

    async def request(
        self, method: str, params: dict[str, Any], started: bool = False
    ) -> dict[str, Any]:
        """The proxy's own request to the agent; its result (an error raises AgentError)."""
        if not started:
            await self.ensure_agent()
        rid = f"{OWN}{next(self.ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.own[rid] = future
        assert self.agent is not None
        await self.agent.send(
            lines.encode({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        )
        return await future

    async def _read_agent(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        try:
            async for frame in lines.frames(process.stdout, self.max_line):
                if frame.piece:
                    if self.editor is not None:
                        await self.editor.send(frame.data)
                elif frame.message is None:
                    log.warning("acp: the agent wrote a line that is not a JSON object")
                else:
                    await self._from_agent_guarded(frame.message, frame.data)
        finally:
            await process.wait()
            if process is self.process:
                await self._agent_gone(process.returncode)

    async def _from_agent_guarded(self, message: dict[str, Any], data: bytes) -> None:
        """``from_agent``; when the proxy's own part fails, the message still passes as it came."""
        try:
            await self.from_agent(message, data)
        except Exception:
            log.exception("acp: the proxy failed on a message of the agent; passed as it came")
            if self.editor is not None:
                await self.editor.send(data)

    async def from_agent(self, message: dict[str, Any], data: bytes) -> None:
        """One message of the agent: an answer to the proxy's own request settles it; anything
        else goes to the editor (its id and session id given back, an update recorded, an answer
        the proxy completes completed)."""
        rid = message.get("id")
        if "method" not in message and rid in self.own:
            future = self.own.pop(rid)
            if not future.done():
                if "error" in message:
                    future.set_exception(sessions.AgentError(message["error"]))
                else:
                    future.set_result(message.get("result") or {})
            return
        if "method" not in message and rid in self.renamed:
            message = {**message, "id": self.renamed.pop(rid)}
            data = b""
        if message.get("method") in QUESTIONS and "id" in message:
            params = message.get("params") or {}
            session = self.state.editor_of(params.get("sessionId"))
            if isinstance(session, str):
                self.listings.asked(message["id"], session)
        if message.get("method") == "session/update":
            params = message.get("params") or {}
            if self.recorder.update(
                str(self.state.editor_of(params.get("sessionId"))), params.get("update") or {}
            ):
                self.recorder.flush(str(self.state.editor_of(params.get("sessionId"))))
        if "method" not in message and message.get("id") in self.pending:
            method, params = self.pending.pop(message["id"])
            message = sessions.completed(self, method, params, message)
            data = b""
        if sessions.rebind(message, self.state.editor_of) or not data:
            data = lines.encode(message)
        if self.editor is not None:
            await self.editor.send(data)

    async def _agent_gone(self, code: int | None) -> None:
        log.warning("acp: the agent exited (code %s)", code)
        self.recorder.end_all("interrupted")
        self.state.detach_all()
        self.listings.forget_questions()
        error = {"code": AGENT_GONE, "message": "the agent exited"}
        for future in self.own.values():
            if not future.done():
                future.set_exception(sessions.AgentError(error))
        self.own.clear()
        for rid in list(self.pending):
            del self.pending[rid]
            await self.answer(rid, error=error)

    async def _tick(self) -> None:
        """Flush replies that lag, renew the leases of streaming rows, make the list's rows
        ahead, tell the editor of the watched lists that changed."""
        beats = 0
        while True:
            await asyncio.sleep(0.05)
            for session_id in self.recorder.due():
                self.recorder.flush(session_id)
            beats += 1
            if time.monotonic() - self.heard > IDLE_S:
                self.listings.warm()
            if beats % LIST_TICKS == 0 and self.state.listens():
                for cwd in self.listings.tick():
                    await self.to_editor(
                        {"jsonrpc": "2.0", "method": listing.CHANGED, "params": {"cwd": cwd}}
                    )
            if beats % 100 == 0:
                try:
                    replies.tend(self.recorder.manager)
                except ChatHistoryError as error:  # the next beat tries again
                    log.warning("acp: the leases were not renewed: %s", error)

    async def _stop_agent(self) -> None:
        """Close the agent's stdin and give it ``STOP_GRACE_S`` to exit, else kill it; then
        stop what it started and left running (its process group: ``_end_group``)."""
        process = self.process
        if process is None:
            return
        self.process = None
        if process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), STOP_GRACE_S)
            except TimeoutError:
                if not _signal_group(process.pid, signal.SIGKILL):
                    process.kill()
                await process.wait()
        await _end_group(process.pid)


def _signal_group(group: int, sig: int) -> bool:
    """Send ``sig`` to the agent's process group ``group`` (its pid); False when no process of
    it is left (or groups are not used)."""
    if not GROUPS:
        return False
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def _end_group(group: int) -> None:
    """The processes left in the agent's group once it exited (what it started: a wrapper's
    real binary, a helper) stopped: ``SIGTERM``, then ``SIGKILL`` after ``GROUP_GRACE_S``."""
    if not _signal_group(group, signal.SIGTERM):
        return
    deadline = time.monotonic() + GROUP_GRACE_S
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        if not _signal_group(group, 0):
            return
    _signal_group(group, signal.SIGKILL)


async def serve(argv: list[str], recorder: Recorder) -> int:
    """Relay our stdio to the agent ``argv`` until the editor closes stdin."""
    reader, writer = await editor_streams()
    try:
        return await Relay(argv, recorder).run(reader, writer)
    finally:
        replies.release(recorder.manager)

"""The session methods the proxy serves from the store when the agent lacks them, and what it
adds to the answers it forwards (protocol.md "Version 4" → ACP sessions):

- ``initialize``: the agent's answer declares ``loadSession`` and the session capabilities
  ``list``, ``resume``, ``close``, ``delete`` and ``fork`` (the proxy serves each);
- ``session/list``: the stored sessions of a ``cwd`` (without one, the proxy's own working
  folder) with titles, merged with the agent's own;
- ``session/load``: the stored history replayed as ``session/update``, then a new agent session
  bound to the editor's session id, whose first prompt carries a context block (``prepare``'s
  budget rules); ``session/resume`` the same without the replay; ``session/fork`` forks the
  conversation and seeds a new agent session the same way; ``session/delete`` deletes it from
  the store for good (and forwards when the agent has it); ``session/close`` ends the binding.
- A session whose agent died is re-attached (a new agent session, seeded) at its next prompt."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from chat_history.acp import rows
from chat_history.acp.recorder import Recorder
from chat_history.errors import ChatHistoryError, InvalidParams
from chat_history.model import Key
from chat_history.service import conversations, history
from chat_history.service.preparation import PrepareOptions

log = logging.getLogger("chat_history.acp")
#: ACP's "resource not found" (a session the store does not hold).
NOT_FOUND = -32002
CAPABILITIES = ("list", "resume", "close", "delete", "fork")


class AgentError(Exception):
    """The agent answered the proxy's own request with an error (or exited)."""

    def __init__(self, error: Any) -> None:
        super().__init__(str(error))
        self.error = error if isinstance(error, dict) else {"code": -32603, "message": str(error)}


@attrs.define
class State:
    """What the proxy knows of the sessions: the editor's ``initialize``, the agent's
    capabilities, each session's cwd, the editor-session → agent-session bindings, the sessions
    of a dead agent, and the context block each seeded session's first prompt carries."""

    initialize: dict[str, Any] | None = None
    agent: dict[str, Any] = attrs.field(factory=dict)
    cwd: dict[str, str] = attrs.field(factory=dict)
    alias: dict[str, str] = attrs.field(factory=dict)
    reverse: dict[str, str] = attrs.field(factory=dict)
    detached: set[str] = attrs.field(factory=set)
    seeds: dict[str, dict[str, str]] = attrs.field(factory=dict)

    def agent_of(self, session: str) -> str:
        """The agent's session the editor's ``session`` is bound to (itself when not rebound)."""
        return self.alias.get(session, session)

    def editor_of(self, session: Any) -> Any:
        """The editor's session of the agent's ``session`` (itself when not rebound, or not a
        string)."""
        return self.reverse.get(session, session) if isinstance(session, str) else session

    def bind(self, editor: str, agent: str) -> None:
        """The editor's session ``editor`` runs on the agent's ``agent`` from now on."""
        self.alias.pop(editor, None)
        if editor != agent:
            self.alias[editor] = agent
            self.reverse[agent] = editor
        self.detached.discard(editor)

    def detach_all(self) -> None:
        """The agent is gone: every known session is re-attached at its next prompt."""
        self.detached.update(self.cwd)
        self.alias.clear()
        self.reverse.clear()

    def learn(self, result: dict[str, Any]) -> None:
        """The agent's capabilities, from its answer to ``initialize``."""
        self.agent = dict(result.get("agentCapabilities") or {})

    def has(self, capability: str) -> bool:
        """Whether the agent itself offers ``capability`` (``load``, or a session capability
        such as ``list`` or ``fork``)."""
        if capability == "load":
            return bool(self.agent.get("loadSession"))
        return (self.agent.get("sessionCapabilities") or {}).get(capability) is not None


class Link(Protocol):
    """What the served methods need of the relay."""

    state: State
    recorder: Recorder
    pending: dict[Any, tuple[str, dict[str, Any]]]

    async def forward(self, message: dict[str, Any], data: bytes | None = None) -> None:
        """An editor's message to the agent, its session id rebound (``data``: its bytes)."""

    async def to_editor(self, message: dict[str, Any]) -> None:
        """A message to the editor."""

    async def answer(self, rid: Any, result: Any = None, error: Any = None) -> None:
        """The answer to the editor's request ``rid``: ``result``, or ``error`` when given."""

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The proxy's own request to the agent; its result (an error raises AgentError)."""


def rebind(message: dict[str, Any], session_of: Callable[[str], str]) -> bool:
    """Replace ``params.sessionId`` through ``session_of`` (a new params dict); True if changed."""
    params = message.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str):
        return False
    bound = session_of(params["sessionId"])
    if bound == params["sessionId"]:
        return False
    message["params"] = {**params, "sessionId": bound}
    return True


def needs_attach(state: State, message: dict[str, Any]) -> bool:
    """Whether ``message`` is for a session of a dead agent (re-attached before it passes)."""
    return (message.get("params") or {}).get("sessionId") in state.detached


async def prompt(link: Link, message: dict[str, Any], data: bytes) -> None:
    """``session/prompt``: recorded, re-attached first if its agent died, its first blocks the
    seeded context when there is one."""
    params = dict(message.get("params") or {})
    session = str(params.get("sessionId"))
    if session in link.state.detached:
        try:
            await attach(link, session, params)
        except AgentError as error:
            await link.answer(message["id"], error=error.error)
            return
    blocks = list(params.get("prompt") or [])
    link.recorder.prompt(session, blocks)
    seed = link.state.seeds.pop(session, None)
    link.pending[message["id"]] = ("session/prompt", params)
    try:
        if seed is None:
            await link.forward(message, data)
        else:
            await link.forward({**message, "params": {**params, "prompt": [seed, *blocks]}})
    except AgentError as error:
        link.pending.pop(message["id"], None)
        link.recorder.end(session, "interrupted")
        await link.answer(message["id"], error=error.error)


async def attach(link: Link, session: str, params: dict[str, Any]) -> dict[str, Any]:
    """A new agent session bound to the editor's ``session``, seeded with its stored history;
    the agent's answer less its session id."""
    cwd = str(params.get("cwd") or link.state.cwd.get(session) or ".")
    key = link.recorder.bind(session, cwd)
    link.state.cwd[session] = cwd
    new = {"cwd": cwd, "mcpServers": params.get("mcpServers") or []}
    result = await link.request("session/new", new)
    link.state.bind(session, str(result["sessionId"]))
    block = seed(link.recorder, key)
    if block is not None:
        link.state.seeds[session] = block
    return {k: v for k, v in result.items() if k != "sessionId"}


def seed(recorder: Recorder, key: Key) -> dict[str, str] | None:
    """The context block of ``key``'s history, under ``prepare``'s budget rules (None: none)."""
    try:
        prepared = history.prepare(recorder.manager, key, PrepareOptions())
    except ChatHistoryError as error:
        log.warning("acp: no context for the new agent session: %s", error)
        return None
    messages = prepared.body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    return rows.context_block(messages)


def completed(link: Link, method: str, params: dict[str, Any], answer: dict[str, Any]) -> Any:
    """The agent's answer to a forwarded request, as the editor gets it (recorded first)."""
    result = answer.get("result")
    session = params.get("sessionId")
    if method == "initialize" and isinstance(result, dict):
        link.state.initialize = params
        link.state.learn(result)
        return {**answer, "result": with_capabilities(result)}
    if method == "session/new" and isinstance(result, dict) and "sessionId" in result:
        cwd = str(params.get("cwd") or ".")
        link.state.cwd[str(result["sessionId"])] = cwd
        link.recorder.bind(str(result["sessionId"]), cwd)
    elif method in ("session/load", "session/resume") and isinstance(session, str):
        cwd = str(params.get("cwd") or ".")
        link.state.cwd[session] = cwd
        link.recorder.bind(session, cwd)
    elif method == "session/prompt" and isinstance(session, str):
        stop = result.get("stopReason") if isinstance(result, dict) else None
        link.recorder.end(session, "complete" if stop not in (None, "cancelled") else "interrupted")
    elif method == "session/list" and isinstance(result, dict) and not params.get("cursor"):
        return {**answer, "result": merged(link, params, result)}
    elif method == "session/fork" and isinstance(result, dict) and isinstance(session, str):
        forked(link, session, str(result.get("sessionId")), params)
    return answer


def with_capabilities(result: dict[str, Any]) -> dict[str, Any]:
    """The agent's ``initialize`` result, declaring ``loadSession`` and every session capability
    the proxy serves."""
    caps = dict(result.get("agentCapabilities") or {})
    session = dict(caps.get("sessionCapabilities") or {})
    for name in CAPABILITIES:
        if session.get(name) is None:
            session[name] = {}
    caps.update(loadSession=True, sessionCapabilities=session)
    return {**result, "agentCapabilities": caps}


#: Sessions per page of a served ``session/list``.
PAGE = 50


def listed_cwd(params: dict[str, Any]) -> str:
    """The folder whose sessions a ``session/list`` lists: its ``cwd``, else the folder the
    editor started the proxy in (ACP lists the sessions "of a cwd": another workspace's only
    when asked for). Raises InvalidParams ``cwd`` for one that is not a non-empty string."""
    cwd = params.get("cwd")
    if cwd is None:
        return os.getcwd()
    if not isinstance(cwd, str) or not cwd:
        raise InvalidParams("cwd", "must be the absolute path of a folder")
    return cwd


def stored(
    link: Link, cwd: str | None, cursor: str | None = None, limit: int | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """The stored sessions of ``cwd`` (every cwd when None) as ``SessionInfo``s, after the store's
    ``cursor``, at most ``limit`` (None: all), and the cursor of the next page (None: the last).
    Raises InvalidParams ``cursor`` for a cursor the store did not hand out."""
    workspace = link.recorder.workspace(cwd) if cwd else None
    found: list[dict[str, Any]] = []
    while True:
        want = None if limit is None else limit - len(found)
        page = conversations.list_page(link.recorder.manager, workspace, want, cursor)
        for info in page.conversations:
            session = rows.session_of(info.conversation_id)
            if session is None or info.message_count == 0:
                continue  # not an ACP session: a page may hold fewer, the next one follows
            entry: dict[str, Any] = {"sessionId": session, "cwd": cwd or _path(info.workspace)}
            if info.title:
                entry["title"] = info.title
            if info.last_activity:
                entry["updatedAt"] = _iso(info.last_activity)
            found.append(entry)
        cursor = page.next_cursor
        if cursor is None or (limit is not None and len(found) >= limit):
            return found, cursor


def merged(link: Link, params: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The agent's first ``session/list`` page with the stored sessions it does not list
    appended."""
    own = list(result.get("sessions") or [])
    known = {s.get("sessionId") for s in own if isinstance(s, dict)}
    try:
        cwd = listed_cwd(params)
    except InvalidParams:
        return result  # the agent took a cwd the store cannot: its answer stands alone
    extra = [s for s in stored(link, cwd)[0] if s["sessionId"] not in known]
    return {**result, "sessions": own + extra}


def forked(link: Link, source: str, target: str, params: dict[str, Any]) -> None:
    """The agent forked ``source`` into ``target``: the stored conversation forked the same way
    (a failure logged)."""
    key = link.recorder.key(source)
    if key is None:
        return
    cwd = str(params.get("cwd") or link.state.cwd.get(source) or ".")
    link.state.cwd[target] = cwd
    try:
        conversations.fork(link.recorder.manager, key, link.recorder.bind(target, cwd))
    except ChatHistoryError as error:
        log.warning("acp: the fork was not recorded: %s", error)


def _path(workspace: str) -> str:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(workspace)
    return unquote(parsed.path) if parsed.scheme == "file" else workspace


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")

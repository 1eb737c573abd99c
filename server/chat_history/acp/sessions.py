"""The session methods the proxy serves from the store when the agent lacks them, and what it
adds to the answers it forwards (protocol.md "Version 4" → ACP sessions):

- ``initialize``: the agent's answer declares ``loadSession`` and the session capabilities
  ``list`` (with the history view's ``limit`` and ``changes``), ``resume``, ``close``,
  ``delete``, ``fork``, ``archive`` and ``setTitle`` (the proxy serves each);
- ``session/list``: the history view of a ``cwd`` (``listing``), from the store;
- ``session/load``: the stored history replayed as ``session/update``, then a new agent session
  bound to the editor's session id, whose first prompt carries a context block (``prepare``'s
  budget rules); ``session/resume`` the same without the replay; ``session/fork`` forks the
  conversation and seeds a new agent session the same way; ``session/delete`` deletes it from
  the store for good (and forwards when the agent has it); ``session/close`` ends the binding.
- A session whose agent died is re-attached (a new agent session, seeded) at its next prompt."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from chat_history.acp import rows
from chat_history.acp.listing import Listings
from chat_history.acp.recorder import Recorder
from chat_history.errors import ChatHistoryError, InvalidParams
from chat_history.model import Key
from chat_history.service import branches, conversations, history
from chat_history.service.preparation import PrepareOptions

log = logging.getLogger("chat_history.acp")
#: ACP's "resource not found" (a session the store does not hold).
NOT_FOUND = -32002
#: The session capabilities the proxy declares, as it declares them: ``list`` honours
#: ``limit`` (and its order) and sends ``session/list_changed`` (the history view RFD's
#: markers); ``archive`` (session archive RFD) and ``setTitle`` (client-set titles) are
#: served whether or not the agent has them.
CAPABILITIES: dict[str, dict[str, Any]] = {
    "list": {"limit": {}, "changes": {}},
    "resume": {},
    "close": {},
    "delete": {},
    "fork": {},
    "archive": {},
    "setTitle": {},
}


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

    def listens(self) -> bool:
        """Whether the editor declared that it takes ``session/list_changed``
        (``clientCapabilities.session.listChanged``); the proxy sends it to no other."""
        found: Any = self.initialize or {}
        for name in ("clientCapabilities", "session", "listChanged"):
            found = found.get(name) if isinstance(found, dict) else None
        return isinstance(found, dict)


class Link(Protocol):
    """What the served methods need of the relay."""

    state: State
    recorder: Recorder
    listings: Listings
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
    own = params.get("messageId")
    link.recorder.prompt(session, blocks, own if isinstance(own, str) else None)
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


def fork_at(params: dict[str, Any]) -> str | None:
    """A ``session/fork``'s ``messageId`` (the ACP draft's: fork at that message), None when
    absent. Raises InvalidParams ``messageId``."""
    value = params.get("messageId")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidParams("messageId", "must be a message id (a non-empty string)")
    return value


def fork_point(recorder: Recorder, key: Key, message_id: str) -> int:
    """The stored row ``message_id`` names in ``key``'s conversation, on any of its branches
    (``rows.message_row``). Raises InvalidParams ``messageId`` (no such message)."""
    found = rows.message_row(branches.tree_rows(recorder.manager, key), message_id)
    if found is None:
        raise InvalidParams("messageId", "names no message of this session")
    return found


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
    elif method == "session/fork" and isinstance(result, dict) and isinstance(session, str):
        forked(link, session, str(result.get("sessionId")), params)
    return answer


def with_capabilities(result: dict[str, Any]) -> dict[str, Any]:
    """The agent's ``initialize`` result, declaring ``loadSession`` and every session capability
    the proxy serves (``list`` as the proxy answers it, whatever the agent's own)."""
    caps = dict(result.get("agentCapabilities") or {})
    session = dict(caps.get("sessionCapabilities") or {})
    for name, declared in CAPABILITIES.items():
        if session.get(name) is None or name == "list":
            session[name] = copy.deepcopy(declared)
    caps.update(loadSession=True, sessionCapabilities=session)
    return {**result, "agentCapabilities": caps}


def forked(link: Link, source: str, target: str, params: dict[str, Any]) -> None:
    """The agent forked ``source`` into ``target``: the stored conversation forked the same way
    (a failure logged)."""
    key = link.recorder.key(source)
    if key is None:
        return
    cwd = str(params.get("cwd") or link.state.cwd.get(source) or ".")
    link.state.cwd[target] = cwd
    try:
        message_id = fork_at(params)
        through = None if message_id is None else fork_point(link.recorder, key, message_id)
    except ChatHistoryError as error:  # the agent knows a message the store does not: all of it
        log.warning("acp: the fork's message is not in the store (%s); copied whole", error)
        through = None
    try:
        conversations.fork(link.recorder.manager, key, link.recorder.bind(target, cwd), through)
    except ChatHistoryError as error:
        log.warning("acp: the fork was not recorded: %s", error)

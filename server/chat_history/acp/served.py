"""The session methods the proxy answers itself when the agent lacks them (``sessions`` holds
the state and the rules): each forwards when the agent declared the capability, else serves it
from the store. Errors go to the editor as JSON-RPC errors; nothing here echoes its values."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from acp.schema import ListSessionsResponse, SessionInfo, SessionNotification

from chat_history.acp import rows
from chat_history.acp.sessions import (
    NOT_FOUND,
    PAGE,
    AgentError,
    Link,
    attach,
    listed_cwd,
    stored,
)
from chat_history.errors import ChatHistoryError, InvalidParams
from chat_history.model import Key
from chat_history.service import conversations, history

Served = Callable[[Link, dict[str, Any]], Awaitable[None]]


async def _forward(link: Link, message: dict[str, Any]) -> None:
    link.pending[message["id"]] = (message["method"], dict(message.get("params") or {}))
    await link.forward(message)


def _params(message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params")
    return dict(params) if isinstance(params, dict) else {}


async def _guarded(link: Link, message: dict[str, Any], work: Callable[[], Awaitable[Any]]) -> None:
    try:
        result = await work()
    except AgentError as error:
        await link.answer(message["id"], error=error.error)
    except InvalidParams as error:
        await link.answer(message["id"], error={"code": -32602, "message": str(error)})
    except ChatHistoryError as error:
        await link.answer(message["id"], error={"code": -32603, "message": str(error)})
    else:
        if result is not None:
            await link.answer(message["id"], result)


async def session_list(link: Link, message: dict[str, Any]) -> None:
    """``session/list``: forwarded when the agent lists sessions (its first page merged with the
    stored ones on the way back), else the stored sessions of ``cwd``, a page at a time."""
    if link.state.has("list"):
        await _forward(link, message)
        return
    params = _params(message)

    async def work() -> Any:
        cursor = params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise InvalidParams("cursor", "must be a string handed out by session/list")
        found, next_cursor = stored(link, listed_cwd(params), cursor, PAGE)
        infos = [SessionInfo.model_validate(s) for s in found]
        if next_cursor is None:  # absent on the last page
            return _wire(ListSessionsResponse(sessions=infos))
        return _wire(ListSessionsResponse(sessions=infos, next_cursor=next_cursor))

    await _guarded(link, message, work)


def _history(link: Link, session: str, cwd: str) -> tuple[Key, list[Any]]:
    key = link.recorder.bind(session, cwd)
    link.state.cwd[session] = cwd
    stored, _ = history.whole(link.recorder.manager, key)
    return key, list(stored)


def _wire(model: Any) -> dict[str, Any]:
    """An SDK message as its wire JSON (what was set, under ACP's names)."""
    value: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return value


async def _missing(link: Link, message: dict[str, Any]) -> None:
    await link.answer(message["id"], error={"code": NOT_FOUND, "message": "session not found"})


async def session_load(link: Link, message: dict[str, Any], replay: bool = True) -> None:
    """Load (or resume) at the agent when it can; from the store when it cannot, or when it
    does not know the session (an agent's own history lost, a session seeded elsewhere)."""
    method = "load" if replay else "resume"
    params = _params(message)
    session, cwd = str(params.get("sessionId")), str(params.get("cwd") or ".")
    refused: dict[str, Any] | None = None
    if link.state.has(method):
        try:
            result = await link.request(f"session/{method}", params)
        except AgentError as error:
            refused = error.error
        else:
            link.recorder.bind(session, cwd)
            link.state.cwd[session] = cwd
            link.state.bind(session, session)  # the agent holds it again: no rebinding
            await link.answer(message["id"], result)
            return

    async def work() -> Any:
        _, stored = _history(link, session, cwd)
        if not stored:
            if refused is not None:
                await link.answer(message["id"], error=refused)
            else:
                await _missing(link, message)
            return None
        if replay:
            for update in rows.replay(stored):
                note = SessionNotification.model_validate({"sessionId": session, "update": update})
                await link.to_editor(
                    {"jsonrpc": "2.0", "method": "session/update", "params": _wire(note)}
                )
        return await attach(link, session, params)

    await _guarded(link, message, work)


async def session_resume(link: Link, message: dict[str, Any]) -> None:
    """``session/resume``: ``session_load`` without the history's replay."""
    await session_load(link, message, replay=False)


async def session_fork(link: Link, message: dict[str, Any]) -> None:
    """``session/fork``: forwarded when the agent forks, else the stored conversation forked into
    a new session id and a new agent session seeded with it."""
    if link.state.has("fork"):
        await _forward(link, message)
        return
    params = _params(message)
    source, cwd = str(params.get("sessionId")), str(params.get("cwd") or ".")

    async def work() -> Any:
        key, stored = _history(link, source, cwd)
        if not stored:
            await _missing(link, message)
            return None
        target = str(uuid.uuid4())
        conversations.fork(link.recorder.manager, key, link.recorder.bind(target, cwd))
        result = await attach(link, target, params)
        return {"sessionId": target, **result}

    await _guarded(link, message, work)


async def session_delete(link: Link, message: dict[str, Any]) -> None:
    """``session/delete``: the session's conversation deleted from the store for good (under
    ``cwd``, else under every workspace), then forwarded when the agent deletes too."""
    params = _params(message)
    session = str(params.get("sessionId"))
    key = link.recorder.key(session)
    if key is None and params.get("cwd"):
        key = link.recorder.bind(session, str(params["cwd"]))
    link.recorder.end(session, "discard")
    if key is not None:
        history.clear(link.recorder.manager, key)
    else:  # no cwd: the session under any workspace
        for entry in stored(link, None)[0]:
            if entry["sessionId"] == session:
                history.clear(link.recorder.manager, link.recorder.bind(session, entry["cwd"]))
    if link.state.has("delete"):
        await _forward(link, message)
    else:
        await link.answer(message["id"], {})


async def session_close(link: Link, message: dict[str, Any]) -> None:
    """``session/close``: its reply left interrupted and its seed dropped; forwarded when the
    agent closes sessions, else answered here."""
    session = str(_params(message).get("sessionId"))
    link.recorder.end(session, "interrupted")
    link.state.seeds.pop(session, None)
    if link.state.has("close"):
        await _forward(link, message)
    else:
        await link.answer(message["id"], {})


SERVED: dict[str, Served] = {
    "session/list": session_list,
    "session/load": session_load,
    "session/resume": session_resume,
    "session/fork": session_fork,
    "session/delete": session_delete,
    "session/close": session_close,
}

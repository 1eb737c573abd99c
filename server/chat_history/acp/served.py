"""The session methods the proxy answers itself (``sessions`` holds the state and the rules):
``session/list`` always from the store (``listing``: the history view); ``load``, ``resume``,
``fork`` and ``close`` forwarded when the agent declared the capability, else served from the
store; ``delete``, ``archive``, ``unarchive`` and ``set_title`` done in the store, then forwarded
when the agent declared them too. Errors go to the editor as JSON-RPC errors; nothing here echoes
its values."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from chat_history.acp import rows
from chat_history.acp.sessions import NOT_FOUND, AgentError, Link, attach, fork_at, fork_point
from chat_history.errors import ChatHistoryError, InvalidParams
from chat_history.model import Key
from chat_history.service import conversations, history
from chat_history.service.conversations import ConversationUpdate
from chat_history.service.session_list import holders

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
    """``session/list``: the history view, from the store (``listing``), whether or not the
    agent lists sessions itself; its own list only when the request asks for it
    (``_meta.chatHistory.source: "agent"``), forwarded as it is."""
    params = _params(message)
    own = _asks_the_agent(params)
    if own and link.state.has("list"):
        await _forward(link, message)
        return

    async def work() -> Any:
        if own:
            raise InvalidParams("_meta.chatHistory.source", "the agent lists no sessions itself")
        return link.listings.page(params)

    await _guarded(link, message, work)


def _asks_the_agent(params: dict[str, Any]) -> bool:
    meta = params.get("_meta")
    ours = meta.get("chatHistory") if isinstance(meta, dict) else None
    return isinstance(ours, dict) and ours.get("source") == "agent"


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
            # The ACP SDK's message types (~70 % of what the proxy would import at its start,
            # issue 45) load at the first history replayed from the store, which alone uses
            # them: the proxy's first answers relay the agent's.
            from acp.schema import SessionNotification

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
    a new session id and a new agent session seeded with it. With ``messageId`` (the ACP draft's
    fork at a message) the copy is the path through that message, on whichever branch of the
    stored tree it is (``sessions.fork_point``); the source is left as it was."""
    if link.state.has("fork"):
        await _forward(link, message)
        return
    params = _params(message)
    source, cwd = str(params.get("sessionId")), str(params.get("cwd") or ".")

    async def work() -> Any:
        message_id = fork_at(params)
        key, stored = _history(link, source, cwd)
        if not stored:
            await _missing(link, message)
            return None
        through = None if message_id is None else fork_point(link.recorder, key, message_id)
        target = str(uuid.uuid4())
        conversations.fork(link.recorder.manager, key, link.recorder.bind(target, cwd), through)
        result = await attach(link, target, params)
        return {"sessionId": target, **result}

    await _guarded(link, message, work)


def _keys(link: Link, session: str, cwd: Any = None) -> list[Key]:
    """The conversations of ``session``: the one this proxy bound it to, else the one of
    ``cwd`` when given, else every workspace's that holds it."""
    key = link.recorder.key(session)
    if key is not None:
        return [key]
    if isinstance(cwd, str) and cwd:
        return [link.recorder.bind(session, cwd)]
    conversation = rows.conversation_id(session)
    return [Key(w, conversation) for w in holders(link.recorder.manager, conversation)]


def _session_id(params: dict[str, Any]) -> str:
    session = params.get("sessionId")
    if not isinstance(session, str) or not session:
        raise InvalidParams("sessionId", "must be a session id")
    return session


async def session_delete(link: Link, message: dict[str, Any]) -> None:
    """``session/delete``: the session's conversation deleted from the store for good (under
    ``cwd``, else under every workspace), then forwarded when the agent deletes too."""
    params = _params(message)
    session = str(params.get("sessionId"))
    keys = _keys(link, session, params.get("cwd"))
    link.recorder.end(session, "discard")
    for key in keys:
        history.clear(link.recorder.manager, key)
    if link.state.has("delete"):
        await _forward(link, message)
    else:
        await link.answer(message["id"], {})


async def session_archive(link: Link, message: dict[str, Any], archived: bool = True) -> None:
    """``session/archive``: the session hidden from the default list (``"archived": true`` in
    its conversation's metadata; the rows stay), then forwarded when the agent archives too;
    -32002 for a session neither holds. Repeating it changes nothing."""
    params = _params(message)

    async def work() -> Any:
        session = _session_id(params)
        keys = _keys(link, session)
        if not keys and not link.state.has("archive"):
            await _missing(link, message)
            return None
        changed = [_set_archived(link, key, archived) for key in keys]
        if any(changed):
            await _info_update(link, session, {"archived": archived})
        if link.state.has("archive"):
            await _forward(link, message)
            return None
        return {}

    await _guarded(link, message, work)


async def session_unarchive(link: Link, message: dict[str, Any]) -> None:
    """``session/unarchive``: ``session_archive`` undone."""
    await session_archive(link, message, archived=False)


def _set_archived(link: Link, key: Key, archived: bool) -> bool:
    """Set or clear the conversation's archive flag (``"archived": true`` in its metadata);
    whether that changed it."""

    def change(metadata: dict[str, Any]) -> bool:
        if (metadata.get("archived") is True) == archived:
            return False
        metadata.pop("archived", None)
        if archived:
            metadata["archived"] = True
        return True

    return link.recorder.annotate(key, change)


async def session_set_title(link: Link, message: dict[str, Any]) -> None:
    """``session/set_title`` (client-set titles): the session's title in the store (1–200
    characters; null restores the automatic one), then forwarded when the agent sets titles
    too; -32002 for a session neither holds."""
    params = _params(message)

    async def work() -> Any:
        session = _session_id(params)
        title = params.get("title")
        if title is not None and not isinstance(title, str):
            raise InvalidParams("title", "must be a string or null")
        keys = _keys(link, session)
        if not keys and not link.state.has("setTitle"):
            await _missing(link, message)
            return None
        change = ConversationUpdate(set_title=True, title=title)
        shown = None
        for key in keys:
            shown = conversations.update(link.recorder.manager, key, change).title
        await _info_update(link, session, {"title": shown})
        if link.state.has("setTitle"):
            await _forward(link, message)
            return None
        return {}

    await _guarded(link, message, work)


async def _info_update(link: Link, session: str, fields: dict[str, Any]) -> None:
    """Tell the editor of a change of ``session`` when it is open on this connection
    (``session_info_update``); a history view learns of it from ``session/list_changed``."""
    if session in link.state.cwd:
        update = {"sessionUpdate": "session_info_update", **fields}
        params = {"sessionId": session, "update": update}
        await link.to_editor({"jsonrpc": "2.0", "method": "session/update", "params": params})


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
    "session/archive": session_archive,
    "session/unarchive": session_unarchive,
    "session/set_title": session_set_title,
}

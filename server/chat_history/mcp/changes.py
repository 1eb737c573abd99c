"""Telling clients that the history changed (docs/mcp.md "When another window writes"): every
``IDLE_SECONDS`` the recall server looks at the store (``RecallServer.look_for_changes``: the
editor's server's change watch over its workspace, or, with ``--all-workspaces``, whether
another process committed at all), and on a change this sends
``notifications/resources/list_changed`` and ``notifications/resources/updated`` for each
subscribed conversation that changed.

Each protocol era hears it its own way: a 2025 client (the ``initialize`` handshake) on its
session's standalone channel, from ``notifications/initialized`` on, with the URIs it gave
``resources/subscribe``; a 2026-07-28 client only on a ``subscriptions/listen`` stream it opened
(the SDK's ListenHandler and bus), which names the notifications and URIs it wants. Sessions
and streams are bounded in number; a notification is best effort (a session gone quiet, or
one that stopped reading for ``SEND_SECONDS``, misses it and reads again)."""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

import anyio
import attrs
import mcp_types as types
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
)

from chat_history.errors import InvalidParams
from chat_history.mcp import uris
from chat_history.model import Key
from chat_history.service.watch import IDLE_SECONDS

log = logging.getLogger("chat_history.mcp")

#: The most 2025-era sessions told of changes (the least recently active is forgotten first;
#: the HTTP transport admits no more sessions than this at once) and 2026 listen streams.
MAX_SESSIONS = 64
#: The most URIs one session may subscribe to.
MAX_SUBSCRIPTIONS = 1_000
#: How long one notification may wait on a client that does not read.
SEND_SECONDS = 5.0


@attrs.frozen
class Changed:
    """What changed since the last look: these conversations, or (None) some of any workspace
    (``--all-workspaces`` knows only that another process committed)."""

    keys: frozenset[Key] | None

    def touches(self, uri: str, workspace: str | None) -> bool:
        """Whether the resource ``uri`` may have changed (``workspace``: the scope's)."""
        try:
            target = uris.parse(uri)
        except (InvalidParams, uris.NotOurs):
            return False
        if self.keys is None:
            return True
        claimed = target.workspace or workspace
        return any(
            key.conversation == target.conversation and key.workspace == claimed
            for key in self.keys
        )


@attrs.define
class Session:
    """A 2025-era session that is told: its ServerSession and the URIs it subscribed to."""

    session: ServerSession
    subscribed: set[str] = attrs.Factory(set)


def session_key(ctx: Any) -> str:
    """The session of a request: the HTTP transport's ``Mcp-Session-Id``, else stdio's one."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    found = headers.get("mcp-session-id") if headers is not None else None
    return f"http:{found}" if isinstance(found, str) else "stdio"


class Announcer:
    """The change loop and who hears it: ``look`` (run on a worker thread) says what changed
    since it last looked, ``workspace`` the scope's workspace (None: every workspace, or not
    fixed yet)."""

    def __init__(
        self, look: Callable[[], Changed | None], workspace: Callable[[], str | None]
    ) -> None:
        self._look = look
        self._workspace = workspace
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus, max_subscriptions=MAX_SESSIONS)
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        #: the URIs the open listen streams subscribed to (each counted once per stream)
        self._listened: Counter[str] = Counter()

    # -- the 2025 era ---------------------------------------------------------------------

    def join(self, ctx: Any) -> Session:
        """The request's session, told of changes from now on (the most recent first kept)."""
        key = session_key(ctx)
        found = self._sessions.pop(key, None)
        if found is None:
            found = Session(ctx.session)
        self._sessions[key] = found
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return found

    def subscribe(self, ctx: Any, uri: str) -> None:
        """``resources/subscribe``: any URI of bounded length is taken (one that names nothing
        never fires, as a 2026 listen stream's does); raises InvalidParams ``uri``."""
        if len(uri) > uris.MAX_URI_CHARS:
            raise InvalidParams("uri", f"must be at most {uris.MAX_URI_CHARS} characters")
        session = self.join(ctx)
        if uri not in session.subscribed and len(session.subscribed) >= MAX_SUBSCRIPTIONS:
            raise InvalidParams("uri", f"at most {MAX_SUBSCRIPTIONS} subscriptions per session")
        session.subscribed.add(uri)

    def unsubscribe(self, ctx: Any, uri: str) -> None:
        found = self._sessions.get(session_key(ctx))
        if found is not None:
            found.subscribed.discard(uri)

    # -- the 2026-07-28 era ---------------------------------------------------------------

    async def listen(
        self, ctx: Any, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen``: the SDK's stream, noting the URIs it wants while open."""
        wanted = set(params.notifications.resource_subscriptions or ())
        self._listened.update(wanted)
        try:
            return await self._listen(ctx, params)
        finally:
            self._listened.subtract(wanted)
            self._listened += Counter()  # drops the URIs no stream wants any more

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """Look for changes every ``IDLE_SECONDS`` and tell them, until cancelled."""
        while True:
            await anyio.sleep(IDLE_SECONDS)
            try:
                changed = await anyio.to_thread.run_sync(self._look)
                if changed is not None:
                    await self.announce(changed)
            except Exception:  # a look that fails must not end the server: the next one tries
                log.warning("chat-history mcp: the change loop failed", exc_info=True)

    async def announce(self, changed: Changed) -> None:
        workspace = self._workspace()
        for session in list(self._sessions.values()):
            await self._send(session.session, types.ResourceListChangedNotification())
            for uri in sorted(session.subscribed):
                if changed.touches(uri, workspace):
                    await self._send(
                        session.session,
                        types.ResourceUpdatedNotification(
                            params=types.ResourceUpdatedNotificationParams(uri=uri)
                        ),
                    )
        await self.bus.publish(ResourcesListChanged())
        for uri in sorted(self._listened):
            if changed.touches(uri, workspace):
                await self.bus.publish(ResourceUpdated(uri=uri))

    @staticmethod
    async def _send(session: ServerSession, notification: types.ServerNotification) -> None:
        with anyio.move_on_after(SEND_SECONDS):
            try:
                await session.send_notification(notification)
            except Exception as exc:  # a session that went away misses it; the others hear it
                log.debug("chat-history mcp: a change notification was not sent: %s", exc)

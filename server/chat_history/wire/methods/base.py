"""What a family of methods registers: ``Method(name, params, run)``, one per JSON-RPC method,
run by the server's one ``request`` helper (settings barrier, initialize gate, params structured
into ``params``, domain errors mapped to codes) as ``run(manager, session, params)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs

from chat_history.model import Key
from chat_history.service.manager import ChatHistoryManager
from chat_history.wire.checks import SessionWorkspace
from chat_history.wire.protocol import KeyParams


class Session(Protocol):
    """What a handler needs of the server session (``wire.session.ChatHistoryServer``; a protocol
    so that the families do not import the server, which imports them)."""

    def key(self, params: KeyParams) -> Key:
        """The request's conversation key, checked; the session's workspace when it names none."""
        ...

    @property
    def session_workspace(self) -> SessionWorkspace:
        """What a request's ``workspace`` is read against."""
        ...

    @property
    def machine(self) -> str:
        """This machine's id (``listWorkspaces``)."""
        ...


@attrs.frozen
class Method:
    """One method of the wire: its name, its params class and its handler; ``inline``: whether
    the thread that read it may run it when the request thread is idle (wire/requests). A method
    that may run for seconds (an import, a workspace move) says False, so that the messages sent
    after it (a cancel of the next request) are still read while it runs."""

    name: str
    params: type
    run: Callable[[ChatHistoryManager, Any, Any], Any]
    inline: bool = True

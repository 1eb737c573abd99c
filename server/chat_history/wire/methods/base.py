"""What a family of methods registers: ``Method(name, params, run)``, one per JSON-RPC method,
run by the server's one ``request`` helper (settings barrier, params structured into
``params``, domain errors mapped to codes) as ``run(manager, session, params)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs

from chat_history.model import Key
from chat_history.service.manager import ChatHistoryManager


class Session(Protocol):
    """What a handler needs of the server session (``wire.server.ChatHistoryServer``)."""

    def key(self, params: Any) -> Key: ...


@attrs.frozen
class Method:
    """One method of the wire: its name, its params class and its handler."""

    name: str
    params: type
    run: Callable[[ChatHistoryManager, Any, Any], Any]

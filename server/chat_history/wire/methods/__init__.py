"""The wire's method families, one module each (``<family>.METHODS``), and their table."""

from __future__ import annotations

from chat_history.wire.methods import replies
from chat_history.wire.methods.base import Method

#: Every family's methods, registered by ``wire.server.register``.
METHOD_FAMILIES: tuple[tuple[Method, ...], ...] = (replies.METHODS,)

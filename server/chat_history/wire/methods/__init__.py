"""The wire's methods, one module per family (each holds its params, checks, translators and
handlers, and its own ``METHODS``), and the one table ``wire.server.register`` registers:
a new family is a new module and one line here."""

from __future__ import annotations

from chat_history.wire.methods import (
    conversations,
    edits,
    history,
    imports,
    provider_state,
    replies,
    search,
    usage,
    workspaces,
)
from chat_history.wire.methods.base import Method

#: Every custom method of the wire, registered in this order.
METHODS: tuple[Method, ...] = (
    *history.METHODS,
    *conversations.METHODS,
    *edits.METHODS,
    *search.METHODS,
    *usage.METHODS,
    *workspaces.METHODS,
    *replies.METHODS,
    *imports.METHODS,
    *provider_state.METHODS,
)

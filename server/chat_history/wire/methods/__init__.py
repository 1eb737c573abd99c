"""The wire's methods, one module per family (each holds its params, checks, translators and
handlers, and its own ``METHODS``), and the one table of them: ``FAMILIES`` names each family's
methods, so that a request loads only its own family (issue 45: the first
``listConversations`` does not wait for the other nine). A new family is a new module and one
line here; ``tests/unit/test_wire_methods.py`` checks that the names here are the family's
``METHODS``, in order."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_history.wire.methods.base import Method

#: Every family of the wire (its module under ``wire/methods``) and the methods it serves
#: (``chatHistory/`` left out), in registration order.
FAMILIES: dict[str, tuple[str, ...]] = {
    "history": (
        "append",
        "get",
        "format",
        "prepare",
        "saveSummary",
        "getSummary",
        "deleteSummary",
        "clear",
    ),
    "conversations": ("listConversations", "updateConversation", "fork"),
    "edits": ("truncate", "deleteTurns", "editMessage"),
    "branches": ("switchBranch", "getTree"),
    "search": ("search",),
    "usage": ("reportUsage",),
    "workspaces": ("moveWorkspace", "listWorkspaces"),
    "replies": ("beginReply", "updateReply", "endReply"),
    "imports": ("importFrom",),
    "provider_state": ("saveCompaction", "reportProviderError"),
}

#: Each method's family, by its full name.
FAMILY_OF: dict[str, str] = {
    f"chatHistory/{name}": family for family, names in FAMILIES.items() for name in names
}


def family_methods(family: str) -> tuple[Method, ...]:
    """The family's ``METHODS`` (its module imported now, if it was not)."""
    methods: tuple[Method, ...] = importlib.import_module(f"{__name__}.{family}").METHODS
    return methods


def __getattr__(name: str) -> Any:
    """``METHODS``: every custom method of the wire, in registration order (every family
    imported)."""
    if name == "METHODS":
        return tuple(method for family in FAMILIES for method in family_methods(family))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

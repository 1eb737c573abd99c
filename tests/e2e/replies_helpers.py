"""What the replies-in-flight e2e modules share: windows (real server processes) on one storage
folder or PostgreSQL database, and the calls they make."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Databases
from tests.e2e.wire import Wire

WORKSPACE = "file:///home/ada/project"
CHANGED = "chatHistory/changed"
#: The lease these tests run with (ms): a killed server's reply is interrupted within ~2 s.
SHORT_LEASE = {"CHAT_HISTORY_REPLY_LEASE_MS": "1200"}


@pytest.fixture
def open_window(tmp_path: Path, databases: Databases | None) -> Iterator[Callable[..., Wire]]:
    """Servers (editor windows) on one storage folder (on PostgreSQL: one database), each on
    ``workspace`` (by default one they share) with further initializationOptions ``options``,
    closed at the end."""
    opened: list[Wire] = []

    def make(
        env: dict[str, str] | None = None,
        settings: Any = None,
        short_lease: bool = True,
        workspace: str = WORKSPACE,
        options: dict[str, Any] | None = None,
    ) -> Wire:
        options = {"workspace": workspace, **(options or {})}
        if databases is not None:
            options["database"] = databases.url(tmp_path)
        wire = Wire(tmp_path, env={**(SHORT_LEASE if short_lease else {}), **(env or {})})
        opened.append(wire)
        wire.initialize(configuration=False, options=options, settings=settings)
        return wire

    yield make
    for wire in opened:
        with contextlib.suppress(Exception):
            wire.close()


def rows(wire: Wire, conversation: str = "c") -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = wire.call("chatHistory/get", {"conversationId": conversation})[
        "messages"
    ]
    return found


def row_of(wire: Wire, row_id: int, conversation: str = "c") -> tuple[str, str] | None:
    """(status, content) of row ``row_id`` as ``wire``'s workspace reads it (None: not there)."""
    found = [r for r in rows(wire, conversation) if r["id"] == row_id]
    return (found[0]["status"], found[0]["content"]) if found else None


def status_of(wire: Wire, row_id: int, conversation: str = "c") -> str | None:
    found = row_of(wire, row_id, conversation)
    return None if found is None else found[0]


def begin(wire: Wire, conversation: str = "c", **params: Any) -> dict[str, Any]:
    row: dict[str, Any] = wire.call(
        "chatHistory/beginReply", {"conversationId": conversation, **params}
    )
    return row


def update(wire: Wire, row_id: int, conversation: str = "c", **params: Any) -> dict[str, Any]:
    answer: dict[str, Any] = wire.call(
        "chatHistory/updateReply", {"conversationId": conversation, "id": row_id, **params}
    )
    return answer


def end(wire: Wire, row_id: int, status: str, conversation: str = "c", **params: Any) -> Any:
    return wire.call(
        "chatHistory/endReply",
        {"conversationId": conversation, "id": row_id, "status": status, **params},
    )


def ask(wire: Wire, text: str = "why is the sky blue?", conversation: str = "c") -> None:
    wire.call(
        "chatHistory/append",
        {"conversationId": conversation, "messages": [{"role": "user", "content": text}]},
    )


def search(wire: Wire, query: str) -> list[int]:
    hits = wire.call("chatHistory/search", {"query": query})["results"]
    return [hit["id"] for hit in hits]


def wait_until(check: Callable[[], bool], seconds: float) -> float:
    """Seconds until ``check()`` held (fails past ``seconds``)."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < seconds, "did not happen in time"
        time.sleep(0.1)
    return time.monotonic() - started

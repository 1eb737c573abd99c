"""Shared fixtures of the core's unit tests: a fixed clock and managers over real SQLite files in
``tmp_path``. Row builders live in each test file, so that a file reads on its own."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Databases
from tests.pgcluster import Cluster

from chat_history.model import Key, Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager, Notify
from chat_history.settings import Settings, load_settings
from chat_history.store import HistoryStore, Store, Transaction
from chat_history.store.postgres import PostgresStore

#: 2025-11-30T05:20:00Z, the example timestamp of protocol.md.
T0 = 1_764_480_000_000
HOUR = 3_600_000


class FixedClock:
    """A clock that only moves when a test moves it (so several appends share one millisecond)."""

    def __init__(self, start: int = T0) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance_hours(self, hours: float) -> None:
        self.now += int(hours * HOUR)


def settings_from(raw: Mapping[str, Any] | Settings | None) -> Settings:
    """Settings from a nested ``chatHistory`` section; a test's own settings must be valid."""
    if isinstance(raw, Settings):
        return raw
    loaded = load_settings(dict(raw or {}))
    assert not loaded.problems and not loaded.unknown_keys, (loaded.problems, loaded.unknown_keys)
    return loaded.settings


MakeManager = Callable[..., ChatHistoryManager]


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def db_folder(tmp_path: Path) -> Path:
    return tmp_path / "storage"


MakeStore = Callable[..., HistoryStore]


@pytest.fixture
def make_store(db_folder: Path, databases: Databases | None) -> Iterator[MakeStore]:
    """``make_store(folder=..., **options)``: a store (its own connection) over the database of
    ``folder`` (default: the test's ``db_folder``): the SQLite file in it, or on PostgreSQL the
    database the test made for that folder. Closed at the end of the test."""
    stores: list[HistoryStore] = []

    def make(folder: Path | None = None, **store_options: Any) -> HistoryStore:
        store: HistoryStore
        if databases is None:
            store = Store(folder or db_folder, **store_options)
        else:
            store = PostgresStore(databases.url(folder or db_folder), **store_options)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def make_manager(make_store: MakeStore, clock: FixedClock) -> MakeManager:
    """``make_manager(settings, folder=..., notify=...)``: a manager on its own store
    (``make_store``)."""

    def make(
        settings: Mapping[str, Any] | Settings | None = None,
        *,
        folder: Path | None = None,
        notify: Notify | None = None,
        **store_options: Any,
    ) -> ChatHistoryManager:
        store = make_store(folder, **store_options)
        return ChatHistoryManager(store, settings_from(settings), notify=notify, clock=clock)

    return make


# -- PostgreSQL's own tests (test_postgres*.py) ----------------------------------------------------


@pytest.fixture
def pg_database(pg_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(name, url) of a fresh database of the session's cluster, dropped after the test."""
    name = "p_" + request.node.name.replace("[", "_").replace("]", "").lower()[:50]
    url = pg_cluster.fresh_database(name)
    yield name, url
    pg_cluster.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_managers() -> Iterator[Callable[..., ChatHistoryManager]]:
    """``pg_managers(url, **store_options)``: a manager on a PostgresStore of its own, closed
    after the test."""
    made: list[ChatHistoryManager] = []

    def make(url: str, **options: Any) -> ChatHistoryManager:
        manager = ChatHistoryManager(PostgresStore(url, **options))
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.close()


@pytest.fixture
def pg_roles(pg_cluster: Cluster) -> Iterator[tuple[str, str]]:
    """Two ordinary login roles, ``alice`` and ``bob`` (dropped after the test, with whatever
    they own or were granted in the test's databases)."""
    roles = ("alice", "bob")
    for role in roles:
        pg_cluster.execute(f"DROP ROLE IF EXISTS {role}")
        pg_cluster.execute(f"CREATE ROLE {role} LOGIN")
    yield roles
    for role in roles:
        pg_cluster.execute(f"DROP ROLE IF EXISTS {role}")


class Gate:
    """A write observer that holds the write it is told of (after its locks are taken) until
    ``release``: a server caught in the middle of a write."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.go = threading.Event()

    def before_write(self, transaction: Transaction) -> None:
        self.inside.set()
        assert self.go.wait(30)

    def after_write(self, transaction: Transaction) -> None:
        pass

    def write_failed(self) -> None:
        pass


def held_write(manager: ChatHistoryManager, key: Key, text: str) -> tuple[Gate, threading.Thread]:
    """``manager`` appends ``text`` to ``key`` in a thread and stays inside that write."""
    gate = Gate()
    manager.store.observer = gate
    errors: list[BaseException] = []

    def run() -> None:
        try:
            history.append(manager, key, [Message(role="user", content=text)])
        except BaseException as exc:  # pragma: no cover - the assertion shows it
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    assert gate.inside.wait(30)
    return gate, thread

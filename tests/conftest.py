"""Fixtures of both suites: the storage engines. A test module marked ``pytest.mark.engines``
runs each test that uses storage (``engine``, and the fixtures built on it: ``make_manager``,
``start_session``) on SQLite and on PostgreSQL; every other test runs on SQLite only.

PostgreSQL is a throwaway cluster (tests/pgcluster.py) started once per test session, on the
first test that needs it, and stopped by its PID at the end; each storage folder a test uses
gets a fresh database of its own."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from tests.pgcluster import Cluster

# No per-example deadline anywhere: an example takes milliseconds, but a loaded CI machine can
# stall one past hypothesis's default 200 ms and fail the suite (DeadlineExceeded, or Flaky
# when the replay is quick). Speed is measured in bench/, never asserted here.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

#: The engines the storage suites run on: both (``make test``), or ``CHAT_HISTORY_TEST_ENGINES=
#: sqlite`` (``make check``, the fast inner loop), which also leaves out the tests that need a
#: PostgreSQL cluster of their own (deselected, so the summary says how many).
ENGINES = tuple(
    name
    for name in os.environ.get("CHAT_HISTORY_TEST_ENGINES", "sqlite,postgres").split(",")
    if name in ("sqlite", "postgres")
) or ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "engines: run the module's storage tests on SQLite and on PostgreSQL"
    )
    config.addinivalue_line(
        "markers", "sqlite_only: a test of SQLite's own files in a module marked engines"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marked = metafunc.definition.get_closest_marker
    if "engine" in metafunc.fixturenames and marked("engines") and not marked("sqlite_only"):
        # Module scope: a module's tests run on one engine, then on the other, and a module's
        # own fixtures (one server for a module's tests) may take the engine too.
        metafunc.parametrize("engine", ENGINES, scope="module")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without PostgreSQL among the engines, the tests that need a cluster are deselected."""
    if "postgres" in ENGINES:
        return
    keep, drop = [], []
    for item in items:
        names = getattr(item, "fixturenames", ())
        engine = getattr(item, "callspec", None)
        on_postgres = engine is not None and engine.params.get("engine") == "postgres"
        (drop if "pg_cluster" in names or on_postgres else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def engine() -> str:
    """The storage engine of the test (parametrized over both in modules marked ``engines``)."""
    return "sqlite"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    cluster = Cluster()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


_names = itertools.count(1)


class Databases:
    """A fresh database per storage folder of one test (two folders: two databases)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.names: dict[str, str] = {}

    def name(self, folder: Path) -> str:
        key = str(folder)
        if key not in self.names:
            self.names[key] = f"t{next(_names)}"
            self.cluster.fresh_database(self.names[key])
        return self.names[key]

    def url(self, folder: Path) -> str:
        return self.cluster.url(self.name(folder))

    def drop(self) -> None:
        for name in self.names.values():
            self.cluster.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def databases(engine: str, request: pytest.FixtureRequest) -> Iterator[Databases | None]:
    """PostgreSQL databases by storage folder when the test's engine is PostgreSQL, else None."""
    yield from databases_of(engine, request)


def databases_of(engine: str, request: pytest.FixtureRequest) -> Iterator[Databases | None]:
    """The ``databases`` of a fixture of any scope: None on SQLite; on PostgreSQL, dropped when
    the fixture ends."""
    if engine != "postgres":
        yield None
        return
    found = Databases(request.getfixturevalue("pg_cluster"))
    yield found
    found.drop()

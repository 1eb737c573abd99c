"""The calibration samples table on a real SQLite file (store/calibration.py): the newest 20
ratios per (kind, model), a missing model its own key, and a remembered read that never serves
what another connection changed."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from chat_history.service import history, usage
from chat_history.store import calibration


@pytest.fixture
def connections(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    path = tmp_path / "db.sqlite3"
    one = sqlite3.connect(path, isolation_level=None)
    one.execute("PRAGMA journal_mode = WAL")
    for statement in calibration.SCHEMA.split(";"):
        if statement.strip():
            one.execute(statement)
    two = sqlite3.connect(path, isolation_level=None)
    yield one, two
    one.close()
    two.close()


def test_keeps_the_newest_20_ratios_oldest_first(connections):
    one, _ = connections
    for n in range(1, 31):
        calibration.add_ratio(one, "openai", "m", n / 10)
    assert calibration.ratios(one, "openai", "m") == tuple(n / 10 for n in range(11, 31))
    stored = one.execute("SELECT COUNT(*) FROM calibration_samples").fetchone()[0]
    assert stored == 20, "older ratios are deleted, not only hidden"


def test_keys_are_kind_and_model_with_none_its_own(connections):
    one, _ = connections
    calibration.add_ratio(one, "openai", None, 2.0)
    calibration.add_ratio(one, "openai", "m", 3.0)
    calibration.add_ratio(one, "anthropic", "m", 0.5)
    calibration.add_ratio(one, "openai", "", 1.5)
    assert calibration.ratios(one, "openai", None) == (2.0,)
    assert calibration.ratios(one, "openai", "m") == (3.0,)
    assert calibration.ratios(one, "anthropic", "m") == (0.5,)
    assert calibration.ratios(one, "openai", "") == (1.5,)
    assert calibration.ratios(one, "gemini", None) == ()
    # trimming one key to 20 leaves the others alone
    for _ in range(25):
        calibration.add_ratio(one, "openai", None, 1.0)
    assert calibration.ratios(one, "openai", "m") == (3.0,)
    assert len(calibration.ratios(one, "openai", None)) == 20


def test_the_memo_sees_another_connections_commit(connections):
    one, two = connections
    memo = calibration.RatioMemo()
    assert memo.ratios(one, "openai", "m") == ()
    calibration.add_ratio(two, "openai", "m", 2.0)  # another connection commits
    assert memo.ratios(one, "openai", "m") == (2.0,)
    # remembered while no other connection commits: this connection's own change is not seen
    # until it forgets the key (the store forgets every key it writes)...
    one.execute("UPDATE calibration_samples SET ratio = 3.0")
    assert memo.ratios(one, "openai", "m") == (2.0,)
    one.execute("UPDATE calibration_samples SET ratio = 2.0")
    # ...and this connection's own write is seen once it forgets the key
    calibration.add_ratio(one, "openai", "m", 4.0)
    memo.forget("openai", "m")
    assert memo.ratios(one, "openai", "m") == (2.0, 4.0)
    memo.clear()
    assert memo.version is None
    assert memo.ratios(one, "openai", "m") == (2.0, 4.0)


def test_a_version_3_database_gains_the_table_and_keeps_its_rows(tmp_path: Path) -> None:
    from chat_history.model import Message
    from chat_history.service.manager import ChatHistoryManager
    from chat_history.store import Key, Store
    from chat_history.store.schema import DATABASE_FILE, MIGRATIONS, SCHEMA_VERSION

    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    legacy = sqlite3.connect(folder / DATABASE_FILE)
    for version in (0, 1, 2):
        for statement in MIGRATIONS[version].split(";"):
            if statement.strip():
                legacy.execute(statement)
    legacy.execute("PRAGMA user_version = 3")
    legacy.execute(
        "INSERT INTO messages (id, workspace, conversation, turn, role, content, timestamp, "
        "tokens) VALUES (1, 'ws', 'c', 1, 'user', 'kept', 1764480000000, 5)"
    )
    legacy.execute("INSERT INTO conversations VALUES ('ws', 'c', 1, 5, 1, 1, 1764480000000, 1)")
    legacy.commit()
    legacy.close()
    old = ChatHistoryManager(Store(folder))
    key = Key("ws", "c")
    old = old.under(attrs.evolve(old.settings, max_age_hours=0))
    assert [row.content for row in history.get(old, key).messages] == ["kept"]
    history.append(old, key, [Message(role="assistant", content="added")])
    assert usage.report(old, None, "m", 100, 150).factor == 1.5
    old.store.close()
    again = ChatHistoryManager(Store(folder))
    again = again.under(old.settings)
    assert [row.content for row in history.get(again, key).messages] == ["kept", "added"]
    assert usage.report(again, None, "m", 100, 250).factor == 2.0
    again.store.close()
    check = sqlite3.connect(folder / DATABASE_FILE)
    try:
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 16
        assert check.execute("SELECT COUNT(*) FROM calibration_samples").fetchone()[0] == 2
    finally:
        check.close()

"""The CLI's ``workspaces``, ``move-workspace`` and ``purge``, and ``--database``, on both engines
(``--db`` names the SQLite store, ``--database`` the PostgreSQL one)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tests.conftest import Databases
from tests.e2e.test_cli import run

from chat_history.model import Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import HistoryStore, Key, Store
from chat_history.store.postgres import PostgresStore

pytestmark = pytest.mark.engines


def test_workspaces_move_workspace_and_purge(
    tmp_path: Path, engine: str, databases: Databases | None
):
    folder = tmp_path / "store"
    store: HistoryStore
    if databases is None:
        store, where = Store(folder), ["--db", str(folder)]
    else:
        url = databases.url(folder)
        store, where = PostgresStore(url), ["--database", url]
    manager = ChatHistoryManager(store)
    history.append(manager, Key("file:///old", "c1"), [Message(role="user", content="one")])
    history.append(manager, Key("file:///old", "c2"), [Message(role="user", content="two")])
    history.append(manager, Key("file:///new", "c2"), [Message(role="user", content="clash")])
    manager.close()
    env = {**os.environ, "CHAT_HISTORY_STORAGE": str(folder)}
    listed = run(env, *where, "workspaces", "--json")
    assert listed.returncode == 0, listed.stderr
    counts = {w["workspace"]: w["conversations"] for w in json.loads(listed.stdout)["workspaces"]}
    assert counts == {"file:///old": 2, "file:///new": 1}
    refused = run(env, *where, "move-workspace", "file:///old", "file:///new")
    assert refused.returncode != 0 and "TO" in refused.stderr and "'c2'" in refused.stderr
    moved = run(env, *where, "move-workspace", "file:///old", "file:///elsewhere/")
    assert moved.returncode == 0, moved.stderr
    assert "moved 2 conversation(s)" in moved.stdout
    listed = run(env, *where, "workspaces")
    assert "file:///elsewhere  2 conversation(s)" in listed.stdout
    purged = run(env, *where, "purge")
    assert purged.returncode == 0, purged.stderr


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://me:hunter2@db.example/h",
        # issue 35 item 8: accepted before, and echoed in the 1002 reason of the connect
        "host=/nonexistent dbname='postgresql://me:hunter2@db.example/h'",
    ],
)
def test_a_database_url_with_a_password_is_refused_and_never_echoed(tmp_path: Path, url: str):
    env = {**os.environ, "CHAT_HISTORY_STORAGE": str(tmp_path)}
    result = run(env, "--database", url, "workspaces")
    assert result.returncode == 2
    assert "password" in result.stderr and "hunter2" not in result.stderr + result.stdout

"""Choosing the engine: a database URL on a server installed without the PostgreSQL extra is
refused at once, naming the field, rather than failing on the first request."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.pgcluster import Cluster

import chat_history
from chat_history.client import StdioClient
from chat_history.errors import InvalidParams
from chat_history.store.choice import EngineOptions, database_option

URL = "postgresql://ada@db.example/history"


def test_a_url_is_taken_when_the_driver_is_installed() -> None:
    assert database_option(EngineOptions(database=URL), env={}) == URL
    assert database_option(EngineOptions(), env={"CHAT_HISTORY_DATABASE_URL": URL}) == URL
    assert database_option(EngineOptions(), env={}) is None


@pytest.mark.parametrize(
    ("options", "env", "field"),
    [
        (EngineOptions(database=URL), {}, "database"),
        (EngineOptions(), {"CHAT_HISTORY_DATABASE_URL": URL}, "CHAT_HISTORY_DATABASE_URL"),
    ],
)
def test_without_the_driver_a_url_names_its_field_and_the_extra(
    monkeypatch: pytest.MonkeyPatch, options: EngineOptions, env: dict[str, str], field: str
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(InvalidParams) as caught:
        database_option(options, env=env)
    assert caught.value.field == field
    assert "chat-history-server[postgres]" in caught.value.why
    assert database_option(EngineOptions(), env={}) is None  # SQLite needs no driver


def test_inside_an_extension_without_the_driver_the_advice_is_sqlite_or_another_python(
    tmp_path: Path,
) -> None:
    """The server run from an extension's ``bundled/libs`` (as boot.py runs it) on a platform its
    .vsix carries no psycopg for (win32-arm64): installing into "the Python that runs it" would
    not help (boot.py isolates the libraries), so the answer says what does."""
    libs = tmp_path / "bundled" / "libs"
    shutil.copytree(
        Path(chat_history.__file__).parent,
        libs / "chat_history",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    script = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(libs)!r})\n"
        "sys.modules['psycopg'] = None\n"
        "import chat_history\n"
        f"assert chat_history.__file__.startswith({str(libs)!r}), chat_history.__file__\n"
        "from chat_history.errors import InvalidParams\n"
        "from chat_history.store.choice import EngineOptions, database_option\n"
        "try:\n"
        f"    database_option(EngineOptions(database={URL!r}), env={{}})\n"
        "except InvalidParams as error:\n"
        "    print(json.dumps({'field': error.field, 'why': error.why}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    answer = json.loads(done.stdout)
    assert answer["field"] == "database"
    why = answer["why"]
    assert why.startswith("the server inside this extension has no PostgreSQL driver for this")
    assert f"({platform.system()} {platform.machine()})" in why
    assert "Remove the database to keep the history in SQLite here" in why
    assert "run the server with a Python 3.11+ where chat-history-server and psycopg" in why
    assert "chat-history-server[postgres] into the Python that runs it" not in why


def _imported(stderr: str) -> set[str]:
    """Top-level packages a ``-X importtime`` run imported."""
    lines = (line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines())
    return {name.split(".")[0] for name in lines if name}


def test_psycopg_is_imported_only_when_a_database_is_named(
    tmp_path: Path, pg_cluster: Cluster
) -> None:
    """A server on SQLite (the default, and every .vsix user who names no database) never loads
    psycopg and its libpq: the .vsix carrying it costs no start time. The same server with a
    database does load it (the check can see it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAT_HISTORY_")}
    command = [sys.executable, "-X", "importtime", "-m", "chat_history"]
    url = pg_cluster.fresh_database("lazy_import")
    seen = {}
    for name, options in (("sqlite", {}), ("postgres", {"database": url})):
        log = tmp_path / f"{name}.stderr"
        with (
            open(log, "wb") as stderr,
            StdioClient(tmp_path / name, env=env, command=command, stderr=stderr) as server,
        ):
            server.initialize(**options)
            server.call(
                "chatHistory/append",
                {"conversationId": "c", "messages": [{"role": "user", "content": "hello"}]},
            )
            got = server.call("chatHistory/get", {"conversationId": "c"})["messages"]
            assert [m["content"] for m in got] == ["hello"]
        seen[name] = _imported(log.read_text())
    assert "chat_history" in seen["sqlite"]
    assert not {"psycopg", "psycopg_binary"} & seen["sqlite"]
    assert {"psycopg", "psycopg_binary"} <= seen["postgres"]
    pg_cluster.execute('DROP DATABASE IF EXISTS "lazy_import" WITH (FORCE)')

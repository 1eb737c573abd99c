"""The recipes of docs/server-database.md run as written, against a real PostgreSQL cluster of
their own: the team recipe's SQL (through ``psql``, as an administrator who is not a superuser),
the owner's first ``chat-history`` command and scheduled purge, each person's CLI seeing only
their own history, and the "Moving between engines" commands (twice: imports never duplicate).

Only the host changes: ``db.internal`` becomes the cluster's unix socket. The code blocks are read
from the document itself, so a recipe edited into something that does not work fails here."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.test_cli import run
from tests.pgcluster import Cluster

from chat_history.model import Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import Key, Store

DOC = Path(__file__).resolve().parents[2] / "docs" / "server-database.md"


def section(title: str) -> str:
    """The text of the document's ``## title`` section."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    own = Cluster()
    own.start()
    try:
        yield own
    finally:
        own.stop()


def host_of(cluster: Cluster) -> str:
    """``db.internal`` as the recipe's URIs name it, here: the socket folder, percent-encoded."""
    return urllib.parse.quote(str(cluster.socket), safe="")


def as_written(command: str, cluster: Cluster) -> list[str]:
    """A ``chat-history`` command line of the document, split, with the host replaced."""
    words = shlex.split(command.replace("db.internal", host_of(cluster)))
    assert words[0] == "chat-history", command
    return words[1:]


def psql(cluster: Cluster, user: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(cluster.bin / "psql"),
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(cluster.socket),
            "-U",
            user,
            "-d",
            "postgres",
        ],
        input=script,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_team_recipe_and_moving_between_engines_work_as_written(
    cluster: Cluster, tmp_path: Path
):
    team = section("Recipe 3: a team, one role per person")
    (sql,) = blocks(team, "sql")
    owner_first = re.search(r"--\s+(chat-history .*workspaces)", sql)
    scheduled = re.search(r"`(chat-history --database .* purge)`", team)
    assert owner_first and scheduled, "the recipe names the owner's first command and the purge"

    # The administrator: may create databases and roles, is not a superuser (RLS binds it too).
    cluster.execute("CREATE ROLE admin LOGIN CREATEDB CREATEROLE")
    done = psql(cluster, "admin", sql)
    assert done.returncode == 0, done.stderr

    env = {**os.environ, "CHAT_HISTORY_STORAGE": str(tmp_path / "storage")}
    env.pop("CHAT_HISTORY_DATABASE_URL", None)
    first = run(env, *as_written(owner_first.group(1), cluster))
    assert first.returncode == 0, first.stderr

    # "Moving between engines", as written, into Alice's database URL.
    moving = section("Moving between engines")
    (commands,) = blocks(moving, "sh")
    export_line, import_line = (line for line in commands.splitlines() if line.strip())
    sqlite_folder = tmp_path / "sqlite-store"
    seeded = ChatHistoryManager(Store(sqlite_folder))
    history.append(
        seeded,
        Key("file:///home/alice/app", "plan"),
        [
            Message(role="user", content="alice's launch plan"),
            Message(role="assistant", content="ok"),
        ],
    )
    history.append(
        seeded, Key("file:///home/alice/app", "notes"), [Message(role="user", content="notes")]
    )
    seeded.close()
    alice_url = f"postgresql://alice@{host_of(cluster)}/chat_history"
    bob_url = f"postgresql://bob@{host_of(cluster)}/chat_history"
    home = str(Path.home())
    export_args = shlex.split(export_line.split(">")[0].replace("~", home))
    assert export_args[:3] == ["chat-history", "--db", f"{home}/.local/share/chat-history"]
    exported = run(env, "--db", sqlite_folder, *export_args[3:])
    assert exported.returncode == 0, exported.stderr
    (tmp_path / "history.jsonl").write_text(exported.stdout, encoding="utf-8")
    import_args = shlex.split(import_line)
    assert import_args[1:3] == ["--database", "$CHAT_HISTORY_DATABASE_URL"]
    for _ in range(2):  # twice: imports never duplicate
        imported = run(env, "--database", alice_url, *import_args[3:-1], tmp_path / import_args[-1])
        assert imported.returncode == 0, imported.stderr

    def workspaces(url: str) -> dict[str, int]:
        listed = run(env, "--database", url, "workspaces", "--json")
        assert listed.returncode == 0, listed.stderr
        return {w["workspace"]: w["conversations"] for w in json.loads(listed.stdout)["workspaces"]}

    assert workspaces(alice_url) == {"file:///home/alice/app": 2}
    shown = run(
        env, "--database", alice_url, "show", "--workspace", "file:///home/alice/app", "plan"
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("alice's launch plan") == 1
    # Bob, in the same database, sees none of it: not with the CLI, not with plain SQL.
    assert workspaces(bob_url) == {}
    found = run(env, "--database", bob_url, "search", "launch")
    assert found.returncode == 0, found.stderr
    assert "alice" not in found.stdout
    found = run(env, "--database", alice_url, "search", "launch")
    assert "alice's [[launch]] plan" in found.stdout
    peek = psql(cluster, "bob", "\\c chat_history\nSELECT count(*) FROM messages;\n")
    assert peek.returncode == 0, peek.stderr
    assert re.search(r"^\s*0\s*$", peek.stdout, flags=re.M), peek.stdout

    # The owner's scheduled purge runs (it is the owner of the tables) and exits 0.
    purged = run(env, *as_written(scheduled.group(1), cluster))
    assert purged.returncode == 0, purged.stderr + purged.stdout

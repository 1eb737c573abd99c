"""``chat-history import --from SOURCE`` over the real CLI and a real SQLite file: the preview of a
dry run writes nothing, an import brings each session in as ``SOURCE:<session id>`` under the
workspace of the folder the tool recorded, importing again adds nothing, a longer version of a
session adds only its tail, and without PATH the tool's own folder for the current folder is
read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.opencode_db import build

from chat_history.importers.claude_code import project_folder_name
from chat_history.model import Key
from chat_history.service import conversations
from chat_history.service.manager import ChatHistoryManager

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
SHOP = FIXTURES / "claude-code" / "-home-me-shop"
NEW = "7f3c2a10-5b1e-4c2d-9e8f-0a1b2c3d4e5f"


def cli(db: Path, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "chat_history.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def stored_conversations(db: Path) -> dict[Key, int]:
    manager = ChatHistoryManager.open(db)
    try:
        listed = conversations.list_page(manager, None, None, None).conversations
        return {info.key: info.message_count for info in listed}
    finally:
        manager.close()


def test_a_dry_run_previews_then_an_import_adds_each_session_once(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    preview = cli(db, "import", "--from", "claude-code", str(SHOP), "--dry-run")
    assert "Dry run: nothing was written." in preview
    assert (
        f"claude-code:{NEW}" in preview
        and "skipped 1 tool result: no tool call before it" in preview
    )
    assert not db.exists() or stored_conversations(db) == {}
    done = cli(db, "import", "--from", "claude-code", str(SHOP))
    found = stored_conversations(db)
    workspace = "file:///home/me/shop"
    assert found[Key(workspace, f"claude-code:{NEW}")] == 6
    assert found[Key(workspace, f"claude-code:{NEW}/agent-a1b2")] == 2
    assert Key(workspace, "claude-code:0b9d4e21-aaaa-4bbb-8ccc-123456789abc/sidechain") in found
    assert "Imported 14 message(s) into 4 of 4 conversation(s)." in done
    again = cli(db, "import", "--from", "claude-code", str(SHOP))
    assert "Imported 0 message(s) into 0 of 4 conversation(s)." in again
    assert stored_conversations(db) == found
    manager = ChatHistoryManager.open(db)
    try:
        info = conversations.info(manager, Key(workspace, f"claude-code:{NEW}"))
        assert info.title == "Fix the Safari checkout date test"
        assert dict(info.metadata.value()) == {"import": {"source": "claude-code", "session": NEW}}
    finally:
        manager.close()


def test_a_longer_version_of_a_session_adds_only_its_tail(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    lines = (SHOP / f"{NEW}.jsonl").read_text().splitlines()
    folder = tmp_path / "projects" / "-home-me-shop"
    folder.mkdir(parents=True)
    session = folder / f"{NEW}.jsonl"
    session.write_text("\n".join(lines[:7]) + "\n")  # up to the first tool result
    cli(db, "import", "--from", "claude-code", str(session))
    key = Key("file:///home/me/shop", f"claude-code:{NEW}")
    assert stored_conversations(db)[key] == 3
    session.write_text("\n".join(lines) + "\n")
    grown = cli(db, "import", "--from", "claude-code", str(session))
    assert "updated" in grown and "Imported 3 message(s) into 1 of 1" in grown
    assert stored_conversations(db)[key] == 6


def test_without_a_path_the_tools_own_folder_for_this_folder_is_read(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    project = tmp_path / "work" / "shop"
    project.mkdir(parents=True)
    home = tmp_path / "home"
    store = home / ".claude" / "projects" / project_folder_name(str(project))
    store.mkdir(parents=True)
    shutil.copy(SHOP / f"{NEW}.jsonl", store / f"{NEW}.jsonl")
    other = home / ".claude" / "projects" / "-elsewhere"
    other.mkdir()
    shutil.copy(SHOP / "0b9d4e21-aaaa-4bbb-8ccc-123456789abc.jsonl", other / "other.jsonl")
    env = {"HOME": str(home), "CLAUDE_CONFIG_DIR": ""}
    out = cli(db, "import", "--from", "claude-code", cwd=project, env=env)
    assert "into 1 of 1 conversation(s)" in out  # the other project's session is not read
    codex_home = tmp_path / "codex"
    shutil.copytree(FIXTURES / "codex" / "sessions", codex_home / "sessions")
    out = cli(
        db,
        "import",
        "--from",
        "codex",
        "--all-projects",
        "--workspace",
        "file:///x",
        env={"CODEX_HOME": str(codex_home)},
    )
    assert "into 2 of 2 conversation(s)" in out
    found = stored_conversations(db)
    assert found[Key("file:///x", "codex:019a6f0e-1d2c-7b3a-9e8d-5c4b3a291807")] == 6


def test_an_unknown_or_unsupported_source_is_a_usage_error(tmp_path: Path) -> None:
    for source, said in (("notatool", "must be one of"), ("Claude-Code", "must be one of")):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "chat_history.cli",
                "--db",
                str(tmp_path),
                "import",
                "--from",
                source,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0 and "--from" in done.stderr and said in done.stderr


def test_gemini_cli_sessions_of_both_formats_come_in_under_the_folder_projects_json_names(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.sqlite3"
    gemini = tmp_path / "g" / ".gemini"
    shutil.copytree(FIXTURES / "gemini-cli", gemini)
    done = cli(db, "import", "--from", "gemini-cli", str(gemini / "tmp"))
    assert "Imported 13 message(s) into 2 of 2 conversation(s)." in done
    assert "skipped 1 tool call: no result recorded (cancelled or still running)" in done
    found = stored_conversations(db)
    shop = "file:///home/me/shop"
    assert found[Key(shop, "gemini-cli:9c8b7a6d-1111-4222-8333-944455566677")] == 7
    assert found[Key(shop, "gemini-cli:a1b2c3d4-0e1f-4a2b-8c3d-4e5f6a7b8c9d")] == 6
    again = cli(db, "import", "--from", "gemini-cli", str(gemini / "tmp"))
    assert "Imported 0 message(s) into 0 of 2 conversation(s)." in again


def test_vscode_chat_sessions_come_in_under_the_folder_workspace_json_names(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.sqlite3"
    storage = tmp_path / "User" / "workspaceStorage"
    shutil.copytree(FIXTURES / "copilot-chat" / "workspaceStorage", storage)
    done = cli(db, "import", "--from", "copilot-chat", str(storage), "--dry-run")
    assert "Would import 13 message(s) into 2 of 2 conversation(s)." in done
    assert not db.exists() or stored_conversations(db) == {}
    cli(db, "import", "--from", "copilot-chat", str(storage))
    shop = "file:///home/me/shop"
    found = stored_conversations(db)
    assert found[Key(shop, "copilot-chat:8e7d6c5b-4a39-4281-9f70-6e5d4c3b2a19")] == 7
    assert found[Key(shop, "copilot-chat:6c1f0d2e-7a8b-4c9d-8e0f-1a2b3c4d5e6f")] == 6
    again = cli(db, "import", "--from", "copilot-chat", str(storage))
    assert "Imported 0 message(s) into 0 of 2 conversation(s)." in again


def test_continue_sessions_of_this_folder_come_in_at_their_sessions_json_time(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.sqlite3"
    home = tmp_path / "c"
    shutil.copytree(FIXTURES / "continue" / "sessions", home / "sessions")
    env = {"CONTINUE_GLOBAL_DIR": str(home)}
    done = cli(db, "import", "--from", "continue", "--all-projects", env=env)
    assert "Imported 10 message(s) into 2 of 2 conversation(s)." in done
    found = stored_conversations(db)
    shop = "file:///home/me/shop"
    assert found[Key(shop, "continue:3b9e2f10-6c4d-4e8a-9b1f-2d3c4e5f6a7b")] == 6
    again = cli(db, "import", "--from", "continue", "--all-projects", env=env)
    assert "Imported 0 message(s) into 0 of 2 conversation(s)." in again


def test_opencode_sessions_come_in_from_its_storage_tree(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    data = tmp_path / "share"
    shutil.copytree(FIXTURES / "opencode" / "storage", data / "opencode" / "storage")
    env = {"XDG_DATA_HOME": str(data)}
    done = cli(db, "import", "--from", "opencode", "--all-projects", env=env)
    assert "Imported 9 message(s) into 2 of 2 conversation(s)." in done
    again = cli(db, "import", "--from", "opencode", "--all-projects", env=env)
    assert "Imported 0 message(s) into 0 of 2 conversation(s)." in again
    main = Key("file:///home/me/shop", "opencode:ses_6a1b2c3d4e5fAbCdEf012345")
    assert stored_conversations(db)[main] == 7


def test_opencode_sessions_come_in_from_its_database_left_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    data = tmp_path / "share"
    database = build(data / "opencode" / "opencode.db")
    before = database.read_bytes()
    env = {"XDG_DATA_HOME": str(data)}
    done = cli(db, "import", "--from", "opencode", "--all-projects", env=env)
    assert "Imported 9 message(s) into 2 of 2 conversation(s)." in done
    again = cli(db, "import", "--from", "opencode", "--all-projects", env=env)
    assert "Imported 0 message(s) into 0 of 2 conversation(s)." in again
    assert database.read_bytes() == before
    main = Key("file:///home/me/shop", "opencode:ses_6a1b2c3d4e5fAbCdEf012345")
    assert stored_conversations(db)[main] == 7


def test_copilot_cli_older_sessions_come_in_with_a_named_workspace(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    home = tmp_path / "copilot"
    shutil.copytree(FIXTURES / "copilot-cli", home)
    env = {"COPILOT_HOME": str(home)}
    older = str(home / "history-session-state")
    done = cli(db, "import", "--from", "copilot-cli", older, "--workspace", "file:///w", env=env)
    assert "Imported 9 message(s) into 1 of 1 conversation(s)." in done
    again = cli(db, "import", "--from", "copilot-cli", older, "--workspace", "file:///w", env=env)
    assert "Imported 0 message(s) into 0 of 1 conversation(s)." in again
    shop = cli(db, "import", "--from", "copilot-cli", cwd=Path("/"), env=env)
    assert "No copilot-cli sessions found" in shop  # none of them recorded the folder /
    key = Key("file:///w", "copilot-cli:4d3c2b1a-0f9e-4d8c-b7a6-5e4d3c2b1a09")
    assert stored_conversations(db)[key] == 9


def test_a_two_gigabyte_session_file_is_refused_by_name_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.sqlite3"
    folder = tmp_path / "projects" / "-home-me-shop"
    folder.mkdir(parents=True)
    shutil.copy(SHOP / f"{NEW}.jsonl", folder / f"{NEW}.jsonl")
    huge = folder / "ffffffff-aaaa-4bbb-8ccc-123456789abc.jsonl"  # after the other one
    with huge.open("wb") as sparse:  # 2 GiB on no disk: a hole, never read
        sparse.truncate(2 * 2**30)
    command = [sys.executable, "-m", "chat_history.cli", "--db", str(db), "import"]
    done = subprocess.run(
        [*command, "--from", "claude-code", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert f"{huge}: larger than 256 MiB, not read" in done.stderr
    assert not db.exists() or stored_conversations(db) == {}


def test_cline_and_roo_code_tasks_come_in_under_the_folder_their_details_name(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.sqlite3"
    for source in ("cline", "roo-code"):
        done = cli(db, "import", "--from", source, str(FIXTURES / source / "tasks"))
        assert "Imported 4 message(s) into 1 of 1 conversation(s)." in done
    found = stored_conversations(db)
    assert found[Key("file:///home/me/shop", "cline:1795770000000")] == 4
    assert found[Key("file:///home/me/shop", "roo-code:5b6c7d8e-9f01-4a2b-8c3d-4e5f60718293")] == 4

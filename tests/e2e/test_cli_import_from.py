"""``chat-history import --from SOURCE`` over the real CLI and a real SQLite file: the preview of a
dry run writes nothing, an import brings each session in as ``SOURCE:<session id>`` under the
workspace of the folder the tool recorded, importing again adds nothing, a longer version of a
session adds only its tail, and without PATH the tool's own folder for the current folder is
read. Issue 43: a session that records no folder goes into the current folder's workspace (said),
Continue and OpenCode files without their index are read, a FIFO or a link to a device is a
warning and never read (under a memory cap), a named file that yields nothing exits 1, and the
user's own conversation of the same id is left alone (the session goes beside it)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.opencode_db import build

from chat_history.importers.claude_code import project_folder_name
from chat_history.model import Key, Message
from chat_history.service import conversations, history
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


# -- issue 43 (Imports): real transcripts, hostile folders, the user's own conversations --------


def run_cli(
    db: Path,
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    memory: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """The CLI's exit, stdout and stderr; ``memory``: its address space capped (bytes), so that
    a read without a bound fails fast instead of taking the machine's memory."""

    def cap() -> None:
        import resource

        assert memory is not None
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [sys.executable, "-m", "chat_history.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        preexec_fn=cap if memory is not None else None,
    )


COPILOT_TIMELINE = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"


def test_a_session_that_records_no_folder_goes_into_the_current_folder_and_says_so(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.sqlite3"
    project = tmp_path / "work" / "shop"
    project.mkdir(parents=True)
    home = tmp_path / "copilot"
    older = home / "history-session-state"
    older.mkdir(parents=True)
    named = (
        FIXTURES
        / "copilot-cli"
        / "timeline-only"
        / f"session_{COPILOT_TIMELINE}_1759250400000.json"
    )
    shutil.copy(named, older / named.name)
    done = run_cli(db, "import", "--from", "copilot-cli", str(older / named.name), cwd=project)
    assert done.returncode == 0, done.stderr
    here = project.as_uri()
    assert "Imported 9 message(s) into 1 of 1 conversation(s)." in done.stdout
    assert f"into the current folder's workspace, {here}" in done.stdout
    assert stored_conversations(db)[Key(here, f"copilot-cli:{COPILOT_TIMELINE}")] == 9
    # Gemini CLI: the file's project folder is the SHA-256 of the current folder, as the CLI
    # names it; the session is this folder's (its recorded place), not a guess
    gemini_tmp = tmp_path / "g" / ".gemini" / "tmp"
    chats = gemini_tmp / hashlib.sha256(str(project).encode()).hexdigest() / "chats"
    chats.mkdir(parents=True)
    source = next((FIXTURES / "gemini-cli" / "tmp").glob("*/chats/session-*.json"))
    shutil.copy(source, chats / source.name)
    gemini = run_cli(db, "import", "--from", "gemini-cli", str(chats / source.name), cwd=project)
    assert gemini.returncode == 0, gemini.stderr
    assert "current folder" not in gemini.stdout and f"[{here}]" in gemini.stdout
    listed = run_cli(db, "import", "--from", "gemini-cli", str(gemini_tmp), "--json", cwd=project)
    entries = json.loads(listed.stdout)["conversations"]
    assert [(e["workspace"], e["workspaceFrom"], e["status"]) for e in entries] == [
        (here, "recorded", "unchanged")
    ]


def test_a_continue_session_without_sessions_json_and_an_opencode_tree_without_sessions(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.sqlite3"
    lone = tmp_path / "cn" / "sessions"
    lone.mkdir(parents=True)
    session = FIXTURES / "continue" / "sessions" / "d4c3b2a1-0f9e-4d8c-b7a6-958473625140.json"
    shutil.copy(session, lone / session.name)
    done = run_cli(db, "import", "--from", "continue", str(lone / session.name))
    assert done.returncode == 0, done.stderr
    assert "into 1 of 1 conversation(s)" in done.stdout
    storage = tmp_path / "share" / "opencode" / "storage"
    shutil.copytree(FIXTURES / "opencode" / "storage", storage)
    shutil.rmtree(storage / "session")
    tree = run_cli(db, "import", "--from", "opencode", str(storage))
    assert tree.returncode == 0, tree.stderr
    assert "Imported 9 message(s) into 2 of 2 conversation(s)." in tree.stdout


def test_a_named_file_that_yields_nothing_is_a_warning_and_a_failure(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    folder = tmp_path / "projects" / "-home-me-shop"
    folder.mkdir(parents=True)
    empty = folder / "11111111-2222-4333-8444-555555555555.jsonl"
    empty.write_text('{"type": "summary", "summary": "Only a title", "leafUuid": "x"}\n')
    done = run_cli(db, "import", "--from", "claude-code", str(empty), "--json")
    assert done.returncode != 0
    why = "no message in it that claude-code's reader carries over (empty, or not its session)"
    assert f"{empty}: {why}" in done.stderr
    assert json.loads(done.stdout) == {
        "conversations": [],
        "warnings": [{"path": str(empty), "why": why}],
    }
    shutil.copy(SHOP / f"{NEW}.jsonl", folder / f"{NEW}.jsonl")
    some = run_cli(db, "import", "--from", "claude-code", str(folder))
    assert some.returncode == 0, some.stderr  # something was imported: the warning stays
    assert f"{empty}: {why}" in some.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev are POSIX")
def test_a_fifo_and_a_link_to_a_device_are_never_read(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    folder = tmp_path / "projects" / "-home-me-shop"
    folder.mkdir(parents=True)
    shutil.copy(SHOP / f"{NEW}.jsonl", folder / f"{NEW}.jsonl")
    fifo = folder / "00000000-fifo.jsonl"
    os.mkfifo(fifo)
    zero = folder / "00000001-zero.jsonl"
    zero.symlink_to("/dev/zero")
    done = run_cli(db, "import", "--from", "claude-code", str(folder), memory=2 * 2**30)
    assert done.returncode == 0, done.stderr
    assert f"{fifo}: a FIFO, not a regular file: not read" in done.stderr
    assert f"{zero}: a character device, not a regular file: not read" in done.stderr
    assert "Imported 6 message(s) into 1 of 1 conversation(s)." in done.stdout
    for named, kind in ((zero, "a character device"), (fifo, "a FIFO")):
        alone = run_cli(db, "import", "--from", "claude-code", str(named), memory=2 * 2**30)
        assert alone.returncode != 0
        assert f"{named}: {kind}, not a regular file: not read" in alone.stderr
        assert "Traceback" not in alone.stderr


def test_an_import_goes_beside_a_conversation_of_the_same_id_it_did_not_create(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.sqlite3"
    workspace = "file:///home/me/shop"
    manager = ChatHistoryManager.open(db)
    try:
        history.append(
            manager, Key(workspace, f"claude-code:{NEW}"), [Message(role="user", content="mine")]
        )
    finally:
        manager.close()
    named = str(SHOP / f"{NEW}.jsonl")
    done = run_cli(db, "import", "--from", "claude-code", named)
    assert done.returncode == 0, done.stderr
    assert f"new        claude-code:{NEW}~2  6 message(s), 6 new" in done.stdout
    assert (
        f"beside claude-code:{NEW}, a conversation the import did not create (not merged)"
        in done.stdout
    )
    found = stored_conversations(db)
    assert found[Key(workspace, f"claude-code:{NEW}")] == 1
    assert found[Key(workspace, f"claude-code:{NEW}~2")] == 6

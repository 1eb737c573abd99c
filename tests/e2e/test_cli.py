"""The ``chat-history`` console script, run as a real process against real SQLite files in
``tmp_path``, populated through the manager (or the real server, via ``chat-history demo``)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from chat_history.cli.settings_file import section_of, strip_jsonc
from chat_history.model import Attachment, Follow, Message, ToolCall
from chat_history.service import branches, conversations, history
from chat_history.service.conversations import ConversationUpdate
from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import default_settings
from chat_history.store import Key, Store

SCRIPT = Path(sys.executable).with_name("chat-history")
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "chat_history.cli"]
HOUR = 3_600_000
NOW = int(time.time() * 1000)
T = NOW - HOUR  # recent enough for every default retention rule
PROJECT = Key("file:///home/ada/project", "chat-1")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """UTC timestamps, and a default storage folder that is never the user's real one."""
    return {**os.environ, "TZ": "UTC", "CHAT_HISTORY_STORAGE": str(tmp_path / "default-storage")}


def run(
    env: dict[str, str], *args: str | Path, stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [*CLI, *map(str, args)],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=timeout,
    )
    return result


def manager(folder: Path, *, clock_ms: int | None = None) -> ChatHistoryManager:
    """A manager that keeps what it is given (retention off), as an editor with generous
    settings would."""
    settings = attrs.evolve(default_settings(), enable_auto_pruning=False)
    if clock_ms is None:
        return ChatHistoryManager(Store(folder), settings)
    return ChatHistoryManager(Store(folder), settings, clock=lambda: clock_ms)


def tool_exchange(at: int) -> list[Message]:
    return [
        Message(role="system", content="You are a coding assistant.", timestamp=at),
        Message(
            role="user",
            content="What does main.py print? ça va",
            timestamp=at + 1_000,
            attachments=(
                Attachment(mime_type="image/png", data="aGVsbG8="),
                Attachment(mime_type="image/jpeg", uri="https://example.com/a.jpg"),
            ),
            metadata={"client": {"panel": 2}},
        ),
        Message(
            role="assistant",
            content="",
            tool_calls=(
                ToolCall(id="call_1", name="read_file", arguments={"path": "main.py"}),
                ToolCall(id="call_2", name="grep", arguments='{"pattern": "print"}'),
            ),
            timestamp=at + 2_000,
            provider_data={"anthropic": {"thinking": [{"type": "thinking", "signature": "s1"}]}},
        ),
        Message(
            role="tool",
            tool_call_id="call_1",
            name="read_file",
            content="print('hello')",
            timestamp=at + 3_000,
        ),
        Message(
            role="tool",
            tool_call_id="call_2",
            name="grep",
            content="main.py:1",
            timestamp=at + 3_500,
        ),
        Message(role="assistant", content="It prints hello.", timestamp=at + 4_000),
    ]


def populate(folder: Path) -> None:
    m = manager(folder)
    history.append(m, PROJECT, tool_exchange(T))
    history.save_summary(m, PROJECT, "The user asked what main.py prints.", covers_through_id=3)
    history.append(
        m,
        Key("file:///home/ada/project", "chat-2"),
        [Message(role="user", content="hi", timestamp=T)],
    )
    history.append(
        m, Key("default", "scratch"), [Message(role="user", content="note", timestamp=T + 9)]
    )
    m.store.close()


def export(env: dict[str, str], db: Path, *extra: str) -> str:
    result = run(env, "export", "--db", db, *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout


# -- conversations, show, stats --------------------------------------------------------------------


def test_conversations_lists_every_workspace_with_counts(
    tmp_path: Path, env: dict[str, str]
) -> None:
    populate(tmp_path)
    result = run(env, "conversations", "--db", tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "default  (1 conversation)" in lines
    assert "file:///home/ada/project  (2 conversations)" in lines
    chat1 = next(line.split() for line in lines if line.strip().startswith("chat-1"))
    rows = json.loads(run(env, "show", "chat-1", "--db", tmp_path, "--json").stdout)["messages"]
    assert chat1[1:3] == ["6", f"{sum(row['tokens'] for row in rows):,}"]
    assert chat1[-1] == "yes"

    only = run(env, "conversations", "--db", tmp_path, "--workspace", "default", "--json")
    [scratch] = json.loads(only.stdout)["conversations"]
    assert scratch["lastActivity"] >= T and scratch["createdAt"] == scratch["lastActivity"]
    assert {k: v for k, v in scratch.items() if k not in ("lastActivity", "createdAt")} == {
        "workspace": "default",
        "conversationId": "scratch",
        "title": "note",
        "titleSource": "auto",
        "messageCount": 1,
        "tokens": 5,
        "hasSummary": False,
        "metadata": {},
    }


def test_conversations_and_stats_count_a_conversation_holding_only_a_title_or_metadata(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A title or metadata makes a conversation exist (protocol.md "Version 2"): the CLI lists and
    counts it as listConversations does."""
    populate(tmp_path)
    m = manager(tmp_path)
    conversations.update(
        m, Key("default", "titled"), ConversationUpdate(set_title=True, title="Plan")
    )
    conversations.update(m, Key("elsewhere", "tagged"), ConversationUpdate(metadata={"pin": True}))
    m.close()
    listed = json.loads(run(env, "conversations", "--db", tmp_path, "--json").stdout)
    entries = {(c["workspace"], c["conversationId"]): c for c in listed["conversations"]}
    assert entries[("default", "titled")]["title"] == "Plan"
    assert entries[("elsewhere", "tagged")]["metadata"] == {"pin": True}
    assert len(entries) == 5
    table = run(env, "conversations", "--db", tmp_path).stdout.splitlines()
    assert "default  (2 conversations)" in table and "elsewhere  (1 conversation)" in table
    stats = run(env, "stats", "--db", tmp_path)
    assert "conversations  5 in 3 workspace(s)" in stats.stdout
    renamed = run(env, "rename", "titled", "Plan B", "--db", tmp_path)
    assert renamed.returncode == 0, renamed.stderr


def test_show_prints_each_tool_call_with_its_result(tmp_path: Path, env: dict[str, str]) -> None:
    populate(tmp_path)
    result = run(env, "show", "chat-1", "--db", tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Conversation 'chat-1' in workspace 'file:///home/ada/project'"
    assert "--- turn 1 ---" in lines
    call = lines.index('    call read_file {"path": "main.py"}  (id call_1)')
    assert lines[call + 1].startswith("        -> result from read_file #4 [")
    assert lines[call + 2] == "            print('hello')"
    assert lines[call + 3] == '    call grep {"pattern": "print"}  (id call_2)'
    assert lines[call + 4].startswith("        -> result from grep #5")
    # Results appear under their calls only, never again as rows of their own.
    assert not any("] tool #" in line for line in lines)
    assert "    [image image/png 8 base64 characters inline]" in lines
    assert "    [providerData: anthropic]" in lines
    assert "The user asked what main.py prints." in result.stdout
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime((T + 1_000) // 1000))
    assert f"[{stamp}] user #2" in lines


def test_show_json_and_provider_body(tmp_path: Path, env: dict[str, str]) -> None:
    populate(tmp_path)
    stored = json.loads(run(env, "show", "chat-1", "--db", tmp_path, "--json").stdout)
    assert [m["role"] for m in stored["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert stored["messages"][2]["toolCalls"][1]["arguments"] == '{"pattern": "print"}'
    assert stored["summary"]["coversThroughId"] == 3

    body = json.loads(run(env, "show", "chat-1", "--db", tmp_path, "--provider", "openai").stdout)
    assert body["provider"] == "openai"
    roles = [(m["role"], m.get("tool_call_id")) for m in body["body"]["messages"]]
    assert roles == [
        ("system", None),
        ("user", None),
        ("assistant", None),
        ("tool", "call_1"),
        ("tool", "call_2"),
        ("assistant", None),
    ]


def test_show_needs_workspace_when_the_id_is_ambiguous(tmp_path: Path, env: dict[str, str]) -> None:
    m = manager(tmp_path)
    for workspace in ("a", "b"):
        history.append(
            m, Key(workspace, "same"), [Message(role="user", content=workspace, timestamp=T)]
        )
    m.store.close()
    ambiguous = run(env, "show", "same", "--db", tmp_path)
    assert ambiguous.returncode == 2
    assert "several workspaces ('a', 'b')" in ambiguous.stderr
    chosen = run(env, "show", "same", "--db", tmp_path, "--workspace", "b")
    assert chosen.returncode == 0 and "    b" in chosen.stdout.splitlines()
    missing = run(env, "show", "nope", "--db", tmp_path)
    assert missing.returncode == 1 and "no conversation 'nope'" in missing.stderr


def test_stats_reports_counts_oldest_row_and_settings(tmp_path: Path, env: dict[str, str]) -> None:
    populate(tmp_path)
    settings = tmp_path / "settings.json"
    settings.write_text('{\n  // mine\n  "chatHistory.maxMessages": 20,\n}\n')
    result = run(env, "stats", "--db", tmp_path, "--settings", settings, "--max-tokens", "900")
    assert result.returncode == 0, result.stderr
    assert "messages       8" in result.stdout
    assert "conversations  3 in 2 workspace(s)" in result.stdout
    oldest = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(T // 1000))
    assert f"oldest message {oldest}" in result.stdout
    stats = json.loads(run(env, "stats", "--db", tmp_path, "--settings", settings, "--json").stdout)
    assert stats["messages"] == 8 and stats["summaries"] == 1 and stats["oldestMessage"] == T
    assert stats["fileBytes"] > 0
    assert stats["settings"]["chatHistory.maxMessages"] == 20
    assert stats["settingSources"]["chatHistory.maxMessages"] == str(settings)
    assert stats["settingSources"]["chatHistory.maxTokens"] == "default"
    assert "chatHistory.maxTokens                900" in result.stdout


def test_the_demo_records_through_the_real_server(tmp_path: Path, env: dict[str, str]) -> None:
    demo = run(env, "demo", "--storage", tmp_path)
    assert demo.returncode == 0, demo.stderr
    listed = run(env, "conversations", "--db", tmp_path / "chat-history.sqlite3")
    assert "  demo " in listed.stdout


# -- export / import -------------------------------------------------------------------------------


def test_export_import_export_is_identical(tmp_path: Path, env: dict[str, str]) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    populate(source)
    first = export(env, source)
    lines = [json.loads(line) for line in first.splitlines()]
    assert lines[0] == {"type": "header", "format": "chat-history", "version": 1}
    chat1 = [
        m["message"] for m in lines if m["type"] == "message" and m["conversationId"] == "chat-1"
    ]
    user = chat1[1]
    assert user["attachments"][1] == {
        "kind": "image",
        "mimeType": "image/jpeg",
        "uri": "https://example.com/a.jpg",
    }
    assert user["metadata"] == {"client": {"panel": 2}} and user["timestamp"] == T + 1_000
    summary = next(line for line in lines if line["type"] == "summary")
    assert summary["summary"]["coversMessages"] == 3

    dump = tmp_path / "dump.jsonl"
    dump.write_text(first, encoding="utf-8")
    imported = run(env, "import", dump, "--db", target)
    assert imported.returncode == 0, imported.stderr
    assert "Imported 8 message(s) and 1 summary into 3 conversation(s)" in imported.stdout
    assert export(env, target) == first
    # The summary still covers the same rows in the new database.
    shown = json.loads(run(env, "show", "chat-1", "--db", target, "--json").stdout)
    assert shown["summary"]["coversThroughId"] == shown["messages"][2]["id"]


def test_export_tree_keeps_every_branch_and_import_restores_it(
    tmp_path: Path, env: dict[str, str]
) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    populate(source)
    m = manager(source)
    rows, _ = history.whole(m, PROJECT)
    # Edit & resend of the prompt: a second branch; the first stays the active one.
    history.append(
        m,
        PROJECT,
        [Message(role="user", content="What does it print, in short?", timestamp=T + 5_000)],
        follow=Follow(rows[0].id),
    )
    branches.switch(m, PROJECT, rows[-1].id)
    m.store.close()
    line = export(env, source)
    tree = export(env, source, "--tree")
    assert "What does it print, in short?" in tree and "in short" not in line
    assert '"parentId"' in tree and '"parentId"' not in line
    assert '{"type":"conversation","workspace":"file:///home/ada/project","conversationId":' in tree
    dump = tmp_path / "tree.jsonl"
    dump.write_text(tree, encoding="utf-8")
    imported = run(env, "import", dump, "--db", target)
    assert imported.returncode == 0, imported.stderr
    assert "Imported 9 message(s)" in imported.stdout
    assert export(env, target, "--tree") == tree
    assert export(env, target) == line
    again = run(env, "import", dump, "--db", target)
    assert "Imported 0 message(s)" in again.stdout, again.stdout


def test_reimport_adds_nothing_and_a_newer_export_adds_only_its_tail(
    tmp_path: Path, env: dict[str, str]
) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    populate(source)
    dump = tmp_path / "dump.jsonl"
    dump.write_text(export(env, source), encoding="utf-8")
    assert run(env, "import", dump, "--db", target).returncode == 0
    again = run(env, "import", dump, "--db", target)
    assert again.returncode == 0, again.stderr
    assert "Imported 0 message(s) and 0 summaries" in again.stdout
    assert "8 message(s) were already stored" in again.stdout

    m = manager(source)
    history.append(m, PROJECT, [Message(role="user", content="And now?", timestamp=T + 10_000)])
    m.store.close()
    newer = tmp_path / "newer.jsonl"
    newer.write_text(export(env, source), encoding="utf-8")
    tail = run(env, "import", "-", "--db", target, stdin=newer.read_bytes())
    assert tail.returncode == 0, tail.stderr
    assert "Imported 1 message(s)" in tail.stdout
    assert export(env, target) == newer.read_text(encoding="utf-8")


def message_line(conversation: str, message: dict[str, Any]) -> str:
    return json.dumps(
        {"type": "message", "workspace": "w", "conversationId": conversation, "message": message}
    )


def big_file(path: Path, messages: int, tail: Sequence[str]) -> None:
    """``messages`` rows of one conversation in tool-exchange turns, a small second conversation,
    then ``tail`` lines."""
    cycle = [
        lambda i: {"role": "user", "content": f"question {i}"},
        lambda i: {
            "role": "assistant",
            "toolCalls": [{"id": f"c{i}", "name": "read", "arguments": {"n": i}}],
        },
        lambda i: {"role": "tool", "toolCallId": f"c{i - 1}", "name": "read", "content": f"r{i}"},
        lambda i: {"role": "assistant", "content": f"answer {i}"},
    ]
    with path.open("w", encoding="utf-8") as out:
        for i in range(messages):
            out.write(message_line("big", {**cycle[i % 4](i), "timestamp": T + i}) + "\n")
        out.write(message_line("small", {"role": "user", "content": "hi", "timestamp": T}) + "\n")
        out.writelines(line + "\n" for line in tail)


def test_import_of_100k_messages_is_atomic_per_conversation(
    tmp_path: Path, env: dict[str, str]
) -> None:
    db, path = tmp_path / "db", tmp_path / "big.jsonl"
    orphan = {"role": "tool", "toolCallId": "nobody", "content": "?", "timestamp": T}
    big_file(path, 100_000, [message_line("big", orphan)])
    failed = run(env, "import", path, "--db", db)
    assert failed.returncode == 1
    assert f"{path}:100002: messages[100000].toolCallId: answers no pending" in failed.stderr
    listed = json.loads(run(env, "conversations", "--db", db, "--json").stdout)
    assert [c["conversationId"] for c in listed["conversations"]] == ["small"]

    big_file(path, 100_000, ['{"type": "message", "workspace": "w", '])
    malformed = run(env, "import", path, "--db", db)
    assert malformed.returncode == 1
    assert f"{path}:100002: not JSON" in malformed.stderr
    assert "nothing was imported" in malformed.stderr

    big_file(path, 100_000, [])
    done = run(env, "import", path, "--db", db)  # its speed: bench/ (no timed assertion here)
    assert done.returncode == 0, done.stderr
    assert (
        "Imported 100,000 message(s)" in done.stdout and "1 message(s) were already" in done.stdout
    )
    listed = json.loads(run(env, "conversations", "--db", db, "--json").stdout)
    assert {c["conversationId"]: c["messageCount"] for c in listed["conversations"]} == {
        "big": 100_000,
        "small": 1,
    }


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("{not json", "not JSON"),
        (
            '{"type": "message", "workspace": "w", "conversationId": "c", "message": '
            '{"role": "user", "content": "no time"}}',
            "message.timestamp: is required",
        ),
        (
            '{"type": "message", "workspace": "w", "conversationId": "c", "message": '
            '{"role": "robot", "content": "x", "timestamp": 1}}',
            "message.role",
        ),
        (
            '{"type": "message", "workspace": "", "conversationId": "c", "message": {}}',
            "workspace: must be a non-empty string",
        ),
        ('{"type": "header", "format": "chat-history", "version": 2}', "version 2"),
        ('{"type": "comment"}', "type: expected"),
    ],
)
def test_a_malformed_line_is_named_and_nothing_is_imported(
    tmp_path: Path, env: dict[str, str], line: str, why: str
) -> None:
    path = tmp_path / "in.jsonl"
    good = message_line("c", {"role": "user", "content": "fine", "timestamp": T})
    path.write_text(f"{good}\n\n{line}\n{good}\n", encoding="utf-8")
    result = run(env, "import", path, "--db", tmp_path / "db")
    assert result.returncode == 1
    assert f"{path}:3: " in result.stderr and why in result.stderr, result.stderr
    assert not (tmp_path / "db").exists()


# -- prune -----------------------------------------------------------------------------------------


def populate_for_retention(folder: Path) -> None:
    """One conversation per rule: 'old' for age (with an old summary), 'long' for count, 'fat'
    for tokens, under maxMessages 20 and maxTokens 1000."""
    m = manager(folder, clock_ms=NOW - 800 * HOUR)
    old = Key("w", "old")
    long_ago = NOW - 800 * HOUR
    history.append(
        m,
        old,
        [
            Message(role="user", content="q", timestamp=long_ago),
            Message(role="assistant", content="a", timestamp=long_ago),
        ]
        * 2,
    )
    history.save_summary(m, old, "ancient")
    long = Key("w", "long")
    history.append(m, long, [Message(role="system", content="sys", timestamp=T)])
    for i in range(30):
        history.append(
            m,
            long,
            [
                Message(role="user", content=f"q{i}", timestamp=T + i),
                Message(role="assistant", content=f"a{i}", timestamp=T + i),
            ],
        )
    fat = Key("w", "fat")
    for i in range(3):
        history.append(
            m,
            fat,
            [
                Message(role="user", content="x" * 2000, timestamp=T + i),
                Message(role="assistant", content="ok", timestamp=T + i),
            ],
        )
    m.store.close()


SETTINGS_JSON = """{
  // VS Code user settings: other extensions' keys are ignored
  "editor.fontSize": 14,
  "chatHistory.maxMessages": 20, /* count rule */
  "chatHistory": {"maxTokens": 1000},
}
"""


def test_prune_dry_run_reports_per_reason_and_deletes_nothing(
    tmp_path: Path, env: dict[str, str]
) -> None:
    db = tmp_path / "db"
    populate_for_retention(db)
    settings = tmp_path / "settings.json"
    settings.write_text(SETTINGS_JSON, encoding="utf-8")
    before = export(env, db)
    report = run(env, "prune", "--dry-run", "--json", "--db", db, "--settings", settings)
    assert report.returncode == 0, report.stderr
    plan = json.loads(report.stdout)
    assert plan["reasons"] == {
        "age": {"messages": 4, "turns": 2, "conversations": 1},
        "count": {"messages": 42, "turns": 21, "conversations": 1},
        "tokens": {"messages": 4, "turns": 2, "conversations": 1},
    }
    assert plan["deletedSummaries"] == 1 and plan["droppedMessages"] == 50
    text = run(env, "prune", "--dry-run", "--db", db, "--settings", settings).stdout
    assert text.splitlines()[0] == "Dry run: nothing was deleted."
    assert "Would delete 50 message(s) in 3 of 3 conversation(s), and 1 expired summary." in text
    assert any(line.split()[:3] == ["count", "42", "messages"] for line in text.splitlines())
    assert export(env, db) == before


def test_prune_deletes_what_the_dry_run_reported(tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "db"
    populate_for_retention(db)
    flags = ["--max-messages", "20", "--max-tokens", "1000"]
    planned = json.loads(run(env, "prune", "--dry-run", "--json", "--db", db, *flags).stdout)
    done = run(env, "prune", "--json", "--db", db, *flags)
    assert done.returncode == 0, done.stderr
    pruned = json.loads(done.stdout)
    assert pruned["dryRun"] is False
    assert pruned["reasons"] == planned["reasons"]
    listed = json.loads(run(env, "conversations", "--json", "--db", db).stdout)
    counts = {c["conversationId"]: c["messageCount"] for c in listed["conversations"]}
    assert counts == {"long": 19, "fat": 2}  # 'old' and its summary are gone
    long = json.loads(run(env, "show", "long", "--json", "--db", db).stdout)["messages"]
    assert long[0]["content"] == "sys"  # system rows are preserved
    assert long[1]["content"] == "q21"  # whole turns went, oldest first
    again = json.loads(run(env, "prune", "--json", "--db", db, *flags).stdout)
    assert again["droppedMessages"] == 0


# -- errors and terminal behaviour -----------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["conversations"], ["show", "x"], ["export"], ["stats"], ["prune", "--dry-run"]],
)
def test_a_missing_database_is_an_error_and_is_not_created(
    tmp_path: Path, env: dict[str, str], command: list[str]
) -> None:
    result = run(env, *command)  # the default location: $CHAT_HISTORY_STORAGE
    assert result.returncode == 1
    assert "no database at " + str(tmp_path / "default-storage") in result.stderr
    assert not (tmp_path / "default-storage").exists()


def test_a_database_that_is_not_sqlite_is_a_storage_error(
    tmp_path: Path, env: dict[str, str]
) -> None:
    broken = tmp_path / "copy.sqlite3"
    broken.write_bytes(b"not a database, just text" * 100)
    result = run(env, "stats", "--db", broken)
    assert result.returncode == 3
    assert "storage error" in result.stderr and "not a database" in result.stderr


def test_a_locked_database_is_a_storage_error(tmp_path: Path, env: dict[str, str]) -> None:
    import sqlite3

    populate(tmp_path)
    holder = sqlite3.connect(tmp_path / "chat-history.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        # The real CLI with a short busy timeout (the server's 15 s would slow the suite down).
        code = (
            "import chat_history.store.failures as f; f.BUSY_TIMEOUT_MS = 200; "
            "from chat_history.cli.main import main; raise SystemExit(main())"
        )
        result = subprocess.run(
            [sys.executable, "-c", code, "prune", "--db", str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.returncode == 3
    assert "database is locked (still locked after 200 ms)" in result.stderr


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["show"], "the following arguments are required: CONVERSATION"),
        (["prune", "--max-messages", "lots"], "invalid int value: 'lots'"),
        (["prune", "--max-messages", "-1"], "argument --max-messages: must be at least 0"),
        (["show", "chat-1", "--provider", "nope"], "unknown provider; known kinds"),
    ],
)
def test_bad_arguments_exit_2(
    tmp_path: Path, env: dict[str, str], args: list[str], why: str
) -> None:
    populate(tmp_path)
    result = run(env, "--db", tmp_path, *args)
    assert result.returncode == 2
    assert why in result.stderr


def test_db_names_a_folder_or_any_database_file(tmp_path: Path, env: dict[str, str]) -> None:
    populate(tmp_path / "store")
    copy = tmp_path / "backup.sqlite3"
    copy.write_bytes((tmp_path / "store" / "chat-history.sqlite3").read_bytes())
    for db in (tmp_path / "store", tmp_path / "store" / "chat-history.sqlite3", copy):
        assert "chat-1" in run(env, "conversations", "--db", db).stdout
    env["CHAT_HISTORY_STORAGE"] = str(tmp_path / "store")
    assert "chat-1" in run(env, "conversations").stdout


def test_progress_is_drawn_on_a_terminal_only(tmp_path: Path, env: dict[str, str]) -> None:
    m = manager(tmp_path)
    for start in range(0, 2_000, 1_000):
        history.append(
            m,
            PROJECT,
            [
                Message(role="user", content=f"m{i}", timestamp=T + i)
                for i in range(start, start + 1_000)
            ],
        )
    m.store.close()
    piped = run(env, "export", "--db", tmp_path)
    assert piped.returncode == 0 and piped.stderr == ""

    master, slave = pty.openpty()
    process = subprocess.run(
        [*CLI, "export", "--db", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        timeout=60,
    )
    os.close(slave)
    drawn = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        drawn += chunk
    os.close(master)
    assert process.returncode == 0
    assert b"exporting [" in drawn
    assert process.stdout.count(b"\n") == 2_001  # the bar never mixes into the data


def test_settings_files_may_hold_comments_trailing_commas_and_both_key_styles() -> None:
    document = json.loads(strip_jsonc(SETTINGS_JSON))
    assert section_of(document) == {"maxMessages": 20, "maxTokens": 1000}
    assert json.loads(strip_jsonc('{"url": "http://x//y", "s": "/* no */",}')) == {
        "url": "http://x//y",
        "s": "/* no */",
    }


def test_reimporting_an_older_export_does_not_bring_pruned_turns_back(
    tmp_path: Path, env: dict[str, str]
) -> None:
    db = tmp_path / "db"
    populate_for_retention(db)
    backup = tmp_path / "backup.jsonl"
    backup.write_text(export(env, db, "long"), encoding="utf-8")
    assert run(env, "prune", "--db", db, "--max-messages", "20").returncode == 0
    pruned = export(env, db, "long")
    result = run(env, "import", backup, "--db", db)
    assert result.returncode == 0, result.stderr
    assert "Imported 0 message(s)" in result.stdout
    assert export(env, db, "long") == pruned


def test_a_workspace_as_long_as_the_server_accepts_survives_export_and_import(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The server takes workspaces up to MAX_IDENTITY_BYTES; its backup must restore them."""
    from tests.e2e.reliability import start, user

    from chat_history.policy.identity import MAX_IDENTITY_BYTES

    longest = "file:///" + "w" * (MAX_IDENTITY_BYTES - len("file:///"))
    source, target = tmp_path / "source", tmp_path / "target"
    server = start(source, {"maxMessages": 100})
    try:
        for workspace in (longest, "short"):
            server.ok(
                "chatHistory/append",
                {"conversationId": "c", "workspace": workspace, "messages": [user("kept")]},
            )
        too_long = server.request(
            "chatHistory/append",
            {"conversationId": "c", "workspace": longest + "w", "messages": [user("no")]},
        )
        assert too_long["error"]["data"]["field"] == "workspace"
    finally:
        server.close()
    first = export(env, source / "chat-history.sqlite3")
    assert f'"workspace":"{longest}"' in first
    dump = tmp_path / "dump.jsonl"
    dump.write_text(first, encoding="utf-8")
    imported = run(env, "import", dump, "--db", target)
    assert imported.returncode == 0, imported.stderr
    assert "into 2 conversation(s)" in imported.stdout
    assert export(env, target) == first

    # One character more is what the server refuses too: named, and nothing imported.
    dump.write_text(first.replace(longest, longest + "w"), encoding="utf-8")
    refused = run(env, "import", dump, "--db", tmp_path / "other")
    assert refused.returncode == 1
    assert "workspace" in refused.stderr and "nothing was imported" in refused.stderr


def test_show_and_conversations_print_no_terminal_control_from_stored_text(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Stored text cannot retitle the terminal, write its clipboard (OSC 52) or overwrite lines:
    controls are shown escaped; tab and newline stay; --json keeps the text exact."""
    hostile = (
        "title\x1b]0;owned\x07 clip\x1b]52;c;ZXZpbA==\x1b\\ csi\x9b2J osc\x9d8;;x\x9c"
        " cr\rback\x08 del\x7f nul\x00 tab\tend\nsecond line"
    )
    key = Key("ws\x1b[31m", "chat\x1b]0;t\x07")
    m = manager(tmp_path)
    history.append(m, key, [Message(role="user", content=hostile, timestamp=T)])
    history.save_summary(m, key, "sum\x1b[2Jmary")
    m.store.close()

    def output(*args: str) -> bytes:
        result = subprocess.run(
            [*CLI, *args, "--db", str(tmp_path)], capture_output=True, env=env, timeout=60
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    for printed in (output("show", key.conversation), output("conversations")):
        text = printed.decode("utf-8")
        assert not [c for c in text if c not in "\t\n" and (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0)]
        assert "\\x1b" in text
    shown = output("show", key.conversation).decode("utf-8")
    assert "clip\\x1b]52;c;ZXZpbA==\\x1b\\ csi\\x9b2J" in shown
    assert "cr\\x0dback\\x08 del\\x7f nul\\x00 tab\tend\n    second line" in shown
    assert "sum\\x1b[2Jmary" in shown
    exact = json.loads(output("show", key.conversation, "--json"))
    assert exact["messages"][0]["content"] == hostile
    assert exact["conversationId"] == key.conversation
    listed = json.loads(output("conversations", "--json"))["conversations"]
    assert [(c["workspace"], c["conversationId"]) for c in listed] == [
        (key.workspace, key.conversation)
    ]


# -- rename, truncate, fork (protocol.md "Version 2": updateConversation, truncate, fork) --------


def test_rename_truncate_and_fork_by_hand(tmp_path: Path, env: dict[str, str]) -> None:
    folder = tmp_path / "storage"
    m = manager(folder)
    rows = history.append(
        m,
        PROJECT,
        [
            Message(role="user", content="first question", timestamp=T),
            Message(role="assistant", content="first answer", timestamp=T),
            Message(role="user", content="second question", timestamp=T),
            Message(role="assistant", content="second answer", timestamp=T),
        ],
    ).messages
    m.close()

    renamed = run(env, "--db", folder, "rename", "chat-1", "Login bug")
    assert renamed.returncode == 0, renamed.stderr
    assert "'Login bug' (user title)" in renamed.stdout
    forked = run(env, "--db", folder, "fork", "chat-1", "chat-2", "--through", rows[1].id)
    assert forked.returncode == 0, forked.stderr
    assert "chat-2: 2 message(s) copied from chat-1" in forked.stdout
    cut = run(env, "--db", folder, "truncate", "chat-1", "--from", rows[2].id)
    assert cut.returncode == 0, cut.stderr
    assert "chat-1: deleted 2 message(s)." in cut.stdout
    automatic = run(env, "--db", folder, "rename", "chat-1", "--automatic")
    assert "'first question' (auto title)" in automatic.stdout

    check = manager(folder)
    assert [r.content for r in history.get(check, PROJECT).messages] == [
        "first question",
        "first answer",
    ]
    fork = conversations.info(check, Key(PROJECT.workspace, "chat-2"))
    assert (fork.title, fork.message_count) == ("Login bug (fork)", 2)
    check.close()


def test_edits_by_hand_refuse_bad_input_and_change_nothing(
    tmp_path: Path, env: dict[str, str]
) -> None:
    folder = tmp_path / "storage"
    m = manager(folder)
    history.append(m, PROJECT, [Message(role="user", content="only", timestamp=T)])
    m.close()
    missing = run(env, "--db", folder, "truncate", "chat-1", "--from", "999999")
    assert missing.returncode == 1 and "--from" in missing.stderr
    blank = run(env, "--db", folder, "rename", "chat-1", "   ")
    assert blank.returncode == 1 and "TITLE" in blank.stderr
    taken = run(env, "--db", folder, "fork", "chat-1", "chat-1")
    assert taken.returncode == 1 and "NEW" in taken.stderr
    both = run(env, "--db", folder, "rename", "chat-1")
    assert both.returncode == 2
    check = manager(folder)
    assert [r.content for r in history.get(check, PROJECT).messages] == ["only"]
    assert conversations.info(check, PROJECT).title_source == "auto"
    check.close()

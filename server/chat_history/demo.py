"""A live session against the real server and a real SQLite file: ``python -m chat_history.demo``.

Starts ``chat-history-server`` over stdio on a fresh storage folder, records a conversation with
a tool exchange, shows storage retention deleting whole turns (and its notification), prepares a
provider request under a small budget, and prints the stored history."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from chat_history.client import StdioClient


def _show(title: str, value: Any) -> None:
    print(f"\n== {title}")
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _history_line(row: dict[str, Any]) -> str:
    text = row["content"] or ", ".join(
        f"{c['name']}({json.dumps(c['arguments'])})" for c in row["toolCalls"]
    )
    answer = f" -> {row['toolCallId']}" if row["toolCallId"] else ""
    return f"  #{row['id']:<3} turn {row['turn']}  {row['role']:<9}{answer} {text[:70]}"


#: The demo's first turn: a user question, a tool call, its result, the reply.
TURN_1 = [
    {"role": "system", "content": "You are a coding assistant."},
    {"role": "user", "content": "What does main.py print?"},
    {
        "role": "assistant",
        "content": None,
        "toolCalls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "main.py"}}],
    },
    {"role": "tool", "toolCallId": "call_1", "name": "read_file", "content": "print('hello')"},
    {"role": "assistant", "content": "It prints hello."},
]
TURN_2 = [
    {"role": "user", "content": "And in French?"},
    {"role": "assistant", "content": "It would print bonjour if you changed it."},
]


def run(storage: Path) -> int:
    """Start the server on ``storage``, append three turns past ``maxMessages``, prepare under a
    30-token budget, and print what happened at each step."""
    settings = {"maxMessages": 7, "context": {"maxContextTokens": 30}}
    with StdioClient(storage) as server:
        init = server.initialize(settings)
        print(f"server started: {init['serverInfo']['name']} {init['serverInfo']['version']}")
        print(f"database: {storage / 'chat-history.sqlite3'}")
        kinds = init["capabilities"]["experimental"]["chatHistory"]["providers"]
        print(f"providers: {', '.join(kinds)}")
        conversation = {"conversationId": "demo"}
        server.call("chatHistory/append", {**conversation, "messages": TURN_1})
        print("\nappended turn 1 (user, tool call, tool result, reply)")
        server.call("chatHistory/append", {**conversation, "messages": TURN_2})
        print("appended turn 2")
        result = server.call(
            "chatHistory/append",
            {**conversation, "messages": [{"role": "user", "content": "Thanks!"}]},
        )
        print("appended turn 3: the conversation now exceeds maxMessages = 7")
        _show(
            "append result: pruned (whole turn 1 deleted for good, tool pair together)",
            result["pruned"],
        )
        _show_notifications(server)
        prepared = server.call(
            "chatHistory/prepare",
            {**conversation, "provider": "anthropic", "model": "claude-sonnet-4-5"},
        )
        _show(
            "prepare for anthropic under a 30-token budget (request only, nothing deleted)",
            {k: prepared[k] for k in ("estimatedTokens", "budget", "trimmed", "body")},
        )
        _show_notifications(server)
        stored = server.call("chatHistory/get", conversation)
        print("\n== stored history")
        for row in stored["messages"]:
            print(_history_line(row))
    return 0


def _show_notifications(server: StdioClient) -> None:
    for note in server.notifications:
        _show(f"notification {note['method']}", note["params"])
    server.notifications.clear()


def main(argv: list[str] | None = None) -> int:
    """``make demo``: a live session against the real server, in ``--storage`` or a new temporary
    folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--storage", type=Path, help="storage folder to use (default: a new temporary folder)"
    )
    args = parser.parse_args(argv)
    if args.storage is not None:
        return run(args.storage)
    with tempfile.TemporaryDirectory(prefix="chat-history-demo-") as folder:
        return run(Path(folder))


if __name__ == "__main__":
    raise SystemExit(main())

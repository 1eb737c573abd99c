"""An agent-shaped session of ``chat-history mcp`` (issue 31's "done when"): a scripted client on
the official MCP SDK asks three questions a user asks of last week's chats — over a database of
5,000 conversations in 3 workspaces whose other two workspaces hold the same topics with other
answers — and each time finds the right conversation of its own workspace, reads the decision
around the hit, and never sees the other workspaces."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from chat_history.model import Key, Message
from chat_history.service import conversations, history
from chat_history.service.manager import ChatHistoryManager

pytestmark = pytest.mark.asyncio

HOURS = 3_600_000
OURS = "file:///home/me/project"
THEIRS = ("file:///home/me/other", "file:///home/me/third")
WORDS = [
    "parser",
    "lexer",
    "token",
    "widget",
    "render",
    "layout",
    "button",
    "theme",
    "colour",
    "config",
    "flag",
    "module",
]
WORDS += [
    "fixture",
    "mock",
    "build",
    "release",
    "branch",
    "merge",
    "review",
    "commit",
    "script",
    "shell",
    "docker",
]
WORDS += [
    "socket",
    "buffer",
    "stream",
    "thread",
    "queue",
    "worker",
    "timer",
    "event",
    "handler",
    "route",
    "request",
]
#: (conversation, question, answer in our workspace, answer the other workspaces hold)
DECISIONS = (
    (
        "retry-logic",
        "How should the retry logic of the uploader back off?",
        "Decision: exponential backoff with full jitter, capped at 30 seconds, five attempts.",
        "Decision: linear backoff of 2 seconds, retried forever.",
    ),
    (
        "database-choice",
        "Which database for the team's shared history server?",
        "We picked PostgreSQL for the team server and SQLite for each laptop.",
        "We picked MongoDB for the team server.",
    ),
    (
        "cache-naming",
        "What do we call the module that keeps whole conversations in memory?",
        "Call it conversation_cache; the prompt-cache one is cache_points.",
        "Call it memcache_layer.",
    ),
)


def filler(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agent") / "history.sqlite3"
    rng = random.Random(31)
    now = int(time.time() * 1000)
    manager = ChatHistoryManager.open(path)
    try:
        counts = {OURS: 2_000, THEIRS[0]: 1_500, THEIRS[1]: 1_500}
        for workspace, count in counts.items():
            for n in range(count - len(DECISIONS)):
                at = now - rng.randrange(1, 14 * 24) * HOURS
                history.append(
                    manager,
                    Key(workspace, f"chat-{n}"),
                    [
                        Message(role="user", content=filler(rng, 12) + "?", timestamp=at),
                        Message(role="assistant", content=filler(rng, 40), timestamp=at + 1),
                    ],
                )
            for conversation, question, ours, theirs in DECISIONS:
                at = now - 6 * 24 * HOURS  # last week
                history.append(
                    manager,
                    Key(workspace, conversation),
                    [
                        Message(role="user", content=question, timestamp=at),
                        Message(role="assistant", content=filler(rng, 30), timestamp=at + 1),
                        Message(role="user", content="So what is the decision?", timestamp=at + 2),
                        Message(
                            role="assistant",
                            content=ours if workspace == OURS else theirs,
                            timestamp=at + 3,
                        ),
                    ],
                )
        assert len(conversations.list_page(manager, None, None, None).conversations) == 5_000
    finally:
        manager.close()
    return path


async def tool(client: ClientSession, name: str, **arguments: Any) -> tuple[dict[str, Any], str]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    structured: dict[str, Any] = result.structured_content
    return structured, text.text


async def test_three_questions_of_last_weeks_chats_find_the_right_conversation(db: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "chat_history.cli", "--db", str(db), "mcp"],
    )

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=OURS)])

    seen: list[str] = []
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, list_roots_callback=roots) as client,
    ):
        await client.initialize()
        questions = (
            ("what did we decide about the retry backoff", "backoff", "full jitter"),
            (
                "which database did we pick for the team server",
                "database team server",
                "PostgreSQL",
            ),
            (
                "what is the conversation cache module called",
                "module conversations memory",
                "conversation_cache",
            ),
        )
        for (conversation, *_), (_, query, answer) in zip(DECISIONS, questions, strict=True):
            found, text = await tool(client, "search_history", query=query, limit=5)
            seen += [text, json.dumps(found)]
            assert found["results"], query
            top = found["results"][0]
            assert (top["conversationId"], top["workspace"]) == (conversation, OURS)
            read, text = await tool(
                client, "read_conversation", conversationId=conversation, aroundId=top["messageId"]
            )
            seen += [text, json.dumps(read)]
            assert answer in text
        listing, text = await tool(client, "list_conversations", limit=200)
        seen += [text, json.dumps(listing)]
        assert {c["workspace"] for c in listing["conversations"]} == {OURS}
    everything = "\n".join(seen)
    for _, _, _, theirs in DECISIONS:
        assert theirs not in everything
    for workspace in THEIRS:
        assert workspace not in everything

"""``chat-history mcp`` over a conversation tree (protocol.md "Version 5" → Conversation trees),
driven by the official MCP client SDK over stdio: search finds rows of every branch and says
which are on the active path, each hit's resource link still reads the conversation,
``read_conversation`` around a row of another branch reads that row's path without switching
anything, and the conversation resources read the active path."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from tests.e2e.test_mcp import checked, refused, session

from chat_history.model import Follow, Key, Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager

pytestmark = pytest.mark.asyncio

WS = "file:///work/project"
KEY = Key(WS, "cache")
T0 = int(time.time() * 1000) - 86_400_000


def seed(db: Path) -> dict[str, int]:
    """One conversation whose first reply was regenerated: the first reply and the exchange
    that followed it are another branch; the new reply and its follow-up the active path.
    Another conversation beside it. Returns the row ids by name."""
    manager = ChatHistoryManager.open(db)
    try:
        first = history.append(
            manager,
            KEY,
            [
                Message(role="user", content="Where do we keep the cache?", timestamp=T0),
                Message(
                    role="assistant", content="Use a SQLite table for the cache.", timestamp=T0 + 1
                ),
                Message(role="user", content="What about its migrations?", timestamp=T0 + 2),
                Message(
                    role="assistant",
                    content="Schema steps handle the migrations.",
                    timestamp=T0 + 3,
                ),
            ],
        ).messages
        prompt, table, migrations, steps = (row.id for row in first)
        second = history.append(
            manager,
            KEY,
            [
                Message(
                    role="assistant",
                    content="Keep the cache in a flat JSON file instead.",
                    timestamp=T0 + 10,
                ),
                Message(role="user", content="Fine, a file it is.", timestamp=T0 + 11),
            ],
            Follow(prompt),
        ).messages
        flat, fine = (row.id for row in second)
        other = history.append(
            manager,
            Key(WS, "elsewhere"),
            [Message(role="user", content="unrelated", timestamp=T0)],
        ).messages[0]
    finally:
        manager.close()
    return {
        "prompt": prompt,
        "table": table,
        "migrations": migrations,
        "steps": steps,
        "flat": flat,
        "fine": fine,
        "other": other.id,
    }


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    db = tmp_path / "history.sqlite3"
    return db, seed(db)


def active_ids(db: Path) -> list[int]:
    manager = ChatHistoryManager.open(db)
    try:
        return [row.id for row in history.get(manager, KEY).messages]
    finally:
        manager.close()


async def test_search_says_which_hits_are_on_the_active_path(
    tree: tuple[Path, dict[str, int]],
) -> None:
    db, ids = tree
    async with session(db, "--workspace", WS) as client:
        found = await checked(client, "search_history", query="cache")
        by_id = {hit["messageId"]: hit for hit in found["results"]}
        assert by_id[ids["table"]]["onActivePath"] is False
        assert by_id[ids["flat"]]["onActivePath"] is True
        assert by_id[ids["prompt"]]["onActivePath"] is True

        result = await client.call_tool("search_history", {"query": "SQLite table"})
        text = result.content[0]
        assert isinstance(text, types.TextContent)
        assert f"message {ids['table']}" in text.text and "on another branch" in text.text
        links = [c for c in result.content if isinstance(c, types.ResourceLink)]
        assert [link.name for link in links] == ["cache"]
        # the link reads the conversation as it shows: its active path
        read = (await client.read_resource(links[0].uri)).contents[0]
        assert isinstance(read, types.TextResourceContents)
        assert "flat JSON file" in read.text and "Fine, a file it is." in read.text
        assert "SQLite table" not in read.text and "migrations" not in read.text


async def test_reading_around_a_row_of_another_branch_reads_its_path(
    tree: tuple[Path, dict[str, int]],
) -> None:
    db, ids = tree
    before = active_ids(db)
    assert before == [ids["prompt"], ids["flat"], ids["fine"]]
    async with session(db, "--workspace", WS) as client:
        hit = (await checked(client, "search_history", query="SQLite table"))["results"][0]
        assert hit["messageId"] == ids["table"] and hit["onActivePath"] is False
        read = await checked(
            client, "read_conversation", conversationId="cache", aroundId=hit["messageId"]
        )
        # from the first row down through the row, then on to the branch's leaf
        assert [row["id"] for row in read["rows"]] == [
            ids["prompt"],
            ids["table"],
            ids["migrations"],
            ids["steps"],
        ]
        assert read["onActivePath"] is False
        assert read["omittedBefore"] == 0 and read["omittedAfter"] == 0
        result = await client.call_tool(
            "read_conversation", {"conversationId": "cache", "aroundId": ids["migrations"]}
        )
        text = result.content[0]
        assert isinstance(text, types.TextContent)
        assert "Another branch's path" in text.text and "Schema steps" in text.text
        assert "flat JSON" not in text.text

        # a narrow read still centres on the row named
        narrow = await checked(
            client, "read_conversation", conversationId="cache", aroundId=ids["table"], limit=1
        )
        assert [row["id"] for row in narrow["rows"]] == [ids["table"]]
        assert narrow["omittedBefore"] == 1 and narrow["omittedAfter"] == 2

        # the conversation still reads its active path, as it did
        newest = await checked(client, "read_conversation", conversationId="cache")
        assert [row["id"] for row in newest["rows"]] == before
        assert newest["onActivePath"] is True
        around = await checked(
            client, "read_conversation", conversationId="cache", aroundId=ids["flat"]
        )
        assert [row["id"] for row in around["rows"]] == before and around["onActivePath"]

        # a row of another conversation, or of none, is no row of this one
        for wrong in (ids["other"], ids["fine"] + 1000):
            message = await refused(
                client, "read_conversation", "aroundId", conversationId="cache", aroundId=wrong
            )
            assert str(wrong) not in message
    assert active_ids(db) == before  # nothing was switched


async def test_the_conversation_resource_reads_the_active_path(
    tree: tuple[Path, dict[str, int]],
) -> None:
    db, ids = tree
    async with session(db, "--workspace", WS) as client:
        listed = (await client.list_resources()).resources
        cache = next(r for r in listed if r.name == "cache")
        assert cache.description is not None and cache.description.startswith("3 messages")
        read = (await client.read_resource(f"{cache.uri}/json")).contents[0]
        assert isinstance(read, types.TextResourceContents)
        shown: dict[str, Any] = json.loads(read.text)
        assert [row["id"] for row in shown["rows"]] == [ids["prompt"], ids["flat"], ids["fine"]]
        assert shown["omittedBefore"] == 0

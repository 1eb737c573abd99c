"""``chat-history mcp`` driven by the official MCP client SDK over stdio (protocol.md "Version
4" → Agents recall their history): the tools as an agent sees them, each answer's structured
content checked against the tool's output schema, the scope (``--workspace``, the client's root,
the working folder, ``--all-workspaces`` from the command line only), deleted text never
returned, and bad arguments answered as tool errors that name the argument while the server
keeps serving."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from chat_history.model import Key, Message, ToolCall
from chat_history.service import edits, history
from chat_history.service.manager import ChatHistoryManager

pytestmark = pytest.mark.asyncio

WS = "file:///work/project"
OTHER = "file:///work/other"
DAY = 86_400_000
T0 = int(time.time() * 1000) - 3 * DAY


def seed(db: Path) -> None:
    """Three conversations in WS, one in OTHER (with a secret), one with a deleted turn."""
    manager = ChatHistoryManager.open(db)
    try:
        history.append(
            manager,
            Key(WS, "retry"),
            [
                Message(role="user", content="How should the retry logic back off?", timestamp=T0),
                Message(
                    role="assistant",
                    content="We decided on exponential backoff with jitter, capped at 30 seconds.",
                    tool_calls=(
                        ToolCall(id="c1", name="read_file", arguments={"path": "retry.py"}),
                    ),
                    timestamp=T0 + 1000,
                ),
                Message(
                    role="tool", content="def retry(): ...", tool_call_id="c1", timestamp=T0 + 2000
                ),
                Message(
                    role="assistant",
                    content="Done: retry.py now uses jittered backoff.",
                    timestamp=T0 + 3000,
                ),
            ],
        )
        history.append(
            manager,
            Key(WS, "naming"),
            [
                Message(
                    role="user", content="What do we call the cache module?", timestamp=T0 + DAY
                ),
                Message(
                    role="assistant",
                    content="conversation_cache, said the review.",
                    timestamp=T0 + DAY,
                ),
            ],
        )
        history.append(
            manager,
            Key(WS, "forgotten"),
            [
                Message(
                    role="user", content="my password is hunter2 zebrafish", timestamp=T0 + 2 * DAY
                ),
                Message(role="assistant", content="Noted.", timestamp=T0 + 2 * DAY),
                Message(
                    role="user", content="Let us talk about lemurs", timestamp=T0 + 2 * DAY + 1
                ),
                Message(
                    role="assistant",
                    content="Lemurs live on Madagascar.",
                    timestamp=T0 + 2 * DAY + 2,
                ),
            ],
        )
        edits.delete_turns(manager, Key(WS, "forgotten"), [1])
        history.append(
            manager,
            Key(OTHER, "secret"),
            [Message(role="user", content="the other project's zebrafish plan", timestamp=T0)],
        )
    finally:
        manager.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp") / "history.sqlite3"
    seed(path)
    return path


Connect = Callable[..., Any]


@asynccontextmanager
async def session(
    db: Path, *args: str, roots: list[str] | None = None, cwd: Path | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized official-SDK client session on ``chat-history --db DB mcp ARGS``."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "chat_history.cli", "--db", str(db), "mcp", *args],
        cwd=str(cwd) if cwd else None,
    )
    callback = None
    if roots is not None:

        async def callback(context: Any) -> types.ListRootsResult:
            return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in roots])

    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, list_roots_callback=callback) as client,
    ):
        await client.initialize()
        yield client


async def call(client: ClientSession, name: str, **arguments: Any) -> types.CallToolResult:
    result = await client.call_tool(name, arguments)
    return result


async def checked(client: ClientSession, name: str, **arguments: Any) -> dict[str, Any]:
    """A successful call's structured content, validated against the tool's output schema."""
    result = await call(client, name, **arguments)
    assert not result.is_error, result.content
    tool = next(t for t in (await client.list_tools()).tools if t.name == name)
    assert tool.output_schema is not None
    jsonschema.validate(result.structured_content, tool.output_schema)
    text = result.content[0]
    assert isinstance(text, types.TextContent) and text.text
    structured: dict[str, Any] = result.structured_content
    return structured


async def refused(client: ClientSession, name: str, argument: str, **arguments: Any) -> str:
    """A tool error's text, which names ``argument``."""
    result = await call(client, name, **arguments)
    assert result.is_error
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert text.text.startswith(f"{argument}:"), text.text
    return text.text


async def test_the_tools_as_an_agent_sees_them(db: Path) -> None:
    async with session(db, "--workspace", WS) as client:
        listed = (await client.list_tools()).tools
        assert [tool.name for tool in listed] == [
            "search_history",
            "list_conversations",
            "read_conversation",
        ]
        for tool in listed:
            assert tool.annotations is not None and tool.annotations.read_only_hint
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
            assert tool.description
        search = listed[0]
        assert search.input_schema["required"] == ["query"]
        assert search.input_schema["properties"]["limit"]["maximum"] == 50


async def test_search_finds_the_decision_with_its_conversation_and_title(db: Path) -> None:
    async with session(db, "--workspace", WS) as client:
        found = await checked(client, "search_history", query="backoff jitter")
        assert [hit["conversationId"] for hit in found["results"]][:1] == ["retry"]
        hit = found["results"][0]
        assert hit["title"] and hit["workspace"] == WS and hit["time"].endswith("Z")
        assert "backoff" in hit["snippet"].lower()
        phrase = await checked(client, "search_history", query='"exponential backoff"')
        assert {h["conversationId"] for h in phrase["results"]} == {"retry"}


async def test_reading_around_a_hit_shows_the_exchange_with_its_tool_call(db: Path) -> None:
    async with session(db, "--workspace", WS) as client:
        hit = (await checked(client, "search_history", query="jitter capped"))["results"][0]
        read = await checked(
            client, "read_conversation", conversationId="retry", aroundId=hit["messageId"]
        )
        contents = [row["content"] for row in read["rows"]]
        assert "How should the retry logic back off?" in contents
        call_row = next(row for row in read["rows"] if row.get("toolCalls"))
        assert call_row["toolCalls"][0]["name"] == "read_file"
        text = (await call(client, "read_conversation", conversationId="retry")).content[0]
        assert isinstance(text, types.TextContent)
        assert 'read_file({"path": "retry.py"})' in text.text


async def test_listing_is_newest_first_and_pages_with_its_cursor(db: Path) -> None:
    async with session(db, "--workspace", WS) as client:
        first = await checked(client, "list_conversations", limit=2)
        assert [c["conversationId"] for c in first["conversations"]] == ["forgotten", "naming"]
        assert first["nextCursor"]
        rest = await checked(client, "list_conversations", cursor=first["nextCursor"])
        assert [c["conversationId"] for c in rest["conversations"]] == ["retry"]
        assert rest["nextCursor"] is None
        titled = await checked(client, "list_conversations", titleContains="CACHE")
        assert [c["conversationId"] for c in titled["conversations"]] == ["naming"]


async def test_deleted_text_and_other_workspaces_are_never_returned(db: Path) -> None:
    async with session(db, "--workspace", WS) as client:
        gone = await checked(client, "search_history", query="hunter2")
        assert gone["results"] == []
        zebra = await checked(client, "search_history", query="zebrafish")
        assert zebra["results"] == []  # the deleted turn's and the other workspace's
        read = await checked(client, "read_conversation", conversationId="forgotten")
        assert "hunter2" not in json.dumps(read)
        unknown = await refused(
            client, "read_conversation", "conversationId", conversationId="nope"
        )
        elsewhere = await refused(
            client, "read_conversation", "conversationId", conversationId="secret"
        )
        assert unknown == elsewhere  # another workspace's id looks unknown, not forbidden
        scoped = await checked(client, "search_history", query="zebrafish", conversationId="secret")
        assert scoped["results"] == []


async def test_every_workspace_only_from_the_command_line(db: Path) -> None:
    async with session(db, "--all-workspaces") as client:
        zebra = await checked(client, "search_history", query="zebrafish")
        assert [(h["workspace"], h["conversationId"]) for h in zebra["results"]] == [
            (OTHER, "secret")
        ]
        tool = (await client.list_tools()).tools[0]
        assert "workspace" not in tool.input_schema["properties"]
        # an agent cannot widen its own scope: an unknown argument is refused by the schema
        assert tool.input_schema["additionalProperties"] is False


async def test_the_scope_comes_from_the_clients_root_else_the_working_folder(
    db: Path, tmp_path: Path
) -> None:
    async with session(db, roots=[WS]) as client:
        found = await checked(client, "list_conversations")
        assert {c["workspace"] for c in found["conversations"]} == {WS}
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    async with session(db, cwd=folder) as client:
        found = await checked(client, "list_conversations")
        assert found["conversations"] == []


async def test_bad_arguments_are_tool_errors_naming_the_argument(db: Path) -> None:
    async with session(db, "--workspace", WS) as client:
        await refused(client, "search_history", "query", query="")
        await refused(client, "search_history", "query", query="x" * 100_000)
        await refused(client, "search_history", "query", query=5)
        said = {
            await refused(client, "search_history", "limit", query="retry", limit=limit)
            for limit in (0, -1, 51, 10**30, "ten", True, 2.5)
        }
        assert said == {"limit: must be from 1 to 50", "limit: must be a whole number from 1 to 50"}
        await refused(client, "list_conversations", "cursor", cursor="forged-cursor")
        await refused(client, "list_conversations", "limit", limit=201)
        await refused(client, "read_conversation", "aroundId", conversationId="retry", aroundId=-3)
        await refused(
            client, "read_conversation", "aroundId", conversationId="retry", aroundId=10**9
        )
        await refused(client, "read_conversation", "conversationId")
        result = await call(client, "no_such_tool")
        assert result.is_error
        # still serving after all of it
        assert (await checked(client, "search_history", query="retry"))["results"]


@pytest.mark.parametrize(
    "query",
    [
        " ".join(chr(97 + n % 26) for n in range(500)),  # 500 terms in 999 characters
        "'; DROP TABLE messages; --",
        "retry OR 1=1",
        ".*(a+)+$ [^x] \\d{3}",
        'NEAR(retry backoff) "unclosed',
        "retry*",
    ],
)
async def test_hostile_queries_answer_normally(db: Path, query: str) -> None:
    async with session(db, "--workspace", WS) as client:
        result = await call(client, "search_history", query=query)
        assert not result.is_error
        assert (await checked(client, "list_conversations"))["conversations"]


async def test_answers_stay_within_max_tokens_and_say_what_was_left_out(tmp_path: Path) -> None:
    db = tmp_path / "big.sqlite3"
    manager = ChatHistoryManager.open(db)
    try:
        for n in range(30):
            history.append(
                manager,
                Key(WS, f"c{n:02}"),
                [
                    Message(role="user", content=f"question {n} about parsers " + "filler " * 300),
                    Message(
                        role="assistant", content=f"answer {n} about parsers " + "padding " * 300
                    ),
                ],
            )
    finally:
        manager.close()
    async with session(db, "--workspace", WS, "--max-tokens", "600") as client:
        found = await checked(client, "search_history", query="parsers", limit=50)
        text = (await call(client, "search_history", query="parsers", limit=50)).content[0]
        assert isinstance(text, types.TextContent)
        assert len(json.dumps(found)) <= 600 * 4 and len(text.text.encode()) <= 600 * 4
        assert found["omitted"] > 0 and "left out" in text.text
        read = await checked(client, "read_conversation", conversationId="c00")
        assert len(json.dumps(read)) <= 600 * 4
        listing = await checked(client, "list_conversations", limit=200)
        assert len(json.dumps(listing)) <= 600 * 4
        if listing["omitted"]:
            assert listing["nextCursor"]
            more = await checked(client, "list_conversations", cursor=listing["nextCursor"])
            shown = {c["conversationId"] for c in listing["conversations"]}
            assert not shown & {c["conversationId"] for c in more["conversations"]}


async def test_a_missing_max_tokens_value_is_a_usage_error(db: Path) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "chat_history.cli", "--db", str(db), "mcp", "--max-tokens", "5"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "--max-tokens" in done.stderr


Call = Callable[..., Awaitable[Any]]

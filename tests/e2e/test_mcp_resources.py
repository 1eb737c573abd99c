"""``chat-history mcp``'s conversations as resources, driven by the official MCP client SDK over
stdio in both protocol eras — the 2025-11-25 ``initialize`` handshake and the stateless
2026-07-28 revision (``server/discover``) — as a client that attaches a past conversation sees
them: the paged listing, a conversation read as Markdown and as JSON within the token bound,
the two URI templates and their completion, the links on search hits, the scope (one
workspace; an id of another reads as unknown; deleted text never served), the notifications
when another process writes, and hostile URIs and cursors refused naming the field."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated, listen
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from chat_history.model import Key, Message
from chat_history.service import edits, history
from chat_history.service.manager import ChatHistoryManager

pytestmark = pytest.mark.asyncio

WS = "file:///work/project"
OTHER = "file:///work/other"
ERAS = ["2025-11-25", "2026-07-28"]
DAY = 86_400_000
T0 = int(time.time() * 1000) - 3 * DAY
URI = "chat-history://conversation/"


def seed(db: Path) -> None:
    """120 conversations for paging, then ``retry`` and ``forgotten`` (a deleted turn) in WS;
    ``secret`` in OTHER (and a ``retry`` there too: ids repeat across workspaces)."""
    manager = ChatHistoryManager.open(db)
    try:
        for n in range(120):
            history.append(
                manager,
                Key(WS, f"bulk-{n:03}"),
                [Message(role="user", content=f"bulk question {n}", timestamp=T0 - DAY - n)],
            )
        history.append(
            manager,
            Key(WS, "retry"),
            [
                Message(role="user", content="How should the retry logic back off?", timestamp=T0),
                Message(
                    role="assistant",
                    content="We decided on exponential backoff with jitter.",
                    timestamp=T0 + 1,
                ),
            ],
        )
        history.append(
            manager,
            Key(WS, "forgotten"),
            [
                Message(role="user", content="my password is hunter2", timestamp=T0 + DAY),
                Message(role="assistant", content="Noted.", timestamp=T0 + DAY),
                Message(role="user", content="Let us talk about lemurs", timestamp=T0 + DAY + 1),
                Message(role="assistant", content="Lemurs live on Madagascar.", timestamp=T0 + DAY),
            ],
        )
        edits.delete_turns(manager, Key(WS, "forgotten"), [1])
        history.append(
            manager,
            Key(OTHER, "secret"),
            [Message(role="user", content="the other project's zebrafish plan", timestamp=T0)],
        )
        history.append(
            manager,
            Key(OTHER, "retry"),
            [Message(role="user", content="another project's retry, private", timestamp=T0)],
        )
    finally:
        manager.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp-resources") / "history.sqlite3"
    seed(path)
    return path


@asynccontextmanager
async def session(
    db: Path, era: str, *args: str, heard: list[Any] | None = None
) -> AsyncIterator[ClientSession]:
    """An official-SDK client session of ``era`` on ``chat-history --db DB mcp ARGS``;
    ``heard`` collects the notifications it receives."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "chat_history.cli", "--db", str(db), "mcp", *args]
    )

    async def handler(message: Any) -> None:
        if heard is not None:
            heard.append(message)

    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=handler) as client,
    ):
        if era == "2026-07-28":
            await client.discover()
        else:
            await client.initialize()
        assert client.protocol_version == era
        yield client


async def refused(client: ClientSession, uri: str, code: int = types.INVALID_PARAMS) -> MCPError:
    """A ``resources/read`` of ``uri`` answered by a protocol error of ``code`` naming ``uri``,
    fast."""
    started = time.monotonic()
    with pytest.raises(MCPError) as raised:
        await client.read_resource(uri)
    assert time.monotonic() - started < 10
    assert raised.value.code == code, raised.value.error
    assert raised.value.message.startswith("uri:"), raised.value.message
    return raised.value


def not_found_code(era: str) -> int:
    return types.INVALID_PARAMS if era == "2026-07-28" else -32002


@pytest.mark.parametrize("era", ERAS)
async def test_the_capabilities_say_resources_their_changes_and_subscriptions(
    db: Path, era: str
) -> None:
    async with session(db, era, "--workspace", WS) as client:
        capabilities = client.server_capabilities
        assert capabilities is not None and capabilities.resources is not None
        assert capabilities.resources.list_changed and capabilities.resources.subscribe
        assert capabilities.completions is not None
        assert capabilities.tools is not None and not capabilities.tools.list_changed


@pytest.mark.parametrize("era", ERAS)
async def test_the_listing_pages_through_the_workspace_newest_first(db: Path, era: str) -> None:
    async with session(db, era, "--workspace", WS) as client:
        first = await client.list_resources()
        assert len(first.resources) == 100 and first.next_cursor
        times = [r.annotations.last_modified for r in first.resources if r.annotations]
        assert times == sorted(times, reverse=True) and len(times) == 100
        rest = await client.list_resources(
            params=types.PaginatedRequestParams(cursor=first.next_cursor)
        )
        assert rest.next_cursor is None
        listed = [r.name for r in first.resources + rest.resources]
        assert len(listed) == 122 == len(set(listed))
        assert "secret" not in listed
        retry = next(r for r in first.resources if r.name == "retry")
        assert retry.uri == URI + "retry" and retry.title == "How should the retry logic back off?"
        assert retry.mime_type == "text/markdown" and retry.description.startswith("2 messages")
        assert retry.annotations is not None and retry.annotations.last_modified
        if era == "2026-07-28":
            assert first.ttl_ms == 0 and first.cache_scope == "private"


@pytest.mark.parametrize("era", ERAS)
async def test_a_conversation_reads_as_markdown_and_as_json(db: Path, era: str) -> None:
    async with session(db, era, "--workspace", WS) as client:
        markdown = (await client.read_resource(URI + "retry")).contents
        assert len(markdown) == 1 and isinstance(markdown[0], types.TextResourceContents)
        assert markdown[0].mime_type == "text/markdown" and markdown[0].uri == URI + "retry"
        text = markdown[0].text
        assert text.startswith("# How should the retry logic back off?\n")
        assert re.search(r"\n## \[\d+\] assistant · \d{4}-", text), text
        assert "exponential backoff with jitter" in text
        read = (await client.read_resource(URI + "retry/json")).contents[0]
        assert isinstance(read, types.TextResourceContents) and read.mime_type == "application/json"
        rows = json.loads(read.text)
        tool = next(t for t in (await client.list_tools()).tools if t.name == "read_conversation")
        assert tool.output_schema is not None
        jsonschema.validate(rows, tool.output_schema)  # read_conversation's own shape
        assert [r["content"] for r in rows["rows"]][-1].startswith("We decided")
        assert rows["workspace"] == WS and rows["omittedBefore"] == 0


@pytest.mark.parametrize("era", ERAS)
async def test_deleted_text_and_other_workspaces_are_never_served(db: Path, era: str) -> None:
    async with session(db, era, "--workspace", WS) as client:
        for uri in (URI + "forgotten", URI + "forgotten/json"):
            read = (await client.read_resource(uri)).contents[0]
            assert isinstance(read, types.TextResourceContents)
            assert "hunter2" not in read.text and "Lemurs" in read.text
        unknown = await refused(client, URI + "nope", not_found_code(era))
        elsewhere = await refused(client, URI + "secret", not_found_code(era))
        assert unknown.message == elsewhere.message  # unknown, not forbidden
        assert elsewhere.data == {"uri": URI + "secret"}
        # a URI that claims the other workspace reads as unknown too, and leaks nothing
        claimed = f"{URI}secret?workspace=file%3A%2F%2F%2Fwork%2Fother"
        await refused(client, claimed, not_found_code(era))
        own = await client.read_resource(f"{URI}retry?workspace=file%3A%2F%2F%2Fwork%2Fproject")
        assert "private" not in own.contents[0].model_dump_json()


@pytest.mark.parametrize("era", ERAS)
async def test_every_workspace_names_the_workspace_in_each_uri(db: Path, era: str) -> None:
    async with session(db, era, "--all-workspaces") as client:
        listed = []
        params = None
        while True:
            page = await client.list_resources(params=params)
            listed += page.resources
            if page.next_cursor is None:
                break
            params = types.PaginatedRequestParams(cursor=page.next_cursor)
        theirs = [r for r in listed if r.name == "retry"]
        assert sorted(r.uri for r in theirs) == [
            f"{URI}retry?workspace=file%3A%2F%2F%2Fwork%2Fother",
            f"{URI}retry?workspace=file%3A%2F%2F%2Fwork%2Fproject",
        ]
        other = (await client.read_resource(theirs[0].uri)).contents[0]
        assert isinstance(other, types.TextResourceContents)
        assert "another project's retry" in other.text and OTHER in other.text
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [
            URI + "{conversationId}{?workspace}",
            URI + "{conversationId}/json{?workspace}",
        ]
        # a bare id found in two workspaces is ambiguous: unknown, as read_conversation says
        await refused(client, URI + "retry", not_found_code(era))
        assert "zebrafish" in (await client.read_resource(URI + "secret")).contents[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ERAS)
async def test_templates_and_their_completion(db: Path, era: str) -> None:
    async with session(db, era, "--workspace", WS) as client:
        templates = (await client.list_resource_templates()).resource_templates
        assert [(t.uri_template, t.mime_type) for t in templates] == [
            (URI + "{conversationId}", "text/markdown"),
            (URI + "{conversationId}/json", "application/json"),
        ]
        ref = types.ResourceTemplateReference(uri=templates[0].uri_template)
        done = await client.complete(ref, {"name": "conversationId", "value": "bulk-11"})
        assert sorted(done.completion.values) == [f"bulk-11{n}" for n in range(10)]
        by_title = await client.complete(ref, {"name": "conversationId", "value": "RETRY LOGIC"})
        assert by_title.completion.values == ["retry"]
        every = await client.complete(ref, {"name": "conversationId", "value": ""})
        assert len(every.completion.values) == 100 and every.completion.has_more
        with pytest.raises(MCPError) as raised:
            await client.complete(
                types.ResourceTemplateReference(uri="test://template/{id}"),
                {"name": "id", "value": "1"},
            )
        assert raised.value.code == types.INVALID_PARAMS and raised.value.message.startswith("ref:")
        with pytest.raises(MCPError) as raised:
            await client.complete(types.PromptReference(name="x"), {"name": "a", "value": ""})
        assert raised.value.message.startswith("ref:")


@pytest.mark.parametrize("era", ERAS)
async def test_search_hits_link_their_conversations(db: Path, era: str) -> None:
    async with session(db, era, "--workspace", WS) as client:
        found = await client.call_tool("search_history", {"query": "backoff"})
        links = [c for c in found.content if isinstance(c, types.ResourceLink)]
        assert [(link.uri, link.name, link.mime_type) for link in links] == [
            (URI + "retry", "retry", "text/markdown")
        ]
        assert links[0].title == "How should the retry logic back off?"
        read = (await client.read_resource(links[0].uri)).contents[0]
        assert isinstance(read, types.TextResourceContents) and "jitter" in read.text
        none = await client.call_tool("search_history", {"query": "zebrafish"})
        assert [c.type for c in none.content] == ["text"]


async def test_a_read_stays_within_max_tokens_and_says_what_was_left_out(tmp_path: Path) -> None:
    db = tmp_path / "big.sqlite3"
    manager = ChatHistoryManager.open(db)
    try:
        history.append(
            manager,
            Key(WS, "long"),
            [
                Message(role="user" if n % 2 == 0 else "assistant", content=f"turn {n} " * 60)
                for n in range(400)
            ],
        )
    finally:
        manager.close()
    async with session(db, "2025-11-25", "--workspace", WS, "--max-tokens", "600") as client:
        for uri in (URI + "long", URI + "long/json"):
            text = (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
            assert 0 < len(text.encode()) <= 600 * 4
        markdown = (await client.read_resource(URI + "long")).contents[0].text  # type: ignore[union-attr]
        assert "earlier messages not shown" in markdown and "turn 399" in markdown
        rows = json.loads((await client.read_resource(URI + "long/json")).contents[0].text)  # type: ignore[union-attr]
        listed = await client.call_tool("list_conversations", {})
        count = listed.structured_content["conversations"][0]["messageCount"]  # type: ignore[index]
        assert rows["rows"][-1]["id"] == 400 and rows["omittedBefore"] == count - len(rows["rows"])
        assert rows["omittedBefore"] > 0


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
@pytest.mark.parametrize("era", ERAS)
async def test_hostile_uris_and_cursors_are_refused_naming_the_field(db: Path, era: str) -> None:
    async with session(db, era, "--workspace", WS) as client:
        for uri in (
            URI + "x" * 100_000,
            URI + "%zz",
            URI + "%ff%fe",
            URI + "retry#fragment",
            URI + "retry?format=json",
            URI + "retry/markdown",
            URI,
            "not a uri at all",
        ):
            error = await refused(client, uri)
            assert uri[len(URI) :][:10] not in error.message or not uri[len(URI) :]
            assert error.data is None  # a malformed URI is never echoed
        # a well-formed URI of another scheme names no resource here (SEP-2164's shape)
        error = await refused(client, "test://nonexistent-resource", not_found_code(era))
        assert error.data == {"uri": "test://nonexistent-resource"}
        for cursor in ("x" * 100_000, "forged-cursor", ""):
            started = time.monotonic()
            with pytest.raises(MCPError) as raised:
                await client.list_resources(params=types.PaginatedRequestParams(cursor=cursor))
            assert time.monotonic() - started < 10
            assert raised.value.code == types.INVALID_PARAMS
            assert raised.value.message.startswith("cursor:"), raised.value.message
            assert "forged" not in raised.value.message
        ref = types.ResourceTemplateReference(uri=URI + "{conversationId}")
        huge = await client.complete(ref, {"name": "conversationId", "value": "x" * 100_000})
        assert huge.completion.values == []
        if era == "2025-11-25":
            with pytest.raises(MCPError) as raised:
                await client.subscribe_resource(URI + "x" * 100_000)
            assert raised.value.message.startswith("uri:")
        # still serving after all of it
        assert (await client.read_resource(URI + "retry")).contents


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_2025_clients_hear_of_changes_and_of_their_subscriptions(tmp_path: Path) -> None:
    db = tmp_path / "changes.sqlite3"
    seed(db)
    heard: list[Any] = []
    async with session(db, "2025-11-25", "--workspace", WS, heard=heard) as client:
        await client.list_resources()  # the scope is fixed: changes from now on are told
        await client.subscribe_resource(URI + "retry")
        await client.subscribe_resource(URI + "forgotten")
        await client.unsubscribe_resource(URI + "forgotten")
        writer = ChatHistoryManager.open(db)
        try:
            history.append(writer, Key(WS, "retry"), [Message(role="user", content="and the cap?")])
            history.append(
                writer, Key(WS, "forgotten"), [Message(role="user", content="more lemurs")]
            )
            history.append(
                writer, Key(OTHER, "secret"), [Message(role="user", content="elsewhere")]
            )
        finally:
            writer.close()
        with anyio.fail_after(15):
            while not any(isinstance(m, types.ResourceUpdatedNotification) for m in heard):
                await anyio.sleep(0.1)
        await anyio.sleep(1.5)  # time for anything else it would (wrongly) send
        updated = [m.params.uri for m in heard if isinstance(m, types.ResourceUpdatedNotification)]
        assert updated == [URI + "retry"]
        assert any(isinstance(m, types.ResourceListChangedNotification) for m in heard)
        read = (await client.read_resource(URI + "retry")).contents[0]
        assert "and the cap?" in read.text  # type: ignore[union-attr]


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_every_workspace_hears_that_something_changed_and_nothing_while_quiet(
    tmp_path: Path,
) -> None:
    db = tmp_path / "changes.sqlite3"
    seed(db)
    heard: list[Any] = []
    async with session(db, "2025-11-25", "--all-workspaces", heard=heard) as client:
        await client.list_resources()
        mine = f"{URI}secret?workspace=file%3A%2F%2F%2Fwork%2Fother"
        await client.subscribe_resource(mine)
        await client.subscribe_resource("test://not-ours")
        await anyio.sleep(2)  # four looks at a quiet store
        assert heard == []
        writer = ChatHistoryManager.open(db)
        try:
            history.append(writer, Key(OTHER, "secret"), [Message(role="user", content="more")])
        finally:
            writer.close()
        with anyio.fail_after(15):
            while not any(isinstance(m, types.ResourceUpdatedNotification) for m in heard):
                await anyio.sleep(0.1)
        updated = [m.params.uri for m in heard if isinstance(m, types.ResourceUpdatedNotification)]
        assert updated == [mine]  # a URI of no conversation never fires
        assert any(isinstance(m, types.ResourceListChangedNotification) for m in heard)


async def test_2026_clients_hear_of_changes_on_the_stream_they_listen_to(tmp_path: Path) -> None:
    db = tmp_path / "changes.sqlite3"
    seed(db)
    heard: list[Any] = []
    async with session(db, "2026-07-28", "--workspace", WS, heard=heard) as client:
        async with listen(  # before any other request: the scope is fixed by it
            client, resources_list_changed=True, resource_subscriptions=[URI + "retry"]
        ) as stream:
            writer = ChatHistoryManager.open(db)
            try:
                history.append(
                    writer, Key(WS, "forgotten"), [Message(role="user", content="lemurs")]
                )
                history.append(
                    writer, Key(WS, "retry"), [Message(role="user", content="and the cap?")]
                )
            finally:
                writer.close()
            events: list[Any] = []
            with anyio.fail_after(15):
                async for event in stream:
                    events.append(event)
                    if any(isinstance(e, ResourceUpdated) for e in events):
                        break
            assert any(isinstance(e, ResourcesListChanged) for e in events)
            assert [e.uri for e in events if isinstance(e, ResourceUpdated)] == [URI + "retry"]
        # nothing arrives outside a listen stream on the 2026 wire: each carries its stream's id
        told = [m for m in heard if isinstance(m, types.ResourceListChangedNotification)]
        assert all(
            m.params and m.params.meta and SUBSCRIPTION_ID_META_KEY in m.params.meta for m in told
        ), told

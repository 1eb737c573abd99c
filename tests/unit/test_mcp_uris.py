"""The MCP resources' URIs (chat_history.mcp.uris): a conversation's URI reads back as the same
conversation whatever its id holds, and a malformed URI is refused for a reason that names
``uri`` and never repeats it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chat_history.errors import InvalidParams
from chat_history.mcp import uris
from chat_history.model import Key

WS = "file:///work/project"


@given(
    conversation=st.text(min_size=1, max_size=uris.ID_CHARS).filter(
        lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t)
    ),
    every=st.booleans(),
    rendering=st.sampled_from(["markdown", "json"]),
)
def test_a_conversation_uri_reads_back_as_its_conversation(
    conversation: str, every: bool, rendering: uris.Rendering
) -> None:
    uri = uris.conversation_uri(Key(WS, conversation), every_workspace=every, rendering=rendering)
    target = uris.parse(uri)
    assert target == uris.Target(conversation, WS if every else None, rendering)


def test_the_uris_as_documented() -> None:
    key = Key(WS, "retry/1?#")
    assert uris.conversation_uri(key, every_workspace=False) == (
        "chat-history://conversation/retry%2F1%3F%23"
    )
    assert uris.conversation_uri(key, every_workspace=True, rendering="json") == (
        "chat-history://conversation/retry%2F1%3F%23/json?workspace=file%3A%2F%2F%2Fwork%2Fproject"
    )
    assert [t[0] for t in uris.templates(every_workspace=False)] == [
        "chat-history://conversation/{conversationId}",
        "chat-history://conversation/{conversationId}/json",
    ]
    assert [t[0] for t in uris.templates(every_workspace=True)] == [
        "chat-history://conversation/{conversationId}{?workspace}",
        "chat-history://conversation/{conversationId}/json{?workspace}",
    ]


@pytest.mark.parametrize(
    "uri",
    [
        "chat-history://conversation/" + "x" * 5_000,
        "chat-history://conversation/" + "%41" * 300,  # 300 characters once decoded
        "chat-history://conversation/",
        "chat-history://conversation//json",
        "chat-history://conversation/a/b",
        "chat-history://conversation/a/json/more",
        "chat-history://conversation/a#frag",
        "chat-history://conversation/a#",
        "chat-history://conversation/a?",
        "chat-history://conversation/a?format=json",
        "chat-history://conversation/a?workspace=x&workspace=y",
        "chat-history://conversation/a?workspace=",
        "chat-history://conversation/%zz",
        "chat-history://conversation/%4",
        "chat-history://conversation/%ff%fe",
        "chat-history://conversation/a b",
        "chat-history://conversation/a\x00",
        "chat-history://conversation/a\ud800",
        "chat-history://conversation/a?workspace=%C3",
        "chat-history://[::1",
        "conversation/retry",
        "",
    ],
)
def test_a_malformed_uri_is_refused_naming_uri_without_echoing_it(uri: str) -> None:
    with pytest.raises(InvalidParams) as raised:
        uris.parse(uri)
    assert raised.value.field == "uri"
    tail = uri.removeprefix(uris.PREFIX)
    if len(tail) >= 3 and tail not in "{conversationId}/json":
        assert tail not in raised.value.why


@pytest.mark.parametrize(
    "uri",
    [
        "test://nonexistent-resource",
        "file:///etc/passwd",
        "chat-history://other/retry",
        "https://x",
    ],
)
def test_another_scheme_or_host_is_not_ours(uri: str) -> None:
    with pytest.raises(uris.NotOurs):
        uris.parse(uri)


def test_the_host_and_the_scheme_are_read_without_regard_to_case() -> None:
    assert uris.parse("CHAT-HISTORY://Conversation/retry") == uris.Target("retry", None, "markdown")

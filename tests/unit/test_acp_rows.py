"""The ACP proxy's pure rules (acp/rows.py): updates coalesced into an assistant row, the rows a
reply makes, the updates that replay them, the context block."""

from __future__ import annotations

from typing import Any

from chat_history.acp import rows
from chat_history.model import Message, StoredMessage


def chunk(text: str, kind: str = "agent_message_chunk", **extra: Any) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}, **extra}


def stored(message: Any, row_id: int) -> StoredMessage:
    return StoredMessage(
        role=message.role,
        content=message.content,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        provider_data=message.provider_data,
        id=row_id,
        turn=1,
        tokens=1,
    )


def test_adjacent_text_chunks_of_one_kind_merge_and_nothing_else_does() -> None:
    reply = rows.Reply()
    for update in (
        chunk("a"),
        chunk("b"),
        chunk("think", "agent_thought_chunk"),
        chunk("c"),
        chunk("d", _meta={"x": 1}),  # a chunk with more than text keeps its own update
        {"sessionUpdate": "plan", "entries": []},
        chunk("e"),
    ):
        reply.add(update)
    assert [u["sessionUpdate"] for u in reply.updates] == [
        "agent_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "agent_message_chunk",
        "plan",
        "agent_message_chunk",
    ]
    assert reply.updates[0]["content"]["text"] == "ab"
    assert "".join(reply.text) == "abcde"


def test_tool_calls_and_their_rows() -> None:
    reply = rows.Reply()
    reply.add(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Read",
            "kind": "read",
            "rawInput": {"path": "a.py"},
            "status": "pending",
        }
    )
    reply.add({"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Run tests"})
    reply.add(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "x = 1"}}],
        }
    )
    calls = reply.tool_calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("t1", "read", {"path": "a.py"}),
        ("t2", "Run tests", {}),
    ]
    tools = reply.tool_rows()  # t2 never finished: no row
    assert [(t.tool_call_id, t.content) for t in tools] == [("t1", "x = 1")]


def test_replay_gives_back_the_prompt_blocks_and_the_coalesced_updates() -> None:
    prompt = rows.prompt_row(
        [
            {"type": "text", "text": "hi"},
            {"type": "resource_link", "uri": "file:///a.py", "name": "a.py"},
        ]
    )
    assert prompt.content == "hi\nfile:///a.py"
    reply = rows.Reply()
    reply.add(chunk("he"))
    reply.add(chunk("llo"))
    assistant = stored(
        Message(role="assistant", content="hello", provider_data=reply.provider_data()),
        2,
    )
    replayed = rows.replay([stored(prompt, 1), assistant])
    assert replayed == [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}},
        {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "resource_link", "uri": "file:///a.py", "name": "a.py"},
        },
        chunk("hello"),
    ]


def test_a_row_another_client_wrote_replays_as_its_text() -> None:
    other = stored(Message(role="assistant", content="from the panel"), 3)
    assert rows.replay([other]) == [chunk("from the panel")]


def test_the_context_block_names_every_message_and_tool_call() -> None:
    block = rows.context_block(
        [
            {"role": "user", "content": "fix it"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "x = 1"},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        ]
    )
    text = block["text"]
    assert block["type"] == "text"
    assert text.startswith("<earlier-conversation>") and text.endswith("</earlier-conversation>")
    assert "user: fix it" in text and "[tool call read: {}]" in text
    assert "tool result t1: x = 1" in text and "assistant: done" in text


def test_session_ids_and_conversation_ids() -> None:
    assert rows.conversation_id("abc") == "acp:abc"
    assert rows.session_of("acp:abc") == "abc"
    assert rows.session_of("panel-1") is None


def test_chunks_of_one_message_merge_and_a_new_message_id_starts_another() -> None:
    reply = rows.Reply()
    for update in (
        chunk("a", messageId="m1"),
        chunk("b", messageId="m1"),
        chunk("c", messageId="m2"),
        chunk("d"),  # no id: not the message before it
    ):
        reply.add(update)
    assert [(u["content"]["text"], u.get("messageId")) for u in reply.updates] == [
        ("ab", "m1"),
        ("c", "m2"),
        ("d", None),
    ]


def test_the_row_a_message_id_names() -> None:
    prompt = stored(rows.prompt_row([{"type": "text", "text": "hi"}], "p-1"), 7)
    reply = rows.Reply()
    reply.add(chunk("hello", messageId="r-1"))
    answer = stored(
        Message(role="assistant", content="hello", provider_data=reply.provider_data()), 8
    )
    plain = stored(rows.prompt_row([{"type": "text", "text": "again"}]), 12)
    tree = [prompt, answer, plain]
    assert rows.message_row(tree, "p-1") == 7
    assert rows.message_row(tree, "r-1") == 8
    assert rows.message_row(tree, "12") == 12  # the store's id, written in decimal
    assert rows.message_row(tree, "8") == 8
    for unknown in ("13", "p-2", "", "-8", "٨", "r-1 "):
        assert rows.message_row(tree, unknown) is None
    # a recorded id wins over a row id that happens to read the same
    named = stored(rows.prompt_row([{"type": "text", "text": "x"}], "7"), 20)
    assert rows.message_row([prompt, named], "7") == 20
    # a replay gives the prompt's id back on its chunks
    assert rows.replay([prompt])[0]["messageId"] == "p-1"
    assert "messageId" not in rows.replay([plain])[0]

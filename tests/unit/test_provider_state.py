"""Provider state through the service on both engines (protocol.md "Version 5" → Provider state
that stays valid): origins stored and returned with their rows (append, replies, edit, fork),
the fence a reported refusal sets (one report, then the next prepare carries none of the refused
state to that target and all of it elsewhere), native compactions standing in only where they
were minted and gone with the rows they cover, and a reported error never kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chat_history.model import Key, Message, ToolCall
from chat_history.policy.origins import origin
from chat_history.service import conversations, edits, history, provider_state, replies
from chat_history.service.edits import MessageEdit
from chat_history.service.preparation import PrepareOptions
from chat_history.service.replies import ReplyBegin, ReplyChange
from chat_history.store.schema import DATABASE_FILE

pytestmark = pytest.mark.engines

KEY = Key("ws", "conv")
SONNET = "claude-sonnet-4-5-20250929"
SIGNED = {"type": "thinking", "thinking": "plan", "signature": "c2ln"}
REFUSED_THINKING = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "messages.1.content.0: Invalid `signature` in `thinking` block",
    },
}
SETTINGS = {
    "providers": {
        "work": {
            "provider": "anthropic",
            "model": SONNET,
            "endpoint": "https://gateway.example/anthropic",
            "stateScope": "team-a",
        }
    }
}


def thought(text: str, made: Any = None) -> Message:
    return Message(
        role="assistant",
        content=text,
        provider_data={"anthropic": {"thinking": [dict(SIGNED, thinking=text)]}},
        origin=made,
    )


def U(text: str) -> Message:
    return Message(role="user", content=text)


def thinking_sent(manager: Any, provider: str = "anthropic", model: str | None = SONNET) -> int:
    body = history.prepare(manager, KEY, PrepareOptions(provider=provider, model=model)).body
    return sum(
        1
        for message in body["messages"]  # type: ignore[union-attr]
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "thinking"
    )


# -- origins stored ---------------------------------------------------------------------------


def test_an_origin_is_stored_and_returned_with_its_row(make_manager) -> None:
    manager = make_manager()
    made = origin("anthropic", SONNET, "https://API.anthropic.com/", "team-a")
    stored = history.append(manager, KEY, [U("q"), thought("a", made)]).messages
    assert stored[1].origin == made and stored[0].origin is None
    again = history.get(manager, KEY).messages
    assert again[1].origin == made
    assert again[1].origin.endpoint == "https://api.anthropic.com"
    assert again[0].origin is None


def test_a_reply_ends_with_its_origin_and_edits_and_forks_keep_it(make_manager) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("q")])
    row = replies.begin(manager, KEY, ReplyBegin())
    made = origin("gemini", "gemini-3-pro-preview")
    ended = replies.end(manager, KEY, row.id, "complete", ReplyChange(content="a", origin=made))
    assert ended.message is not None and ended.message.origin == made
    edited = edits.edit_message(manager, KEY, row.id, MessageEdit(content="a, edited"))
    assert edited.origin == made
    assert history.get(manager, KEY).messages[-1].origin == made
    copy = Key("ws", "copy")
    conversations.fork(manager, KEY, copy)
    assert history.get(manager, copy).messages[-1].origin == made


# -- a reported refusal --------------------------------------------------------------------------


def test_one_report_fences_the_refused_thinking_and_only_there(make_manager) -> None:
    manager = make_manager()
    made = origin("anthropic", SONNET)
    history.append(manager, KEY, [U("q1"), thought("a1", made), U("q2"), thought("a2", made)])
    assert thinking_sent(manager) == 2

    result = provider_state.report_error(manager, KEY, "anthropic", SONNET, 400, REFUSED_THINKING)

    assert (result.fenced, result.reason) == (2, "thinking_signature")
    assert thinking_sent(manager) == 0
    # A new reply minted after the report goes back.
    history.append(manager, KEY, [U("q3"), thought("a3", made)])
    assert thinking_sent(manager) == 1
    # Reporting again fences only what is left.
    again = provider_state.report_error(manager, KEY, "anthropic", SONNET, 400, REFUSED_THINKING)
    assert again.fenced == 1


def test_a_report_fences_survive_and_rows_without_an_origin_are_fenced_too(
    make_manager, db_folder: Path
) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("q"), thought("a")])  # version 4: no origin
    assert thinking_sent(manager, model="claude-opus-4-1") == 1
    provider_state.report_error(manager, KEY, "anthropic", "claude-opus-4-1", 400, REFUSED_THINKING)
    reopened = make_manager()
    assert thinking_sent(reopened, model="claude-opus-4-1") == 0
    # The fence is for that model's family: another family still gets it.
    assert thinking_sent(reopened, model=SONNET) == 1
    assert history.get(reopened, KEY).messages[1].provider_data["anthropic"]["thinking"]


def test_any_other_error_fences_nothing(make_manager) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("q"), thought("a", origin("anthropic", SONNET))])
    for status, body in (
        (429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        (500, REFUSED_THINKING),  # not a client error
        (400, "prompt is too long: 250000 tokens > 200000 maximum"),
    ):
        assert provider_state.report_error(manager, KEY, "anthropic", SONNET, status, body) == (
            provider_state.Fenced(0, None)
        )
    # Another kind's refusal text is not this kind's refusal.
    other = provider_state.report_error(manager, KEY, "gemini", None, 400, REFUSED_THINKING)
    assert other == provider_state.Fenced(0, None)
    assert thinking_sent(manager) == 1


@pytest.mark.sqlite_only
def test_a_reported_error_is_never_stored(make_manager, db_folder: Path) -> None:
    manager = make_manager()
    history.append(manager, KEY, [U("q"), thought("a", origin("anthropic", SONNET))])
    marker = "ERRTEXT-6f1c2d9e-only-in-the-report"
    body = {"error": {"message": f"Invalid `signature` in `thinking` block {marker}"}}
    assert provider_state.report_error(manager, KEY, "anthropic", SONNET, 400, body).fenced == 1
    manager.store.close()
    for suffix in ("", "-wal", "-shm"):
        path = Path(str(db_folder / DATABASE_FILE) + suffix)
        if path.exists():
            assert marker.encode() not in path.read_bytes()


def test_an_alias_target_is_its_endpoint_and_scope(make_manager) -> None:
    manager = make_manager(SETTINGS)
    at_gateway = origin("anthropic", SONNET, "https://gateway.example/anthropic", "team-a")
    history.append(manager, KEY, [U("q"), thought("a", at_gateway)])
    assert thinking_sent(manager, "work", None) == 1
    assert thinking_sent(manager, "anthropic", SONNET) == 0  # the public API, no scope
    result = provider_state.report_error(manager, KEY, "work", None, 400, REFUSED_THINKING)
    assert result.fenced == 1
    assert thinking_sent(manager, "work", None) == 0


def test_a_missing_thought_signature_is_answered_with_the_placeholder(make_manager) -> None:
    manager = make_manager()
    carrier = Message(role="assistant", content="", tool_calls=(ToolCall(id="c", name="ls"),))
    history.append(
        manager, KEY, [U("list"), carrier, Message(role="tool", content="x", tool_call_id="c")]
    )

    def first_call(model: str | None) -> dict[str, Any]:
        body = history.prepare(manager, KEY, PrepareOptions(provider="gemini", model=model)).body
        turn = next(c for c in body["contents"] if c["role"] == "model")  # type: ignore[union-attr]
        return dict(turn["parts"][0])

    assert "thoughtSignature" not in first_call("my-tuned-model")
    missing = {
        "error": {
            "code": 400,
            "message": "Function call is missing a thought_signature in functionCall parts. "
            "This is required for tools to work correctly, and missing thought_signature may "
            "lead to degraded model performance. Additional data, function call "
            "`default_api:ls` , position 2.",
            "status": "INVALID_ARGUMENT",
        }
    }
    result = provider_state.report_error(manager, KEY, "gemini", "my-tuned-model", 400, missing)
    assert (result.fenced, result.reason) == (1, "thought_signature")
    assert first_call("my-tuned-model")["thoughtSignature"] == "skip_thought_signature_validator"


# -- native compaction ------------------------------------------------------------------------


COMPACTION_ITEM = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-compacted"}


def responses_input(manager: Any, provider: str, model: str | None) -> list[dict[str, Any]]:
    body = history.prepare(manager, KEY, PrepareOptions(provider=provider, model=model)).body
    return list(body["input"])  # type: ignore[call-overload]


def compacted(manager: Any) -> list[Any]:
    made = origin("openai-responses", "gpt-5.2", None, None)
    old = history.append(
        manager, KEY, [U("old question"), Message(role="assistant", content="old answer")]
    ).messages
    history.append(manager, KEY, [U("new question"), Message(role="assistant", content="new")])
    provider_state.save_compaction(manager, KEY, old[-1].id, [COMPACTION_ITEM], made)
    return old


def test_a_native_compaction_stands_in_only_where_it_was_minted(make_manager) -> None:
    manager = make_manager()
    compacted(manager)
    minted = responses_input(manager, "openai-responses", "gpt-5.2")
    assert minted[0] == COMPACTION_ITEM
    assert "old question" not in str(minted) and "new question" in str(minted)
    # Elsewhere the rows themselves (no summary stored) ...
    for provider, model in (("openai-responses", "gpt-4.1"), ("openai", "gpt-5.2")):
        body = history.prepare(manager, KEY, PrepareOptions(provider=provider, model=model)).body
        assert "cmp_1" not in str(body) and "old question" in str(body), provider
    # ... or the stored summary in their place.
    history.save_summary(
        manager, KEY, "they asked an old question", history.get(manager, KEY).messages[1].id
    )
    other = responses_input(manager, "openai-responses", "gpt-4.1")
    assert "cmp_1" not in str(other) and "they asked an old question" in str(other)
    assert responses_input(manager, "openai-responses", "gpt-5.2")[0] == COMPACTION_ITEM


def test_a_refused_compaction_is_fenced_and_the_rows_come_back(make_manager) -> None:
    manager = make_manager()
    compacted(manager)
    refused = {
        "error": {
            "message": "The encrypted content gAAA...DQ== could not be verified.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_encrypted_content",
        }
    }
    result = provider_state.report_error(manager, KEY, "openai-responses", "gpt-5.2", 400, refused)
    assert (result.fenced, result.reason) == (1, "encrypted_content")
    after = responses_input(manager, "openai-responses", "gpt-5.2")
    assert "cmp_1" not in str(after) and "old question" in str(after)


@pytest.mark.parametrize("how", ["truncate", "delete_turns", "retention", "clear"])
def test_deleting_a_covered_row_deletes_the_compaction(make_manager, how: str) -> None:
    manager = make_manager()
    old = compacted(manager)
    if how == "truncate":
        edits.truncate(manager, KEY, old[0].id)
    elif how == "delete_turns":
        edits.delete_turns(manager, KEY, [old[0].turn])
    elif how == "retention":
        history.append(make_manager({"maxMessages": 2}), KEY, [U("more")])
    else:
        history.clear(manager, KEY)
    with manager.store.read() as tx:
        assert tx.compaction(KEY) is None, how


def test_deleting_only_newer_rows_keeps_the_compaction(make_manager) -> None:
    manager = make_manager()
    compacted(manager)
    newest = history.get(manager, KEY).messages[-1]
    edits.truncate(manager, KEY, newest.id)
    with manager.store.read() as tx:
        assert tx.compaction(KEY) is not None


def test_a_fork_takes_the_compaction_with_the_rows_it_covers(make_manager) -> None:
    manager = make_manager()
    compacted(manager)
    copy = Key("ws", "copy")
    conversations.fork(manager, KEY, copy)
    with manager.store.read() as tx:
        native = tx.compaction(copy)
    assert native is not None
    assert native.covers_through_id == history.get(manager, copy).messages[1].id


def test_a_compaction_needs_a_kind_with_one_and_a_row_of_the_conversation(make_manager) -> None:
    from chat_history.errors import InvalidParams

    manager = make_manager()
    stored = history.append(manager, KEY, [U("q")]).messages
    with pytest.raises(InvalidParams) as bad_kind:
        provider_state.save_compaction(
            manager, KEY, stored[0].id, [COMPACTION_ITEM], origin("gemini")
        )
    assert bad_kind.value.field == "origin.provider"
    with pytest.raises(InvalidParams) as bad_row:
        provider_state.save_compaction(
            manager, KEY, stored[0].id + 1000, [COMPACTION_ITEM], origin("anthropic")
        )
    assert bad_row.value.field == "covers_through_id"

"""Settings over the wire: initializationOptions, workspace/configuration, didChangeConfiguration,
and one warning per bad value."""

from __future__ import annotations

import pytest
from lsprotocol import types
from tests.e2e.conftest import Session, StartSession

from chat_history.policy.prepare.context import BREADCRUMB

pytestmark = pytest.mark.engines


def turn(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]


async def stored(session: Session, conversation: str = "c") -> list[str]:
    result = await session.request("chatHistory/get", {"conversationId": conversation})
    return [m["content"] for m in result["messages"]]


async def assert_count_rule_of_two(session: Session) -> None:
    """maxMessages 2 in force: the second turn's append drops the first turn, whole, by count."""
    first = await session.append("c", *turn(1))
    assert first["pruned"] is None  # two messages: within the limit
    result = await session.append("c", *turn(2))
    assert result["pruned"]["reasons"] == ["count"]
    assert result["pruned"]["droppedTurns"] == 1
    assert result["pruned"]["droppedMessages"] == 2
    assert await stored(session) == ["q2", "a2"]


async def test_initialization_options_apply_without_configuration(start_session: StartSession):
    session = await start_session(settings={"maxMessages": 2}, declare_configuration=False)
    await assert_count_rule_of_two(session)


async def test_workspace_configuration_overrides_initialization_options(
    start_session: StartSession,
):
    session = await start_session(settings={"maxMessages": 100}, configuration={"maxMessages": 2})
    await assert_count_rule_of_two(session)


async def test_null_configuration_keeps_initialization_options(start_session: StartSession):
    session = await start_session(settings={"maxMessages": 2})
    await assert_count_rule_of_two(session)


async def test_did_change_configuration_with_settings_applies_them(start_session: StartSession):
    session = await start_session(settings={"maxMessages": 100})
    await session.append("c", *turn(1), *turn(2))
    assert await stored(session) == ["q1", "a1", "q2", "a2"]  # 100 in force: nothing dropped
    session.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"chatHistory": {"maxMessages": 2}})
    )
    await session.settle()
    result = await session.append("c", *turn(3))
    assert result["pruned"]["reasons"] == ["count"]
    assert result["pruned"]["droppedTurns"] == 2
    assert await stored(session) == ["q3", "a3"]


async def test_did_change_configuration_without_settings_pulls_again(start_session: StartSession):
    session = await start_session(configuration={"maxMessages": 100})
    await session.append("c", *turn(1), *turn(2))
    assert await stored(session) == ["q1", "a1", "q2", "a2"]  # 100 in force: nothing dropped
    session.set_configuration({"maxMessages": 2})
    session.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings=None)
    )
    await session.settle(pulls=2)
    result = await session.append("c", *turn(3))
    assert result["pruned"]["reasons"] == ["count"]
    assert result["pruned"]["droppedTurns"] == 2
    assert await stored(session) == ["q3", "a3"]


async def test_a_bad_value_warns_once_and_the_default_applies(start_session: StartSession):
    session = await start_session(
        settings={"maxMessages": "lots", "maxTokens": 40},
        configuration={"maxMessages": "lots", "maxTokens": 40},
    )
    session.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings=None)
    )
    await session.settle(pulls=2)
    warnings = [w for w in session.warnings if "chatHistory.maxMessages" in w]
    assert len(warnings) == 1
    assert '"lots"' in warnings[0] and "50" in warnings[0]
    assert session.client.messages[0].type == types.MessageType.Warning
    # maxTokens still applied although maxMessages was bad
    await session.append("c", {"role": "user", "content": "x" * 200})
    result = await session.append("c", *turn(2))
    assert result["pruned"]["reasons"] == ["tokens"]


async def test_dotted_keys_are_accepted(start_session: StartSession):
    session = await start_session(configuration={"maxMessages": 6, "context.maxHistoryTurns": 2})
    result = await session.append("c", *turn(1), *turn(2), *turn(3), *turn(4))
    assert result["pruned"]["reasons"] == ["count"]  # maxMessages 6: three turns kept
    assert await stored(session) == ["q2", "a2", "q3", "a3", "q4", "a4"]
    prepared = await session.request("chatHistory/prepare", {"conversationId": "c"})
    # context.maxHistoryTurns 2: the request sends the newest two turns only
    assert prepared["trimmed"]["reason"] == "turnLimit"
    assert (prepared["trimmed"]["droppedTurns"], prepared["trimmed"]["retainedTurns"]) == (1, 2)
    sent = [m["content"] for m in prepared["body"]["messages"]]
    assert sent == [BREADCRUMB, "q3", "a3", "q4", "a4"]
    assert not session.warnings

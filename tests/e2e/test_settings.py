"""Settings over the wire: initializationOptions, workspace/configuration, didChangeConfiguration,
and one warning per bad value."""

from __future__ import annotations

from lsprotocol import types
from tests.e2e.conftest import StartSession


def turn(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]


async def test_initialization_options_apply_without_configuration(start_session: StartSession):
    session = await start_session(settings={"maxMessages": 2}, declare_configuration=False)
    await session.append("c", *turn(1))
    result = await session.append("c", *turn(2))
    assert result["pruned"]["reasons"] == ["count"]


async def test_workspace_configuration_overrides_initialization_options(
    start_session: StartSession,
):
    session = await start_session(settings={"maxMessages": 100}, configuration={"maxMessages": 2})
    await session.append("c", *turn(1))
    result = await session.append("c", *turn(2))
    assert result["pruned"] is not None and result["pruned"]["droppedTurns"] == 1


async def test_null_configuration_keeps_initialization_options(start_session: StartSession):
    session = await start_session(settings={"maxMessages": 2})
    await session.append("c", *turn(1))
    result = await session.append("c", *turn(2))
    assert result["pruned"] is not None


async def test_did_change_configuration_with_settings_applies_them(start_session: StartSession):
    session = await start_session(settings={"maxMessages": 100})
    await session.append("c", *turn(1))
    session.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"chatHistory": {"maxMessages": 2}})
    )
    await session.settle()
    result = await session.append("c", *turn(2))
    assert result["pruned"] is not None


async def test_did_change_configuration_without_settings_pulls_again(start_session: StartSession):
    session = await start_session(configuration={"maxMessages": 100})
    await session.append("c", *turn(1))
    session.set_configuration({"maxMessages": 2})
    session.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings=None)
    )
    await session.settle(pulls=2)
    result = await session.append("c", *turn(2))
    assert result["pruned"] is not None


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
    session = await start_session(configuration={"maxMessages": 2, "context.maxHistoryTurns": 3})
    await session.append("c", *turn(1))
    result = await session.append("c", *turn(2))
    assert result["pruned"] is not None
    assert not session.warnings

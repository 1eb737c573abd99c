"""The heaps are given back at rest (wire/transport/memory.py, issue 35 item 14): once no message
has been read or written for ``IDLE_SECONDS`` the server trims glibc's heaps once, and a message
before then postpones it. On a real event loop with the C library's own ``malloc_trim`` (this
machine has glibc); the quiet spell is shortened, nothing is timed."""

from __future__ import annotations

import asyncio

import pytest

from chat_history.wire.transport import memory

IDLE = 0.2


@pytest.fixture(autouse=True)
def short_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    assert memory.trim_function() is not None, "glibc's malloc_trim is there on this machine"
    monkeypatch.setattr(memory, "IDLE_SECONDS", IDLE)
    monkeypatch.setattr(memory, "_rest", None)


def test_a_quiet_server_trims_once() -> None:
    async def scenario() -> int:
        before = memory.trims
        memory.large_message(
            100, asyncio.get_running_loop()
        )  # a small message: no trim for its size
        await asyncio.sleep(IDLE * 4)
        return memory.trims - before

    assert asyncio.run(scenario()) == 1


def test_a_message_before_the_rest_postpones_the_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clock the test moves (``memory.time``), so that a late wake-up of a loaded machine
    cannot turn "before the rest" into "after it": the checks run on the real loop as often as
    they are due, but the quiet spell they measure is the test's."""
    now = [1_000.0]
    monkeypatch.setattr(memory, "time", type("Clock", (), {"monotonic": lambda: now[0]}))

    async def scenario() -> tuple[int, int]:
        before = memory.trims
        memory.large_message(100, asyncio.get_running_loop())
        now[0] += IDLE * 0.6
        memory.large_message(100, asyncio.get_running_loop())  # still busy: the rest starts again
        now[0] += IDLE * 0.6  # 1.2 × IDLE after the first, 0.6 × after the last
        await asyncio.sleep(IDLE * 3)  # the check ran (more than once): never a rest yet
        early = memory.trims - before
        now[0] += IDLE
        for _ in range(100):  # the next check is due within IDLE
            if memory.trims - before:
                break
            await asyncio.sleep(IDLE / 4)
        return early, memory.trims - before

    assert asyncio.run(scenario()) == (0, 1)


def test_no_message_no_trim() -> None:
    async def scenario() -> int:
        before = memory.trims
        await asyncio.sleep(IDLE * 3)
        return memory.trims - before

    assert asyncio.run(scenario()) == 0


def test_at_rest_the_callback_runs_then_the_trim_on_the_executor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    seen: list[tuple[str, int]] = []
    with ThreadPoolExecutor(max_workers=1) as requests:
        monkeypatch.setattr(memory, "_rest", None)
        memory.on_rest(lambda: seen.append(("rest", memory.trims)), requests)

        async def scenario() -> None:
            memory.large_message(100, asyncio.get_running_loop())
            await asyncio.sleep(IDLE * 4)

        before = memory.trims
        asyncio.run(scenario())
    assert seen == [("rest", before)]  # the callback ran before the trim
    assert memory.trims == before + 1


def test_the_cache_at_rest_keeps_its_newest_conversations_within_the_bound() -> None:
    from chat_history.model import Key, StoredMessage
    from chat_history.store.conversation_cache import ConversationCache, row_bytes

    cache = ConversationCache(64, 50_000)
    rows = [
        StoredMessage(role="user", content="x" * 10_000, id=n, turn=n, tokens=1, timestamp=0)
        for n in range(10)
    ]
    for n in range(8):
        cache.put(Key("ws", f"c{n}"), rows)
    one = sum(map(row_bytes, rows))

    cache.shrink(3 * one)

    assert len(cache) == 3 and cache.bytes == 3 * one and cache.rows == 30
    assert [cache.get(Key("ws", f"c{n}")) is not None for n in range(8)] == [False] * 5 + [True] * 3

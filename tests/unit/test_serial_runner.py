"""The request thread (wire/transport/serial.py): one task at a time, in submission order, on its
own thread or on the caller's when nothing is queued or running."""

from __future__ import annotations

import asyncio
import threading

import pytest

from chat_history.wire.transport.serial import SerialRunner


def test_tasks_run_in_order_one_at_a_time() -> None:
    runner = SerialRunner("t")
    seen: list[int] = []
    running = [0]
    overlap = []

    def task(n: int) -> int:
        running[0] += 1
        overlap.append(running[0])
        seen.append(n)
        running[0] -= 1
        return n * 2

    futures = [runner.submit(task, n) for n in range(200)]
    assert [f.result(timeout=30) for f in futures] == [n * 2 for n in range(200)]
    assert seen == list(range(200))
    assert max(overlap) == 1
    runner.shutdown()


def test_run_here_runs_on_the_caller_when_idle() -> None:
    runner = SerialRunner("t")
    where: list[threading.Thread] = []
    assert runner.run_here(lambda: where.append(threading.current_thread()))
    assert where == [threading.current_thread()]
    runner.shutdown()


def test_run_here_refuses_while_a_task_is_queued_or_running() -> None:
    runner = SerialRunner("t")
    release = threading.Event()
    started = threading.Event()

    def blocking() -> None:
        started.set()
        release.wait(30)

    first = runner.submit(blocking)
    started.wait(30)
    ran: list[str] = []
    assert not runner.run_here(lambda: ran.append("here"))  # one is running
    queued = runner.submit(lambda: ran.append("queued"))
    assert not runner.run_here(lambda: ran.append("here"))  # one is queued
    release.set()
    first.result(timeout=30)
    queued.result(timeout=30)
    assert ran == ["queued"]
    assert runner.run_here(lambda: ran.append("here"))  # idle again
    assert ran == ["queued", "here"]
    runner.shutdown()


def test_a_task_submitted_during_run_here_waits_for_it() -> None:
    runner = SerialRunner("t")
    order: list[str] = []

    def here() -> None:
        order.append("here started")
        later = runner.submit(lambda: order.append("submitted meanwhile"))
        assert not later.done()
        order.append("here ended")

    assert runner.run_here(here)
    runner.submit(lambda: None).result(timeout=30)
    assert order == ["here started", "here ended", "submitted meanwhile"]
    runner.shutdown()


def test_an_exception_of_a_task_is_its_future_s() -> None:
    runner = SerialRunner("t")

    def boom() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        runner.submit(boom).result(timeout=30)
    assert runner.submit(lambda: 1).result(timeout=30) == 1  # the thread goes on
    with pytest.raises(ValueError, match="no"):
        runner.run_here(boom)
    assert runner.run_here(lambda: None)  # nothing left counted as running
    runner.shutdown()


def test_shutdown_finishes_what_was_queued_and_refuses_more() -> None:
    runner = SerialRunner("t")
    release = threading.Event()
    done: list[int] = []
    runner.submit(lambda: release.wait(30))
    for n in range(5):
        runner.submit(done.append, n)
    threading.Timer(0.05, release.set).start()
    runner.shutdown(wait=True)
    assert done == [0, 1, 2, 3, 4]
    with pytest.raises(RuntimeError):
        runner.submit(lambda: None)
    assert not runner.run_here(lambda: None)


def test_the_event_loop_runs_work_on_it() -> None:
    runner = SerialRunner("t")

    async def main() -> str:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(runner, lambda: threading.current_thread().name)

    assert asyncio.run(main()) == "t"
    runner.shutdown()

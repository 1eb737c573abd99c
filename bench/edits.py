"""Cost of the version 2 edits by history size: ``truncate`` (the last turn), ``deleteTurns`` (one
turn in the middle), ``editMessage`` (the newest prompt, and a row in the middle) and ``fork`` (the
whole conversation, in rows per second). Through the manager on a real SQLite file, the WAL
reset after each deleting operation included. ``python bench/edits.py [sizes...]``; not part of
``make bench`` (which compares whole systems)."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))

from chat_history.model import Key, Message  # noqa: E402
from chat_history.service import conversations, edits, history  # noqa: E402
from chat_history.service.edits import MessageEdit  # noqa: E402
from chat_history.service.manager import ChatHistoryManager  # noqa: E402
from chat_history.settings import load_settings  # noqa: E402

KEEP_ALL = {"maxMessages": 10_000_000, "maxTokens": 0, "maxAgeHours": 0}
TEXT = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 4
KEY = Key("bench", "c")
REPS = 15


def turn(i: int) -> list[Message]:
    return [
        Message(role="user", content=f"question {i} {TEXT}"),
        Message(role="assistant", content=f"answer {i} {TEXT}"),
    ]


def median_ms(run: Callable[[int], None], reps: int = REPS) -> float:
    times = []
    for i in range(reps):
        t0 = time.perf_counter()
        run(i)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def measure(size: int) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="chat-history-edits-"))
    manager = ChatHistoryManager.open(folder / "edits.sqlite3", load_settings(KEEP_ALL).settings)
    for start in range(0, size // 2, 500):
        history.append(
            manager, KEY, [m for i in range(start, min(start + 500, size // 2)) for m in turn(i)]
        )
    rows = history.get(manager, KEY, limit=2).messages
    turns = rows[-1].turn

    t_truncate = []
    for i in range(REPS):
        tail = history.get(manager, KEY, limit=2).messages
        t0 = time.perf_counter()
        edits.truncate(manager, KEY, tail[0].id)
        t_truncate.append((time.perf_counter() - t0) * 1000)
        history.append(manager, KEY, turn(10_000_000 + i))

    middle = turns // 2
    delete_ms = median_ms(lambda i: edits.delete_turns(manager, KEY, [middle + i]))

    newest = history.get(manager, KEY, limit=2).messages[0]
    edit_new_ms = median_ms(
        lambda i: edits.edit_message(
            manager, KEY, newest.id, MessageEdit(content=f"edited {i} {TEXT}")
        )
    )
    early = history.get(manager, KEY, limit=size // 2).messages[0]  # a row half-way back
    edit_mid_ms = median_ms(
        lambda i: edits.edit_message(
            manager, KEY, early.id, MessageEdit(content=f"edited {i} {TEXT}")
        )
    )

    count = len(history.get(manager, KEY).messages)
    t0 = time.perf_counter()
    conversations.fork(manager, KEY, Key("bench", "fork"))
    fork_s = time.perf_counter() - t0
    manager.close()
    return {
        "rows": count,
        "truncate last turn (2 rows) ms": statistics.median(t_truncate),
        "deleteTurns one middle turn (2 rows) ms": delete_ms,
        "editMessage newest prompt ms": edit_new_ms,
        "editMessage a row half-way back ms": edit_mid_ms,
        "fork rows/s": count / fork_s,
    }


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1_000, 10_000, 100_000]
    results = {size: measure(size) for size in sizes}
    names = list(next(iter(results.values())))
    print("| measure | " + " | ".join(f"{s:,} rows" for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for name in names[1:]:
        print(f"| {name} | " + " | ".join(f"{results[s][name]:,.1f}" for s in sizes) + " |")


if __name__ == "__main__":
    main()

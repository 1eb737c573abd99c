"""``make bench``, replies part (protocol.md "Version 4" → Replies in flight): the cost of an
``updateReply`` (a 200-character delta) on a 1 KB and a 100 KB reply against an ``append`` of
one row, through ``ChatHistoryManager`` on SQLite and on PostgreSQL (a throwaway cluster, as the
tests start it) in the same run, as ratios to that append; and the memory of a real server
process streaming 20 conversations at once (VmRSS sampled as the replies grow). Prints the
figures and writes the "Replies in flight" section of BENCHMARKS.md. ``--quick``: fewer
repetitions. The goal: an update at 100 KB costs at most 2x an append."""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT))

from tests.pgcluster import Cluster  # noqa: E402

from chat_history.client import StdioClient  # noqa: E402
from chat_history.model import Key, Message  # noqa: E402
from chat_history.service import history, replies  # noqa: E402
from chat_history.service.manager import ChatHistoryManager  # noqa: E402
from chat_history.service.replies import ReplyBegin, ReplyChange  # noqa: E402
from chat_history.settings import load_settings  # noqa: E402
from chat_history.store import HistoryStore, Store  # noqa: E402
from chat_history.store.postgres import PostgresStore  # noqa: E402

KEEP_ALL = load_settings({"maxMessages": 1_000_000, "maxTokens": 0, "maxAgeHours": 0}).settings
DELTA = 200
SIZES = (1_000, 100_000)
STREAMS = 20


def words(rng: random.Random, chars: int) -> str:
    out = []
    length = 0
    while length < chars:
        word = rng.choice(("light", "scatters", "blue", "short", "waves", "the", "of", "sky"))
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:chars]


def median_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(store: HistoryStore, repeat: int) -> dict[str, float]:
    """Median ms of an append of one row and of an update at each reply size."""
    manager = ChatHistoryManager(store, KEEP_ALL)
    rng = random.Random(5)
    for c in range(20):  # a database with some history
        history.append(
            manager, Key("ws", f"c{c}"), [Message(role="user", content=words(rng, 400))] * 50
        )
    appending = Key("ws", "appending")
    figures = {
        "append one row": median_ms(
            lambda: history.append(
                manager, appending, [Message(role="assistant", content=words(rng, DELTA))]
            ),
            repeat,
        )
    }
    for size in SIZES:
        key = Key("ws", f"reply{size}")
        history.append(manager, key, [Message(role="user", content="why is the sky blue?")])
        row = replies.begin(manager, key, ReplyBegin())
        replies.update(manager, key, row.id, ReplyChange(content=words(rng, size)))
        delta = words(rng, DELTA)
        figures[f"update at {size // 1000} KB"] = median_ms(
            lambda key=key, row=row.id, delta=delta: replies.update(
                manager,  # type: ignore[misc]
                key,
                row,
                ReplyChange(content_delta=delta),
            ),
            repeat,
        )
        replies.end(manager, key, row.id, "complete", ReplyChange())
    manager.close()
    return figures


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def memory(folder: Path, rounds: int) -> list[tuple[int, int]]:
    """A real server streaming ``STREAMS`` replies at once, each updated ``rounds`` times with
    a 200-character delta (round robin, within the update rate): (updates sent, VmRSS KiB)
    sampled along the way."""
    samples: list[tuple[int, int]] = []
    rng = random.Random(9)
    with StdioClient(folder, env={**os.environ}) as client:
        client.initialize(settings={"maxMessages": 1_000_000, "maxAgeHours": 0})
        rows = []
        for c in range(STREAMS):
            conversation = f"s{c}"
            client.call(
                "chatHistory/append",
                {"conversationId": conversation, "messages": [{"role": "user", "content": "go"}]},
            )
            row = client.call("chatHistory/beginReply", {"conversationId": conversation})
            rows.append((conversation, row["id"]))
        sent = 0
        for round_ in range(rounds):
            started = time.monotonic()
            for conversation, row_id in rows:
                delta = words(rng, DELTA)
                client.call(
                    "chatHistory/updateReply",
                    {"conversationId": conversation, "id": row_id, "contentDelta": delta},
                )
                sent += 1
            if round_ % max(1, rounds // 6) == 0 or round_ == rounds - 1:
                samples.append((sent, rss_kib(client.process.pid)))
            # At most UPDATES_PER_SECOND a row: pace the rounds.
            pause = 1 / replies.UPDATES_PER_SECOND - (time.monotonic() - started)
            if pause > 0:
                time.sleep(pause)
        for conversation, row_id in rows:
            client.call(
                "chatHistory/endReply",
                {"conversationId": conversation, "id": row_id, "status": "complete"},
            )
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat = 30 if args.quick else 200
    rounds = 100 if args.quick else 300
    # The bench sends updates back to back: the per-reply rate (service.replies) would refuse
    # them past its burst, which is what a client must not do, not what is measured here.
    replies.BURST_UPDATES = 10**9
    cluster = Cluster()
    cluster.start()
    results: dict[str, dict[str, float]] = {}
    folder = Path(tempfile.mkdtemp(prefix="chat-history-replies-"))
    try:
        results["SQLite"] = measure(Store(folder / "sqlite"), repeat)
        results["PostgreSQL"] = measure(PostgresStore(cluster.fresh_database("replies")), repeat)
        print(results, flush=True)
        samples = memory(folder / "memory", rounds)
        print(samples, flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
    write_section(results, samples, f"{os.getloadavg()[0]:.0f}", repeat)


def write_section(
    results: dict[str, dict[str, float]], samples: list[tuple[int, int]], load: str, repeat: int
) -> None:
    lines = [
        "## Replies in flight",
        "",
        "`bench/replies.py`: an `updateReply` with a 200-character delta on a 1 KB and a 100 KB "
        "reply against an `append` of one 200-character row, through `ChatHistoryManager` on "
        "SQLite and on PostgreSQL (a throwaway cluster on a unix socket, fsync off) in the same "
        f"run; medians of {repeat} calls in ms, and each as a ratio to that engine's append. "
        f"Load average {load} on 2 CPUs. Goal: an update at 100 KB at most 2x an append.",
        "",
        "| operation | SQLite ms | SQLite ratio | PostgreSQL ms | PostgreSQL ratio |",
        "|---|---|---|---|---|",
    ]
    for operation in results["SQLite"]:
        cells = []
        for engine in ("SQLite", "PostgreSQL"):
            value = results[engine][operation]
            cells += [f"{value:.2f}", f"{value / results[engine]['append one row']:.2f}x"]
        lines.append(f"| {operation} | {' | '.join(cells)} |")
    first, last = samples[0], samples[-1]
    lines += [
        "",
        f"Memory: one server process streaming {STREAMS} replies at once (SQLite), VmRSS "
        "after each sixth of the updates: "
        + ", ".join(f"{kib / 1024:.1f} MiB at {sent:,}" for sent, kib in samples)
        + f" updates ({(last[1] - first[1]) / 1024:+.1f} MiB from the first sample to the last, "
        f"while the replies grew to {last[0] // STREAMS * DELTA // 1000} KB each).",
        "",
        "- An update writes one part row and one small `replies` row whatever the reply's "
        "length; every 64 parts are folded into the reply's text (one copy of it), so the cost "
        "per update stays that of a small write (store/replies.py).",
    ]
    section = "\n".join(lines) + "\n"
    path = ROOT / "BENCHMARKS.md"
    current = path.read_text(encoding="utf-8")
    if "## Replies in flight" in current:
        before, _, after = current.partition("## Replies in flight")
        rest = after.split("\n## ", 1)
        tail = "\n## " + rest[1] if len(rest) > 1 else ""
        current = before + section + tail
    else:
        current = current.rstrip("\n") + "\n\n" + section
    path.write_text(current, encoding="utf-8")
    print(section)


if __name__ == "__main__":
    main()

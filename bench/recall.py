"""``make bench``, MCP part: ``search_history`` of ``chat-history mcp`` driven by the official MCP
client over stdio, beside the same searches through ``chatHistory/search`` of the editor's server
(the real process over stdio, LSP framing), on one SQLite file of 100,000 messages in 100
conversations. Medians and 99th percentiles of whole round trips, in the same run. Writes the
"MCP recall" section of BENCHMARKS.md. ``--quick``: 10,000 messages, fewer repetitions."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from search import RARE, message_text  # noqa: E402

from chat_history.client import StdioClient  # noqa: E402
from chat_history.model import Key, Message  # noqa: E402
from chat_history.service import history  # noqa: E402
from chat_history.service.manager import ChatHistoryManager  # noqa: E402
from chat_history.settings import load_settings  # noqa: E402
from chat_history.store import DATABASE_FILE  # noqa: E402

WORKSPACE = "file:///bench/project"
CONVERSATIONS = 100
KEEP_ALL = {"maxMessages": 1_000_000, "maxTokens": 0, "maxAgeHours": 0}
QUERIES = {"rare word (20 rows)": RARE, "common word": "return", "phrase": '"def __init__(self"'}


def fill(path: Path, rows: int) -> None:
    """``rows`` messages in 100 conversations of one workspace; the rare word in 20 of them."""
    rng = random.Random(7)
    rare = set(rng.sample(range(rows), 20))
    manager = ChatHistoryManager.open(path, load_settings(KEEP_ALL).settings)
    try:
        per = rows // CONVERSATIONS
        n = 0
        for c in range(CONVERSATIONS):
            batch = []
            for i in range(per):
                text = message_text(rng) + (f" {RARE}" if n in rare else "")
                batch.append(Message(role="user" if i % 2 == 0 else "assistant", content=text))
                n += 1
            for start in range(0, len(batch), 100):
                history.append(manager, Key(WORKSPACE, f"c{c}"), batch[start : start + 100])
    finally:
        manager.close()


def spread(times: list[float]) -> tuple[float, float]:
    """(median, 99th percentile) in ms."""
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def timed(fn: Callable[[], object], reps: int) -> tuple[float, float]:
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return spread(times)


def lsp_search(path: Path, reps: int) -> dict[str, tuple[float, float]]:
    with StdioClient(path.parent) as client:
        client.initialize(KEEP_ALL, workspace=WORKSPACE)
        found = client.call("chatHistory/search", {"query": RARE, "limit": 10})["results"]
        assert len(found) == 10, "the editor's server must read the same history"
        return {
            label: timed(
                lambda q=query: client.call("chatHistory/search", {"query": q, "limit": 10}), reps
            )
            for label, query in QUERIES.items()
        }


async def mcp_search(path: Path, reps: int) -> dict[str, tuple[float, float]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "chat_history.cli", "--db", str(path), "mcp", "--workspace", WORKSPACE],
    )
    figures: dict[str, tuple[float, float]] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        for label, query in QUERIES.items():
            times = []
            for rep in range(reps + 1):
                start = time.perf_counter()
                result = await client.call_tool("search_history", {"query": query, "limit": 10})
                if rep:
                    times.append(time.perf_counter() - start)
                assert not result.is_error, result.content
            figures[label] = spread(times)
    return figures


def report(rows: int, lsp: dict[str, Any], mcp: dict[str, Any]) -> str:
    lines = [
        "## MCP recall",
        "",
        f"`bench/recall.py`: `search_history` of `chat-history mcp` through the official MCP "
        f"client "
        f"(stdio, newline-delimited JSON, answer bounded by `--max-tokens` 4,000), beside "
        f"`chatHistory/search` of the editor's server (stdio, LSP framing), limit 10, on one "
        f"SQLite file of {rows:,} messages in {CONVERSATIONS} conversations. Whole round trips, "
        f"ms; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end.",
        "",
        "| query | search_history median | p99 | chatHistory/search median | p99 | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for label in QUERIES:
        (m50, m99), (l50, l99) = mcp[label], lsp[label]
        lines.append(
            f"| {label} | {m50:.2f} | {m99:.2f} | {l50:.2f} | {l99:.2f} | {m50 / l50:.2f}× |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10,000 messages")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    args = parser.parse_args()
    rows, reps = (10_000, 20) if args.quick else (100_000, 100)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / DATABASE_FILE  # where the editor's server looks in its folder
        fill(path, rows)
        lsp = lsp_search(path, reps)
        mcp = asyncio.run(mcp_search(path, reps))
    text = report(rows, lsp, mcp)
    print(text)
    if args.out.exists():  # the section replaced in place (or added at the end)
        current = args.out.read_text()
        head, found, rest = current.partition("\n## MCP recall\n")
        tail = rest[rest.find("\n## ") :] if found and "\n## " in rest else ""
        args.out.write_text(head.rstrip("\n") + "\n\n" + text + tail)


if __name__ == "__main__":
    main()

"""``make bench``, memory part (issue 35 item 14): the server's resident memory at rest after a
read workload. The real server process over stdio: 64 conversations of 484 rows are written
(in a first process), then a fresh process reads them in 8 cycles (each a whole ``get`` and a
``prepare`` of every conversation), and its ``VmRSS`` is read from /proc at start, right after
the cycles and after ``--rest`` seconds idle. Each cycle's median ``get`` and ``prepare`` are
shown divided by the trivial request's (``getSummary`` of a conversation without one) timed
between them, so the cache's effect (cycle 1 reads the file, the later ones the cache) is seen
as ratios, not as absolute times. Prints the figures and writes the "Memory at rest" section of
BENCHMARKS.md (replaced in place, or added at the end; ``--out -``: print only).

Target: under 80 MiB at rest after the workload."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))

from chat_history.client import StdioClient  # noqa: E402

WORKSPACE = "/bench/memory"
SETTINGS: dict[str, Any] = {"maxMessages": 1_000_000, "maxTokens": 0, "maxAgeHours": 0}
BATCH = 44  # rows per append while writing
TARGET_MIB = 80.0


def rss_mib(client: StdioClient) -> float:
    for line in Path(f"/proc/{client.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def row(conversation: int, n: int) -> dict[str, Any]:
    """A row of ordinary chat text (~1,700 characters, distinct per row)."""
    role = "user" if n % 2 == 0 else "assistant"
    words = " ".join(f"w{conversation}x{n}y{k}" for k in range(150))
    return {"role": role, "content": f"{role} row {n} of conversation {conversation}: {words}"}


def start(folder: Path) -> StdioClient:
    client = StdioClient(folder)
    client.initialize(SETTINGS, workspace=WORKSPACE)
    return client


def write(folder: Path, conversations: int, rows: int) -> None:
    client = start(folder)
    try:
        for c in range(conversations):
            for first in range(0, rows, BATCH):
                batch = [row(c, n) for n in range(first, min(rows, first + BATCH))]
                client.call("chatHistory/append", {"conversationId": f"c{c}", "messages": batch})
    finally:
        client.close()


def timed(client: StdioClient, method: str, params: dict[str, Any]) -> float:
    started = time.perf_counter()
    client.call(method, params)
    return time.perf_counter() - started


def read_cycles(client: StdioClient, conversations: int, cycles: int) -> list[dict[str, float]]:
    """Each cycle's median get and prepare, divided by the trivial request's."""
    figures = []
    for _ in range(cycles):
        gets, prepares, trivial = [], [], []
        for c in range(conversations):
            key = {"conversationId": f"c{c}"}
            gets.append(timed(client, "chatHistory/get", key))
            trivial.append(timed(client, "chatHistory/getSummary", {"conversationId": "none"}))
            prepares.append(timed(client, "chatHistory/prepare", key))
            trivial.append(timed(client, "chatHistory/getSummary", {"conversationId": "none"}))
        base = statistics.median(trivial)
        figures.append(
            {"get": statistics.median(gets) / base, "prepare": statistics.median(prepares) / base}
        )
    return figures


def report(
    args: argparse.Namespace,
    at_start: float,
    after: float,
    at_rest: float,
    figures: list[dict[str, float]],
) -> str:
    met = "met" if at_rest < TARGET_MIB else "not met"
    lines = [
        "## Memory at rest",
        "",
        f"`bench/memory.py` (in `make bench`): the real server over stdio; {args.conversations} "
        f"conversations of {args.rows} rows (~1,700 characters each) written by a first process, "
        f"then a fresh one reads them in {args.cycles} cycles (an unlimited `get` and a `prepare` "
        "of each); its `VmRSS` from /proc at start, right after the cycles and after "
        f"{args.rest:g} s idle. Each cycle's median divided by the trivial request's.",
        "",
        "| RSS at start MiB | right after the cycles MiB | at rest MiB | target |",
        "|---|---|---|---|",
        f"| {at_start:.1f} | {after:.1f} | {at_rest:.1f} | < {TARGET_MIB:g} MiB: {met} |",
        "",
        "| cycle | get ÷ trivial | prepare ÷ trivial |",
        "|---|---|---|",
    ]
    lines += [
        f"| {n} | {figure['get']:.1f} | {figure['prepare']:.1f} |"
        for n, figure in enumerate(figures, 1)
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=64)
    parser.add_argument("--rows", type=int, default=484)
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--rest", type=float, default=5.0, help="seconds idle before the last RSS")
    parser.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"), help="'-': print only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        folder = Path(tmp) / "store"
        write(folder, args.conversations, args.rows)
        client = start(folder)
        try:
            at_start = rss_mib(client)
            figures = read_cycles(client, args.conversations, args.cycles)
            after = rss_mib(client)
            time.sleep(args.rest)
            at_rest = rss_mib(client)
        finally:
            client.close()
    text = report(args, at_start, after, at_rest, figures)
    print(text)
    out = Path(args.out)
    if args.out != "-" and out.exists():
        current = out.read_text(encoding="utf-8")
        head, found, rest = current.partition("\n## Memory at rest\n")
        tail = rest[rest.find("\n## ") :] if found and "\n## " in rest else ""
        out.write_text(head.rstrip("\n") + "\n\n" + text + tail, encoding="utf-8")


if __name__ == "__main__":
    main()

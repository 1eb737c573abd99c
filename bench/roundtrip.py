"""``make bench``, round-trip part (issue 36): what one request costs over stdio with LSP framing,
against a floor measured in the same run, the bare echo server of bench/echo_server.py (read a
frame, ``json.loads``, write a null result). The same client sends every request and waits for
its answer: a trivial request (the summary of a conversation that has none), ``get`` of one row
and of a page of 50, ``append`` of one row, ``prepare`` of a 4,000-token request, and
``updateReply`` with a 200-character delta, on a conversation of 100 / 10,000 / 100,000 stored
rows (the workload of bench/workload.py). Rounds alternate the floor and each request, so load
that comes and goes lands on both; every figure is a median and a ratio to the floor's median.
Writes the "Round trips" section of BENCHMARKS.md. ``--quick``: 100 and 10,000 rows, fewer
rounds. ``--profile`` runs py-spy (a dev tool, never a dependency) on the server while it
answers the trivial request and prints the top of its breakdown."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from systems import OUR_SETTINGS, preload_ours  # noqa: E402
from workload import CONVERSATION, OTHER_CONVERSATIONS, OTHER_LENGTH, WORKSPACE, take  # noqa: E402

from chat_history.client import StdioClient  # noqa: E402

ECHO = [sys.executable, str(BENCH / "echo_server.py")]
PYGLS = [sys.executable, str(BENCH / "bare_server.py")]
DELTA = "x" * 200
#: updates per reply: under the 200 a window may send to one reply at once (protocol.md)
UPDATES_PER_REPLY = 100
#: the requests ``--against`` also sends to the other build (no replies: a window's own)
AGAINST = ("trivial", "get 1", "get 50", "append", "prepare")
AGAINST_SUFFIX = " (against)"
OPS = ("bare pygls", "trivial", "get 1", "get 50", "append", "prepare", "updateReply")


class Session:
    """Our server on a preloaded folder and the echo floor, both alive for the whole size;
    with ``against`` (a checkout's root), that build of the server too, on a copy of the
    folder, for the requests of AGAINST."""

    def __init__(self, folder: Path, against: Path | None = None) -> None:
        self.ours = StdioClient(folder)
        self.ours.initialize(OUR_SETTINGS, workspace=WORKSPACE)
        self.base: StdioClient | None = None
        if against is not None:
            copy = folder.parent / (folder.name + "-against")
            shutil.copytree(folder, copy)
            env = {**os.environ, "PYTHONPATH": str(against / "server")}
            self.base = StdioClient(copy, env=env)
            self.base.initialize(OUR_SETTINGS, workspace=WORKSPACE)
        self.echo = StdioClient(command=ECHO)
        self.pygls = StdioClient(command=PYGLS)
        self.pygls.initialize()
        self.key = {"conversationId": CONVERSATION}
        self.reply: dict[str, Any] | None = None
        self.updates = 0
        self.appended = 0

    def call(self, op: str) -> None:
        client = self.ours
        if op.endswith(AGAINST_SUFFIX):
            assert self.base is not None
            client, op = self.base, op.removesuffix(AGAINST_SUFFIX)
        if op == "floor":
            self.echo.call("echo", {"conversationId": CONVERSATION})
        elif op == "bare pygls":
            self.pygls.call("bench/echo", {"conversationId": CONVERSATION})
        elif op == "trivial":
            client.call("chatHistory/getSummary", {"conversationId": "none"})
        elif op.startswith("get "):
            client.call("chatHistory/get", {**self.key, "limit": int(op[4:])})
        elif op == "append":
            self.appended += 1
            row = {"role": "user" if self.appended % 2 else "assistant", "content": DELTA}
            client.call("chatHistory/append", {"conversationId": "appended", "messages": [row]})
        elif op == "prepare":
            client.call("chatHistory/prepare", self.key)
        elif op == "updateReply":
            self.update()

    def update(self) -> None:
        """One update of the streaming reply; a new reply after UPDATES_PER_REPLY (its begin and
        end are not timed: they are the next call's setup, done before its clock starts)."""
        assert self.reply is not None
        self.ours.call("chatHistory/updateReply", {**self.reply, "contentDelta": DELTA})
        self.updates += 1

    def ready(self, op: str) -> None:
        """Untimed setup before a call: a streaming reply with updates left."""
        if op != "updateReply" or (self.reply is not None and self.updates < UPDATES_PER_REPLY):
            return
        streamed = {"conversationId": "streamed"}
        if self.reply is not None:
            self.ours.call("chatHistory/endReply", {**self.reply, "status": "complete"})
        else:
            self.ours.call(
                "chatHistory/append",
                {**streamed, "messages": [{"role": "user", "content": "go"}]},
            )
        row = self.ours.call("chatHistory/beginReply", streamed)
        self.reply = {**streamed, "id": row["id"]}
        self.updates = 0

    def close(self) -> None:
        self.ours.close()
        self.echo.close()
        self.pygls.close()
        if self.base is not None:
            self.base.close()


def timed(session: Session, op: str, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        session.ready(op)
        start = time.perf_counter()
        session.call(op)
        out.append((time.perf_counter() - start) * 1000)
    return out


def measure(size: int, rounds: int, calls: int, against: Path | None = None) -> dict[str, float]:
    """Median ms of the floor and of each request at ``size`` stored rows."""
    folder = Path(tempfile.mkdtemp(prefix="chat-history-roundtrip-"))
    try:
        others = {f"other{i}": take(OTHER_LENGTH, f"o{i}") for i in range(OTHER_CONVERSATIONS)}
        preload_ours(folder, take(size), others)
        session = Session(folder, against)
        try:
            ops = ["floor", *OPS]
            if against is not None:
                ops += [op + AGAINST_SUFFIX for op in AGAINST]
            samples: dict[str, list[float]] = {op: [] for op in ops}
            for op in samples:  # warm both processes' caches
                timed(session, op, 20)
            for _ in range(rounds):
                for op, out in samples.items():
                    out += timed(session, op, calls)
            return {op: statistics.median(out) for op, out in samples.items()}
        finally:
            session.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(folder.parent / (folder.name + "-against"), ignore_errors=True)


def profile(seconds: float) -> None:
    """py-spy on the server while it answers trivial requests: the top of its breakdown."""
    spy = shutil.which("py-spy") or os.environ.get("PY_SPY", "")
    if not spy:
        sys.exit("--profile needs py-spy on PATH (or PY_SPY): pip install py-spy")
    folder = Path(tempfile.mkdtemp(prefix="chat-history-roundtrip-"))
    out = Path(tempfile.gettempdir()) / "chat-history-roundtrip-profile.txt"
    try:
        session = Session(folder)
        timed(session, "trivial", 200)
        command = [spy, "record", "--threads", "--rate", "2000", "--format", "raw"]
        command += ["--duration", str(int(seconds)), "--output", str(out)]
        command += ["--pid", str(session.ours.process.pid)]
        recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        time.sleep(1.0)
        sent = 0
        while recorder.poll() is None:
            timed(session, "trivial", 50)
            sent += 50
        session.close()
        print(f"{sent} trivial requests profiled; collapsed stacks in {out}")
        summarize(out.read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def summarize(collapsed: str, top: int = 30) -> None:
    """Per function, over every thread's on-CPU samples: in how many it is on the stack
    (inclusive) and in how many it is the innermost frame (self)."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = stack.split(";")
        total += int(count)
        own[frames[-1]] = own.get(frames[-1], 0) + int(count)
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + int(count)
    for title, figures in (("inclusive", inclusive), ("self", own)):
        print(f"-- {title}, % of {total} samples")
        for frame, count in sorted(figures.items(), key=lambda kv: -kv[1])[:top]:
            print(f"{100 * count / total:6.1f}%  {frame[:150]}")


#: The same bench at 2144ac8, before the cuts of issue 36 (one run, load 6.9-7.4), by size:
#: a recorded run, not this one. Its floor was 0.072 / 0.022 / 0.026 ms: compare with bare pygls.
BEFORE = {
    100: {"bare pygls": 0.272, "trivial": 0.346, "get 1": 0.387, "append": 1.018, "prepare": 1.568},
    10_000: {
        "bare pygls": 0.285,
        "trivial": 0.437,
        "get 1": 0.483,
        "append": 1.208,
        "prepare": 1.922,
    },
    100_000: {
        "bare pygls": 0.298,
        "trivial": 0.546,
        "get 1": 0.643,
        "append": 1.258,
        "prepare": 1.843,
    },
}
#: Where a trivial request's time went and what was cut (issue 36): py-spy on the server, A/B
#: runs of this bench against the commit before each cut (``--against``), in-process timings.
BREAKDOWN = [
    "Where a trivial request's time goes (py-spy on the server process, `--profile`; each cut "
    "measured with `--against` the commit before it, both servers in the same rounds; load "
    "7-10 on 2 CPUs while a CI run shared the machine):",
    "",
    "- **Thread hops** (most of it): py-spy finds the server's threads waiting, not working, "
    "for most of a trivial request's wall time. Before, one request woke six threads in "
    "turn: the stdin reader for the header, the loop, the reader again for the body, the loop, "
    "the request thread, the loop again to write the answer. Then three: header and body are "
    "read in one hop (wire/transport/framing.py) and the request thread writes its own answer "
    "(requests.Requests._answer). Together: 0.419 -> 0.300 ms. Now one: a request that finds "
    "the request thread idle (nothing queued or running, no settings pull pending) is run by "
    "the thread that read it (wire/transport/serial.py), and a frame of at most 64 KiB is one "
    "write (with an unbuffered stdout, as PYTHONUNBUFFERED gives, header and body were two "
    "system calls and the client woke for the header alone). Under load a wake-up cost more "
    "than the request's own work: a SimpleQueue.put that woke the request thread took ~110 us "
    "of the reader's wall time at load 4.",
    "- **pygls's dispatch**: `handle_message` tests each message against `runtime_checkable` "
    "Protocols (~37 us an `isinstance` at load 10); a custom method's request now goes "
    "straight to pygls's `_handle_request` (issue 36; since issue 45 none goes through pygls), "
    "and frames are "
    "parsed with one JSON decoder, not one per call: 0.312 -> 0.271 ms.",
    "- **Encoding the answer**: the chunked walk (which keeps a huge answer from being held "
    "twice) cost ~57 us on a null result; an answer of at most 512 values and 64 K "
    "characters is now one `json.dumps` (~18 us): 0.291 -> 0.276 ms.",
    "- **The change watch**: its look before each answer opened a read transaction; it now "
    "reads only the change token when nothing else committed (in-process 33 -> 8 us; over "
    "stdio within noise). Its re-read of a written conversation's fingerprint before the "
    "commit read every row for the newest and oldest ids (store/changes.py): an append to a "
    "conversation of 10,000 rows took 5-8 ms over stdio, 0.76 ms now (bench/worker.py stdio "
    "10000, against 2144ac8 in the same minute).",
    "- **Not cut**: the rest of the change watch's look (`PRAGMA data_version` and a `stat` "
    "of the database file that every read section makes) and `getSummary`'s own reads "
    "(retention's quick check and the summary, in one snapshot).",
    "- **pygls's own share** (issue 36): bare pygls (bench/bare_server.py answering `bench/echo` "
    "on its loop) cost about as much as our whole trivial request, 11-13x the echo floor by "
    "itself: its stdin reads go through an executor and every message through asyncio.",
    "- **Off pygls's path** (issue 45): the `chatHistory/*` methods are dispatched by the "
    "server's own front (wire/server.py, wire/requests.py): the reading thread checks the "
    "frame and runs the request, or queues it on the request thread when that one is busy; no "
    "pygls dispatch, no event loop. A trivial request went from about bare pygls's cost to a "
    "third of it (`--against` main in the same rounds: the `(main)` rows).",
    "- **What a trivial request is made of now** (thread CPU time per call in process, load "
    "~1.6, each stage timed with `time.thread_time_ns`; the server process's whole CPU per "
    "request from /proc is 128 us against the echo server's 28 us): the reading thread's "
    "parse and checks ~15 us; the change watch's look before and after the call ~24 us; "
    "`getSummary`'s own service work (one snapshot: retention's quick check, the summary) "
    "~28 us; encoding the answer ~11 us and writing it ~18 us (one system call, as the "
    "echo's); the settings barrier, `manager.under` (now made once per settings value, not "
    "per request), params and the identity ~7 us; the job's bookkeeping ~10 us. Everything "
    "left is work the protocol asks of each request (the look for other windows' changes "
    "before its answer, retention before each read) or the checks every message passes: the "
    "3x goal is not met (see the table).",
    "- **prepare at 10,000 rows** (same method): the service's `prepare` (read plan, window, "
    "trim, the provider body: `format_body` ~17 % of it) ~70 %, the answer's JSON (~24 KB) "
    "~25 %, the rest (reader, change watch, the `trimmed` notifications) ~5 %. A prepare "
    "whose rows to send, route and settings are those of a recent one now reuses that body, "
    "cache marks and native compaction items included (`service/body_memo.py`: keyed on the "
    "rows by value, so an edit, a fence or another process's write is another key), and the "
    "`cacheKey` is hashed once per conversation. `--against` the commit before (5fd0b0d) in "
    "the same rounds, load 3-8: over stdio 0.832 vs 0.936 ms at 100 rows, 0.888 vs 1.002 at "
    "10,000; in process (bench/worker.py, medians of 2-4 runs each) 0.296 vs 0.42 ms at 100, "
    "0.29 vs 0.40 at 10,000. A prepare after an append renders its body anew (the memo adds "
    "~20 us to it). Reusing each unchanged row's rendering inside a new body is not done: the "
    "formatters work on the whole body (call ids unique across it, merged turns, the trailing "
    "instruction, the fence of the current tool loop), and their per-row part is ~40 % of "
    "`format_body`, ~1-2 % of a prepare after an append.",
    "- **prepare's own work** (cProfile of 300 prepares, 1,000 rows, ~40 sent): SQL ~10%, the "
    "provider body ~20%, the per-turn memo lookups ~18%, most of it hashing ~270 rows per "
    "prepare through a Python `__hash__`; rows now use object's identity hash in C "
    "(1.407 -> 1.349 ms over stdio at 10,000 rows).",
    "- **Peers** (bench/worker.py at 10,000 rows, one after the other at load 7, a recorded run "
    "before issue 45; "
    "`make bench`'s run.py gives the full table): our in-process prepare 0.392 ms, the OpenAI "
    "Agents SDK's read + trim 34.3 ms (87x), LangChain's 858 ms (2,190x); over stdio ours is "
    "1.233 ms (28x and 696x).",
]


def write_section(results: dict[int, dict[str, float]], load: str, calls: str) -> None:
    sizes = sorted(results)
    lines = [
        "## Round trips",
        "",
        "`bench/roundtrip.py`: one client, one request at a time, over stdio with LSP framing; "
        "the floor is a bare Python echo server (bench/echo_server.py: read a frame, "
        "`json.loads`, write a null result) measured in the same rounds as each request. "
        f"Medians of {calls} calls in ms, each with its ratio to the floor. Load average {load} "
        "on 2 CPUs, shared. Goal (issue 45): a trivial request at most 3x the floor. The "
        "`(main)` rows, when there, are the same requests to the server of another checkout "
        "(`--against`: main at 099d07d, before this stop's cuts) in the same rounds.",
        "",
        "| request | " + " | ".join(f"{size:,} rows" for size in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    ops = ["floor", *OPS]
    if any(op + AGAINST_SUFFIX in results[size] for size in sizes for op in AGAINST):
        ops += [op + AGAINST_SUFFIX for op in AGAINST]
    for op in ops:
        cells = []
        for size in sizes:
            value, floor = results[size][op], results[size]["floor"]
            cells.append(f"{value:.3f}" if op == "floor" else f"{value:.3f} ({value / floor:.2f}x)")
        name = "echo floor" if op == "floor" else op.replace(AGAINST_SUFFIX, " (main)")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines += [
        "",
        "Before the cuts of issue 36 (2144ac8, a recorded run at load 7; its echo floor moved "
        "between 0.022 and 0.072 ms, so each request is given against bare pygls of the same "
        "run), and now:",
        "",
        "| request ÷ bare pygls | " + " | ".join(f"{size:,} before / now" for size in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    for op in ("trivial", "get 1", "append", "prepare"):
        cells = []
        for size in sizes:
            now = results[size][op] / results[size]["bare pygls"]
            before = BEFORE.get(size)
            was = f"{before[op] / before['bare pygls']:.2f}x" if before else "-"
            cells.append(f"{was} / {now:.2f}x")
        lines.append(f"| {op} | {' | '.join(cells)} |")
    lines += [
        "",
        *BREAKDOWN,
    ]
    replace_section(BENCH.parent / "BENCHMARKS.md", "## Round trips", "\n".join(lines) + "\n")


def replace_section(path: Path, heading: str, section: str) -> None:
    current = path.read_text(encoding="utf-8")
    if heading in current:
        before, _, after = current.partition(heading)
        rest = after.split("\n## ", 1)
        current = before + section + ("\n## " + rest[1] if len(rest) > 1 else "")
    else:
        current = current.rstrip("\n") + "\n\n" + section
    path.write_text(current, encoding="utf-8")
    print(section)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", type=float, metavar="SECONDS")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--sizes", help="comma-separated row counts (printed only)")
    parser.add_argument("--rounds", type=int)
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout's root, measured alongside (its rows: (main))",
    )
    args = parser.parse_args(argv)
    if args.profile:
        profile(args.profile)
        return
    sizes = (100, 10_000) if args.quick else (100, 10_000, 100_000)
    if args.sizes:
        sizes = tuple(int(size) for size in args.sizes.split(","))
        args.no_write = True
    rounds, calls = (4, 25) if args.quick else (10, 40)
    rounds = args.rounds or rounds
    results: dict[int, dict[str, float]] = {}
    loads = []
    for size in sizes:
        results[size] = measure(size, rounds, calls, args.against)
        loads.append(os.getloadavg()[0])
        print(size, {op: round(ms, 3) for op, ms in results[size].items()}, flush=True)
    if not args.no_write:
        write_section(results, f"{min(loads):.1f}-{max(loads):.1f}", f"{rounds} x {calls}")


if __name__ == "__main__":
    main()

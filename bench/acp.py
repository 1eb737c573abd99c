"""``bench/acp.py``: what ``chat-history acp`` adds between an editor and an agent (issue 33,
"Overhead"), and its history view against an agent's own (issue 44 item 2).

Overhead, against the same agent reached directly in the same run:

- **Latency per message**: one request at a time (``session/set_mode``, answered ``{}`` by
  the agent at once), round trips through the proxy against direct; the median added.
- **Streaming**: one prompt whose reply is ``session/update`` chunks sent at 1,000 a second,
  each stamped with its sending time; the lag from the agent's write to the editor's read
  (median, p99) through the proxy against direct, with the proxy recording into SQLite.
- **Throughput**: chunks sent as fast as the agent can write them; updates a second received.

History view (``--history``): 5,000 sessions of one folder (and the panel's 500 chats beside
them) in the store, listed through the proxy in pages of 50: the first page asked again and
again (median, p95), the first page of a proxy just started, and every page of a walk (the
first walk, whose rows are made as they are met, and the next one). Beside it, Codex's ACP
adapter (tests/acp-agents, offline against a fake model) with 5,000 sessions of its own (one
real session cloned into its rollouts and its state database) answering its own
``session/list``; and the proxy in front of Codex, which answers from the store.

Prints the figures and writes the "ACP proxy" and "ACP history view" sections of
BENCHMARKS.md. ``--quick``: fewer messages and calls. Goals: under 1 ms added per message at the
median; no visible lag at 1,000 a second; the first 50 of 5,000 sessions in 5 ms at p95, and
every later page the same."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
AGENT = [sys.executable, "-m", "tests.e2e.acp_peers.raw_agent"]
PROXY = [sys.executable, "-m", "chat_history.cli"]
#: The history view's store: sessions of one folder, and the panel's chats beside them.
SESSIONS, PANEL_EVERY = 5_000, 10


class Peer:
    """A process spoken to in newline-delimited JSON-RPC, in a process group of its own (Codex's
    npm wrapper leaves its binary behind: ``close`` stops the whole group)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'server'}", **env},
            start_new_session=True,
        )
        self.next = 0

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.next += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        return self.next

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the peer closed its output")
        value: dict[str, Any] = json.loads(line)
        return value

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = self.send(method, params)
        while True:
            message = self.read()
            if message.get("id") == rid and "method" not in message:
                return message
            if "method" in message and "id" in message:  # the agent asks: nobody says yes
                line = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps(line).encode() + b"\n")
                self.process.stdin.flush()

    def timed(self, method: str, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """A request's round trip (ms) and its answer's result (an error raises)."""
        began = time.perf_counter()
        answer = self.call(method, params)
        took = (time.perf_counter() - began) * 1000
        if "result" not in answer:
            raise RuntimeError(f"{method} failed: {answer.get('error')}")
        result: dict[str, Any] = answer["result"]
        return took, result

    def close(self) -> None:
        """Close its input (the editor leaves), give it 10 s, then stop what is left of its
        group."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def start(through_proxy: bool, db: Path, env: dict[str, str]) -> Peer:
    argv = AGENT
    if through_proxy:
        argv = [*PROXY, "--db", str(db), "acp", "--", *AGENT]
    peer = Peer(argv, {"ACP_RAW_MODE": "stream", **env})
    peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    return peer


def latency(peer: Peer, count: int) -> float:
    """The median round trip of one request (ms)."""
    times = []
    for _ in range(count):
        began = time.perf_counter()
        peer.call("session/set_mode", {"sessionId": "s", "modeId": "m"})
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def stream(peer: Peer, cwd: str) -> tuple[list[float], float]:
    """One prompt's chunks: the lag of each (ms) and the updates a second received."""
    session = peer.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    rid = peer.send("session/prompt", {"sessionId": session, "prompt": [_text("go")]})
    lags, began, received = [], time.monotonic(), 0
    while True:
        message = peer.read()
        if message.get("id") == rid:
            break
        text = message["params"]["update"]["content"]["text"]
        if text[:1].isdigit():
            lags.append((time.monotonic() - float(text)) * 1000)
            received += 1
    return lags, received / (time.monotonic() - began)


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def p99(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.99) - 1]


def measure(quick: bool) -> dict[str, dict[str, float]]:
    count, updates = (300, 1000) if quick else (2000, 5000)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        db, cwd = Path(folder) / "h.db", Path(folder)
        for name, proxied in (("direct", False), ("proxy", True)):
            row: dict[str, float] = {}
            paced = {"ACP_RAW_UPDATES": str(updates), "ACP_RAW_RATE": "1000"}
            peer = start(proxied, db, paced)
            latency(peer, 50)  # warm up
            row["latency"] = latency(peer, count)
            lags, _ = stream(peer, str(cwd))
            row["lag median"], row["lag p99"] = statistics.median(lags), p99(lags)
            peer.close()
            peer = start(proxied, db, {"ACP_RAW_UPDATES": str(updates * 4), "ACP_RAW_RATE": "1e9"})
            _, row["throughput"] = stream(peer, str(cwd))
            peer.close()
            results[name] = row
            print(name, row, flush=True)
    return results


def write_section(results: dict[str, dict[str, float]], quick: bool) -> None:
    """The "ACP proxy" section."""
    direct, proxy = results["direct"], results["proxy"]
    load = f"{os.getloadavg()[0]:.1f}"
    section = "\n".join(
        [
            "## ACP proxy",
            "",
            "`bench/acp.py`: `chat-history acp` in front of a hand-written agent "
            "(tests/e2e/acp_peers/raw_agent.py), against the same agent reached directly in the "
            f"same run{' (--quick)' if quick else ''}; the proxy records into SQLite. Load "
            f"average {load} on 2 CPUs. Goals: under 1 ms added per message at the median, no "
            "visible lag at 1,000 updates a second.",
            "",
            "| figure | direct | through the proxy | added |",
            "|---|---|---|---|",
            _row("round trip of one request, median (ms)", direct, proxy, "latency"),
            _row("lag of a session/update at 1,000/s, median (ms)", direct, proxy, "lag median"),
            _row("lag of a session/update at 1,000/s, p99 (ms)", direct, proxy, "lag p99"),
            f"| session/update as fast as the agent writes (a second) | "
            f"{direct['throughput']:,.0f} | {proxy['throughput']:,.0f} | "
            f"{proxy['throughput'] / direct['throughput']:.2f}x |",
            "",
        ]
    )
    replace_section("## ACP proxy", section)


def replace_section(heading: str, section: str) -> None:
    """Write ``section`` (which starts with ``heading``) into BENCHMARKS.md in place of the one
    with that heading, or at its end; every other section stays as it is."""
    path = ROOT / "BENCHMARKS.md"
    current = path.read_text(encoding="utf-8")
    if f"\n{heading}\n" in current:
        before, _, after = current.partition(f"\n{heading}\n")
        rest = after.split("\n## ", 1)
        current = before + "\n" + section + ("\n## " + rest[1] if len(rest) > 1 else "")
    else:
        current = current.rstrip("\n") + "\n\n" + section
    path.write_text(current, encoding="utf-8")
    print(section)


def _row(label: str, direct: dict[str, float], proxy: dict[str, float], key: str) -> str:
    return f"| {label} | {direct[key]:.3f} | {proxy[key]:.3f} | {proxy[key] - direct[key]:+.3f} |"


# -- the history view ------------------------------------------------------------------------


def seed(db: Path, cwd: Path) -> None:
    """``SESSIONS`` sessions of ``cwd`` (a prompt and a reply each, a second apart), and the
    panel's chats beside them, written through the service as the proxy and the panel write."""
    sys.path.insert(0, str(ROOT / "server"))
    from chat_history.model import Key, Message
    from chat_history.service import history, workspaces
    from chat_history.service.manager import ChatHistoryManager

    workspace = workspaces.resolve(cwd.as_uri(), "folder").workspace
    at = [1_767_225_600_000]
    opened = ChatHistoryManager.open(db)
    try:
        manager = ChatHistoryManager(opened.store, clock=lambda: at[0])
        for i in range(SESSIONS):
            at[0] += 1000
            rows = [
                Message(role="user", content=f"question {i}"),
                Message(role="assistant", content="ok"),
            ]
            history.append(manager, Key(workspace, f"acp:s{i:05}"), rows)
            if i % PANEL_EVERY == 0:
                chat = [Message(role="user", content="a panel chat")]
                history.append(manager, Key(workspace, f"panel-{i}"), chat)
    finally:
        opened.close()


def list_figures(peer: Peer, cwd: str, calls: int, walks: int) -> dict[str, Any]:
    """The first page's round trip asked ``calls`` times, and ``walks`` walks of every page
    (ms each; sessions seen, pages, empty pages)."""
    params: dict[str, Any] = {"cwd": cwd, "limit": 50}
    firsts = [peer.timed("session/list", params)[0] for _ in range(calls)]
    figures: dict[str, Any] = {"first": firsts}
    for n in range(walks):
        pages, seen, empty = [], 0, 0
        cursor = None
        while True:
            took, result = peer.timed(
                "session/list", {**params, **({"cursor": cursor} if cursor else {})}
            )
            pages.append(took)
            seen += len(result["sessions"])
            empty += not result["sessions"]
            cursor = result.get("nextCursor")
            if not cursor:
                break
        figures[f"walk{n}"] = {"pages": pages, "seen": seen, "empty": empty}
    return figures


def proxy_history(
    db: Path, cwd: Path, agent: list[str], env: dict[str, str], quick: bool
) -> dict[str, Any]:
    """The history view through a proxy just started in front of ``agent``."""
    peer = Peer([*PROXY, "--db", str(db), "acp", "--", *agent], env)
    peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    cold, _ = peer.timed("session/list", {"cwd": str(cwd), "limit": 50})
    figures = list_figures(peer, str(cwd), 100 if quick else 400, 2)
    figures["cold"] = cold
    peer.close()
    return figures


def codex_sessions(home: Path, cwd: Path, codex: Path) -> None:
    """``SESSIONS`` sessions of ``cwd`` in Codex's own history: one real session (a prompt
    answered by the fake model), cloned into new rollouts a second apart and rows of its
    state database, as Codex would have written them."""
    peer = Peer([str(codex)], {"CODEX_HOME": str(home), **CODEX_ENV})
    peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session = peer.call("session/new", {"cwd": str(cwd), "mcpServers": []})["result"]["sessionId"]
    peer.call("session/prompt", {"sessionId": session, "prompt": [_text("hello")]})
    peer.close()
    database = sqlite3.connect(next(home.glob("state_*.sqlite")))
    columns = [row[1] for row in database.execute("PRAGMA table_info(threads)")]
    real = dict(zip(columns, database.execute("SELECT * FROM threads").fetchone(), strict=True))
    meta, rest = Path(real["rollout_path"]).read_text(encoding="utf-8").split("\n", 1)
    for i in range(1, SESSIONS):
        when = real["created_at"] - (SESSIONS - i)
        stamp = datetime.fromtimestamp(when, UTC)
        clone = str(uuid.uuid4())
        folder = home / "sessions" / stamp.strftime("%Y/%m/%d")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rollout-{stamp.strftime('%Y-%m-%dT%H-%M-%S')}-{clone}.jsonl"
        head = json.loads(meta)  # the session's own line: its id and when it began
        head["timestamp"] = head["payload"]["timestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        head["payload"]["id"] = clone
        path.write_text(json.dumps(head) + "\n" + rest.replace(session, clone), encoding="utf-8")
        row = {**real, "id": clone, "rollout_path": str(path), "title": f"question {i}"}
        row.update(
            created_at=when, updated_at=when, created_at_ms=when * 1000, updated_at_ms=when * 1000
        )
        marks = ", ".join("?" * len(columns))
        database.execute(
            f"INSERT INTO threads ({', '.join(columns)}) VALUES ({marks})",
            [row[c] for c in columns],
        )
    database.commit()
    database.close()


def codex_history(home: Path, cwd: Path, codex: Path, quick: bool) -> dict[str, Any]:
    """Codex's own ``session/list`` of ``cwd`` (its pages, its order)."""
    peer = Peer([str(codex)], {"CODEX_HOME": str(home), **CODEX_ENV})
    peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    cold, _ = peer.timed("session/list", {"cwd": str(cwd)})
    params: dict[str, Any] = {"cwd": str(cwd)}
    firsts = [peer.timed("session/list", params)[0] for _ in range(10 if quick else 40)]
    pages, seen, empty, size = [], 0, 0, 0
    cursor = None
    while len(pages) < (20 if quick else 10_000):
        took, result = peer.timed(
            "session/list", {**params, **({"cursor": cursor} if cursor else {})}
        )
        pages.append(took)
        seen += len(result["sessions"])
        empty += not result["sessions"]
        size = max(size, len(result["sessions"]))
        cursor = result.get("nextCursor")
        if not cursor:
            break
    peer.close()
    walk = {"pages": pages, "seen": seen, "empty": empty, "whole": cursor is None}
    return {"cold": cold, "first": firsts, "walk0": walk, "page size": size}


CODEX = ROOT / "tests" / "acp-agents" / "node_modules" / ".bin" / "codex-acp"
CODEX_ENV = {"FAKE_API_KEY": "test", "RUST_LOG": "error"}


def measure_history(quick: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        db, cwd = base / "h.db", base / "project"
        cwd.mkdir()
        seed(db, cwd)
        results["proxy"] = proxy_history(db, cwd, AGENT, {}, quick)
        print("proxy", _summary(results["proxy"]), flush=True)
        if not CODEX.exists():
            print("Codex's ACP adapter is not installed (make acp-agents): skipped", flush=True)
            return results
        sys.path.insert(0, str(ROOT))
        from tests.e2e.acp_peers.codex import codex_home

        with codex_home(base / "codex-home") as home:
            codex_sessions(home, cwd, CODEX)
            results["codex"] = codex_history(home, cwd, CODEX, quick)
            print("codex", _summary(results["codex"]), flush=True)
            env = {"CODEX_HOME": str(home), **CODEX_ENV}
            results["proxy+codex"] = proxy_history(db, cwd, [str(CODEX)], env, quick)
            print("proxy+codex", _summary(results["proxy+codex"]), flush=True)
    return results


def _p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]


def _summary(figures: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"cold": round(figures["cold"], 2)}
    out["first median"] = round(statistics.median(figures["first"]), 2)
    out["first p95"] = round(_p95(figures["first"]), 2)
    for name in ("walk0", "walk1"):
        if name in figures:
            walk = figures[name]
            out[name] = {
                "pages": len(walk["pages"]),
                "seen": walk["seen"],
                "empty": walk["empty"],
                "median": round(statistics.median(walk["pages"]), 2),
                "p95": round(_p95(walk["pages"]), 2),
                "total": round(sum(walk["pages"])),
            }
    return out


def write_history_section(results: dict[str, Any], quick: bool) -> None:
    """The "ACP history view" section."""
    load = f"{os.getloadavg()[0]:.1f}"
    rows = [("through the proxy (it serves the list)", results["proxy"])]
    if "codex" in results:
        rows += [
            ("Codex's ACP adapter, its own list", results["codex"]),
            ("through the proxy in front of Codex", results["proxy+codex"]),
        ]
    lines = [
        "## ACP history view",
        "",
        f"`bench/acp.py --history`{' --quick' if quick else ''}: {SESSIONS:,} sessions of one "
        f"folder, with {SESSIONS // PANEL_EVERY:,} of the panel's chats beside them, listed with "
        "`session/list` (`limit` 50) by a client that speaks JSON lines, one request at a time; "
        "the proxy records into SQLite. Codex's ACP adapter (`@zed-industries/codex-acp` "
        "0.16.0, offline against a fake model) holds as many sessions of its own (one real "
        "session cloned into its rollouts and state database) and pages its own list (it takes "
        "no `limit`); in front of it, the proxy shares the CPUs with Codex's own process. "
        f"Load average {load} on 2 CPUs. Goal: the first 50 in 5 ms at p95, every later page "
        "the same.",
        "",
        "| ms | first page, median | first page, p95 | first page of a proxy just started "
        "| pages of a first walk: median / p95 / total | pages of the next walk: median / p95 "
        "| pages, sessions seen, empty pages |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, figures in rows:
        first, again = figures["walk0"], figures.get("walk1")
        walk = (
            f"{statistics.median(first['pages']):.1f} / {_p95(first['pages']):.1f} / "
            f"{sum(first['pages']):,.0f}"
        )
        if not first.get("whole", True):
            walk += f" (first {len(first['pages'])} pages)"
        next_walk = (
            f"{statistics.median(again['pages']):.2f} / {_p95(again['pages']):.2f}"
            if again
            else "—"
        )
        lines.append(
            f"| {label} | {statistics.median(figures['first']):.2f} | {_p95(figures['first']):.2f} "
            f"| {figures['cold']:.1f} | {walk} | {next_walk} "
            f"| {len(first['pages'])}, {first['seen']:,}, {first['empty']} |"
        )
    lines.append("")
    replace_section("## ACP history view", "\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--history", action="store_true", help="only the history view")
    arguments = parser.parse_args()
    if not arguments.history:
        write_section(measure(arguments.quick), arguments.quick)
    write_history_section(measure_history(arguments.quick), arguments.quick)
